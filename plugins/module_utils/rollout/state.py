# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read a running cluster's versions the way they run on Talos: each machine's Talos, the
control-plane component images in the control planes' machine configs, each Node's kubelet,
the CNI, the stored versions from the cluster record, and every machine's live config for the
config engine (the contract form each config is in)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.common.given import given
from ansible_collections.maesh.ichor.plugins.module_utils.config import registry_auth, secrets, yamlio
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import model as rollout
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record, cni
from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res
from ansible_collections.maesh.ichor.plugins.module_utils.config.images import component_versions


async def _none():
    return None


async def _machine_versions(client, m, extensions=False):
    info, config, node_name, items = await machine.gather(
        machine.version(client, m["node"]), machine.get_resource(client, res.MACHINE_CONFIG, m["node"]),
        machine.node_name(client, m["node"]),
        machine.list_resources(client, res.EXTENSION_STATUSES, m["node"]) if extensions else _none())
    text = config["spec"] if config else ""
    out = {"name": m["name"], "node": m["node"], "role": m["role"], "talos": info["tag"], "components": {},
           "config": text, "objects": None, "node_name": node_name or m["name"],
           "extensions": machine.in_load_order(items) if items is not None else None}
    if text.strip():
        # read once (the C loader where PyYAML has it), here for the images and later for the config engine;
        # a config that is not YAML is left to rollout.Machine, which names the machine in its refusal
        try:
            out["objects"] = yamlio.load_all(text)
        except ConfigError:
            pass
    if m["role"] == "controlplane" and out["objects"] is not None:
        out["components"] = component_versions(out["objects"])
    return out


def _read_machines(talos, machines, extensions=False):
    results = {}
    by_node = dict((m["node"], m) for m in machines)
    fan = talos.fan_out(lambda node: _machine_versions(talos, by_node[node], extensions), list(by_node))
    for node, result in fan.items():
        if result.error is not None:
            raise result.error
        results[node] = result.message
    return [results[m["node"]] for m in machines]


def _live(read_rows):
    return [rollout.Machine(m["name"], m["node"], m["role"], m["talos"], m["config"], m.get("objects"),
                            node_name=m.get("node_name"))
            for m in read_rows]


def live_machines(talos, machines):
    """Each machine's Talos version and live config, as rollout.Machine (for the config engine)."""
    return _live(_read_machines(talos, machines))


def reads_back(talos, m, model, rendered):
    """Whether machine m's live config now equals rendered (the set's contract form)."""
    back = live_machines(talos, [{"name": m.name, "node": m.node, "role": m.role}])[0]
    return model.drift(rendered, back.docs, release.CONTRACT).zero


def live_from(state):
    """The rollout.Machine list of a read() result."""
    return _live(state["rows"])


def handed_over(record):
    """The Cilium inline manifest entries the cluster record names as handed over: cilium_takeover writes them
    with the release, only once the hand-over is complete."""
    cilium = record.get("cilium") if record is not None else None
    if not isinstance(cilium, dict) or not cilium.get("release"):
        return []
    names = cilium.get("inlineManifests")
    return [name for name in names if isinstance(name, str)] if isinstance(names, list) else []


def config_model(live, cluster=None, secrets_path=None, record=None, kube=None):
    """The engine's model of the cluster: the given spec and bundle, or what the live configs state; the
    inline entries the cluster record says were handed over are left out."""
    if record is not None:  # the rollout renders whole configs: never onto a machine adopt still holds
        cluster_record.refuse_held(record, set(m.name for m in live) | set(m.node for m in live))
    bundle = secrets.load(secrets_path) if secrets_path else None
    return rollout.model(live, cluster=given(cluster) or None, bundle=bundle, handed_over=handed_over(record),
                         auth_refs=registry_auth.record_refs(record), kube=kube)


def read(talos, kube, machines, record=None):
    """{machines: [{name, node, role, talos, node_name (the Node Talos reports for it)}], kubernetes: {source:
    version}, cni, record, rows (with each config and its system extensions), nodes (the Nodes' names)}.

    ``record``: the cluster record when the caller read it already (else it is read here)."""
    ordered = _read_machines(talos, machines, extensions=True)
    node_objects = kube.list("v1", "Node")
    kubernetes = kubernetes_versions([(m["name"], m["components"]) for m in ordered], kube, node_objects)
    if record is None:
        record = cluster_record.read(kube)
    found_cni = cni_of(kube, record)
    return {"machines": [{"name": m["name"], "node": m["node"], "role": m["role"], "talos": m["talos"],
                          "node_name": m["node_name"]} for m in ordered],
            "kubernetes": kubernetes, "cni": found_cni, "record": record, "rows": ordered,
            "nodes": set((n.get("metadata") or {}).get("name") for n in node_objects)}


def kubernetes_versions(components, kube, node_objects=None):
    """{source: version} of every Kubernetes component: each control plane's static pods (``components``: (machine
    name, {component: "vX.Y.Z"}) pairs) and each Node's kubelet (``node_objects``: the Nodes, when listed already)."""
    kubernetes = {}
    for name, images in components:
        for component in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
            if images.get(component):
                kubernetes["%s %s" % (name, component)] = images[component]
    for node in kube.list("v1", "Node") if node_objects is None else node_objects:
        version = ((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion")
        if version:
            kubernetes["%s kubelet" % node["metadata"]["name"]] = version
    return kubernetes


def cni_of(kube, record):
    """The CNI the cluster runs (``cni.detect``), marked unmanaged when adopt left it alone."""
    found_cni = cni.detect(kube)
    if ((record.get("cluster") or {}).get("cni") or {}).get("preset") == "unmanaged":
        found_cni["unmanaged"] = True  # adopted with its CNI left alone: no Cilium judgement, no Cilium step
    return found_cni


def compared_docs(docs, record):
    """A machine's documents without the Cilium inline manifest entries the record says were handed over."""
    return rollout.without_inline(docs, sorted(set(rollout.inline_names(docs)) & set(handed_over(record))))


def stored_versions(record):
    return dict((k, record.get(k)) for k in ("talos", "kubernetes", "contract"))
