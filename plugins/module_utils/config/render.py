# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render a machine config: bundle + cluster spec + machine spec -> documents for a contract.

The output is what ``talosctl gen config --with-secrets`` (machinery's generator) writes for the same
options, in the same document order, so machinery's loader and encoder see the same config
(tests/integration/test_config_render_go.py judges that with the Go ``compare``). Mirrors without
overridePath/skipFallback are emitted where the generator's WithRegistryMirror puts them; mirrors
with either flag, kernel modules and inline manifests come after, in the order a talosctl patch
adds them, then (contract v1.14) the machine's network documents (config/network.py: links, bonds and
VLANs, Layer 2 VIPs, TimeSyncConfig) and the registry credentials (RegistryAuthConfig, config/registry_auth.py).
The machine's and the cluster's other typed fields (labels, taints, kubelet and component arguments, audit
policy, admission configuration, nameservers) merge into the documents the generator writes, as a patch
to them does.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.config import contracts, documents, network, registry_auth
from ansible_collections.maesh.ichor.plugins.module_utils.config import spec as specs
from ansible_collections.maesh.ichor.plugins.module_utils.config.documents import legacy, typed
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.config.secrets import b64

KUBELET = "ghcr.io/siderolabs/kubelet"
K8S_REGISTRY = "registry.k8s.io"
DISCOVERY_ENDPOINT = "https://discovery.talos.dev/"
CP_LABEL = "node-role.kubernetes.io/control-plane"
LB_EXCLUDE = "node.kubernetes.io/exclude-from-external-load-balancers"


def pod_security():
    return {
        "apiVersion": "pod-security.admission.config.k8s.io/v1alpha1",
        "defaults": {
            "audit": "restricted", "audit-version": "latest",
            "enforce": "baseline", "enforce-version": "latest",
            "warn": "restricted", "warn-version": "latest",
        },
        "exemptions": {"namespaces": ["kube-system"], "runtimeClasses": [], "usernames": []},
        "kind": "PodSecurityConfiguration",
    }


def audit_policy():
    return {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Metadata"}]}


# The labels and taint machinery's generator writes for a role, per form: spec.nodeLabels and spec.nodeTaints are what a
# machine carries beyond them (a value given for one of these keys replaces the default).
DEFAULT_LABELS = {"legacy": {"controlplane": {LB_EXCLUDE: ""}, "worker": {}},
                  "typed": {"controlplane": {CP_LABEL: "", LB_EXCLUDE: ""}, "worker": {}}}
DEFAULT_TAINTS = {"legacy": {"controlplane": {}, "worker": {}},
                  "typed": {"controlplane": {CP_LABEL: "NoSchedule"}, "worker": {}}}


def node_labels(machine, form):
    return dict(DEFAULT_LABELS[form][machine["role"]], **machine["nodeLabels"])


def node_taints(machine, form):
    return dict(DEFAULT_TAINTS[form][machine["role"]], **machine["nodeTaints"])


def admission_control(cluster):
    """[{name, configuration}] kube-apiserver's admission plugins are configured with (Talos's PodSecurity default)."""
    if cluster["admissionControl"] is None:
        return [{"name": "PodSecurity", "configuration": pod_security()}]
    return [dict(item) for item in cluster["admissionControl"]]


def audit(cluster):
    """The audit policy (Talos's default unless the spec states one; {} for none)."""
    return audit_policy() if cluster["auditPolicy"] is None else cluster["auditPolicy"]


def _with_args(body, component):
    if component["extraArgs"]:
        body["extraArgs"] = dict(component["extraArgs"])
    return body


# kube-apiserver arguments machinery v1.14.1 refuses in KubeAPIServerConfig (config/types/k8s/apiserver.go
# deniedArgPrefixes): the typed documents that take their place have no spec field.
TYPED_DENIED_API_ARGS = ("anonymous-auth", "oidc-", "authentication-config", "authorization-config", "authorization-mode",
                         "authorization-webhook-")


def refuse_unrenderable(cluster, machine, contract):
    """What normalised specs state that the contract's form cannot hold: one line, before anything is rendered."""
    if not contracts.get(contract).multidoc_kubernetes:
        return
    denied = sorted(arg for arg in cluster["apiServer"]["extraArgs"] if arg.startswith(TYPED_DENIED_API_ARGS))
    if denied and machine["role"] == "controlplane":
        raise ConfigError("contract v1.14 refuses kube-apiserver extra argument(s) %s (Talos v1.14 takes them from "
                          "KubeAuthenticationConfig or KubeAuthorizerConfig, which have no spec field): drop them, or keep "
                          "the cluster at contract v1.13" % ", ".join(denied))
    if machine["kubelet"]["extraMounts"]:
        raise ConfigError("contract v1.14 has no kubelet extra mounts (machinery v1.14.1 removed them from the multi-document "
                          "config): drop kubelet.extraMounts, or keep the cluster at contract v1.13")


def _image(name, version):
    return "%s/%s:v%s" % (K8S_REGISTRY, name, version)


def _mirror_doc(entry):
    flagged = entry["overridePath"] or entry["skipFallback"]
    endpoints = []
    for url in entry["endpoints"]:
        item = {"url": url}
        if entry["overridePath"]:
            item["overridePath"] = True
        endpoints.append(item)
    body = {"endpoints": endpoints}
    if entry["skipFallback"]:
        body["skipFallback"] = True
    return flagged, typed("RegistryMirrorConfig", body, name=entry["host"])


def _mirrors(cluster):
    plain, flagged = [], []
    for entry in cluster["registries"]:
        if not entry["endpoints"]:
            continue  # credentials only
        is_flagged, doc = _mirror_doc(entry)
        (flagged if is_flagged else plain).append(doc)
    return plain, flagged


def _auth(bundle, cluster):
    """[(host, {username, password | auth | identityToken})] of the spec's authSecretRefs, in host order."""
    return [(host, registry_auth.credentials(bundle, host, name)) for host, name in sorted(registry_auth.refs(cluster).items())]


def _hostname(machine):
    if machine["hostname"]:
        return typed("HostnameConfig", {"hostname": machine["hostname"]})
    return typed("HostnameConfig", {"auto": "stable"})


COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "kubelet")


def render(bundle, cluster, machine, contract=None, images=None):
    """Documents for one machine. cluster and machine are raw or normalised specs.

    images: {component: "X.Y.Z"} for components that run another Kubernetes version than
    cluster.kubernetesVersion (a Kubernetes upgrade moves them one phase at a time).
    """
    cluster = specs.cluster(cluster)
    machine = specs.machine(machine, cluster)
    contract = contracts.get(contract or cluster["versionContract"])
    unknown = set(images or {}) - set(COMPONENTS)
    if unknown:
        raise ConfigError("images: unknown component(s) %s" % ", ".join(sorted(unknown)))
    versions = dict((name, (images or {}).get(name) or cluster["kubernetesVersion"]) for name in COMPONENTS)
    refuse_unrenderable(cluster, machine, contract)
    if contract.multidoc_kubernetes:
        return _render_typed(bundle, cluster, machine, versions)
    return _render_legacy(bundle, cluster, machine, contract, versions)


def render_text(bundle, cluster, machine, contract=None, images=None):
    return documents.emit(render(bundle, cluster, machine, contract, images))


def _legacy_ca(bundle, name, controlplane):
    return {"crt": b64(bundle.crt(name)), "key": b64(bundle.key(name)) if controlplane else ""}


def _render_legacy(bundle, cluster, machine, contract, versions):
    controlplane = machine["role"] == "controlplane"
    talos_cni = specs.talos_cni(cluster)
    proxy_disabled = cluster["cni"]["kubeProxy"] == "replaced"

    kubelet = {
        "image": "%s:v%s" % (KUBELET, versions["kubelet"]),
        "defaultRuntimeSeccompProfileEnabled": True,
        "disableManifestsDirectory": True,
    }
    _with_args(kubelet, machine["kubelet"])
    if machine["kubelet"]["extraMounts"]:
        kubelet["extraMounts"] = [dict(item) for item in machine["kubelet"]["extraMounts"]]
    if machine["kubelet"]["nodeIPSubnets"]:
        kubelet["nodeIP"] = {"validSubnets": list(machine["kubelet"]["nodeIPSubnets"])}
    mach = {
        "type": machine["role"],
        "token": bundle.trustd_token.reveal(),
        "ca": _legacy_ca(bundle, "os", controlplane),
        "certSANs": list(cluster["certSANs"]),
        "kubelet": kubelet,
    }
    machine_network, time = network.legacy(machine["network"], machine["timeServers"])
    if machine_network or contract.legacy_network_placeholder:
        mach["network"] = machine_network
    mach["install"] = {
        "disk": machine["install"]["disk"], "image": machine["install"]["image"],
        "wipe": machine["install"]["wipe"], "grubUseUKICmdline": True,
    }
    if cluster["sysctls"]:
        mach["sysctls"] = dict(cluster["sysctls"])
    features = {"diskQuotaSupport": True}
    if cluster["kubePrism"]["enabled"]:
        features["kubePrism"] = {"enabled": True, "port": cluster["kubePrism"]["port"]}
    features["hostDNS"] = {"enabled": True, "forwardKubeDNSToHost": True}
    mach["features"] = features
    if cluster["kernelModules"]:
        mach["kernel"] = {"modules": [{"name": name} for name in cluster["kernelModules"]]}
    if time:
        mach["time"] = time
    auth = _auth(bundle, cluster)
    if auth:
        mach["registries"] = {"config": dict((host, {"auth": creds}) for host, creds in auth)}
    labels, taints = node_labels(machine, "legacy"), node_taints(machine, "legacy")
    if labels:
        mach["nodeLabels"] = labels
    if taints:
        mach["nodeTaints"] = taints

    cluster_network = {}
    if talos_cni == "none":
        cluster_network["cni"] = {"name": "none"}
    elif talos_cni == "custom":
        cluster_network["cni"] = {"name": "custom", "urls": list(cluster["cni"]["unmanaged"]["urls"])}
    cluster_network["dnsDomain"] = cluster["network"]["dnsDomain"]
    cluster_network["podSubnets"] = list(cluster["network"]["podSubnets"])
    cluster_network["serviceSubnets"] = list(cluster["network"]["serviceSubnets"])

    clus = {
        "id": bundle.cluster_id.reveal(),
        "secret": bundle.cluster_secret.reveal(),
        "controlPlane": {"endpoint": cluster["endpoint"]},
        "clusterName": cluster["name"],
        "network": cluster_network,
        "token": bundle.bootstrap_token.reveal(),
    }
    if controlplane:
        for key, secret in bundle.encryption_keys():  # each the bundle holds, none dropped (see _encryption_config)
            clus[key.legacy_field] = secret
    clus["ca"] = _legacy_ca(bundle, "k8s", controlplane)
    if controlplane:
        clus["aggregatorCA"] = _legacy_ca(bundle, "k8saggregator", True)
        clus["serviceAccount"] = {"key": b64(bundle.key("k8sserviceaccount"))}
        api = {"image": _image("kube-apiserver", versions["kube-apiserver"])}
        _with_args(api, cluster["apiServer"])
        if cluster["certSANs"]:
            api["certSANs"] = list(cluster["certSANs"])
        if admission_control(cluster):
            api["admissionControl"] = admission_control(cluster)
        if audit(cluster):
            api["auditPolicy"] = audit(cluster)
        clus["apiServer"] = api
        clus["controllerManager"] = _with_args({"image": _image("kube-controller-manager", versions["kube-controller-manager"])},
                                               cluster["controllerManager"])
        proxy = {"image": _image("kube-proxy", versions["kube-proxy"])}
        if proxy_disabled:
            proxy["disabled"] = True
        clus["proxy"] = proxy
        clus["scheduler"] = _with_args({"image": _image("kube-scheduler", versions["kube-scheduler"])}, cluster["scheduler"])
    elif proxy_disabled:
        clus["proxy"] = {"disabled": True}
    clus["discovery"] = {"enabled": True, "registries": {"kubernetes": {"disabled": True}, "service": {}}}
    if controlplane:
        clus["etcd"] = {"ca": _legacy_ca(bundle, "etcd", True)}
        if cluster["inlineManifests"]:
            clus["inlineManifests"] = [dict(item) for item in cluster["inlineManifests"]]

    plain, flagged = _mirrors(cluster)
    docs = [legacy({"version": "v1alpha1", "debug": False, "persist": True, "machine": mach, "cluster": clus})]
    docs.extend(plain)
    docs.append(_hostname(machine))
    docs.extend(flagged)
    return docs


def _encryption_config(bundle):
    """KubeEtcdEncryptionConfig: the providers kube-apiserver runs with at the legacy contracts (Talos's own
    encryption configuration: secretbox key2, then aescbc key1, each the bundle holds), so that moving a cluster to
    contract v1.14 keeps every key it reads Secrets with. Machinery v1.14.1's generator writes a bundle's aescbc
    secret as a secretbox key key1, with which kube-apiserver cannot read a Secret aescbc encrypted: not followed."""
    providers = [{key.provider: {"keys": [{"name": key.name, "secret": secret}]}} for key, secret in bundle.encryption_keys()]
    return typed("KubeEtcdEncryptionConfig", {"config": {"resources": [{"providers": providers, "resources": ["secrets"]}]}})


def _render_typed(bundle, cluster, machine, versions):
    controlplane = machine["role"] == "controlplane"
    talos_cni = specs.talos_cni(cluster)

    clus = {"token": bundle.bootstrap_token.reveal()}
    if controlplane:
        clus["etcd"] = {"ca": _legacy_ca(bundle, "etcd", True)}
    docs = [legacy({
        "version": "v1alpha1", "debug": False, "persist": True,
        "machine": {
            "type": machine["role"], "token": bundle.trustd_token.reveal(),
            "ca": _legacy_ca(bundle, "os", controlplane), "certSANs": list(cluster["certSANs"]),
            "features": {"diskQuotaSupport": True},
        },
        "cluster": clus,
    })]
    docs.append(typed("DiscoveryServiceConfig", {"endpoint": DISCOVERY_ENDPOINT}, name="default"))
    docs.append(typed("DiscoveryIdentityConfig", {"clusterID": bundle.cluster_id.reveal(), "clusterSecret": bundle.cluster_secret.reveal()}))
    docs.append(typed("UnattendedInstallConfig", {
        "installer": {"image": machine["install"]["image"]},
        "provisioning": {"diskSelector": {"match": 'disk.dev_path == "%s"' % machine["install"]["disk"]}, "wipe": machine["install"]["wipe"]},
    }))
    resolver = {"nameservers": network.typed_nameservers(machine["network"])} if machine["network"]["nameservers"] else {}
    resolver["hostDNS"] = {"enabled": True, "forwardKubeDNSToHost": True}
    docs.append(typed("ResolverConfig", resolver))
    if cluster["sysctls"]:
        docs.append(typed("SysctlConfig", {"params": dict(cluster["sysctls"])}))
    docs.append(typed("VolumeConfig", {"mount": {"secure": True}}, name="EPHEMERAL"))
    docs.append(typed("FilesystemTrimConfig", {"interval": "168h0m0s"}))
    docs.append(typed("SecurityProfileConfig", {"workloadIsolation": True}))
    plain, flagged = _mirrors(cluster)
    docs.extend(plain)
    docs.append(_hostname(machine))
    docs.append(typed("KubeClusterConfig", {"clusterName": cluster["name"], "endpoint": cluster["endpoint"]}))
    node = {"nodeIP": {"validSubnets": list(machine["kubelet"]["nodeIPSubnets"])} if machine["kubelet"]["nodeIPSubnets"] else {}}
    labels, taints = node_labels(machine, "typed"), node_taints(machine, "typed")
    if labels:
        node["labels"] = labels
    if taints:
        node["taints"] = taints
    docs.append(typed("KubeNodeConfig", node))
    kubelet = _with_args({"image": "%s:v%s" % (KUBELET, versions["kubelet"]), "config": {}}, machine["kubelet"])
    kubelet["defaultRuntimeSeccompProfileEnabled"] = True
    docs.append(typed("KubeletConfig", kubelet))
    docs.append(typed("KubeNetworkConfig", {
        "dnsDomain": cluster["network"]["dnsDomain"],
        "podSubnets": list(cluster["network"]["podSubnets"]),
        "serviceSubnets": list(cluster["network"]["serviceSubnets"]),
    }))
    if controlplane:
        docs.append(typed("KubeAPIServerCAConfig", {"issuingCA": {"cert": bundle.crt("k8s"), "key": bundle.key("k8s")}}))
    else:
        docs.append(typed("KubeAPIServerCAConfig", {"acceptedCAs": [bundle.crt("k8s")]}))
    if cluster["kubePrism"]["enabled"]:
        docs.append(typed("KubePrismConfig", {"port": cluster["kubePrism"]["port"]}))
    if controlplane:
        docs.append(typed("KubeAggregatorCAConfig", {"issuingCA": {"cert": bundle.crt("k8saggregator"), "key": bundle.key("k8saggregator")}}))
        docs.extend(typed("KubeAdmissionControlConfig", {"configuration": item["configuration"]}, name=item["name"])
                    for item in admission_control(cluster))
        if audit(cluster):
            docs.append(typed("KubeAuditPolicyConfig", {"configuration": audit(cluster)}))
        docs.append(typed("KubeAuthenticationConfig", {"configuration": {
            "anonymous": {"conditions": [{"path": "/livez"}, {"path": "/readyz"}, {"path": "/healthz"}], "enabled": True},
            "jwt": [],
        }}))
        docs.append(typed("KubeAuthorizerConfig", {"type": "Node"}, name="node"))
        docs.append(typed("KubeAuthorizerConfig", {"type": "RBAC"}, name="rbac"))
        docs.append(_encryption_config(bundle))
        docs.append(typed("KubeServiceAccountConfig", {"issuer": {"privateKey": bundle.key("k8sserviceaccount"), "issuerURL": cluster["endpoint"]}}))
        api = _with_args({"image": _image("kube-apiserver", versions["kube-apiserver"])}, cluster["apiServer"])
        if cluster["certSANs"]:
            api["certExtraSANs"] = list(cluster["certSANs"])
        docs.append(typed("KubeAPIServerConfig", api))
        docs.append(typed("KubeControllerManagerConfig", _with_args(
            {"image": _image("kube-controller-manager", versions["kube-controller-manager"])}, cluster["controllerManager"])))
        docs.append(typed("KubeSchedulerConfig", _with_args(
            {"image": _image("kube-scheduler", versions["kube-scheduler"]), "config": {}}, cluster["scheduler"])))
        proxy = {}
        if cluster["cni"]["kubeProxy"] == "replaced":
            proxy["enabled"] = False
        proxy["image"] = _image("kube-proxy", versions["kube-proxy"])
        proxy["config"] = {}
        docs.append(typed("KubeProxyConfig", proxy))
        if talos_cni == "default":
            docs.append(typed("KubeFlannelCNIConfig", {"backendType": "vxlan", "backendPort": 4789}))
        docs.append(typed("KubeCoreDNSConfig", {"enabled": True}))
        if talos_cni == "custom":
            urls = cluster["cni"]["unmanaged"]["urls"]
            if len(urls) != 1:
                raise ConfigError("contract v1.14 renders one custom CNI manifest URL (KubeExternalManifestConfig custom-cni), not %d" % len(urls))
            docs.append(typed("KubeExternalManifestConfig", {"url": urls[0]}, name="custom-cni"))
    docs.extend(flagged)
    docs.extend(typed("KernelModuleConfig", name=name) for name in cluster["kernelModules"])
    if controlplane:
        docs.extend(typed("KubeInlineManifestConfig", {"manifest": item["contents"]}, name=item["name"]) for item in cluster["inlineManifests"])
    docs.extend(network.typed(machine["network"], machine["timeServers"]))
    docs.extend(typed("RegistryAuthConfig", creds, name=host) for host, creds in _auth(bundle, cluster))
    return docs
