# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster spec and the machine spec the renderer takes: shape, defaults and checks.

Cluster spec (camelCase, as the TalosCluster CRD names things)::

    name: prod                          # required
    endpoint: https://api.prod:6443     # required
    kubernetesVersion: 1.37.0           # required ("v" prefix accepted)
    talosVersion: v1.14.1               # the installer image tag when machine.install.image is unset
    versionContract: v1.14              # v1.12, v1.13 or v1.14 (default: talosVersion's)
    network: {dnsDomain: cluster.local, podSubnets: [10.244.0.0/16], serviceSubnets: [10.96.0.0/12]}
    cni:
      preset: cilium | unmanaged        # cilium: no Talos CNI (cni none / no flannel); Ichor runs Cilium
      unmanaged: {talosCNI: default | none | custom, urls: []}   # only with preset unmanaged
      kubeProxy: enabled | replaced     # replaced = kube-proxy disabled in Talos
    kubePrism: {enabled: true, port: 7445}
    registries: [{host: docker.io, endpoints: [https://...], overridePath: false, skipFallback: false,
                  authSecretRef: {name: <a Secret in ichor-system>}}]   # credentials by reference only
    certSANs: []                        # machine.certSANs and the API server's SANs, one list
    sysctls: {}                         # captured as patches (SysctlConfig / machine.sysctls)
    kernelModules: []                   # captured as patches (KernelModuleConfig / machine.kernel.modules)
    inlineManifests: [{name, contents}] # control planes only; a Cilium entry is Ichor-owned (class B)
    apiServer: {extraArgs: {}}          # control planes only, like the next four; extraArgs values are strings
    controllerManager: {extraArgs: {}}
    scheduler: {extraArgs: {}}
    auditPolicy: null                   # null: Talos's default (Metadata for everything); {}: none
    admissionControl: null              # null: Talos's PodSecurity default; [{name, configuration}] as given

``talosCNI: custom`` (manifest URLs) and non-Cilium ``inlineManifests`` render faithfully, so a config
that has them can be reproduced, but adoption classes them C (unrepresentable) all the same.

Machine spec::

    role: controlplane | worker         # required
    hostname: null                      # null: HostnameConfig auto: stable
    install: {disk: /dev/sda, image: null, wipe: false}   # image default ghcr.io/siderolabs/installer:<talosVersion>
    network: {interfaces: [], nameservers: []}            # see config/network.py (addresses, routes, bonds, VLANs, VIP)
    timeServers: []
    nodeLabels: {}                      # beyond the labels Talos's generator writes for the role (config/render.py)
    nodeTaints: {}                      # key: "value:Effect", beyond the role's own
    kubelet: {extraArgs: {}, extraMounts: [], nodeIPSubnets: []}   # extraMounts: contracts v1.12 and v1.13 only
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.common import versions
from ansible_collections.maesh.ichor.plugins.module_utils.config import contracts, network, yamlio
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.config.values import as_list as _list, as_mapping as _mapping
from ansible_collections.maesh.ichor.plugins.module_utils.config.values import only as _only
from ansible_collections.maesh.ichor.plugins.module_utils.talos import KUBEPRISM_PORT

DEFAULT_POD_SUBNETS = ["10.244.0.0/16"]
DEFAULT_SERVICE_SUBNETS = ["10.96.0.0/12"]

_HOST = re.compile(r"^[A-Za-z0-9.:_*-]+$")
_SECRET_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def _port(value, what):
    try:
        port = int(value)
    except (TypeError, ValueError):
        raise ConfigError("%s must be a port number" % what)
    if isinstance(value, bool) or not 0 < port < 65536:
        raise ConfigError("%s %r is not a port" % (what, port))
    return port


def _bool(value, what, default=False):
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    raise ConfigError("%s must be true or false" % what)


COMPONENT_ARGS = ("apiServer", "controllerManager", "scheduler")
# A machine spec's fields beside its role.
MACHINE_FIELDS = ("hostname", "install", "network", "timeServers", "nodeLabels", "nodeTaints", "kubelet")
MOUNT_FIELDS = ("destination", "type", "source", "options")


def machine_options():
    """The machine spec's fields beside its role as Ansible suboptions (doc fragment maesh.ichor.machine_spec); the
    config engine judges their values (machine(), config/network.py)."""
    strings = dict(type="list", elements="str")
    routes = dict(type="list", elements="dict", options=dict(
        network=dict(type="str", required=True), gateway=dict(type="str"), metric=dict(type="int")))
    addressed = dict(addresses=strings, routes=routes, mtu=dict(type="int"), vip=dict(type="str"))
    bond = dict(type="dict", options=dict(
        interfaces=dict(type="list", elements="str", required=True), mode=dict(type="str", required=True),
        **dict((key, dict(type="str")) for key in network.BOND_STRINGS[1:]), **dict((key, dict(type="int")) for key in network.BOND_NUMBERS)))
    interface = dict(name=dict(type="str", required=True), bond=bond, vlans=dict(type="list", elements="dict", options=dict(
        id=dict(type="int", required=True), **addressed)), **addressed)
    mount = dict((key, dict(type="str")) for key in MOUNT_FIELDS[:3])
    mount.update(destination=dict(type="str", required=True), options=strings)
    return dict(
        hostname=dict(type="str"),
        install=dict(type="dict", options=dict(disk=dict(type="str"), image=dict(type="str"), wipe=dict(type="bool"))),
        network=dict(type="dict", options=dict(interfaces=dict(type="list", elements="dict", options=interface), nameservers=strings)),
        timeServers=strings, nodeLabels=dict(type="dict"), nodeTaints=dict(type="dict"),
        kubelet=dict(type="dict", options=dict(extraArgs=dict(type="dict"), extraMounts=dict(type="list", elements="dict", options=mount),
                                               nodeIPSubnets=strings)),
    )


def scalar_text(value, what):
    """A string, or a number or boolean as the command line or a label writes it (250, true)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise ConfigError("%s must be a string (a list or mapping has no field here)" % what)


def _strings_map(value, what):
    return dict(sorted((str(key), scalar_text(item, "%s.%s" % (what, key))) for key, item in _mapping(value, what).items()))


def _sorted(value):
    """A copy with every mapping's keys in order, at every level: the order machinery writes a map in, so that the
    same policy stated in any order renders the same bytes."""
    if isinstance(value, dict):
        return dict((key, _sorted(value[key])) for key in sorted(value, key=str))
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value


def args(value, what):
    """Extra command-line arguments: {flag: value}, each value one string (Talos v1.12's form; a list has no field)."""
    return _strings_map(value, what)


def mount(raw, what):
    if not isinstance(raw, dict) or not raw.get("destination"):
        raise ConfigError("%s needs a destination" % what)
    _only(raw, MOUNT_FIELDS, what)
    out = {}
    for key in MOUNT_FIELDS[:3]:
        if raw.get(key) is not None:
            out[key] = str(raw[key])
    if raw.get("options") is not None:
        out["options"] = [str(item) for item in _list(raw["options"], what + ".options")]
    return out


def cluster(raw):
    """A normalised copy of a cluster spec with every default filled in; one line on bad input."""
    if not isinstance(raw, dict):
        raise ConfigError("the cluster spec must be a mapping")
    raw = copy.deepcopy(raw)
    out = {}
    for field in ("name", "endpoint", "kubernetesVersion"):
        if not raw.get(field):
            raise ConfigError("the cluster spec has no %s" % field)
    out["name"] = str(raw["name"])
    endpoint = str(raw["endpoint"])
    if not endpoint.startswith("https://"):
        raise ConfigError("cluster endpoint %r must be an https:// URL" % endpoint)
    out["endpoint"] = endpoint
    stated = versions.read(str(raw["kubernetesVersion"]))
    if stated is None or not stated.full:
        raise ConfigError("kubernetesVersion %r is not a version X.Y.Z" % raw["kubernetesVersion"])
    out["kubernetesVersion"] = stated.text()[1:]
    out["talosVersion"] = raw.get("talosVersion")
    contract = raw.get("versionContract") or raw.get("talosVersion")
    if not contract:
        raise ConfigError("the cluster spec has neither versionContract nor talosVersion")
    out["versionContract"] = contracts.get(contract).name

    network = _mapping(raw.get("network"), "network")
    out["network"] = {
        "dnsDomain": str(network.get("dnsDomain") or "cluster.local"),
        "podSubnets": _list(network.get("podSubnets"), "network.podSubnets") or list(DEFAULT_POD_SUBNETS),
        "serviceSubnets": _list(network.get("serviceSubnets"), "network.serviceSubnets") or list(DEFAULT_SERVICE_SUBNETS),
    }

    cni = _mapping(raw.get("cni"), "cni")
    preset = cni.get("preset")
    if preset not in ("cilium", "unmanaged"):
        raise ConfigError("cni.preset must be cilium or unmanaged (flannel and custom are not presets)")
    kube_proxy = cni.get("kubeProxy") or "enabled"
    if kube_proxy not in ("enabled", "replaced"):
        raise ConfigError("cni.kubeProxy must be enabled or replaced")
    unmanaged = _mapping(cni.get("unmanaged"), "cni.unmanaged")
    if preset == "cilium" and unmanaged:
        raise ConfigError("cni.unmanaged applies only to preset unmanaged")
    talos = unmanaged.get("talosCNI") or "default"
    if talos not in ("default", "none", "custom"):
        raise ConfigError("cni.unmanaged.talosCNI must be default, none or custom")
    urls = [str(url) for url in _list(unmanaged.get("urls"), "cni.unmanaged.urls")]
    if talos == "custom" and not urls:
        raise ConfigError("cni.unmanaged.talosCNI custom needs urls")
    if talos != "custom" and urls:
        raise ConfigError("cni.unmanaged.urls needs talosCNI custom")
    out["cni"] = {"preset": preset, "kubeProxy": kube_proxy}
    if preset == "unmanaged":
        out["cni"]["unmanaged"] = {"talosCNI": talos, "urls": urls}

    prism = _mapping(raw.get("kubePrism"), "kubePrism")
    enabled = _bool(prism.get("enabled"), "kubePrism.enabled", True)
    port = _port(prism.get("port") or KUBEPRISM_PORT, "kubePrism.port")
    out["kubePrism"] = {"enabled": enabled, "port": port if enabled else 0}

    registries = []
    hosts = set()
    for index, entry in enumerate(_list(raw.get("registries"), "registries")):
        if not isinstance(entry, dict) or not entry.get("host"):
            raise ConfigError("registries[%d] has no host" % index)
        host = str(entry["host"])
        if not _HOST.match(host) or host in hosts:
            raise ConfigError("registries[%d] host %r is invalid or repeated" % (index, host))
        hosts.add(host)
        endpoints = [str(url) for url in _list(entry.get("endpoints"), "registries[%d].endpoints" % index)]
        ref = entry.get("authSecretRef")
        if not endpoints and ref is None:
            raise ConfigError("registries[%d] (%s) has no endpoints and no authSecretRef" % (index, host))
        for key in entry:
            if key not in ("host", "endpoints", "overridePath", "skipFallback", "authSecretRef"):
                raise ConfigError("registries[%d] (%s) has an unknown field %s (credentials use authSecretRef, not this spec)" % (index, host, key))
        item = {
            "host": host, "endpoints": endpoints,
            "overridePath": _bool(entry.get("overridePath"), "registries[%d].overridePath" % index),
            "skipFallback": _bool(entry.get("skipFallback"), "registries[%d].skipFallback" % index),
        }
        if ref is not None:
            if not isinstance(ref, dict) or set(ref) - {"name"} or not isinstance(ref.get("name"), str) or not _SECRET_NAME.match(ref["name"]):
                raise ConfigError("registries[%d] (%s).authSecretRef must be {name: <a Secret in ichor-system>} and nothing "
                                  "else (the credentials stay in the Secret)" % (index, host))
            item["authSecretRef"] = {"name": ref["name"]}
        registries.append(item)
    out["registries"] = sorted(registries, key=lambda item: item["host"])
    out["certSANs"] = [str(san) for san in _list(raw.get("certSANs"), "certSANs")]
    sysctls = raw.get("sysctls") or {}
    if not isinstance(sysctls, dict):
        raise ConfigError("sysctls must be a mapping")
    out["sysctls"] = dict((str(key), str(value)) for key, value in sorted(sysctls.items()))
    out["kernelModules"] = [str(name) for name in _list(raw.get("kernelModules"), "kernelModules")]
    manifests = []
    for index, entry in enumerate(_list(raw.get("inlineManifests"), "inlineManifests")):
        if not isinstance(entry, dict) or not entry.get("name") or "contents" not in entry:
            raise ConfigError("inlineManifests[%d] needs name and contents" % index)
        manifests.append({"name": str(entry["name"]), "contents": str(entry["contents"])})
    out["inlineManifests"] = manifests
    for component in COMPONENT_ARGS:
        given = _mapping(raw.get(component), component)
        _only(given, ("extraArgs",), component)
        out[component] = {"extraArgs": args(given.get("extraArgs"), component + ".extraArgs")}
    policy = raw.get("auditPolicy")
    if policy is not None and not isinstance(policy, dict):
        raise ConfigError("auditPolicy must be a mapping (an audit.k8s.io/v1 Policy), or {} for none")
    out["auditPolicy"] = _sorted(policy) if policy is not None else None
    admission = raw.get("admissionControl")
    if admission is not None:
        plugins, names = [], set()
        for index, entry in enumerate(_list(admission, "admissionControl")):
            if not isinstance(entry, dict) or not entry.get("name") or not isinstance(entry.get("configuration"), dict) or \
                    set(entry) - {"name", "configuration"} or entry["name"] in names:
                raise ConfigError("admissionControl[%d] needs a name (once) and a configuration mapping, nothing else" % index)
            names.add(entry["name"])
            plugins.append({"name": str(entry["name"]), "configuration": _sorted(entry["configuration"])})
        admission = plugins
    out["admissionControl"] = admission
    unknown = set(raw) - set(out) - {"discovery"}
    if unknown:
        raise ConfigError("the cluster spec has unknown fields: %s" % ", ".join(sorted(unknown)))
    return out


def machine(raw, cluster_spec):
    """A normalised copy of a machine spec with defaults; one line on bad input."""
    if not isinstance(raw, dict):
        raise ConfigError("the machine spec must be a mapping")
    role = raw.get("role")
    if role not in ("controlplane", "worker"):
        raise ConfigError("machine role must be controlplane or worker")
    install = _mapping(raw.get("install"), "machine install")
    image = install.get("image")
    if not image:
        if not cluster_spec.get("talosVersion"):
            raise ConfigError("machine install.image is unset and the cluster spec has no talosVersion for the default installer")
        image = release.installer_image(cluster_spec["talosVersion"])
    hostname = raw.get("hostname")
    machine_network, time_servers = network.normalise(raw.get("network"), raw.get("timeServers"), role == "controlplane")
    kubelet = _mapping(raw.get("kubelet"), "kubelet")
    _only(kubelet, ("extraArgs", "extraMounts", "nodeIPSubnets"), "kubelet")
    out = {
        "role": role,
        "hostname": str(hostname) if hostname else None,
        "install": {"disk": str(install.get("disk") or "/dev/sda"), "image": str(image), "wipe": _bool(install.get("wipe"), "install.wipe")},
        "network": machine_network,
        "timeServers": time_servers,
        "nodeLabels": _strings_map(raw.get("nodeLabels"), "nodeLabels"),
        "nodeTaints": _strings_map(raw.get("nodeTaints"), "nodeTaints"),
        "kubelet": {
            "extraArgs": args(kubelet.get("extraArgs"), "kubelet.extraArgs"),
            "extraMounts": [mount(item, "kubelet.extraMounts[%d]" % index)
                            for index, item in enumerate(_list(kubelet.get("extraMounts"), "kubelet.extraMounts"))],
            "nodeIPSubnets": [str(item) for item in _list(kubelet.get("nodeIPSubnets"), "kubelet.nodeIPSubnets")],
        },
    }
    unknown = set(raw) - set(out)
    if unknown:
        raise ConfigError("the machine spec has unknown fields: %s" % ", ".join(sorted(unknown)))
    return out


def talos_cni(cluster_spec):
    """'default', 'none' or 'custom': what the Talos side of the CNI is for this spec."""
    if cluster_spec["cni"]["preset"] == "cilium":
        return "none"
    return cluster_spec["cni"]["unmanaged"]["talosCNI"]


def is_cilium_manifest(contents):
    """Whether a manifest holds Cilium's DaemonSet (kube-system/cilium), found by content, not by name: the one test of
    "is this inline manifest Cilium?"."""
    if not isinstance(contents, str):
        return False
    try:
        objs = yamlio.load_all(contents)
    except ConfigError:
        return False
    for obj in objs:
        if not isinstance(obj, dict):
            continue
        meta = obj.get("metadata")
        if obj.get("kind") == "DaemonSet" and isinstance(meta, dict) and meta.get("name") == "cilium" and \
                meta.get("namespace", "default") == "kube-system":
            return True
    return False
