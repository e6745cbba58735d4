# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The orphans of a takeover: what the foreign release owned and the collection's chart does not render.

``helm upgrade --install --take-ownership`` adopts only the objects the chart renders. An object the foreign release
made that the chart does not render (the hubble-generate-certs Job, which the chart names after a hash of its spec
so that the release's own upgrade replaces it; a component the user's values enabled and the takeover's values do
not) stays live with the foreign release's ownership metadata, and once the foreign records are retired no release
owns it. Here they are found (the manifests of every foreign record, each object live and still carrying that
release's ``meta.helm.sh`` annotations, minus what the chart renders); the takeover keeps them, recorded and shown,
or, with consent, backs each up into its own Secret in ichor-system, reads the backup back, and deletes the object
only while it is the one that was read (UID precondition). A delete that fails re-creates, from their backups, the
objects this run deleted before it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import copy
import hashlib
import json
import re

from ansible_collections.maesh.ichor.plugins.module_utils.cilium import gate as gate_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import helm as helm_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium.errors import CiliumError
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import metadata
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.errors import Conflict, KubeError, NotFound, ref_text

RELEASE_NAME = "meta.helm.sh/release-name"
RELEASE_NAMESPACE = "meta.helm.sh/release-namespace"
RESOURCE_POLICY = "helm.sh/resource-policy"
BACKUP_PREFIX = "ichor-cilium-orphan."
BACKUP_OF = "ichor.maesh.dev/backup-of"
BACKUP_UID = "ichor.maesh.dev/backup-uid"
BACKUP_RELEASE = "ichor.maesh.dev/backup-release"
BACKUP_KIND = "orphan"
DATA_KEY = "object"
_NAME_OK = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_JOB_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid")


def group_of(api_version):
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def identity(api_version, kind, namespace, name):
    """What names one object whatever its version: (group, kind, namespace or "", name)."""
    return (group_of(api_version), kind, namespace or "", name)


class Orphan:
    """One object of a foreign release that the chart does not render, as it was read live."""

    def __init__(self, api_version, kind, namespace, name, release, live=None):
        self.api_version = api_version
        self.kind = kind
        self.namespace = namespace or None
        self.name = name
        self.release = release  # (namespace, name) of the foreign release that lists it
        self.live = live
        self.delete = False

    @property
    def ref(self):
        return ref_text(self.api_version, self.kind, self.name, self.namespace)

    @property
    def release_ref(self):
        return "%s/%s" % self.release

    @property
    def uid(self):
        return ((self.live or {}).get("metadata") or {}).get("uid")

    @property
    def policy_keep(self):
        """Helm itself never deletes an object annotated ``helm.sh/resource-policy: keep``; nor does the takeover."""
        annotations = ((self.live or {}).get("metadata") or {}).get("annotations") or {}
        return annotations.get(RESOURCE_POLICY) == "keep"

    @property
    def key(self):
        return identity(self.api_version, self.kind, self.namespace, self.name)

    def summary(self):
        """The result's (and the cluster record's, without ``action``) entry."""
        return {"object": self.ref, "apiVersion": self.api_version, "uid": self.uid, "release": self.release_ref,
                "action": "delete" if self.delete else "keep"}


def _namespace(meta, namespaced, release_namespace):
    """Where helm puts an object: none for a cluster-scoped kind, the release's namespace for a namespaced one
    written without one; as written when the API server does not serve the kind (``namespaced`` None)."""
    if namespaced is False:
        return None
    return meta.get("namespace") or (release_namespace if namespaced else None)


def listed(records, namespaced, notes=None):
    """Every object the foreign records' manifests list, newest record first: [(api_version, kind, namespace, name,
    (release namespace, release name))], each identity once. ``namespaced(api_version, kind)`` is True, False, or None
    when the API server does not serve the kind (the manifest's namespace is then taken as it is written). A record
    that cannot be decoded adds a line to ``notes``."""
    seen, parsed, out = set(), set(), []
    for rec in sorted(records, key=lambda r: (-r.revision, r.namespace or "", r.name or "")):
        try:
            release = rec.release
        except CiliumError as exc:
            if notes is not None:
                notes.append("%s: %s; the objects it lists are not checked" % (rec.ref, exc.message))
            continue
        where = release.get("namespace") or rec.namespace
        manifest = release.get("manifest") or ""
        if (where, rec.release_name, manifest) in parsed:
            continue  # an unchanged revision lists the same objects
        parsed.add((where, rec.release_name, manifest))
        for doc in helm_mod.documents(manifest):
            meta = doc.get("metadata") or {}
            if not meta.get("name") or not doc.get("apiVersion"):
                continue
            namespace = _namespace(meta, namespaced(doc["apiVersion"], doc["kind"]), where)
            key = identity(doc["apiVersion"], doc["kind"], namespace, meta["name"])
            if key in seen:
                continue
            seen.add(key)
            out.append((doc["apiVersion"], doc["kind"], namespace, meta["name"], (where, rec.release_name)))
    return out


def rendered_keys(rendered, namespaced, release_namespace):
    """The identities of what the chart renders (hooks too: Helm runs them, so they are the chart's)."""
    keys = set()
    for doc in rendered:
        meta = doc.get("metadata") or {}
        namespace = _namespace(meta, namespaced(doc["apiVersion"], doc["kind"]), release_namespace)
        keys.add(identity(doc["apiVersion"], doc["kind"], namespace, meta.get("name")))
    return keys


def owner(live):
    """(release namespace, release name) of the Helm release the live object names, or None."""
    annotations = ((live or {}).get("metadata") or {}).get("annotations") or {}
    if annotations.get(RELEASE_NAME) and annotations.get(RELEASE_NAMESPACE):
        return annotations[RELEASE_NAMESPACE], annotations[RELEASE_NAME]
    return None


def not_rendered(records, rendered, namespaced, release_namespace, notes=None):
    """What the foreign records list and the chart does not render (pure: nothing is read live)."""
    chart = rendered_keys(rendered, namespaced, release_namespace)
    return [item for item in listed(records, namespaced, notes) if identity(*item[:4]) not in chart]


def find(kube, records, rendered, release_namespace):
    """(orphans, notes): each object of a foreign release that the chart does not render, live and still carrying that
    release's ownership annotations; the notes are one line each for a listed object that could not be read or that
    another owner holds now (left alone)."""
    served = {}

    def namespaced(api_version, kind):
        if (api_version, kind) not in served:
            try:
                served[(api_version, kind)] = bool(kube.resource(api_version, kind).namespaced)
            except KubeError:
                served[(api_version, kind)] = None
        return served[(api_version, kind)]

    orphans, notes = [], []
    for api_version, kind, namespace, name, release in not_rendered(records, rendered, namespaced, release_namespace,
                                                                    notes):
        ref = ref_text(api_version, kind, name, namespace)
        where = "%s/%s" % release
        if namespaced(api_version, kind) is None:
            notes.append("%s: listed by the foreign release %s, not rendered by the chart, and the API server does not "
                         "serve %s: not checked; look for it yourself" % (ref, where, api_version))
            continue
        try:
            live = kube.get(api_version, kind, name, namespace)
        except KubeError as exc:
            notes.append("%s: listed by the foreign release %s, not rendered by the chart, cannot be read (%s): not "
                         "checked; look for it yourself" % (ref, where, exc.message))
            continue
        if live is None:
            continue  # gone already: nothing is left of it
        held = owner(live)
        if held != release:
            notes.append("%s: listed by the foreign release %s, not rendered by the chart, but %s: not its orphan, "
                         "left alone" % (ref, where, "owned by the Helm release %s/%s now" % held if held else
                                         "it carries no Helm release's ownership annotations"))
            continue
        orphans.append(Orphan(api_version, kind, namespace, name, release, live))
    return sorted(orphans, key=lambda o: (o.kind, o.namespace or "", o.name)), notes


# -- the backup ---------------------------------------------------------------------------
def backup_name(orphan):
    """``ichor-cilium-orphan.<kind>[.<group>].<namespace>.<name>``, or a shortened name with a hash of the identity when
    that is not a valid Secret name."""
    group = group_of(orphan.api_version)
    parts = [orphan.kind.lower()] + ([group] if group else []) + [orphan.namespace or "cluster", orphan.name]
    name = BACKUP_PREFIX + ".".join(parts)
    if len(name) <= 253 and _NAME_OK.match(name):
        return name
    digest = hashlib.sha256("/".join(str(p) for p in orphan.key).encode("utf-8")).hexdigest()[:12]
    cleaned = re.sub(r"[^a-z0-9.-]", "-", name.lower())[:200].rstrip("-.")
    return "%s.%s" % (cleaned, digest)


def encode(obj):
    return base64.b64encode(json.dumps(obj, sort_keys=True).encode("utf-8")).decode("ascii")


def decode(data):
    return json.loads(base64.b64decode(data).decode("utf-8"))


def backup_secret(orphan, namespace):
    """The live object as it was read, whole, in a Secret of ichor-system (one per object)."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": backup_name(orphan), "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "maesh.ichor", BACKUP_OF: BACKUP_KIND},
                         "annotations": {BACKUP_OF: orphan.ref, BACKUP_UID: orphan.uid or "",
                                         BACKUP_RELEASE: orphan.release_ref}},
            "data": {DATA_KEY: encode(orphan.live)}}


def restorable(obj):
    """The object as it is created again from its backup: without what the API server sets (uid, resourceVersion,
    status, ...), and a Job without the selector the server generated for it (it generates a new one)."""
    obj = copy.deepcopy(obj)
    obj.pop("status", None)
    metadata.without(obj.get("metadata") or {})
    spec = obj.get("spec") or {}
    if obj.get("kind") == "Job" and not spec.get("manualSelector"):
        spec.pop("selector", None)
        labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        for key in _JOB_LABELS:
            labels.pop(key, None)
    return obj


# -- the deletion -------------------------------------------------------------------------
class Retirement:
    """Back up, read back, delete (UID precondition), and restore what was deleted when a delete fails."""

    def __init__(self, kube, namespace, say, result):
        self.kube = kube
        self.namespace = namespace
        self.say = say
        self.result = result

    def run(self, orphans):
        """Delete the orphans marked for deletion; returns the backups [{object, backup, uid, deleted}]."""
        chosen = [o for o in orphans if o.delete]
        current = []
        for orphan in chosen:
            live = self.kube.get(orphan.api_version, orphan.kind, orphan.name, orphan.namespace)
            if live is None:
                self.say("gone already: %s (uid %s)" % (orphan.ref, orphan.uid))
                continue
            if (live.get("metadata") or {}).get("uid") != orphan.uid or owner(live) != orphan.release:
                self.say("kept: %s changed since it was checked (another uid or owner); it is not deleted: look at it "
                         "yourself" % orphan.ref)
                continue
            orphan.live = live
            current.append(orphan)
        backups = [(orphan, self._back_up(orphan)) for orphan in current]  # every backup before the first delete
        done, out = [], []
        for orphan, name in backups:
            try:
                self.kube.delete(orphan.api_version, orphan.kind, orphan.name, orphan.namespace, uid=orphan.uid)
            except NotFound:
                self.say("gone already: %s (uid %s)" % (orphan.ref, orphan.uid))
                continue
            except Conflict:
                self.say("kept: %s was re-created since it was checked (another uid); it is not deleted" % orphan.ref)
                continue
            except KubeError as exc:
                restored = self._restore(done)
                raise CiliumError("deleting %s failed (%s); %s; the foreign records are kept: fix it and rerun" % (
                    orphan.ref, exc.message, "the %d objects deleted before it were created again from their backups "
                    "(%s)" % (len(restored), ", ".join(restored)) if restored else "nothing was deleted before it"),
                    result=self.result)
            done.append((orphan, name))
            self.say("deleted: %s (uid %s; its backup %s/%s read back identical)" % (
                orphan.ref, orphan.uid, self.namespace, name))
            out.append({"object": orphan.ref, "backup": "%s/%s" % (self.namespace, name), "uid": orphan.uid})
        return out

    def _back_up(self, orphan):
        kube, wanted = self.kube, backup_secret(orphan, self.namespace)
        name = wanted["metadata"]["name"]
        existing = kube.get("v1", "Secret", name, self.namespace)
        if existing is None:
            kube.create(wanted)
        else:
            held = ((existing.get("metadata") or {}).get("annotations") or {}).get(BACKUP_UID)
            if held != orphan.uid:
                raise CiliumError("the backup %s/%s holds another object (uid %s) than %s (uid %s); it is kept and "
                                  "nothing is deleted: move it away and rerun" % (
                                      self.namespace, name, held, orphan.ref, orphan.uid), result=self.result)
            if existing.get("data") != wanted["data"]:  # the same object, changed since an earlier run's backup
                wanted["metadata"]["resourceVersion"] = existing["metadata"].get("resourceVersion")
                kube.replace(wanted)
        back = kube.get("v1", "Secret", name, self.namespace)
        if (back or {}).get("data") != wanted["data"] or decode(back["data"][DATA_KEY]) != orphan.live:
            raise CiliumError("the backup %s/%s of %s is not what was written; nothing is deleted: rerun" % (
                self.namespace, name, orphan.ref), result=self.result)
        self.say("backed up: %s into %s/%s (read back identical)" % (orphan.ref, self.namespace, name))
        return name

    def _restore(self, done):
        restored = []
        for orphan, name in reversed(done):
            secret = self.kube.get("v1", "Secret", name, self.namespace)
            obj = restorable(decode(secret["data"][DATA_KEY]))
            self.kube.create(obj)
            self.say("restored: %s from %s/%s (a new uid)" % (orphan.ref, self.namespace, name))
            restored.append(orphan.ref)
        return restored


def diff(orphan):
    """The --diff entry of an orphan the takeover deletes: the live object (Secret data masked), then nothing."""
    return {"before_header": "%s (live, of the foreign release %s)" % (orphan.ref, orphan.release_ref),
            "after_header": "%s (deleted: delete_orphans)" % orphan.ref,
            "before": gate_mod.dump(gate_mod.comparable(orphan.live)),
            "after": ""}


def lines(orphans, chart_label, consent):
    """The gate's lines: one per orphan, naming it, its release, and what the takeover does with it."""
    out = []
    for orphan in orphans:
        if orphan.policy_keep:
            fate = "it stays (%s: keep), owned by no release, after the takeover; delete it yourself when nothing " \
                   "needs it" % RESOURCE_POLICY
        elif consent:
            fate = "deleted after the hand-over (delete_orphans), backed up first"
        else:
            fate = "it stays, owned by no release, after the takeover (set delete_orphans to delete it)"
        out.append("gate: %s: owned by the foreign release %s, not rendered by %s: %s" % (
            orphan.ref, orphan.release_ref, chart_label, fate))
    return out
