# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read a running cluster's versions the way they run on Talos: each machine's Talos, the
control-plane component images in the control planes' machine configs, each Node's kubelet,
the CNI, and the stored contract from the cluster record."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils import release
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record, cni
from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res
from ansible_collections.maesh.ichor.plugins.module_utils.talos.kubernetes import component_versions


async def _machine_versions(client, m):
    info = await machine.version(client, m["address"])
    out = {"name": m["name"], "role": m["role"], "talos": info["tag"], "components": {}}
    if m["role"] == "controlplane":
        config = await machine.get_resource(client, res.MACHINE_CONFIG, m["address"])
        out["components"] = component_versions(config["spec"] if config else "")
    return out


def read(talos, kube, machines):
    """{machines: [{name, role, talos}], kubernetes: {source: version}, contract, cni, record}."""
    results = {}
    by_address = dict((m["address"], m) for m in machines)
    fan = talos.fan_out(lambda addr: _machine_versions(talos, by_address[addr]), list(by_address))
    for addr, result in fan.items():
        if result.error is not None:
            raise result.error
        results[addr] = result.message
    ordered = [results[m["address"]] for m in machines]
    kubernetes = {}
    for m in ordered:
        for component in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
            if m["components"].get(component):
                kubernetes["%s %s" % (m["name"], component)] = m["components"][component]
    for node in (kube.resource("v1", "Node").get().to_dict().get("items") or []):
        version = ((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion")
        if version:
            kubernetes["%s kubelet" % node["metadata"]["name"]] = version
    record = cluster_record.read(kube)
    contract = record.get("contract")
    if not contract:
        # no record yet: a cluster's contract is never newer than the Talos it runs
        lowest = min((m["talos"] for m in ordered), key=release.parse)
        contract = "v%d.%d" % release.minor(lowest)
    return {"machines": [{"name": m["name"], "role": m["role"], "talos": m["talos"]} for m in ordered],
            "kubernetes": kubernetes, "contract": contract, "cni": cni.detect(kube), "record": record}


def stored_versions(record):
    return dict((k, record.get(k)) for k in ("talos", "kubernetes", "contract"))
