# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Adopt's second phase (seed 0103, 1.8): under the cluster lock, what later runs need is written into the cluster
itself, and nothing is applied to a node.

The plan is made again first (``inspection``: every refusal holds here as in the plan). Then, in this order: the
secrets bundle as Secret ``ichor-secrets-bundle`` in ichor-system (an existing one must hold this cluster's bundle),
and the cluster record: the versions running (where none are stored yet), the cluster spec (inline manifests by
name: their contents stay in the machine configs), the adoption (marker, mode, the CNI detected, the Cilium inline
entry, the CA-rotation advice), each machine's identity and spec, and a hold on every machine the record did not
know yet. The spec and the adoption are written once; a second run changes nothing: machines already released stay
released.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import copy
import time

from ansible_collections.maesh.ichor.plugins.module_utils.adopt import inspection
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.config import secrets
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record, lock

BUNDLE_SECRET = "ichor-secrets-bundle"
BUNDLE_KEY = "bundle.yaml"


def options():
    return dict(inspection.options(), holder=dict(type="str", required=True))


def run(params, conn, check_mode):
    """The plan, then the writes (dry runs in check mode)."""
    result, bundle = inspection.inspect(params, conn)
    kube = conn.kube()
    try:
        if not check_mode:
            lock.require(kube, params["holder"])
        changed = _bundle_secret(kube, bundle, result, check_mode)
        before, after, recorded = cluster_record.update(kube, lambda data: _record(data, result), dry_run=check_mode)
    except IchorError as exc:
        exc.result = result
        raise
    result["changed"] = changed or recorded
    result["held"] = sorted(after.get("held") or {})
    result["plan"].append("cluster record %s/%s: %s" % (cluster_record.NAMESPACE, cluster_record.NAME, (
        "would be written" if check_mode else "written") if recorded else "unchanged"))
    result["diff"] = {"before": before, "after": after}
    return result


def stored_bundle(secret):
    """The bundle Secret ichor-secrets-bundle holds, or None when it holds none that can be read."""
    try:
        return secrets.parse(base64.b64decode((secret.get("data") or {}).get(BUNDLE_KEY) or "").decode("utf-8"))
    except (ConfigError, ValueError, UnicodeDecodeError):
        return None


def _bundle_secret(kube, bundle, result, check_mode):
    """Secret ichor-system/ichor-secrets-bundle: created when missing, left when it holds this bundle, refused when it
    holds another. Its data never reaches a result."""
    live = kube.get("v1", "Secret", BUNDLE_SECRET, cluster_record.NAMESPACE)
    where = "%s/%s" % (cluster_record.NAMESPACE, BUNDLE_SECRET)
    if live is not None:
        stored = stored_bundle(live)
        if stored is None or stored.fingerprint() != bundle.fingerprint():
            raise IchorError("Secret %s holds %s, not this cluster's (Talos CA %s): nothing written; remove it only if "
                             "you know it is stale" % (where, "no readable bundle" if stored is None else
                                                       "the bundle of another cluster (Talos CA %s)" % stored.fingerprint(),
                                                       bundle.fingerprint()))
        result["plan"].append("secrets bundle Secret %s: holds this cluster's bundle already" % where)
        return False
    body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": BUNDLE_SECRET, "namespace": cluster_record.NAMESPACE,
                         "labels": {"app.kubernetes.io/managed-by": "maesh.ichor"}},
            "data": {BUNDLE_KEY: base64.b64encode(bundle.to_yaml().encode("utf-8")).decode("ascii")}}
    if kube.get("v1", "Namespace", cluster_record.NAMESPACE) is None:
        if check_mode:  # a dry run cannot place the Secret in a namespace that does not exist yet
            result["plan"].append("secrets bundle Secret %s: would be created (Talos CA %s)" % (where, bundle.fingerprint()))
            return True
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster_record.NAMESPACE}})
    kube.create(body, dry_run=check_mode)
    result["plan"].append("secrets bundle Secret %s: %s (Talos CA %s)" % (
        where, "would be created" if check_mode else "created", bundle.fingerprint()))
    return True


def _stored_spec(spec):
    """The cluster spec as the record keeps it: inline manifests by name (the contents stay in the configs)."""
    stored = copy.deepcopy(spec)
    stored["inlineManifests"] = [{"name": item["name"]} for item in spec.get("inlineManifests") or []]
    return stored


def _record(data, result):
    """Mutate the record's data: what adopt writes. The first adoption's spec and adoption stay as written (later
    runs and the rollout own them: a rerun after the hand-over must not read the cluster as adopted again);
    a machine new to the record is added and held; a released machine is not held again."""
    preview = result["record"]
    for key in ("talos", "kubernetes", "contract"):
        if not data.get(key) and preview.get(key):
            data[key] = preview[key]
    if not data.get("cluster"):
        data["cluster"] = _stored_spec(dict(result["cluster_spec"], versionContract=result["contract"]))
    if not (data.get("adoption") or {}).get("adopted"):
        data["adoption"] = {
            "adopted": True, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "mode": result["cni"]["mode"],
            "detected": preview["detected"],
            "inlineManifest": [item["name"] for item in data["cluster"].get("inlineManifests") or []],
            "caRotationAdvised": True}
    nodes = data.get("nodes") or {}
    held = data.get("held") or {}
    for m in result["machines"]:
        if m["name"] not in nodes:
            held[m["name"]] = m["reason"]
            nodes[m["name"]] = {"uuid": m["uuid"], "node": m["node"], "role": m["role"], "spec": m["spec"]}
    data["nodes"] = nodes
    data["held"] = held
