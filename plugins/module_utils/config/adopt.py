# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Class A mapping on adoption: read the spec running machines' configs state.

From one live config (legacy or typed form): name, endpoint, Kubernetes version, subnets, KubePrism,
the Talos CNI (default or none) and kube-proxy setting, sysctls and kernel modules, install (disk
from ``installDisk`` or a ``disk.dev_path ==`` selector, image, wipe), registry mirrors and cert SANs.
Registry credentials and TLS, custom CNI URLs and non-Cilium inline manifests are never mapped
(class C).

Across a cluster (read()): each field is read from the machines that carry it (the CNI, kube-proxy
and inline manifests from control planes: a contract v1.14 worker has none of them) and compared
across all of them; a field they disagree on is not mapped (unmapped: its drift is class C). Nothing
depends on the order the machines come in.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.maesh.ichor.plugins.module_utils.config import contracts, documents, images, network, render
from ansible_collections.maesh.ichor.plugins.module_utils.config import spec as specs
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.talos import KUBEPRISM_PORT

_DEV_PATH = re.compile(r'^\s*disk\.dev_path\s*==\s*"([^"]+)"\s*$')

# Cluster spec fields as the drift names them (drift.HINT_DISAGREE), in the order they are compared.
FIELDS = ("name", "endpoint", "kubernetesVersion", "network", "cni", "kubeProxy", "kubePrism", "registries",
          "certSANs", "sysctls", "kernelModules", "inlineManifests", "apiServer", "controllerManager", "scheduler",
          "auditPolicy", "admissionControl")
# What a worker's config does not carry: at contract v1.14 the CNI and kube-proxy documents are the
# control planes' only; inline manifests and the control-plane components' settings are the control planes' at every
# contract.
_COMPONENTS = ("inlineManifests", "apiServer", "controllerManager", "scheduler", "auditPolicy", "admissionControl")
_CONTROLPLANE_ONLY = {"typed": ("cni", "kubeProxy") + _COMPONENTS, "legacy": _COMPONENTS}


# Lists the machines may disagree on: then nothing is mapped (their paths are class C on every machine), rather than
# one machine's list taken for the cluster's.
_NOTHING_WHEN_SPLIT = {"registries": [], "certSANs": []}


def _typed(docs, kind, name=None):
    doc = documents.find(docs, kind, name)
    return doc.body if doc is not None else None


# A live config is not ours: a field of the wrong type reads as absent here (the drift still shows it).
def _map(value):
    return value if isinstance(value, dict) else {}


def _seq(value):
    return value if isinstance(value, list) else []


def _mirrors(docs, legacy):
    out = {}
    for host, entry in _map(documents.get_path(legacy, "machine.registries.mirrors")).items():
        entry = _map(entry)
        out[str(host)] = {"host": str(host), "endpoints": list(_seq(entry.get("endpoints"))),
                          "overridePath": bool(entry.get("overridePath")), "skipFallback": bool(entry.get("skipFallback"))}
    for doc in documents.find_all(docs, "RegistryMirrorConfig"):
        if not doc.name:
            continue  # machinery refuses a mirror without a name; the drift shows it
        items = _seq(doc.body.get("endpoints"))
        if not all(isinstance(item, dict) for item in items):
            continue  # not a form machinery takes; the drift shows it
        overrides = [item.get("overridePath") for item in items]
        if any(value is not overrides[0] for value in overrides):
            continue  # per-endpoint overridePath that differs has no field (drift classes the host C)
        overrides = set(bool(value) for value in overrides)
        out[doc.name] = {"host": doc.name, "endpoints": [item.get("url") for item in items],
                         "overridePath": overrides == {True}, "skipFallback": bool(doc.body.get("skipFallback"))}
    return [out[host] for host in sorted(out)]


def _strings(mapping):
    """The entries of a {str: str} map (labels, taints, arguments) whose value is a scalar, as text (YAML reads
    ``tier: 1`` as a number, machinery as the string "1"); a list or a map has no field (its drift is class C)."""
    return dict((str(key), specs.scalar_text(value, key)) for key, value in _map(mapping).items()
                if isinstance(value, (str, int, float, bool)) and value is not None)


def _beyond(stated, defaults):
    """What a machine states beyond the labels or taints its role has by default (spec.nodeLabels, spec.nodeTaints)."""
    return dict((key, value) for key, value in stated.items() if defaults.get(key) != value)


def _mounts(items, unread):
    out = []
    for item in _seq(items):
        try:
            out.append(specs.mount(item, "kubelet.extraMounts"))
        except ConfigError:
            unread.append(UNREAD_MOUNTS)  # not a form the spec states: unmapped, its drift class C
    return out


# Machine fields a live config states in a form the spec cannot hold: read() lists them as unmapped (drift.py classes
# their paths C), so that what adoption left out is never applied as a removal.
UNREAD_NETWORK = "network.interfaces"
UNREAD_MOUNTS = "kubelet.extraMounts"


def _machine_fields(docs, legacy, role, typed_k8s, unread):
    """network, timeServers, nodeLabels, nodeTaints and kubelet of one live config; what it could not read is added to
    unread (UNREAD_NETWORK, UNREAD_MOUNTS)."""
    get = documents.get_path
    form = "typed" if typed_k8s else "legacy"
    defaults = {"role": role if role in ("controlplane", "worker") else "worker", "nodeLabels": {}, "nodeTaints": {}}
    machine_network, time_servers, complete = network.read(docs, legacy, role == "controlplane")
    if not complete:
        unread.append(UNREAD_NETWORK)
    if typed_k8s:
        node = _map(_typed(docs, "KubeNodeConfig"))
        labels, taints, subnets = node.get("labels"), node.get("taints"), get(node, "nodeIP.validSubnets")
        kubelet_args = _map(_typed(docs, "KubeletConfig")).get("extraArgs")
    else:
        labels, taints = get(legacy, "machine.nodeLabels"), get(legacy, "machine.nodeTaints")
        subnets, kubelet_args = get(legacy, "machine.kubelet.nodeIP.validSubnets"), get(legacy, "machine.kubelet.extraArgs")
    return {
        "network": machine_network, "timeServers": time_servers,
        "nodeLabels": _beyond(_strings(labels), render.node_labels(defaults, form)),
        "nodeTaints": _beyond(_strings(taints), render.node_taints(defaults, form)),
        "kubelet": {"extraArgs": _strings(kubelet_args), "extraMounts": _mounts(get(legacy, "machine.kubelet.extraMounts"), unread),
                    "nodeIPSubnets": [item for item in _seq(subnets) if isinstance(item, str)]},
    }


def _components(docs, legacy, typed_k8s):
    """apiServer, controllerManager, scheduler (extra arguments), auditPolicy and admissionControl of one live config:
    None where it states Talos's default."""
    get = documents.get_path
    if typed_k8s:
        stated = dict((field, _typed(docs, kind)) for field, kind in (
            ("apiServer", "KubeAPIServerConfig"), ("controllerManager", "KubeControllerManagerConfig"), ("scheduler", "KubeSchedulerConfig")))
        policy = _map(_typed(docs, "KubeAuditPolicyConfig")).get("configuration")
        admission = [{"name": doc.name, "configuration": doc.body.get("configuration")}
                     for doc in documents.find_all(docs, "KubeAdmissionControlConfig") if doc.name]
    else:
        stated = dict((field, get(legacy, "cluster.%s" % field)) for field in ("apiServer", "controllerManager", "scheduler"))
        policy = get(legacy, "cluster.apiServer.auditPolicy")
        admission = [dict(item) for item in _seq(get(legacy, "cluster.apiServer.admissionControl")) if isinstance(item, dict)]
    out = dict((field, {"extraArgs": _strings(_map(body).get("extraArgs"))}) for field, body in stated.items())
    policy = _map(policy)
    out["auditPolicy"] = None if policy == render.audit_policy() else policy
    default = [{"name": "PodSecurity", "configuration": render.pod_security()}]
    out["admissionControl"] = None if admission == default else admission
    for field in ("auditPolicy", "admissionControl"):
        if not _plain(out[field]):
            out[field] = UNREADABLE  # keys that are not strings: no spec holds it, its paths are class C
    return out


# What a field reads as when the config states it in a form the spec cannot hold; read() leaves it unmapped.
UNREADABLE = "(not readable into the spec)"


def _readable(value):
    return None if value == UNREADABLE else value


def _plain(value):
    """Whether value is what JSON (and so the spec and the record) holds: string keys, at every level."""
    if isinstance(value, dict):
        return all(isinstance(key, str) and _plain(item) for key, item in value.items())
    if isinstance(value, list):
        return all(_plain(item) for item in value)
    return value is None or isinstance(value, (str, int, float, bool))


class Stated:
    """What one live config states: the cluster fields (FIELDS), the machine spec, the fields it carries."""

    def __init__(self, fields, machine, carried, talos_version, unread=()):
        self.unread = sorted(set(unread))  # machine fields not read (UNREAD_*)
        self.fields = fields
        self.machine = machine
        self.carried = carried
        self.talos_version = talos_version


def state(docs, talos_version):
    """The Stated of one live config."""
    if isinstance(docs, (str, bytes)):
        docs = documents.parse(docs)
    legacy_doc = documents.find(docs, documents.LEGACY)
    if legacy_doc is None:
        raise ConfigError("the live config has no v1alpha1 document")
    legacy = legacy_doc.body
    get = documents.get_path
    role = get(legacy, "machine.type")
    if role == "init":
        role = "controlplane"
    kube_cluster = _map(_typed(docs, "KubeClusterConfig"))
    name = kube_cluster.get("clusterName") or get(legacy, "cluster.clusterName")
    endpoint = kube_cluster.get("endpoint") or get(legacy, "cluster.controlPlane.endpoint")
    kubelet_image = _map(_typed(docs, "KubeletConfig")).get("image") or get(legacy, "machine.kubelet.image") or ""
    kubelet_version = images.tag_version(kubelet_image)  # a digest after the tag is the image's, not the version's
    if not (isinstance(name, str) and name and isinstance(endpoint, str) and endpoint and kubelet_version):
        raise ConfigError("the live config does not state the cluster name, endpoint and kubelet image")
    network = _map(_typed(docs, "KubeNetworkConfig") or get(legacy, "cluster.network"))

    typed_k8s = documents.find(docs, "KubeletConfig") is not None
    if typed_k8s:
        prism = _typed(docs, "KubePrismConfig")
        kube_prism = {"enabled": prism is not None, "port": _map(prism).get("port") or KUBEPRISM_PORT}
        proxy_doc = _typed(docs, "KubeProxyConfig")
        proxy_disabled = proxy_doc is not None and proxy_doc.get("enabled") is False
        talos_cni = "default" if documents.find(docs, "KubeFlannelCNIConfig") is not None else "none"
        sysctls = _map(_map(_typed(docs, "SysctlConfig")).get("params"))
        modules = [doc.name for doc in documents.find_all(docs, "KernelModuleConfig") if doc.name]
        manifests = [{"name": doc.name, "contents": doc.body.get("manifest") or ""} for doc in documents.find_all(docs, "KubeInlineManifestConfig")
                     if doc.name]
        api_sans = _seq(_map(_typed(docs, "KubeAPIServerConfig")).get("certExtraSANs"))
        install_doc = _map(_typed(docs, "UnattendedInstallConfig"))
        selector = get(install_doc, "provisioning.diskSelector.match") or ""
        disk_match = _DEV_PATH.match(selector) if isinstance(selector, str) else None
        install = {"disk": disk_match.group(1) if disk_match else None, "image": get(install_doc, "installer.image"),
                   "wipe": bool(get(install_doc, "provisioning.wipe"))}
    else:
        prism = _map(get(legacy, "machine.features.kubePrism"))
        kube_prism = {"enabled": bool(prism.get("enabled")), "port": prism.get("port") or KUBEPRISM_PORT}
        proxy_disabled = bool(get(legacy, "cluster.proxy.disabled"))
        cni_name = get(legacy, "cluster.network.cni.name") or "flannel"
        talos_cni = "none" if cni_name == "none" else "default"  # custom URLs are never mapped (class C)
        sysctls = _map(get(legacy, "machine.sysctls"))
        modules = [item.get("name") for item in _seq(get(legacy, "machine.kernel.modules")) if isinstance(item, dict) and item.get("name")]
        manifests = [dict(item) for item in _seq(get(legacy, "cluster.inlineManifests")) if isinstance(item, dict)]
        api_sans = _seq(get(legacy, "cluster.apiServer.certSANs"))
        install = {"disk": get(legacy, "machine.install.disk"), "image": get(legacy, "machine.install.image"),
                   "wipe": bool(get(legacy, "machine.install.wipe"))}
    machine_sans = list(_seq(get(legacy, "machine.certSANs")))
    fields = {
        "name": name, "endpoint": endpoint, "kubernetesVersion": kubelet_version[1:],
        "network": {"dnsDomain": network.get("dnsDomain"), "podSubnets": list(_seq(network.get("podSubnets"))),
                    "serviceSubnets": list(_seq(network.get("serviceSubnets")))},
        "cni": talos_cni, "kubeProxy": "replaced" if proxy_disabled else "enabled", "kubePrism": kube_prism,
        "registries": _mirrors(docs, legacy),
        # A control plane whose API server SANs differ from machine.certSANs states no one list (class C).
        "certSANs": machine_sans if (role != "controlplane" or list(api_sans) == machine_sans) else [],
        "sysctls": dict((str(k), str(v)) for k, v in sysctls.items()),
        "kernelModules": modules,
        "inlineManifests": manifests,
    }
    fields.update(_components(docs, legacy, typed_k8s))
    carried = set(FIELDS)
    if role != "controlplane":
        carried -= set(_CONTROLPLANE_ONLY["typed" if typed_k8s else "legacy"])
    hostname = _map(_typed(docs, "HostnameConfig")).get("hostname")
    machine = {"role": role, "hostname": hostname, "install": install}
    unread = []
    machine.update(_machine_fields(docs, legacy, role, typed_k8s, unread))
    return Stated(fields, machine, carried, talos_version, unread)


def _cluster_spec(fields, talos_version, preset=None):
    """The cluster spec for the fields stated (FIELDS); preset: cilium | unmanaged | None (detect)."""
    prism = fields["kubePrism"]
    cilium = [item for item in fields["inlineManifests"] if specs.is_cilium_manifest(item.get("contents") or "")]
    if preset is None:
        preset = "cilium" if (fields["cni"] == "none" and cilium and prism["enabled"]
                              and prism["port"] == KUBEPRISM_PORT) else "unmanaged"
    cni = {"preset": preset, "kubeProxy": fields["kubeProxy"]}
    if preset == "unmanaged":
        cni["unmanaged"] = {"talosCNI": fields["cni"]}
    return {
        "name": fields["name"], "endpoint": fields["endpoint"], "kubernetesVersion": fields["kubernetesVersion"],
        "talosVersion": talos_version, "network": fields["network"], "cni": cni, "kubePrism": prism,
        "registries": fields["registries"], "certSANs": fields["certSANs"], "sysctls": fields["sysctls"],
        "kernelModules": fields["kernelModules"],
        "apiServer": fields["apiServer"], "controllerManager": fields["controllerManager"], "scheduler": fields["scheduler"],
        "auditPolicy": _readable(fields["auditPolicy"]), "admissionControl": _readable(fields["admissionControl"]),
        # Only an Ichor-managed Cilium's entry is carried (class B until the hand-over drops it);
        # any other inline manifest stays class C.
        "inlineManifests": cilium if preset == "cilium" else [],
    }


def from_config(docs, talos_version, preset=None):
    """(cluster spec, machine spec) stated by one live config. preset: cilium | unmanaged | None (detect)."""
    stated = state(docs, talos_version)
    return _cluster_spec(stated.fields, talos_version, preset), stated.machine


def _canonical(value):
    return json.dumps(value, sort_keys=True)


class Adoption:
    """The cluster spec read from a cluster's live configs, each machine's spec, and the unmapped fields."""

    def __init__(self, cluster, machines, unmapped):
        self.cluster = cluster
        self.machines = machines
        self.unmapped = unmapped

    def unmapped_besides(self, given):
        """The unmapped fields a given (inventory) cluster spec does not state: what it states is the operator's word."""
        given = given or {}
        return [field for field in self.unmapped if ("cni" if field == "kubeProxy" else field) not in given]


def read(configs, preset=None):
    """An Adoption from [(machine name, live docs, running Talos version)], whatever their order.

    Each field comes from the machines that carry it; where they disagree the field is unmapped (its
    drift is class C) and the value taken is the same whatever the order (the lowest version, nothing
    for registry mirrors and cert SANs, else the first in a sorted order). A field no machine carries
    keeps the value a worker's config implies.
    """
    if not configs:
        raise ConfigError("no machine configs to adopt")
    stated = []
    for name, docs, talos_version in configs:
        try:
            stated.append(state(docs, talos_version))
        except ConfigError as exc:
            raise ConfigError("%s: %s" % (name, exc))
    fields = {}
    unmapped = []
    for field in FIELDS:
        carriers = [item for item in stated if field in item.carried] or stated
        values = sorted(set(_canonical(item.fields[field]) for item in carriers))
        if field == "kubernetesVersion":
            values = sorted(values, key=lambda value: contracts.parse_version(json.loads(value)))
        fields[field] = json.loads(values[0])
        if len(values) > 1 or fields[field] == UNREADABLE:
            unmapped.append(field)
            if field in _NOTHING_WHEN_SPLIT:
                fields[field] = _NOTHING_WHEN_SPLIT[field]  # no one machine's list speaks for the others
    for item in stated:
        unmapped.extend(field for field in item.unread if field not in unmapped)
    talos = min((item.talos_version for item in stated), key=contracts.parse_version)
    return Adoption(_cluster_spec(fields, talos, preset), [item.machine for item in stated], unmapped)


def unmapped(cluster_specs):
    """The fields (``registries``, ``certSANs``) the cluster specs disagree on (see read() for whole configs)."""
    out = []
    for field in ("registries", "certSANs"):
        values = [item.get(field) for item in cluster_specs]
        if any(value != values[0] for value in values):
            out.append(field)
    return out


def merge(cluster_specs):
    """One cluster spec from cluster specs (from_config()): mirrors and cert SANs only when all agree.

    Kept for callers that hold specs only; it takes the other fields from the first spec, so it
    depends on their order: read() reads whole configs and does not.
    """
    if not cluster_specs:
        raise ConfigError("no machine configs to adopt")
    merged = dict(cluster_specs[0])
    for field in unmapped(cluster_specs):
        merged[field] = []
    return merged
