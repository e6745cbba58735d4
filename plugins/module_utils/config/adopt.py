# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Class A mapping on adoption: read the spec a running machine's config states.

From one live config (legacy or typed form): name, endpoint, Kubernetes version, subnets, KubePrism,
the Talos CNI (default or none) and kube-proxy setting, sysctls and kernel modules, install (disk
from ``installDisk`` or a ``disk.dev_path ==`` selector, image, wipe), registry mirrors and cert SANs.
Across machines, registry mirrors and cert SANs are mapped only when every machine states the same;
otherwise they are left out and the difference stays in the drift. Registry credentials and TLS,
custom CNI URLs and non-Cilium inline manifests are never mapped (class C).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.maesh.ichor.plugins.module_utils.config import documents
from ansible_collections.maesh.ichor.plugins.module_utils.config import spec as specs
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError

_DEV_PATH = re.compile(r'^\s*disk\.dev_path\s*==\s*"([^"]+)"\s*$')
_TAG = re.compile(r":v?(\d+\.\d+\.\d+)$")


def _typed(docs, kind, name=None):
    doc = documents.find(docs, kind, name)
    return doc.body if doc is not None else None


def _mirrors(docs, legacy):
    out = {}
    for host, entry in (documents.get_path(legacy, "machine.registries.mirrors") or {}).items():
        entry = entry or {}
        out[host] = {"host": host, "endpoints": list(entry.get("endpoints") or []),
                     "overridePath": bool(entry.get("overridePath")), "skipFallback": bool(entry.get("skipFallback"))}
    for doc in documents.find_all(docs, "RegistryMirrorConfig"):
        items = [item if isinstance(item, dict) else {"url": item} for item in doc.body.get("endpoints") or []]
        overrides = set(bool(item.get("overridePath")) for item in items)
        if len(overrides) > 1:
            continue  # mixed per-endpoint overridePath has no field
        out[doc.name] = {"host": doc.name, "endpoints": [item.get("url") for item in items],
                         "overridePath": overrides == {True}, "skipFallback": bool(doc.body.get("skipFallback"))}
    return [out[host] for host in sorted(out)]


def from_config(docs, talos_version, preset=None):
    """(cluster spec, machine spec) stated by one live config. preset: cilium | unmanaged | None (detect)."""
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
    kube_cluster = _typed(docs, "KubeClusterConfig") or {}
    name = kube_cluster.get("clusterName") or get(legacy, "cluster.clusterName")
    endpoint = kube_cluster.get("endpoint") or get(legacy, "cluster.controlPlane.endpoint")
    kubelet_image = (_typed(docs, "KubeletConfig") or {}).get("image") or get(legacy, "machine.kubelet.image") or ""
    match = _TAG.search(kubelet_image)
    if not (name and endpoint and match):
        raise ConfigError("the live config does not state the cluster name, endpoint and kubelet image")
    network = _typed(docs, "KubeNetworkConfig") or get(legacy, "cluster.network") or {}

    typed_k8s = documents.find(docs, "KubeletConfig") is not None
    if typed_k8s:
        prism = _typed(docs, "KubePrismConfig")
        kube_prism = {"enabled": prism is not None, "port": (prism or {}).get("port") or specs.DEFAULT_KUBEPRISM_PORT}
        proxy_doc = _typed(docs, "KubeProxyConfig")
        proxy_disabled = proxy_doc is not None and proxy_doc.get("enabled") is False
        if documents.find(docs, "KubeFlannelCNIConfig") is not None:
            talos_cni = "default"
        else:
            talos_cni = "none"
        sysctls = (_typed(docs, "SysctlConfig") or {}).get("params") or {}
        modules = [doc.name for doc in documents.find_all(docs, "KernelModuleConfig")]
        manifests = [{"name": doc.name, "contents": doc.body.get("manifest") or ""} for doc in documents.find_all(docs, "KubeInlineManifestConfig")]
        api_sans = (_typed(docs, "KubeAPIServerConfig") or {}).get("certExtraSANs") or []
        install_doc = _typed(docs, "UnattendedInstallConfig") or {}
        selector = get(install_doc, "provisioning.diskSelector.match") or ""
        disk_match = _DEV_PATH.match(selector)
        install = {"disk": disk_match.group(1) if disk_match else None, "image": get(install_doc, "installer.image"),
                   "wipe": bool(get(install_doc, "provisioning.wipe"))}
    else:
        prism = get(legacy, "machine.features.kubePrism") or {}
        kube_prism = {"enabled": bool(prism.get("enabled")), "port": prism.get("port") or specs.DEFAULT_KUBEPRISM_PORT}
        proxy_disabled = bool(get(legacy, "cluster.proxy.disabled"))
        cni_name = get(legacy, "cluster.network.cni.name") or "flannel"
        talos_cni = "none" if cni_name == "none" else "default"  # custom URLs are never mapped (class C)
        sysctls = get(legacy, "machine.sysctls") or {}
        modules = [item.get("name") for item in get(legacy, "machine.kernel.modules") or [] if isinstance(item, dict)]
        manifests = [dict(item) for item in get(legacy, "cluster.inlineManifests") or [] if isinstance(item, dict)]
        api_sans = get(legacy, "cluster.apiServer.certSANs") or []
        install = {"disk": get(legacy, "machine.install.disk"), "image": get(legacy, "machine.install.image"),
                   "wipe": bool(get(legacy, "machine.install.wipe"))}

    cilium = [item for item in manifests if specs.is_cilium_manifest(item.get("contents") or "")]
    if preset is None:
        preset = "cilium" if (talos_cni == "none" and cilium and kube_prism["enabled"]
                              and kube_prism["port"] == specs.DEFAULT_KUBEPRISM_PORT) else "unmanaged"
    cni = {"preset": preset, "kubeProxy": "replaced" if proxy_disabled else "enabled"}
    if preset == "unmanaged":
        cni["unmanaged"] = {"talosCNI": talos_cni}
    machine_sans = list(get(legacy, "machine.certSANs") or [])
    cluster_spec = {
        "name": name, "endpoint": endpoint, "kubernetesVersion": match.group(1), "talosVersion": talos_version,
        "network": {"dnsDomain": network.get("dnsDomain"), "podSubnets": list(network.get("podSubnets") or []),
                    "serviceSubnets": list(network.get("serviceSubnets") or [])},
        "cni": cni,
        "kubePrism": kube_prism,
        "registries": _mirrors(docs, legacy),
        "certSANs": machine_sans if (role != "controlplane" or list(api_sans) == machine_sans) else [],
        "sysctls": dict((str(k), str(v)) for k, v in sysctls.items()),
        "kernelModules": modules,
        # Only an Ichor-managed Cilium's entry is carried (class B until the hand-over drops it);
        # any other inline manifest stays class C.
        "inlineManifests": cilium if preset == "cilium" else [],
    }
    hostname = (_typed(docs, "HostnameConfig") or {}).get("hostname")
    machine_spec = {"role": role, "hostname": hostname, "install": install}
    return cluster_spec, machine_spec


def unmapped(cluster_specs):
    """The fields (``registries``, ``certSANs``) the machines disagree on: not mapped, their drift is class C."""
    out = []
    for field in ("registries", "certSANs"):
        values = [item.get(field) for item in cluster_specs]
        if any(value != values[0] for value in values):
            out.append(field)
    return out


def merge(cluster_specs):
    """One cluster spec from every machine's: mirrors and cert SANs only when all agree (see unmapped())."""
    if not cluster_specs:
        raise ConfigError("no machine configs to adopt")
    merged = dict(cluster_specs[0])
    for field in unmapped(cluster_specs):
        merged[field] = []
    return merged
