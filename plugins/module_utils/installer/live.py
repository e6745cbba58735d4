# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Installer: one run's calls to the API server through a KubeClient (plan with dry runs, the
previous inventory, snapshot, apply, prune under the owner check, inventory write, restore)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible_collections.maesh.ichor.plugins.module_utils.common import retry
from ansible_collections.maesh.ichor.plugins.module_utils.installer import bundle, inventory, prune, snapshot
from ansible_collections.maesh.ichor.plugins.module_utils.installer.errors import InstallerError
from ansible_collections.maesh.ichor.plugins.module_utils.installer.objects import (
    DEFAULT_NAMESPACE, FIELD_MANAGER, MARK_KEY, MARK_VALUE, Ref, carries_mark, comparable, restorable)
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.errors import Conflict, KubeError, NotFound

# How KubeClient.resource says that discovery does not know a kind (a custom resource whose CRD is gone).
NOT_SERVED = "the API server does not serve "


class Step:
    """One planned change: action (create, update, unchanged, prune, keep), the ref, the reason, before/after."""

    def __init__(self, action, ref, reason=None, before=None, after=None, uid=None, renamed=None):
        self.action = action
        self.renamed = renamed  # the prune.RENAMED_OBJECTS entry this candidate is, if any
        self.ref = ref
        self.reason = reason
        self.before = before
        self.after = after
        self.uid = uid

    def line(self):
        if self.action in ("prune", "keep"):
            return "%s %s: %s" % (self.action, self.ref, self.reason)
        return "%s %s" % (self.action, self.ref)


class Installer:
    """One installer run over a KubeClient: plan, snapshot, apply, prune, restore."""

    def __init__(self, client, bundle_paths, namespace=DEFAULT_NAMESPACE, snapshot_file=None, run_id=None):
        self.client = client
        self.namespace = namespace
        self.snapshot_file = snapshot_file
        self.run_id = run_id  # made by installer_apply, given to installer_prune and installer_restore
        self.leftover = None  # a snapshot of another run, found by this_runs_snapshot
        self.objects = bundle.apply_order(bundle.load(bundle_paths, namespace, self._namespaced))
        self.refs = [Ref.of(o) for o in self.objects]
        self.warnings = []
        self._previous = None  # previous_inventory, read once per run stage

    def _namespaced(self, api_version, kind):
        return bool(self.client.resource(api_version, kind).namespaced)

    def _get(self, ref):
        return self.client.get(ref.api_version, ref.kind, ref.name, ref.namespace)

    # -- plan ------------------------------------------------------------------------------
    def plan_apply(self):
        """create / update / unchanged for every bundle object, asking the server (dry run)."""
        steps = []
        for obj in self.objects:
            ref = Ref.of(obj)
            live = self._get(ref)
            try:
                would = self.client.apply(obj, FIELD_MANAGER, dry_run=True)
            except KubeError:
                # e.g. the object's namespace is created by this same bundle: the dry run cannot tell
                if live is not None:
                    raise
                would = obj
            if live is None:
                steps.append(Step("create", ref, after=restorable(would)))
            elif comparable(live) != comparable(would):
                steps.append(Step("update", ref, before=restorable(live), after=restorable(would)))
            else:
                steps.append(Step("unchanged", ref))
        return steps

    def previous_inventory(self):
        """The previous run's refs that name an object this server can hold; what does not is skipped with a warning.
        Read once: the plan and the inventory this run writes see the same."""
        if self._previous is None:
            self._previous = self._read_inventory()
        return self._previous

    def _read_inventory(self):
        configmap = self.client.get("v1", "ConfigMap", inventory.INVENTORY_NAME, self.namespace)
        refs, warnings = inventory.parse(configmap)
        self.warnings.extend(warnings)
        if refs is None:
            return None, configmap
        valid = []
        for ref in refs:
            why = self._unusable(ref)
            if why:
                self.warnings.append("the installer inventory %s/%s lists %s, but %s; it is skipped and not pruned"
                                     % (self.namespace, inventory.INVENTORY_NAME, ref, why))
            else:
                valid.append(ref)
        return valid, configmap

    def _unusable(self, ref):
        """Why an inventory ref cannot be looked up (its kind is not served, or its scope is wrong), or None."""
        try:
            namespaced = self._namespaced(ref.api_version, ref.kind)
        except KubeError as exc:
            if exc.status is None and exc.message.startswith(NOT_SERVED):
                return "the API server no longer serves %s %s" % (ref.api_version, ref.kind)
            raise
        if namespaced and not ref.namespace:
            return "%s is namespaced and the entry has no namespace" % ref.kind
        if not namespaced and ref.namespace:
            return "%s is cluster-scoped and the entry has a namespace" % ref.kind
        return None

    def plan_prune(self):
        """prune / keep for every candidate (previous inventory minus bundle, and the renamed objects)."""
        previous, _configmap = self.previous_inventory()
        found, skipped = prune.candidates(previous, self.refs, self.namespace)
        steps = [Step("keep", ref, reason) for ref, reason in skipped if self._get(ref) is not None]
        checks = [(ref, None) for ref in found]
        checks += [(r.ref, r) for r in prune.renamed_candidates(self.refs) if r.ref not in set(found)]
        for ref, renamed in checks:
            live = self._get(ref)
            if live is None:
                continue
            delete, reason = prune.owner_check(live, renamed)
            steps.append(Step("prune" if delete else "keep", ref, reason, before=restorable(live),
                              uid=live["metadata"].get("uid"), renamed=renamed))
        return steps

    def still_installed(self, previous, pruned=()):
        """The inventory's refs after this run: every object the bundle ships, then every object of ``previous`` (refs
        a past run installed) that still exists and is not ``pruned``: kept by the owner check, of a kind never pruned,
        or left by a run that did not reach its prune. Nothing that still exists leaves the inventory, so a later
        run prunes it once the bundle no longer ships it and the owner check allows."""
        shipped, gone = set(self.refs), set(pruned)
        return self.refs + [r for r in previous or [] if r not in shipped and r not in gone and self._get(r) is not None]

    def planned_inventory(self, prune_steps):
        """The inventory this run writes if its prune deletes what ``prune_steps`` plan to (check mode's view)."""
        previous, _configmap = self.previous_inventory()
        return self.still_installed(previous, [s.ref for s in prune_steps if s.action == "prune"])

    def inventory_changed(self, refs):
        configmap = self.client.get("v1", "ConfigMap", inventory.INVENTORY_NAME, self.namespace)
        return configmap is None or (configmap.get("data") or {}) != inventory.data(refs)

    # -- snapshot --------------------------------------------------------------------------
    def snapshot_entries(self, apply_steps, prune_steps):
        entries = []
        for step in apply_steps:
            if step.action == "create":
                entries.append(snapshot.entry(step.ref, None))
            elif step.action == "update":
                entries.append(snapshot.entry(step.ref, self._get(step.ref)))
        for step in prune_steps:
            if step.action == "prune":
                entries.append(snapshot.entry(step.ref, self._get(step.ref)))
        return entries

    def save_snapshot(self, entries):
        """Persist the snapshot, replacing any other, and read it back; the run goes on only if it reads back the same."""
        text = snapshot.encode(entries, self.run_id)
        if self.snapshot_file:
            snapshot.write_file(self.snapshot_file, text)
        else:
            self._ensure_namespace()
            # one write that replaces the snapshot in place: a failure leaves the one before as it was
            self.client.apply(snapshot.secret(text, self.namespace), FIELD_MANAGER)
        back = self.load_snapshot()
        if back is None or back.run_id != self.run_id or back.entries != entries:
            raise InstallerError("the snapshot read back differs from what was written; nothing was changed")
        return back

    def load_snapshot(self):
        """The persisted Snapshot, or None when there is none; snapshot.Unreadable when it is not a snapshot."""
        if self.snapshot_file:
            text = snapshot.read_file(self.snapshot_file)
            return None if text is None else snapshot.decode(text)
        secret = self.client.get("v1", "Secret", snapshot.SNAPSHOT_NAME, self.namespace)
        return None if secret is None else snapshot.from_secret(secret)

    def this_runs_snapshot(self):
        """The snapshot this run wrote, or None. Another run's (one that did not finish), or one that cannot be read,
        is never restored by this run: ``leftover`` holds it, a warning says so; this run's own snapshot replaces it,
        or this run's prune removes it."""
        fate = "this run never restores it; this run's snapshot replaces it, or this run's prune removes it"
        try:
            found = self.load_snapshot()
        except snapshot.Unreadable as exc:
            self.leftover = snapshot.Snapshot(None, [])
            self.warnings.append("the installer snapshot in %s cannot be read (%s): %s"
                                 % (self.snapshot_place(), exc.message, fate))
            return None
        if found is None or (self.run_id and found.run_id == self.run_id):
            return found
        self.leftover = found
        self.warnings.append("the installer snapshot in %s is of %s, which did not finish: %s (to roll that run back "
                             "instead, run installer_restore with run_id %s first)"
                             % (self.snapshot_place(), found.describe(), fate, found.run_id))
        return None

    def snapshot_place(self):
        if self.snapshot_file:
            return "the file %s" % self.snapshot_file
        return "the Secret %s/%s" % (self.namespace, snapshot.SNAPSHOT_NAME)

    def delete_snapshot(self, found):
        """Remove the snapshot ``found`` was read from; a Secret only if it is still that one (UID and
        resourceVersion): another run may have replaced it since. Whether it was removed."""
        if self.snapshot_file:
            snapshot.remove_file(self.snapshot_file)
            return True
        try:
            self.client.delete("v1", "Secret", snapshot.SNAPSHOT_NAME, self.namespace, uid=found.uid,
                               resource_version=found.version)
        except (Conflict, NotFound):
            return False
        return True

    def _ensure_namespace(self):
        if self.client.get("v1", "Namespace", self.namespace) is None:
            self.client.apply({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": self.namespace, "labels": {MARK_KEY: MARK_VALUE}}},
                              FIELD_MANAGER)

    # -- write -----------------------------------------------------------------------------
    def apply(self, steps):
        by_ref = dict((Ref.of(o), o) for o in self.objects)
        for step in steps:
            if step.action in ("create", "update"):
                self.client.apply(by_ref[step.ref], FIELD_MANAGER)

    def prune(self, steps, entries):
        """Delete what the owner check still allows, with the UID it had when snapshotted."""
        snapped = dict((Ref.from_dict(e["ref"]), e) for e in entries or [])
        done, kept = [], []
        for step in steps:
            if step.action != "prune":
                continue
            entry = snapped.get(step.ref)
            if entry is None:
                kept.append((step.ref, "not in the run's snapshot; not deleted"))
                continue
            live = self._get(step.ref)
            delete, reason = prune.owner_check(live, step.renamed)
            if not delete or live["metadata"].get("uid") != entry["uid"]:
                kept.append((step.ref, reason if not delete else "re-created since it was checked (new UID)"))
                continue
            self.client.delete(step.ref.api_version, step.ref.kind, step.ref.name, step.ref.namespace,
                               uid=entry["uid"])
            done.append(step.ref)
        return done, kept

    def record_inventory(self):
        """Before the apply: the inventory also lists every object this run is about to apply, so that a run stopped
        after its apply and before its prune leaves nothing the next run cannot prune. Nothing is taken out here.
        The refs written (None when it listed them all already). A failure raises: the run must not apply what it could
        not record."""
        shipped = set(self.refs)
        return self._put_inventory(lambda current: [r for r in current if r not in shipped] + self.refs)

    def write_inventory(self, pruned):
        """After the prune: what still_installed keeps, from the inventory as it is now (read again). The refs written
        (None when unchanged); a failure is a warning, and the inventory stays as record_inventory left it (a
        superset)."""
        try:
            return self._put_inventory(lambda current: self.still_installed(self._usable_refs(current), pruned))
        except Exception as exc:  # pylint: disable=broad-except
            # whatever stops the write, the run succeeds: the inventory it leaves lists more, never less
            self.warnings.append("the installer inventory could not be written (%s); it still lists what this run "
                                 "pruned, and the next run finds those gone" % exc)
            return None

    def _usable_refs(self, refs):
        return [r for r in refs if not self._unusable(r)]

    def _put_inventory(self, refs_of, attempts=3):
        """Write refs_of(the inventory's refs now) in one update conditional on what was read (resourceVersion), so a
        write never replaces one it did not see; read again and redo on a conflict. The refs written, or None when the
        inventory already was that."""
        def put():
            configmap = self.client.get("v1", "ConfigMap", inventory.INVENTORY_NAME, self.namespace)
            current, _warnings = inventory.parse(configmap)
            refs = refs_of(current or [])
            body = inventory.configmap(refs, self.namespace)
            if configmap is not None and (configmap.get("data") or {}) == body["data"]:
                return None
            if configmap is None:
                self._ensure_namespace()
                self.client.create(body)
            else:
                body["metadata"]["resourceVersion"] = configmap["metadata"].get("resourceVersion")
                self.client.replace(body)
            return refs

        try:  # on a Conflict another writer got there first: read again and build on what it wrote
            return retry.attempt(put, attempts, Conflict)[0]
        except retry.Exhausted:
            raise InstallerError("the installer inventory %s/%s changed %d times while this run wrote it; run again"
                                 % (self.namespace, inventory.INVENTORY_NAME, attempts))

    def restore(self, entries):
        """Put every snapshotted object back as it was; returns the refs that had to be re-created."""
        recreated = []
        for entry in reversed(entries or []):
            ref = Ref.from_dict(entry["ref"])
            live = self._get(ref)
            want = entry["object"]
            if want is None:
                if live is not None and carries_mark(live):
                    self.client.delete(ref.api_version, ref.kind, ref.name, ref.namespace,
                                       uid=live["metadata"].get("uid"))
                continue
            if live is None:
                self.client.create(copy.deepcopy(want))
                recreated.append(ref)
            elif comparable(live) != comparable(want):
                body = copy.deepcopy(want)
                body["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
                self.client.replace(body)
        return recreated
