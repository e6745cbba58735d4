# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Installer: one run's calls to the API server through a KubeClient (plan with dry runs, the
previous inventory, snapshot, apply, prune under the owner check, inventory write, restore)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os

from ansible_collections.maesh.ichor.plugins.module_utils.installer import bundle, inventory, prune, snapshot
from ansible_collections.maesh.ichor.plugins.module_utils.installer.errors import InstallerError
from ansible_collections.maesh.ichor.plugins.module_utils.installer.objects import (
    DEFAULT_NAMESPACE, FIELD_MANAGER, MARK_KEY, MARK_VALUE, Ref, carries_mark, comparable, restorable)
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeError


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

    def __init__(self, client, bundle_paths, namespace=DEFAULT_NAMESPACE, snapshot_file=None):
        self.client = client
        self.namespace = namespace
        self.snapshot_file = snapshot_file
        self.objects = bundle.apply_order(bundle.load(bundle_paths, namespace, self._namespaced))
        self.refs = [Ref.of(o) for o in self.objects]
        self.warnings = []

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
        configmap = self.client.get("v1", "ConfigMap", inventory.INVENTORY_NAME, self.namespace)
        refs, warning = inventory.parse(configmap)
        if warning:
            self.warnings.append(warning)
        return refs, configmap

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

    def inventory_changed(self):
        configmap = self.client.get("v1", "ConfigMap", inventory.INVENTORY_NAME, self.namespace)
        return configmap is None or (configmap.get("data") or {}) != inventory.data(self.refs)

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
        """Persist the snapshot and read it back; the run goes on only if it reads back the same."""
        text = snapshot.encode(entries)
        if self.snapshot_file:
            fd = os.open(self.snapshot_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
        else:
            self._ensure_namespace()
            self.delete_snapshot()
            self.client.create(snapshot.secret(text, self.namespace))
        back = self.load_snapshot()
        if back != json.loads(text)["entries"]:
            raise InstallerError("the snapshot read back differs from what was written; nothing was changed")
        return back

    def load_snapshot(self):
        """The persisted entries, or None when there is no snapshot."""
        if self.snapshot_file:
            if not os.path.exists(self.snapshot_file):
                return None
            with open(self.snapshot_file) as handle:
                return snapshot.decode(handle.read())
        secret = self.client.get("v1", "Secret", snapshot.SNAPSHOT_NAME, self.namespace)
        return None if secret is None else snapshot.from_secret(secret)

    def delete_snapshot(self):
        if self.snapshot_file:
            if os.path.exists(self.snapshot_file):
                os.unlink(self.snapshot_file)
            return
        if self.client.get("v1", "Secret", snapshot.SNAPSHOT_NAME, self.namespace) is not None:
            self.client.delete("v1", "Secret", snapshot.SNAPSHOT_NAME, self.namespace)

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

    def write_inventory(self):
        """Delete then create (the installer may not update ConfigMaps). Whether it was written: a failure is a warning."""
        body = inventory.configmap(self.refs, self.namespace)
        try:
            if self.client.get("v1", "ConfigMap", inventory.INVENTORY_NAME, self.namespace) is not None:
                self.client.delete("v1", "ConfigMap", inventory.INVENTORY_NAME, self.namespace)
            self.client.create(body)
        except Exception as exc:  # pylint: disable=broad-except
            # ADR 0111: whatever stops the write, the run succeeds; the next run then prunes less, never more
            self.warnings.append("the installer inventory could not be written (%s); the next run prunes less, "
                                 "never more" % exc)
            return False
        return True

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
