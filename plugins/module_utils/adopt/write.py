# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Adopt's second phase: under the cluster lock, what later runs need is written into the cluster
itself, and nothing is applied to a node.

The plan is made again first (``inspection``: every refusal holds here as in the plan). Then, in this order: the
secrets bundle as Secret ``ichor-secrets-bundle`` in ichor-system (an existing one must hold this cluster's bundle),
and the cluster record: the versions running (where none are stored yet), the cluster spec (inline manifests by
name: their contents stay in the machine configs), the adoption (marker, mode, the CNI detected, the Cilium inline
entry, the CA-rotation advice), each machine's identity and spec, and a hold on every machine the record did not
know yet, with when the hold began (``heldSince``: a hold's age is its own, not the first adoption's). The spec and
the adoption are written once; a second run changes nothing: machines already released stay released.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.maesh.ichor.plugins.module_utils.adopt import inspection
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record, lock
from ansible_collections.maesh.ichor.plugins.module_utils.config.bundle_secret import bundle_secret


def options():
    return dict(inspection.options(), holder=dict(type="str", required=True))


def run(params, conn, check_mode):
    """The plan, then the writes (dry runs in check mode)."""
    result, bundle = inspection.inspect(params, conn)
    kube = conn.kube()
    try:
        if not check_mode:
            lock.keep(kube, params["holder"])
        changed = bundle_secret(kube, bundle, result, check_mode)
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


def _record(data, result):
    """Mutate the record's data: what adopt writes. The first adoption's spec and adoption stay as written (later
    runs and the rollout own them: a rerun after the hand-over must not read the cluster as adopted again);
    a machine new to the record is added and held; a released machine is not held again."""
    preview = result["record"]
    for key in ("talos", "kubernetes", "contract"):
        if not data.get(key) and preview.get(key):
            data[key] = preview[key]
    if not data.get("cluster"):
        data["cluster"] = cluster_record.stored_spec(dict(result["cluster_spec"], versionContract=result["contract"]))
    if not (data.get("adoption") or {}).get("adopted"):
        data["adoption"] = {
            "adopted": True, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "mode": result["cni"]["mode"],
            "detected": preview["detected"],
            "inlineManifest": [item["name"] for item in data["cluster"].get("inlineManifests") or []],
            "caRotationAdvised": True}
    nodes = data.get("nodes") or {}
    held = data.get("held") or {}
    since = data.get("heldSince") or {}
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for m in result["machines"]:
        if m["name"] not in nodes:
            held[m["name"]] = m["reason"]
            since[m["name"]] = now
            nodes[m["name"]] = {"uuid": m["uuid"], "node": m["node"], "role": m["role"], "spec": m["spec"]}
    data["nodes"] = nodes
    data["held"] = held
    if since or "heldSince" in data:  # kept while held: a start is dropped with its hold, never moved
        data["heldSince"] = dict((name, at) for name, at in since.items() if name in held)
