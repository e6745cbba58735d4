# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The diff gate: every object the chart renders, compared with the live one, per object and path.

For each rendered object the API server is asked twice, both times with a server-side apply dry run:
once for the object under a scratch name (the chart's object as the server would store it, with every
default filled in, so defaults are never reported) and once for the live object (what the takeover
leaves: a field only the live object has is kept or dropped). Volatile fields (uid, resourceVersion,
managedFields, status, allocated Service addresses, the annotations kubectl and Helm manage) are
removed, and Secret data is never compared by value: PEM data (the hubble and CA certificates
``helm template`` generates anew on every render) is only compared by kind, other data by a hash.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import copy
import hashlib
import json
import re

try:
    import yaml
except ImportError:  # the module fails with missing_required_lib-like words when it needs it
    yaml = None

from ansible_collections.maesh.ichor.plugins.module_utils.k8s import metadata
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.errors import KubeError, NotFound, ref_text

MANAGER = "ichor-cilium-gate"
SCRATCH = "-ichor-gate"
# generateName too: a scratch copy of an object is named by the gate
VOLATILE_META = metadata.SERVER_SET + ("generateName",)
VOLATILE_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration", "deprecated.daemonset.template.generation",
                        "deployment.kubernetes.io/revision", "meta.helm.sh/release-name", "meta.helm.sh/release-namespace")
HELM_LABEL = "app.kubernetes.io/managed-by"
INSTALLER_MARK = "ichor.maesh.dev/installed-by"
NAMESPACE_LABEL = "kubernetes.io/metadata.name"
HOOK = "helm.sh/hook"
_PEM = re.compile(r"-----BEGIN ([A-Z ]+)-----")
_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
SHOWN = 100  # characters of a value quoted in a plan line


def _secret_value(encoded):
    """A Secret data value as it is compared: the PEM kinds it holds, or a hash of it."""
    try:
        raw = base64.b64decode(encoded or "")
    except (TypeError, ValueError, binascii.Error):
        raw = (encoded or "").encode()
    kinds = _PEM.findall(raw.decode("utf-8", "replace"))
    if kinds:
        return "<generated certificate data: %s>" % ", ".join(kinds)
    return "<secret data sha256:%s>" % hashlib.sha256(raw).hexdigest()[:12]


def _prune(value):
    if isinstance(value, dict):
        out = dict((k, _prune(v)) for k, v in value.items())
        return dict((k, v) for k, v in out.items() if v not in (None, {}, []))
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value


def comparable(obj):
    """The object without what the API server, kubectl and Helm manage, and with Secret data masked."""
    obj = copy.deepcopy(obj)
    obj.pop("status", None)
    meta = metadata.without(obj.get("metadata") or {}, VOLATILE_META)
    annotations = meta.get("annotations") or {}
    for key in VOLATILE_ANNOTATIONS:
        annotations.pop(key, None)
    labels = meta.get("labels") or {}
    if labels.get(HELM_LABEL) == "Helm":
        labels.pop(HELM_LABEL)
    if labels.get(INSTALLER_MARK) == "ichor-installer":
        # the collection's installer made it first (the cilium-secrets Namespace its RBAC needs): ours, not drift
        labels.pop(INSTALLER_MARK)
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if kind == "Service":
        for key in ("clusterIP", "clusterIPs", "healthCheckNodePort"):
            spec.pop(key, None)
        for port in spec.get("ports") or []:
            port.pop("nodePort", None)
    elif kind == "ServiceAccount":
        obj.pop("secrets", None)
    elif kind == "Secret":
        obj["data"] = dict((k, _secret_value(v)) for k, v in (obj.get("data") or {}).items())
    return _prune(obj)


def _key_of(items):
    """The field that identifies the items of a list (as the API merges it), or None for an atomic list."""
    if not items or not all(isinstance(i, dict) for i in items):
        return None
    for field in ("name", "mountPath", "containerPort", "devicePath"):
        keys = [i.get(field) for i in items]
        if None not in keys and len(set(map(str, keys))) == len(keys):
            return field
    return None


def _join(prefix, key):
    key = str(key)
    if _PLAIN_KEY.match(key):
        return "%s.%s" % (prefix, key) if prefix else key
    return '%s["%s"]' % (prefix, key)


def flatten(value, prefix=""):
    """{path: leaf}; mappings by key, lists whose items have a name (or mountPath, ...) by that, others whole."""
    out = {}
    if isinstance(value, dict) and value:
        for key, item in value.items():
            out.update(flatten(item, _join(prefix, key)))
    elif isinstance(value, list) and _key_of(value):
        field = _key_of(value)
        for item in value:
            path = "%s[%s]" % (prefix, item[field])
            rest = dict((k, v) for k, v in item.items() if k != field)
            if rest:
                out.update(flatten(rest, path))
            else:
                out[path] = item[field]  # an item that is only its key
    else:
        out[prefix] = value
    return out


def compare(live, chart, after=None):
    """[(path, change, live value, chart value)] between two comparable objects; ``after`` (what the takeover
    leaves) tells whether a field only the live object has is kept or dropped."""
    left, right = flatten(live), flatten(chart)
    kept = flatten(after) if after is not None else {}
    found = []
    for path in sorted(set(left) | set(right)):
        if path in left and path in right:
            if left[path] != right[path]:
                found.append((path, "differs", left[path], right[path]))
        elif path in left:
            change = "live only, kept" if path in kept and kept[path] == left[path] else "live only, dropped"
            found.append((path, change, left[path], None))
        else:
            found.append((path, "missing live", None, right[path]))
    return found


def _scratch(obj):
    """The object under a scratch name (a dry run creates it as new: every default filled, nothing live merged)."""
    copied = copy.deepcopy(obj)
    meta = copied["metadata"]
    meta["name"] = meta["name"][:63 - len(SCRATCH)] + SCRATCH
    if copied.get("kind") == "Namespace":
        (meta.get("labels") or {}).pop(NAMESPACE_LABEL, None)
    return copied


def as_stored(kube, obj):
    """The chart's object as the API server would store it (a dry run under a scratch name); the rendered
    object itself when the server cannot say (its namespace does not exist yet, or the name is taken)."""
    try:
        stored = kube.apply(_scratch(obj), MANAGER, dry_run=True)
    except NotFound:
        return obj
    if (stored.get("metadata") or {}).get("resourceVersion"):
        return obj  # the scratch name exists: what came back is merged with it
    stored["metadata"]["name"] = obj["metadata"]["name"]
    if obj.get("kind") == "Namespace":
        stored["metadata"].setdefault("labels", {})[NAMESPACE_LABEL] = obj["metadata"]["name"]
    return stored


def dump(obj):
    """An object as the --diff shows it (YAML, keys sorted; "" for none)."""
    return yaml.safe_dump(obj, default_flow_style=False, sort_keys=True) if obj is not None else ""


def _shown(value):
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else value
    return text if len(text) <= SHOWN else text[:SHOWN - 3] + "..."


class Gate:
    """The gate's findings: entries (dicts, per object and path), plan lines, the --diff list."""

    def __init__(self, chart_label):
        self.chart_label = chart_label
        self.entries = []
        self.diff = []
        self.skipped = []
        self.objects = 0

    def add(self, ref, path, change, live=None, chart=None):
        self.entries.append({"object": ref, "path": path, "change": change, "live": live, "chart": chart})

    @property
    def empty(self):
        return not self.entries

    @property
    def invalid(self):
        return [e for e in self.entries if e["change"] == "invalid"]

    def lines(self):
        out = []
        for entry in self.entries:
            if entry["path"] is None:
                out.append("gate: %s: %s" % (entry["object"], entry["change"]))
            elif entry["change"] == "differs":
                out.append("gate: %s: %s differs: live %s, chart %s" % (
                    entry["object"], entry["path"], _shown(entry["live"]), _shown(entry["chart"])))
            elif entry["change"] == "missing live":
                out.append("gate: %s: %s missing live: chart %s" % (entry["object"], entry["path"], _shown(entry["chart"])))
            else:
                out.append("gate: %s: %s %s: %s" % (entry["object"], entry["path"], entry["change"], _shown(entry["live"])))
        return out

    def summary(self):
        if self.empty:
            return "diff gate: empty (%d objects rendered, every one as it runs)" % self.objects
        objects = len(set(e["object"] for e in self.entries))
        return "diff gate: %d differences in %d of %d objects" % (len(self.entries), objects, self.objects)


def run(kube, rendered, release_namespace, chart_label):
    """Compare each rendered object with the live one; a Gate."""
    gate = Gate(chart_label)
    for obj in rendered:
        meta = obj.setdefault("metadata", {})
        if HOOK in (meta.get("annotations") or {}):
            hook = ref_text(obj["apiVersion"], obj["kind"], meta.get("name"))
            gate.skipped.append("%s (a Helm hook, run by Helm, not compared)" % hook)
            continue
        if not meta.get("namespace") and kube.resource(obj["apiVersion"], obj["kind"]).namespaced:
            meta["namespace"] = release_namespace
        gate.objects += 1
        ref = ref_text(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        live = kube.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        chart = comparable(as_stored(kube, obj))
        if live is None:
            gate.add(ref, None, "absent live: Helm creates it")
            gate.diff.append({"before_header": "%s (not live)" % ref, "after_header": "%s (%s)" % (ref, chart_label),
                              "before": "", "after": dump(chart)})
            continue
        try:
            after = comparable(kube.apply(obj, MANAGER, dry_run=True))
        except KubeError as exc:
            gate.add(ref, None, "invalid", live=exc.message)
            continue
        live_view = comparable(live)
        found = compare(live_view, chart, after)
        for path, change, live_value, chart_value in found:
            gate.add(ref, path, change, live_value, chart_value)
        if found:
            gate.diff.append({"before_header": "%s (live)" % ref, "after_header": "%s (%s)" % (ref, chart_label),
                              "before": dump(live_view), "after": dump(chart)})
    return gate
