# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The installer: apply a bundle with server-side apply, record an inventory, prune what the
previous run installed and this bundle drops (ADR 0111), with a snapshot to roll back to.

Pure logic here (bundle, inventory, candidates, owner check, snapshot form); the calls to the
API server go through module_utils.k8s.client and are made by ``Run``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os

try:
    import yaml
    HAS_YAML = True
except ImportError:  # pragma: no cover
    HAS_YAML = False

FIELD_MANAGER = "ichor-installer"
MARK_KEY = "ichor.maesh.dev/installed-by"
MARK_VALUE = "ichor-installer"
INVENTORY_NAME = "ichor-installer-inventory"
SNAPSHOT_NAME = "ichor-installer-snapshot"
INSTALLER_PREFIX = "ichor-installer"
DEFAULT_NAMESPACE = "ichor-system"

# ADR 0111: the kinds the installer may delete (its Role/ClusterRole hold delete on each).
PRUNABLE_KINDS = frozenset([
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
    ("", "ServiceAccount"),
    ("", "Service"),
    ("apps", "Deployment"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
])


class Ref:
    """apiVersion, kind, namespace (None when cluster-scoped) and name of an object."""

    __slots__ = ("api_version", "kind", "namespace", "name")

    def __init__(self, api_version, kind, namespace, name):
        self.api_version = api_version
        self.kind = kind
        self.namespace = namespace or None
        self.name = name

    @classmethod
    def of(cls, obj):
        meta = obj.get("metadata") or {}
        return cls(obj.get("apiVersion"), obj.get("kind"), meta.get("namespace"), meta.get("name"))

    @property
    def group(self):
        return self.api_version.split("/", 1)[0] if "/" in self.api_version else ""

    def key(self):
        # the version is not part of the identity: an object served at v1 and v1beta1 is one object
        return (self.group, self.kind, self.namespace or "", self.name)

    def to_dict(self):
        return {"apiVersion": self.api_version, "kind": self.kind, "namespace": self.namespace, "name": self.name}

    def __eq__(self, other):
        return isinstance(other, Ref) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())

    def __repr__(self):
        return "Ref(%s)" % self

    def __str__(self):
        return "%s %s/%s" % (self.kind, self.namespace, self.name) if self.namespace else "%s %s" % (self.kind, self.name)


class Renamed:
    """An object a build before ADR 0111 may still hold under an old name (``renamedObjects``)."""

    def __init__(self, ref, label, new_name):
        self.ref = ref
        self.label = label
        self.new_name = new_name


# ADR 0109 renamed the override ClusterRole; builds before the inventory may still hold it.
RENAMED_OBJECTS = (
    Renamed(Ref("rbac.authorization.k8s.io/v1", "ClusterRole", None, "ichor-ichor-break-glass-role"),
            ("app.kubernetes.io/name", "ichor"), "ichor-ichor-override-role"),
)


class BundleError(Exception):
    """A bundle that cannot be applied: one line naming the file and what is wrong."""


def _bundle_files(paths):
    files = []
    for path in paths:
        if os.path.isdir(path):
            for root, dirs, names in os.walk(path):
                dirs.sort()
                files.extend(os.path.join(root, n) for n in sorted(names) if n.endswith((".yaml", ".yml")))
        elif os.path.isfile(path):
            files.append(path)
        else:
            raise BundleError("bundle path %s does not exist" % path)
    return files


def load_bundle(paths, namespace, is_namespaced):
    """Read the manifests of a bundle: a list of objects, each stamped with the installer's mark.

    ``is_namespaced(api_version, kind)`` tells the scope (from API discovery); a namespaced
    object without a namespace goes into the installer's namespace.
    """
    objects = []
    seen = {}
    for path in _bundle_files(paths):
        try:
            with open(path) as handle:
                docs = list(yaml.safe_load_all(handle))
        except (IOError, OSError, yaml.YAMLError) as exc:
            raise BundleError("bundle file %s cannot be read as YAML (%s)" % (path, type(exc).__name__))
        for doc in docs:
            if doc is None:
                continue
            items = doc.get("items", []) if isinstance(doc, dict) and doc.get("kind", "").endswith("List") else [doc]
            for obj in items:
                if not isinstance(obj, dict) or not obj.get("apiVersion") or not obj.get("kind") or \
                        not (obj.get("metadata") or {}).get("name"):
                    raise BundleError("bundle file %s holds an object without apiVersion, kind or metadata.name" % path)
                obj = copy.deepcopy(obj)
                meta = obj["metadata"]
                if is_namespaced(obj["apiVersion"], obj["kind"]):
                    meta.setdefault("namespace", namespace)
                else:
                    meta.pop("namespace", None)
                meta.setdefault("labels", {})[MARK_KEY] = MARK_VALUE
                ref = Ref.of(obj)
                if ref in seen:
                    raise BundleError("%s is in the bundle twice (%s and %s)" % (ref, seen[ref], path))
                seen[ref] = path
                objects.append(obj)
    return objects


def parse_inventory(configmap):
    """The refs of the previous run's inventory: (refs, warning). Unparseable -> (None, warning)."""
    if configmap is None:
        return None, None
    text = (configmap.get("data") or {}).get("objects")
    try:
        items = json.loads(text)
        refs = [Ref(i["apiVersion"], i["kind"], i.get("namespace"), i["name"]) for i in items]
    except (TypeError, ValueError, KeyError, AttributeError):
        return None, ("the installer inventory %s/%s cannot be parsed; it is ignored and nothing it lists is pruned"
                      % (configmap["metadata"].get("namespace"), INVENTORY_NAME))
    return refs, None


def inventory_data(refs):
    """The inventory ConfigMap's data: every applied object, sorted, one JSON list."""
    items = sorted((r.to_dict() for r in refs), key=lambda d: (d["kind"], d["namespace"] or "", d["name"]))
    return {"objects": json.dumps(items, sort_keys=True, indent=1)}


def inventory_configmap(refs, namespace):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": INVENTORY_NAME, "namespace": namespace, "labels": {MARK_KEY: MARK_VALUE}},
            "data": inventory_data(refs)}


def is_prunable(ref, namespace):
    """Whether an inventory object may be a candidate at all (kind, scope, installer's own RBAC)."""
    if (ref.group, ref.kind) not in PRUNABLE_KINDS:
        return False, "%s is not a kind the installer prunes" % ref.kind
    if ref.namespace and ref.namespace != namespace:
        return False, "in namespace %s, not the installer's %s" % (ref.namespace, namespace)
    if ref.name.startswith(INSTALLER_PREFIX):
        return False, "the installer's own object"
    return True, None


def candidates(previous, bundle_refs, namespace):
    """(candidates, skipped): objects of the previous inventory the bundle no longer ships.

    ``skipped`` are the dropped objects that are never pruned, each with the reason.
    """
    shipped = set(bundle_refs)
    out, skipped = [], []
    for ref in previous or []:
        if ref in shipped:
            continue
        ok, why = is_prunable(ref, namespace)
        if ok:
            out.append(ref)
        else:
            skipped.append((ref, why))
    return out, skipped


def renamed_candidates(bundle_refs):
    shipped = set(bundle_refs)
    return [r for r in RENAMED_OBJECTS if r.ref not in shipped]


def owner_check(live, renamed=None):
    """At delete time: (delete?, reason). Only an object that still carries the mark is deleted."""
    if live is None:
        return False, "already gone"
    meta = live.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return False, "already being deleted (Terminating); not touched"
    labels = meta.get("labels") or {}
    if renamed is not None:
        key, value = renamed.label
        if labels.get(key) == value:
            return True, "renamed to %s (ADR 0109) and carries %s=%s" % (renamed.new_name, key, value)
        return False, "does not carry %s=%s" % (key, value)
    if labels.get(MARK_KEY) == MARK_VALUE:
        return True, "dropped from the bundle and carries %s=%s" % (MARK_KEY, MARK_VALUE)
    return False, "does not carry %s=%s (not installed by the installer, or relabelled by a person)" % (
        MARK_KEY, MARK_VALUE)


# -- snapshot: what the run will change or delete, to restore on failure -------------------

_VOLATILE_META = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields",
                  "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds", "ownerReferences")


def restorable(live):
    """The part of a live object a restore puts back: labels, annotations, spec/data (no status)."""
    obj = copy.deepcopy(live)
    obj.pop("status", None)
    meta = obj.get("metadata") or {}
    for key in _VOLATILE_META:
        meta.pop(key, None)
    return obj


def comparable(obj):
    """Two objects are 'as they were' when these are equal (UIDs and resourceVersions aside)."""
    obj = restorable(obj)
    meta = obj.get("metadata") or {}
    return {k: v for k, v in obj.items() if k != "metadata"}, {
        "name": meta.get("name"), "namespace": meta.get("namespace"),
        "labels": meta.get("labels") or {}, "annotations": meta.get("annotations") or {}}


def snapshot_entry(ref, live):
    """One snapshot entry: the object as it is (or that it is absent, to be deleted on restore)."""
    return {"ref": ref.to_dict(), "object": restorable(live) if live is not None else None,
            "uid": ((live or {}).get("metadata") or {}).get("uid")}


def encode_snapshot(entries):
    return json.dumps({"schema": 1, "entries": entries}, sort_keys=True)


def decode_snapshot(text):
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("schema") != 1 or not isinstance(data.get("entries"), list):
        raise ValueError("not an installer snapshot")
    return data["entries"]


# -- the run against the API server ---------------------------------------------------------

# Apply order: what others depend on first.
_ORDER = {"Namespace": 0, "CustomResourceDefinition": 1, "PriorityClass": 2, "ServiceAccount": 3,
          "ClusterRole": 4, "Role": 4, "ClusterRoleBinding": 5, "RoleBinding": 5, "ConfigMap": 6,
          "Secret": 6, "Service": 7}


def apply_order(objects):
    return sorted(objects, key=lambda o: (_ORDER.get(o["kind"], 8), Ref.of(o).key()))


class InstallerError(Exception):
    """A failed run: one line saying what happened (and whether the cluster was restored)."""


class Step:
    """One planned change: action (create, update, unchanged, prune, keep), the ref, the reason, before/after."""

    def __init__(self, action, ref, reason=None, before=None, after=None, uid=None, renamed=None):
        self.action = action
        self.renamed = renamed  # the RENAMED_OBJECTS entry this candidate is, if any
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
        self.objects = apply_order(load_bundle(bundle_paths, namespace, self._namespaced))
        self.refs = [Ref.of(o) for o in self.objects]
        self.warnings = []

    def _namespaced(self, api_version, kind):
        return bool(self.client.resource(api_version, kind).namespaced)

    # -- plan ------------------------------------------------------------------------------
    def plan_apply(self):
        """create / update / unchanged for every bundle object, asking the server (dry run)."""
        steps = []
        for obj in self.objects:
            ref = Ref.of(obj)
            live = self.client.get(ref.api_version, ref.kind, ref.name, ref.namespace)
            try:
                would = self.client.apply(obj, FIELD_MANAGER, dry_run=True)
            except Exception:  # pylint: disable=broad-except
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
        configmap = self.client.get("v1", "ConfigMap", INVENTORY_NAME, self.namespace)
        refs, warning = parse_inventory(configmap)
        if warning:
            self.warnings.append(warning)
        return refs, configmap

    def plan_prune(self):
        """prune / keep for every candidate (previous inventory minus bundle, and the renamed objects)."""
        previous, _configmap = self.previous_inventory()
        found, skipped = candidates(previous, self.refs, self.namespace)
        steps = [Step("keep", ref, reason) for ref, reason in skipped
                 if self.client.get(ref.api_version, ref.kind, ref.name, ref.namespace) is not None]
        checks = [(ref, None) for ref in found]
        checks += [(r.ref, r) for r in renamed_candidates(self.refs) if r.ref not in set(found)]
        for ref, renamed in checks:
            live = self.client.get(ref.api_version, ref.kind, ref.name, ref.namespace)
            if live is None:
                continue
            delete, reason = owner_check(live, renamed)
            steps.append(Step("prune" if delete else "keep", ref, reason, before=restorable(live),
                              uid=live["metadata"].get("uid"), renamed=renamed))
        return steps

    def inventory_changed(self):
        configmap = self.client.get("v1", "ConfigMap", INVENTORY_NAME, self.namespace)
        return configmap is None or (configmap.get("data") or {}) != inventory_data(self.refs)

    # -- snapshot --------------------------------------------------------------------------
    def snapshot_entries(self, apply_steps, prune_steps):
        entries = []
        for step in apply_steps:
            if step.action == "create":
                entries.append(snapshot_entry(step.ref, None))
            elif step.action == "update":
                live = self.client.get(step.ref.api_version, step.ref.kind, step.ref.name, step.ref.namespace)
                entries.append(snapshot_entry(step.ref, live))
        for step in prune_steps:
            if step.action == "prune":
                live = self.client.get(step.ref.api_version, step.ref.kind, step.ref.name, step.ref.namespace)
                entries.append(snapshot_entry(step.ref, live))
        return entries

    def _snapshot_secret(self, text):
        return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": SNAPSHOT_NAME, "namespace": self.namespace, "labels": {MARK_KEY: MARK_VALUE}},
                "stringData": {"snapshot": text}}

    def save_snapshot(self, entries):
        """Persist the snapshot and read it back; the run goes on only if it reads back the same."""
        text = encode_snapshot(entries)
        if self.snapshot_file:
            fd = os.open(self.snapshot_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
        else:
            self._ensure_namespace()
            self.delete_snapshot()
            self.client.create(self._snapshot_secret(text))
        back = self.load_snapshot()
        if back != json.loads(text)["entries"]:
            raise InstallerError("the snapshot read back differs from what was written; nothing was changed")
        return back

    def load_snapshot(self):
        if self.snapshot_file:
            if not os.path.exists(self.snapshot_file):
                return None
            with open(self.snapshot_file) as handle:
                return decode_snapshot(handle.read())
        secret = self.client.get("v1", "Secret", SNAPSHOT_NAME, self.namespace)
        if secret is None:
            return None
        import base64  # pylint: disable=import-outside-toplevel
        return decode_snapshot(base64.b64decode(secret["data"]["snapshot"]).decode("utf-8"))

    def delete_snapshot(self):
        if self.snapshot_file:
            if os.path.exists(self.snapshot_file):
                os.unlink(self.snapshot_file)
            return
        if self.client.get("v1", "Secret", SNAPSHOT_NAME, self.namespace) is not None:
            self.client.delete("v1", "Secret", SNAPSHOT_NAME, self.namespace)

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

    def prune(self, steps, snapshot):
        """Delete what the owner check still allows, with the UID it had when snapshotted."""
        snapped = dict((Ref(**ref_kwargs(e["ref"])), e) for e in snapshot or [])
        done, kept = [], []
        for step in steps:
            if step.action != "prune":
                continue
            entry = snapped.get(step.ref)
            if entry is None:
                kept.append((step.ref, "not in the run's snapshot; not deleted"))
                continue
            live = self.client.get(step.ref.api_version, step.ref.kind, step.ref.name, step.ref.namespace)
            delete, reason = owner_check(live, step.renamed)
            if not delete or live["metadata"].get("uid") != entry["uid"]:
                kept.append((step.ref, reason if not delete else "re-created since it was checked (new UID)"))
                continue
            self.client.delete(step.ref.api_version, step.ref.kind, step.ref.name, step.ref.namespace,
                               uid=entry["uid"])
            done.append(step.ref)
        return done, kept

    def write_inventory(self):
        """Delete then create (the installer may not update ConfigMaps); a failure is a warning."""
        try:
            if self.client.get("v1", "ConfigMap", INVENTORY_NAME, self.namespace) is not None:
                self.client.delete("v1", "ConfigMap", INVENTORY_NAME, self.namespace)
            self.client.create(inventory_configmap(self.refs, self.namespace))
        except Exception as exc:  # pylint: disable=broad-except
            self.warnings.append("the installer inventory could not be written (%s); the next run prunes less, "
                                 "never more" % exc)

    def restore(self, snapshot):
        """Put every snapshotted object back as it was; returns the refs that had to be re-created."""
        recreated = []
        for entry in reversed(snapshot or []):
            ref = Ref(**ref_kwargs(entry["ref"]))
            live = self.client.get(ref.api_version, ref.kind, ref.name, ref.namespace)
            want = entry["object"]
            if want is None:
                if live is not None and ((live["metadata"].get("labels") or {}).get(MARK_KEY) == MARK_VALUE):
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


def ref_kwargs(d):
    return {"api_version": d["apiVersion"], "kind": d["kind"], "namespace": d.get("namespace"), "name": d["name"]}
