# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Init's last write (the ``init_record`` module): what later playbooks need, in the cluster itself, as adopt writes
it - the secrets bundle as Secret ``ichor-secrets-bundle`` in ichor-system and the cluster record (the versions of the
release set, the contract, the cluster spec with its preset and kube-proxy mode, each machine's identity and spec).
Written once; a machine that joins later is added, and its pending entry (reclaim's) is taken out. Nothing is held:
init's machines run the collection's render already."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.common.given import given
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.config import secrets
from ansible_collections.maesh.ichor.plugins.module_utils.config import spec as specs
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.config.bundle_secret import bundle_secret


def options():
    return dict(
        secrets=dict(type="path", required=True),
        machines=dict(type="list", elements="dict", required=True, options=dict(
            name=dict(type="str", required=True), node=dict(type="str", required=True),
            role=dict(type="str", required=True, choices=["controlplane", "worker"]),
            uuid=dict(type="str", required=True),
            spec=dict(type="dict", default={}),  # init_plan's result: config.spec judged it there
            # the plan's own keys, not the record's
            state=dict(type="str"), etcd_members=dict(type="list", elements="str"))),
    )


def _machine(entry):
    """One of init_plan's machines (its other keys - state, etcd members - are the plan's, not the record's)."""
    missing = [key for key in ("name", "node", "role", "uuid") if not entry.get(key)]
    if missing or entry["role"] not in ("controlplane", "worker"):
        raise IchorError("a machine of init_record needs name, node, role (controlplane or worker) and uuid, as "
                         "init_plan returns them; %s has %s" % (entry.get("name") or "one", "no " + ", ".join(missing)
                                                                if missing else "role %r" % entry["role"]))
    return {"name": str(entry["name"]), "node": str(entry["node"]), "role": entry["role"], "uuid": str(entry["uuid"]),
            "spec": given(entry.get("spec") or {})}


def run(params, conn, check_mode):
    result = dict(changed=False, plan=[])
    try:
        return _run(params, conn, check_mode, result)
    except IchorError as exc:
        exc.result = result
        raise


def _run(params, conn, check_mode, result):
    bundle = secrets.validate(secrets.load(params["secrets"]), release.CONTRACT)
    spec = specs.cluster(given(params["cluster"]))
    if spec["cni"]["preset"] != "cilium":
        raise IchorError("init writes cni.preset cilium only (preset unmanaged is for adoption alone)")
    kube = conn.kube()
    changed = bundle_secret(kube, bundle, result, check_mode)
    machines = [_machine(m) for m in params["machines"]]
    before, after, recorded = cluster_record.update(kube, lambda data: _record(data, spec, machines), dry_run=check_mode)
    result["changed"] = changed or recorded
    result["plan"].append("cluster record %s/%s: %s" % (cluster_record.NAMESPACE, cluster_record.NAME, (
        "would be written" if check_mode else "written") if recorded else "unchanged"))
    result["diff"] = {"before": before, "after": after}
    return result


def _record(data, spec, machines):
    """Mutate the record's data: the versions and spec when it has none (later runs and the rollout own them), the
    machines it does not know yet; their pending entries leave the list."""
    for key, value in (("talos", release.TALOS), ("kubernetes", release.KUBERNETES), ("contract", release.CONTRACT)):
        if not data.get(key):
            data[key] = value
    if not data.get("cluster"):
        data["cluster"] = cluster_record.stored_spec(spec)
    if not data.get("init") and not (data.get("adoption") or {}).get("adopted"):
        data["init"] = {"by": "maesh.ichor.init", "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    nodes = data.get("nodes") or {}
    for m in machines:
        if m["name"] not in nodes:
            nodes[m["name"]] = {"uuid": m["uuid"], "node": m["node"], "role": m["role"], "spec": m.get("spec") or {}}
    data["nodes"] = nodes
    joined = set(m["uuid"] for m in machines)
    if data.get("machines"):
        data["machines"] = [p for p in data["machines"] if not (isinstance(p, dict) and p.get("state") == "pending"
                                                                and p.get("uuid") in joined)]
