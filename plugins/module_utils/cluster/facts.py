# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes side of a cluster as adopt reads it: which CNI runs, who installed
it, kube-proxy, Cilium's kube-proxy replacement, and the Nodes. Read-only.

Cluster-wide and in few calls: the DaemonSets of every namespace in one list (Calico's operator installs into
``calico-system``, upstream flannel into ``kube-flannel``), the Helm records of the Cilium release in one list,
the Nodes in one list, and a get per Cilium ConfigMap and CRD.

The verdict is one row of adopt's CNI table:

=================  ==========================================================================================
ours               a Cilium whose release the collection keeps (``cilium`` in ichor-system)
cilium-helm        a Cilium with a foreign Helm release (``helm install``)
cilium-cli         a Cilium with a foreign Helm release made by the Cilium CLI (its record's values hold the
                   keys the CLI adds: ``cluster.name`` and ``routingMode``)
cilium-manifest    a Cilium with no Helm release: a Talos inline manifest or an applied ``helm template``
flannel, calico    that CNI
other              another known CNI (weave, kube-router, antrea, ...)
two-cnis           CNI DaemonSets of two CNIs (or of one CNI in two namespaces)
none               no CNI DaemonSet anywhere
=================  ==========================================================================================
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.cilium import live as cilium_live
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import record as cilium_record
from ansible_collections.maesh.ichor.plugins.module_utils.cilium.errors import CiliumError
from ansible_collections.maesh.ichor.plugins.module_utils.common import images
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cni, nodes

OURS, HELM, CLI, MANIFEST, FLANNEL, CALICO, OTHER, TWO, NONE = (
    "ours", "cilium-helm", "cilium-cli", "cilium-manifest", "flannel", "calico", "other", "two-cnis", "none")
VERDICTS = (OURS, HELM, CLI, MANIFEST, FLANNEL, CALICO, OTHER, TWO, NONE)

# CNI agent DaemonSets: (cni, DaemonSet names, label (key, value) pairs, image repository last path parts).
# Images are matched on the repository's trailing path (registry and tag free), so a mirror still matches.
# Only the agent counts: cilium-envoy, cilium-node-init and Calico's csi-node-driver are parts, not a CNI.
KNOWN = (
    ("canal", ("canal",), (("k8s-app", "canal"),), ()),
    ("cilium", ("cilium",), (("k8s-app", "cilium"),), ("cilium/cilium",)),
    ("flannel", ("kube-flannel", "kube-flannel-ds"), (("app", "flannel"), ("k8s-app", "flannel")), ("flannel",)),
    ("calico", ("calico-node",), (("k8s-app", "calico-node"),), ("calico/node",)),
    ("weave", ("weave-net",), (("name", "weave-net"),), ("weave-kube",)),
    ("kube-router", ("kube-router",), (("k8s-app", "kube-router"),), ("kube-router",)),
    ("antrea", ("antrea-agent",), (("component", "antrea-agent"),), ()),
    ("kube-ovn", ("kube-ovn-cni",), (("app", "kube-ovn-cni"),), ()),
    ("ovn-kubernetes", ("ovnkube-node",), (("name", "ovnkube-node"),), ()),
    ("aws-vpc-cni", ("aws-node",), (("k8s-app", "aws-node"),), ("amazon-k8s-cni",)),
    ("kindnet", ("kindnet",), (("app", "kindnet"),), ("kindnetd",)),
)
PRIMARY = {"cilium": "cilium", "flannel": "flannel", "calico": "calico"}
KUBE_PROXY = "kube-proxy"
OUR_RELEASE = (cilium_live.RELEASE_NAMESPACE, cilium_live.RELEASE)
CLI_KEYS = (("cluster", "name"), ("routingMode",))
CRDS = {"ciliumnodes": "ciliumnodes.cilium.io", "ciliumnetworkpolicies": "ciliumnetworkpolicies.cilium.io"}


# -- pure classification -----------------------------------------------------------------------


def _repository_tail(image):
    try:
        return images.parse(image).path
    except images.ImageRefError:
        return ""


def _pod_spec(ds):
    return ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}


def daemonset_images(ds):
    return [c.get("image", "") for c in _pod_spec(ds).get("containers") or []]


def _image_matches(image, tails):
    path = _repository_tail(image)
    return any(path == tail or path.endswith("/" + tail) for tail in tails)


def classify_daemonset(ds):
    """(cni, why) of a DaemonSet, or (None, None) when it is no CNI's agent. Name first, then labels, then
    images: a renamed DaemonSet is still found by what it runs."""
    meta = ds.get("metadata") or {}
    name, labels = meta.get("name"), meta.get("labels") or {}
    if name in ("cilium-envoy", "cilium-node-init"):
        return None, None
    for cni_name, names, pairs, tails in KNOWN:
        if name in names:
            return cni_name, "name"
    for cni_name, names, pairs, tails in KNOWN:
        for key, value in pairs:
            if labels.get(key) == value:
                return cni_name, "label %s=%s" % (key, value)
    for cni_name, names, pairs, tails in KNOWN:
        for image in daemonset_images(ds):
            if tails and _image_matches(image, tails):
                return cni_name, "image %s" % image
    return None, None


def is_kube_proxy(ds):
    meta = ds.get("metadata") or {}
    return meta.get("name") == KUBE_PROXY or (meta.get("labels") or {}).get("k8s-app") == KUBE_PROXY


def _agent_image(cni_name, ds):
    found = daemonset_images(ds)
    for _name, _names, _pairs, tails in KNOWN:
        if _name == cni_name and tails:
            match = [i for i in found if _image_matches(i, tails)]
            if match:
                return match[0]
    return found[0] if found else ""


def cni_daemonsets(daemonsets):
    """Every CNI agent DaemonSet: dicts with namespace, name, cni, why, image, version, managers."""
    out = []
    for ds in daemonsets:
        cni_name, why = classify_daemonset(ds)
        if cni_name is None:
            continue
        meta = ds.get("metadata") or {}
        image = _agent_image(cni_name, ds)
        out.append({"namespace": meta.get("namespace"), "name": meta.get("name"), "cni": cni_name, "why": why,
                    "image": image, "version": cni.image_version(image),
                    "managers": sorted(set(m.get("manager") for m in meta.get("managedFields") or [] if m.get("manager")))})
    return sorted(out, key=lambda d: (d["namespace"], d["name"]))


def _has(config, path):
    for key in path:
        if not isinstance(config, dict) or key not in config:
            return False
        config = config[key]
    return True


def made_by_cli(config):
    """Whether a Helm record's user values carry what the Cilium CLI adds to every install."""
    return all(_has(config or {}, path) for path in CLI_KEYS)


def verdict(found, releases):
    """(row, evidence lines) from the CNI DaemonSets (``cni_daemonsets``) and the Cilium release summaries
    (``release_summary``)."""
    places = sorted(set((d["cni"], d["namespace"]) for d in found))
    if not places:
        return NONE, ["no CNI DaemonSet in any namespace"]
    described = ["%s (DaemonSet %s/%s, %s)" % (d["cni"], d["namespace"], d["name"], d["why"]) for d in found]
    if len(places) > 1:
        return TWO, ["two CNIs: " + " and ".join(described)]
    cni_name = places[0][0]
    if cni_name != "cilium":
        return PRIMARY.get(cni_name, OTHER), ["CNI " + described[0]]
    evidence = ["CNI " + described[0]]
    ours = [r for r in releases if (r["namespace"], r["release"]) == OUR_RELEASE]
    foreign = [r for r in releases if (r["namespace"], r["release"]) != OUR_RELEASE]
    for r in foreign:
        evidence.append("foreign Helm release %s/%s: revision %s, %s, chart %s%s" % (
            r["namespace"], r["release"], r["revision"], r["status"], r["chart"],
            ", values as the Cilium CLI writes them" if r["cli"] else ""))
    if ours:
        r = ours[0]
        evidence.append("the collection's release %s/%s: revision %s, %s, chart %s" % (
            r["namespace"], r["release"], r["revision"], r["status"], r["chart"]))
        return OURS, evidence
    if foreign:
        return (CLI if any(r["cli"] for r in foreign) else HELM), evidence
    managers = found[0]["managers"]
    evidence.append("no Helm release record of Cilium in any namespace%s" % (
        "; field managers of the DaemonSet: " + ", ".join(managers) if managers else ""))
    return MANIFEST, evidence


def release_summary(records):
    """One summary per release (namespace, name): its newest record's revision, status, chart and whether the
    Cilium CLI made it."""
    by_release = {}
    for rec in records:
        by_release.setdefault((rec.namespace, rec.release_name), []).append(rec)
    out = []
    for (namespace, name), recs in sorted(by_release.items()):
        newest = cilium_record.newest(recs)
        try:
            chart, cli = newest.chart_version, made_by_cli(newest.config)
        except CiliumError:  # a record that is not a release: still a release was there
            chart, cli = None, False
        out.append({"namespace": namespace, "release": name, "revision": newest.revision, "status": newest.status,
                    "chart": chart, "cli": cli, "records": len(recs)})
    return out


def kube_proxy_replacement_setting(config_data):
    """The ``kube-proxy-replacement`` key of cilium-config as written (None when absent)."""
    value = (config_data or {}).get("kube-proxy-replacement")
    return None if value is None else str(value)


def node_rows(node_objects):
    rows = []
    for node in node_objects:
        addresses = (node.get("status") or {}).get("addresses") or []
        internal = [a.get("address") for a in addresses if a.get("type") == "InternalIP"]
        labels = (node.get("metadata") or {}).get("labels") or {}
        rows.append({"name": (node.get("metadata") or {}).get("name"), "ready": nodes.ready(node),
                     "kubelet_version": nodes.info(node).get("kubeletVersion"),
                     "internal_ip": internal[0] if internal else None,
                     "controlplane": "node-role.kubernetes.io/control-plane" in labels})
    return sorted(rows, key=lambda r: r["name"] or "")


# -- the read --------------------------------------------------------------------------------


def _crd(kube, name):
    return kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name) is not None


def gather(kube):
    """The facts (a dict), read from the cluster."""
    daemonsets = kube.list("apps/v1", "DaemonSet")  # every namespace, one call
    found = cni_daemonsets(daemonsets)
    proxies = [ds for ds in daemonsets if is_kube_proxy(ds)]

    cilium_ds = [ds for ds in daemonsets if (ds.get("metadata") or {}).get("namespace") in
                 set(d["namespace"] for d in found if d["cni"] == "cilium")
                 and classify_daemonset(ds)[0] == "cilium"]
    release_names = set([cilium_live.RELEASE])
    cilium = None
    if cilium_ds:
        ds = cilium_ds[0]
        namespace = ds["metadata"]["namespace"]
        config = kube.get("v1", "ConfigMap", cilium_live.CONFIG, namespace)
        running = cilium_live.LiveCilium(ds, config, None)
        if running.helm_release[0]:
            release_names.add(running.helm_release[0])
        cilium = {"namespace": namespace, "daemonset": ds["metadata"]["name"], "image": running.image,
                  "version": running.version, "config": config is not None,
                  "kube_proxy_replacement": running.kube_proxy_replacement if config is not None else None,
                  "kube_proxy_replacement_setting": kube_proxy_replacement_setting(running.config),
                  "helm_release": {"name": running.helm_release[0], "namespace": running.helm_release[1]}
                  if running.helm_release[0] else None}
    records = []
    for name in sorted(release_names):  # every namespace: a release may live anywhere
        records += [cilium_record.Record(s) for s in
                    kube.list("v1", "Secret", label_selector="owner=helm,name=%s" % name)]
    releases = release_summary(records)
    crds = dict((key, _crd(kube, name)) for key, name in CRDS.items())
    if cilium is not None:
        cilium["releases"] = releases
        cilium.update(("crd_" + key, present) for key, present in crds.items())

    row, evidence = verdict(found, releases if cilium is not None else [])
    node_list = node_rows(kube.list("v1", "Node"))
    proxy = None
    if proxies:
        meta = proxies[0]["metadata"]
        image = (daemonset_images(proxies[0]) or [""])[0]
        proxy = {"namespace": meta.get("namespace"), "name": meta.get("name"), "image": image,
                 "version": cni.image_version(image)}
    if row == NONE:
        not_ready = [n["name"] for n in node_list if not n["ready"]]
        evidence.append("%d of %d Nodes NotReady" % (len(not_ready), len(node_list)))
    return {
        "cni": {"verdict": row, "names": sorted(set(d["cni"] for d in found)), "evidence": evidence,
                "daemonsets": found},
        "cilium": cilium,
        "cilium_releases": releases,
        "crds": crds,
        "kube_proxy": {"present": proxy is not None, "daemonset": proxy},
        "nodes": node_list,
        "nodes_ready": sum(1 for n in node_list if n["ready"]),
        "kubelet_versions": sorted(set(n["kubelet_version"] for n in node_list if n["kubelet_version"])),
    }


def plan_lines(facts):
    row = facts["cni"]["verdict"]
    lines = ["CNI: %s" % row] + ["  " + line for line in facts["cni"]["evidence"]]
    cilium = facts["cilium"]
    if cilium is not None:
        lines.append("Cilium %s (%s), kube-proxy-replacement %s" % (
            cilium["version"] or "of unknown version", cilium["image"],
            cilium["kube_proxy_replacement_setting"] if cilium["config"] else "unknown (no cilium-config)"))
    proxy = facts["kube_proxy"]["daemonset"]
    lines.append("kube-proxy: DaemonSet %s/%s (%s)" % (proxy["namespace"], proxy["name"], proxy["image"])
                 if proxy else "kube-proxy: no DaemonSet")
    kubelets = ", ".join(facts["kubelet_versions"]) or "unknown"
    lines.append("Nodes: %d of %d Ready, kubelet %s" % (facts["nodes_ready"], len(facts["nodes"]), kubelets))
    return lines


def run(conn):
    """The ``cluster_facts`` module's result."""
    facts = gather(conn.kube())
    return dict(changed=False, ansible_facts={"ichor_cluster_facts": facts}, plan=plan_lines(facts))
