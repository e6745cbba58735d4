# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Drift between a rendered and a live machine config, in three classes: pure rules over two sets of documents (which
contract made a live config is found by rendering at each: ``probing``).

The rule: every leaf in which the live config and the render differ is a Difference with a class, and
an apply happens only when none is class C. Both sides are normalised the same way before comparing:
documents keyed by kind and name; empty values ("", [], {}) kept as leaves (a node label
``node-role.kubernetes.io/worker: ""`` or a LUKS ``tpm: {}`` key slot is configuration), except the
placeholders machinery itself drops (``PLACEHOLDERS``); an empty container facing content at the same
path is not a difference of its own (the content's leaves are); registry mirrors from
``machine.registries.mirrors`` and from ``RegistryMirrorConfig`` documents folded into one
representation (``registries/<host>``), so the same mirrors in either form are not drift, and whatever
the fold does not know stays a leaf of its own.

Each differing path is sorted into

* class A, representable: a spec field covers it (install, registries, cert SANs, subnets, name and
  endpoint, Kubernetes version, KubePrism, hostname, the Talos CNI and kube-proxy setting in
  unmanaged mode) or it is captured as a patch (sysctls, kernel modules);
* class B, Ichor-owned, only with ``cni.preset: cilium``: the Cilium inline entry, flannel removal
  (``KubeFlannelCNIConfig``, ``cluster.network.cni``) and kube-proxy when ``replaced``. Listed, need
  consent, do not block. With ``preset: unmanaged`` no CNI item is ever class B;
* class C, unrepresentable: everything else, including every field of the secrets bundle (a bundle
  that is not this cluster's), what a spec field nearly covers but cannot state (component images
  from another registry, a mirror whose endpoints mix overridePath, machine and API server SANs that
  differ) and the fields the machines of a cluster disagree on. Blocks the machine; paths that share
  a hint are reported under it once.

Secret values (``secret_paths``) are never printed: not in a Difference, not in a masked document.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.maesh.ichor.plugins.module_utils.common import images as image_refs
from ansible_collections.maesh.ichor.plugins.module_utils.config import contracts, documents, images, registry_auth, render, secret_paths
from ansible_collections.maesh.ichor.plugins.module_utils.config import spec as specs

REGISTRIES = "registries"

HINT_SECRETS = ("the secrets bundle is not this cluster's: recover it from one of its control planes "
                "(maesh.ichor.talos_secrets) and render again; nothing is applied with another cluster's secrets")
HINT_ENCRYPTION = ("the keys kube-apiserver encrypts Secrets with are the cluster's, exactly: a changed, dropped or reordered "
                   "key makes every Secret in etcd unreadable; recover the bundle from one of its control planes "
                   "(maesh.ichor.talos_secrets); nothing is applied")
HINT_INSTALL = "spec.install (disk, image, wipe); other install options and disk selectors have no field"
HINT_REGISTRIES = "spec.registries (host, endpoints, overridePath, skipFallback)"
HINT_MIRROR_MIXED = "a registry mirror whose endpoints mix overridePath, or with fields spec.registries has not, cannot be represented"
HINT_REGISTRY_AUTH = ("registry credentials and TLS are never mapped: put the credentials in a Secret in ichor-system (keys "
                      "username and password, or auth, or identityToken) and name it in the cluster spec's "
                      "registries[].authSecretRef; TLS has no field")
HINT_CERT_SANS = "spec.certSANs (machine.certSANs and the API server SANs, one list)"
HINT_SANS_SPLIT = "the machine's certSANs and the API server's SANs differ: spec.certSANs is one list for both"
HINT_IMAGE = ("a component image from another registry, or pinned by digest: spec.kubernetesVersion sets only the tag of "
              "the default images, no spec field holds a registry")
HINT_DOWNGRADE = ("a component image a minor behind the one it runs: Kubernetes does not support moving a component back a "
                  "minor; finish the Kubernetes upgrade and set spec.kubernetesVersion to the minor it runs")
HINT_CUSTOM_CNI = "Talos-applied CNI manifest URLs are not representable; keep them in the node's own tooling"
HINT_INLINE = "inline and extra manifests other than Cilium's are not representable; keep them in the node's own tooling"
HINT_OTHER = "no spec field covers this path"
HINT_NETWORK = ("the machine's network.interfaces (addresses, routes with network, gateway and metric, mtu, vip, bond, "
                "vlans), network.nameservers and timeServers: DHCP, device selectors, bridges, other bond and route "
                "options and other link kinds have no field")
HINT_ROLE_LABEL = ("a label or taint Talos gives the role (node-role.kubernetes.io/control-plane, "
                   "node.kubernetes.io/exclude-from-external-load-balancers) is missing: nodeLabels and nodeTaints add "
                   "to the role's own, they cannot remove them")
HINT_ARGS_LIST = "an extra argument given as a list: the spec's extraArgs hold one string per flag"
HINT_MOUNTS = "kubelet.extraMounts (destination, type, source, options) at contracts v1.12 and v1.13; other mount fields have none"
HINT_DISAGREE = "%s: the machines do not all state one value the spec can hold, so it was not read into the spec"

# Empty values machinery drops when it loads and re-encodes a config: talosctl's commented files carry
# them, the canonical form has none (tests/configgen ``encode`` over every fixture shows exactly these).
PLACEHOLDERS = {
    "v1alpha1:cluster.extraManifests": [],
    "v1alpha1:cluster.inlineManifests": [],
    "v1alpha1:machine.registries": {},
}

# (pattern, spec field, hint) for class A; the first match wins. Class B/C rules are in _classify_one().
_CLASS_A = [
    (r"^v1alpha1:machine\.install\.(disk|image|wipe)$", "install", HINT_INSTALL),
    (r"^UnattendedInstallConfig:(installer\.image|provisioning\.wipe)$", "install", HINT_INSTALL),
    (r"^registries/.+:(endpoints|overridePath|skipFallback)$", "registries", HINT_REGISTRIES),
    (r"^v1alpha1:machine\.certSANs$", "certSANs", HINT_CERT_SANS),
    (r"^v1alpha1:cluster\.apiServer\.certSANs$", "certSANs", HINT_CERT_SANS),
    (r"^KubeAPIServerConfig:certExtraSANs$", "certSANs", HINT_CERT_SANS),
    (r"^v1alpha1:machine\.sysctls(\.|$)", "sysctls", "spec.sysctls"),
    (r"^SysctlConfig:(params(\.|$)|$)", "sysctls", "spec.sysctls"),
    (r"^v1alpha1:machine\.kernel\.modules(\[[^\]]+\](\.name)?)?$", "kernelModules", "spec.kernelModules"),
    (r"^KernelModuleConfig/[^:]+:$", "kernelModules", "spec.kernelModules"),
    (r"^v1alpha1:cluster\.network\.(dnsDomain|podSubnets|serviceSubnets)$", "network", "spec.network"),
    (r"^KubeNetworkConfig:(dnsDomain|podSubnets|serviceSubnets)$", "network", "spec.network"),
    (r"^v1alpha1:cluster\.clusterName$", "name", "spec.name and spec.endpoint"),
    (r"^v1alpha1:cluster\.controlPlane\.endpoint$", "endpoint", "spec.name and spec.endpoint"),
    (r"^KubeClusterConfig:clusterName$", "name", "spec.name and spec.endpoint"),
    (r"^KubeClusterConfig:endpoint$", "endpoint", "spec.name and spec.endpoint"),
    (r"^KubeServiceAccountConfig:issuer\.issuerURL$", "endpoint", "spec.endpoint"),
    (r"^v1alpha1:machine\.features\.kubePrism\.(enabled|port)$", "kubePrism", "spec.kubePrism"),
    (r"^v1alpha1:machine\.features\.kubePrism$", "kubePrism", "spec.kubePrism"),
    (r"^KubePrismConfig:(port)?$", "kubePrism", "spec.kubePrism"),
    (r"^HostnameConfig:(hostname|auto)$", "hostname", "machine hostname"),
]

# The machine's network (config/network.py) in either form: what the spec states of it, leaf by leaf.
_ROUTE = r"routes(\[\d+\](\.(%s))?)?"
_LEGACY_ADDRESSED = r"addresses|mtu|vip(\.ip)?|" + _ROUTE % "network|gateway|metric"
_LEGACY_BOND = r"bond(\.(interfaces|mode|miimon|lacpRate|xmitHashPolicy|updelay|downdelay))?"
_TYPED_ADDRESSED = r"mtu|addresses(\[\d+\](\.address)?)?|" + _ROUTE % "destination|gateway|metric"
_NETWORK_A = [
    # not machine.network itself: its empty placeholder is contract v1.12's, no field's
    r"^v1alpha1:machine\.network(\.nameservers|\.interfaces(\[\d+\](\.(interface|%s|%s|vlans(\[\d+\](\.(vlanId|%s))?)?))?)?)$" % (
        _LEGACY_ADDRESSED, _LEGACY_BOND, _LEGACY_ADDRESSED),
    r"^v1alpha1:machine\.time(\.servers)?$",
    r"^LinkConfig/[^:]+:(%s)?$" % _TYPED_ADDRESSED,
    r"^BondConfig/[^:]+:(%s|links|bondMode|miimon|lacpRate|xmitHashPolicy|updelay|downdelay)?$" % _TYPED_ADDRESSED,
    r"^VLANConfig/[^:]+:(%s|vlanID|parent)?$" % _TYPED_ADDRESSED,
    r"^Layer2VIPConfig/[^:]+:(link)?$",
    r"^ResolverConfig:nameservers(\[\d+\](\.address)?)?$",
    r"^TimeSyncConfig:(ntp(\.servers)?)?$",
]
# (the machine fields' names are adopt.UNREAD_*: a machine whose network or mounts adoption could not read has them unmapped)
_CLASS_A += [(pattern, "network.interfaces", "the machine's network and timeServers") for pattern in _NETWORK_A] + [
    (r"^(v1alpha1:machine\.nodeLabels|KubeNodeConfig:labels)(\.|$)", None, "the machine's nodeLabels"),
    (r"^(v1alpha1:machine\.nodeTaints|KubeNodeConfig:taints)(\.|$)", None, "the machine's nodeTaints"),
    (r"^(v1alpha1:machine\.kubelet\.nodeIP|KubeNodeConfig:nodeIP)(\.validSubnets)?$", None, "the machine's kubelet.nodeIPSubnets"),
    (r"^(v1alpha1:machine\.kubelet|KubeletConfig:)(\.)?extraArgs(\.|$)", None, "the machine's kubelet.extraArgs"),
    (r"^v1alpha1:machine\.kubelet\.extraMounts(\[\d+\](\.(destination|type|source|options))?)?$", "kubelet.extraMounts", HINT_MOUNTS),
    (r"^(v1alpha1:cluster\.apiServer\.|KubeAPIServerConfig:)extraArgs(\.|$)", "apiServer", "spec.apiServer.extraArgs"),
    (r"^(v1alpha1:cluster\.controllerManager\.|KubeControllerManagerConfig:)extraArgs(\.|$)", "controllerManager",
     "spec.controllerManager.extraArgs"),
    (r"^(v1alpha1:cluster\.scheduler\.|KubeSchedulerConfig:)extraArgs(\.|$)", "scheduler", "spec.scheduler.extraArgs"),
    (r"^(v1alpha1:cluster\.apiServer\.auditPolicy(\.|\[|$)|KubeAuditPolicyConfig:)", "auditPolicy", "spec.auditPolicy"),
    (r"^(v1alpha1:cluster\.apiServer\.admissionControl(\.|\[|$)|KubeAdmissionControlConfig/)", "admissionControl",
     "spec.admissionControl"),
]
_CLASS_A = [(re.compile(pattern), field, hint) for pattern, field, hint in _CLASS_A]
_NETWORK = re.compile(r"^(v1alpha1:machine\.(network|time)\.|(LinkConfig|BondConfig|VLANConfig|Layer2VIPConfig|"
                      r"ResolverConfig|TimeSyncConfig|DHCPv4Config|DHCPv6Config|BridgeConfig|DummyLinkConfig|"
                      r"EthernetConfig|LinkAliasConfig|StaticHostConfig|RouteConfig|VRFConfig)[/:])")
_ROLE_LABEL = re.compile(r"^(v1alpha1:machine\.node(Labels|Taints)|KubeNodeConfig:(labels|taints))\.(.+)$")
_ARGS = re.compile(r"(^|[.:])extraArgs\.")

# Component images: class A (spec.kubernetesVersion) only when the tag alone differs.
_IMAGE = re.compile(r"^(v1alpha1:machine\.kubelet\.image|v1alpha1:cluster\.(apiServer|controllerManager|scheduler|proxy)\.image"
                    r"|Kube(let|APIServer|ControllerManager|Scheduler|Proxy)Config:image)$")
_DISK_EQUALITY = re.compile(r'^\s*disk\.(dev_path|wwid|serial|symlinks|bus_path)\s*==\s*"[^"]+"\s*$')
_CNI_NAME = re.compile(r"^v1alpha1:cluster\.network\.cni\.name$")
_CNI_URLS = re.compile(r"^(v1alpha1:cluster\.network\.cni\.urls|KubeExternalManifestConfig/custom-cni:)")
_CNI = re.compile(r"^(v1alpha1:cluster\.network\.cni|KubeFlannelCNIConfig:|KubeExternalManifestConfig/custom-cni:)")
_FLANNEL = re.compile(r"^KubeFlannelCNIConfig:")
_PROXY = re.compile(r"^(v1alpha1:cluster\.proxy\.disabled|KubeProxyConfig:enabled)$")
_INLINE = re.compile(r"^(v1alpha1:cluster\.inlineManifests\[([^\]]+)\]|KubeInlineManifestConfig/([^:]+):)")
_EXTRA = re.compile(r"^(v1alpha1:cluster\.extraManifests|KubeExternalManifestConfig/)")
_REG_AUTH = re.compile(r"^(v1alpha1:machine\.registries\.config|RegistryAuthConfig/|RegistryTLSConfig/)")
# a registry's credentials, folded into RegistryAuthConfig's form (a host may have a port: the last ':' ends it)
_AUTH = re.compile(r"^RegistryAuthConfig/(.+):(username|password|auth|identityToken)?$")
_MIRROR = re.compile(r"^registries/(.+):([^:]*)$")  # a host may have a port
# The Secrets encryption keys wherever a contract states them (secrets.ENCRYPTION_KEYS): never changed by an apply.
_ENCRYPTION = re.compile(r"^(v1alpha1:cluster\.(secretbox|aescbc)EncryptionSecret$|KubeEtcdEncryptionConfig:)")
_SANS = re.compile(r"^(v1alpha1:machine\.certSANs|v1alpha1:cluster\.apiServer\.certSANs|KubeAPIServerConfig:certExtraSANs)$")


def is_secret_path(path):
    """A field of the secrets bundle (drift there means the bundle is not this cluster's)."""
    return secret_paths.is_bundle(path)


class Difference:
    """One differing path: the rendered and the live value (None when absent), class and hint."""

    __slots__ = ("path", "rendered", "live", "cls", "hint")

    def __init__(self, path, rendered, live):
        self.path = path
        self.rendered = rendered
        self.live = live
        self.cls = None
        self.hint = None

    @property
    def secret(self):
        return is_secret_path(self.path)

    @property
    def change(self):
        if self.rendered is None:
            return "remove"
        if self.live is None:
            return "add"
        return "change"

    def to_dict(self):
        """Printable form: secret values are never included."""
        out = {"path": self.path, "change": self.change, "class": self.cls}
        if self.hint:
            out["hint"] = self.hint
        out["rendered"] = secret_paths.mask(self.path, self.rendered)
        out["live"] = secret_paths.mask(self.path, self.live)
        return out

    def __repr__(self):
        return "Difference(%s %s %s)" % (self.cls, self.change, self.path)


# ---------------------------------------------------------------------------- normalisation


def _flat(prefix, value):
    out = documents.flatten(value, "", {}, keep_empty=True)
    return dict(("%s%s" % (prefix, path) if path else prefix.rstrip("."), item) for path, item in out.items())


def _folded(entry, known):
    """The fields of a mirror entry the fold represents (known, with a value of their type) and the rest."""
    kept, rest = {}, {}
    for key, value in entry.items():
        wanted = known.get(key)
        if wanted is not None and (value is None or isinstance(value, wanted)):
            kept[key] = value
        else:
            rest[key] = value
    return kept, rest


def _typed_mirror(host, body):
    """{path: value} of one RegistryMirrorConfig, folded; fields the fold does not know stay leaves."""
    prefix = "%s/%s:" % (REGISTRIES, host)
    urls, overrides, out = [], [], {}
    kept, rest = _folded(dict((k, v) for k, v in body.items() if k not in ("apiVersion", "kind", "name")),
                         {"endpoints": list, "skipFallback": bool})
    for index, item in enumerate(kept.get("endpoints") or []):
        if not isinstance(item, dict):
            out["%sendpoints[%d]" % (prefix, index)] = item  # typed endpoints are mappings: not folded
            continue
        item, extra = _folded(item, {"url": str, "overridePath": bool})
        urls.append(item.get("url"))
        overrides.append(item.get("overridePath"))
        if extra:
            out.update(_flat("%sendpoints[%d]." % (prefix, index), extra))
    # one value for the host when every endpoint says the same (false and absent differ: both are *bool)
    override = overrides[0] if overrides and all(value is overrides[0] for value in overrides) else overrides or None
    if rest:
        out.update(_flat(prefix, rest))
    out.update(_mirror_paths(prefix, urls, override, kept.get("skipFallback")))
    return out


def _legacy_mirror(host, entry):
    prefix = "%s/%s:" % (REGISTRIES, host)
    kept, rest = _folded(entry if isinstance(entry, dict) else {"": entry}, {"endpoints": list, "overridePath": bool, "skipFallback": bool})
    out = _flat(prefix, rest) if rest else {}
    out.update(_mirror_paths(prefix, list(kept.get("endpoints") or []), kept.get("overridePath"), kept.get("skipFallback")))
    return out


def _mirror_paths(prefix, endpoints, override, skip):
    out = {prefix + "endpoints": endpoints}
    if override is not None:
        out[prefix + "overridePath"] = override
    if skip is not None:
        out[prefix + "skipFallback"] = skip
    return out


def _legacy_auth(body, flat):
    """The legacy document without ``machine.registries.config.<host>.auth``, each of which goes into flat as the
    paths of the RegistryAuthConfig document that says the same (``RegistryAuthConfig/<host>:password``): the same
    credentials in either form are not drift, and are masked as one."""
    config = documents.get_path(body, "machine.registries.config")
    if not isinstance(config, dict) or not any(isinstance(entry, dict) and isinstance(entry.get("auth"), dict)
                                               for entry in config.values()):
        return body
    kept = {}
    for host, entry in config.items():
        if isinstance(entry, dict) and isinstance(entry.get("auth"), dict):
            flat.update(documents.paths(documents.typed("RegistryAuthConfig", entry["auth"], name=str(host)), keep_empty=True))
            entry = dict((key, value) for key, value in entry.items() if key != "auth")
            if not entry:
                continue
        kept[host] = entry
    body = dict(body)
    body["machine"] = dict(body["machine"])
    body["machine"]["registries"] = dict(body["machine"]["registries"])
    if kept:
        body["machine"]["registries"]["config"] = kept
    else:
        del body["machine"]["registries"]["config"]
    return body


def normalise(docs):
    """{path: value} for a config: empty values kept (but machinery's placeholders), mirrors and registry credentials
    each in one form."""
    flat = {}
    mirrors = {}
    for doc in docs:
        if doc.kind == "RegistryMirrorConfig" and doc.name:
            mirrors[doc.name] = _typed_mirror(doc.name, doc.body)
            continue
        if doc.kind == documents.LEGACY:
            doc = documents.legacy(_legacy_auth(doc.body, flat))
            legacy_mirrors = documents.get_path(doc.body, "machine.registries.mirrors")
            if isinstance(legacy_mirrors, dict) and legacy_mirrors:
                body = dict(doc.body)
                body["machine"] = dict(body["machine"])
                body["machine"]["registries"] = dict(body["machine"]["registries"])
                del body["machine"]["registries"]["mirrors"]
                for host, entry in legacy_mirrors.items():
                    mirrors.setdefault(str(host), _legacy_mirror(host, entry))
                doc = documents.legacy(body)
        flat.update(documents.paths(doc, keep_empty=True))
    for host_paths in mirrors.values():
        flat.update(host_paths)
    for path, empty in PLACEHOLDERS.items():
        if path in flat and flat[path] == empty and type(flat[path]) is type(empty):
            del flat[path]
    return flat


def _under(path, other):
    """Whether other is a path below path (``a`` and ``a.b``, ``a[x]``, ``a.b[0].c``)."""
    return len(other) > len(path) and other.startswith(path) and other[len(path)] in ".["


def _empty_facing_content(path, value, other_side):
    """An empty container on one side where the other side has leaves below the same path."""
    if value not in ({}, []):
        return False
    return any(_under(path, other) for other in other_side)


def compare(rendered_docs, live_docs):
    """Sorted list of Difference (unclassified) between two document lists."""
    rendered = normalise(rendered_docs)
    live = normalise(live_docs)
    out = []
    for path in sorted(set(rendered) | set(live)):
        left, right = rendered.get(path), live.get(path)
        if left == right and isinstance(left, bool) == isinstance(right, bool):
            continue
        if path not in live and _empty_facing_content(path, left, live):
            continue
        if path not in rendered and _empty_facing_content(path, right, rendered):
            continue
        out.append(Difference(path, left, right))
    return out


# ---------------------------------------------------------------------------- classes


def _inline_contents(docs, name):
    for doc in docs:
        if doc.kind == "KubeInlineManifestConfig" and doc.name == name:
            return doc.body.get("manifest") or ""
        if doc.kind == documents.LEGACY:
            for item in documents.get_path(doc.body, "cluster.inlineManifests") or []:
                if isinstance(item, dict) and item.get("name") == name:
                    return item.get("contents") or ""
    return ""


# Paths of each cluster spec field (adopt.unmapped() names the fields the machines disagree on).
_FIELD_PATHS = {
    "kubernetesVersion": _IMAGE,
    "cni": _CNI,
    "kubeProxy": _PROXY,
    "inlineManifests": _INLINE,
}


def _field_of(path):
    """The cluster spec field whose value a path states, or None."""
    for field, pattern in _FIELD_PATHS.items():
        if pattern.search(path):
            return field
    for pattern, field, _hint in _CLASS_A:
        if pattern.search(path):
            return field
    return None


def minor_back(rendered, live):
    """Whether a rendered component image states a lower Kubernetes minor than the live one runs (by their tags)."""
    want, have = images.tag_version(rendered), images.tag_version(live)
    return bool(want and have) and contracts.parse_version(want)[:2] < contracts.parse_version(have)[:2]


def _repository(image):
    """(repository, digest) of an image reference: the tag is what spec.kubernetesVersion sets."""
    if not isinstance(image, str):
        return None, None
    try:
        ref = image_refs.parse(image)
    except image_refs.ImageRefError:
        return image, None  # not a reference: equal to no other
    return ref.repository, ref.digest


def _image_class(diff):
    rendered, live = _repository(diff.rendered), _repository(diff.live)
    if diff.rendered is None or diff.live is None:
        return ("A", "spec.kubernetesVersion") if diff.live is None else ("C", HINT_IMAGE)
    if minor_back(diff.rendered, diff.live):
        return "C", HINT_DOWNGRADE  # never applied, whatever else the images say
    if rendered[0] == live[0] and rendered[1] is None and live[1] is None:
        return "A", "spec.kubernetesVersion"
    return "C", HINT_IMAGE


def _representable(live_docs):
    """What the live config states that a spec field nearly covers but cannot state:
    ({mirror hosts}, split SANs)."""
    hosts = set()
    flat = normalise(live_docs or [])
    for path, value in flat.items():
        match = _MIRROR.match(path)
        if not match:
            continue
        rest = match.group(2)
        if rest not in ("endpoints", "overridePath", "skipFallback") or (rest == "overridePath" and isinstance(value, list)):
            hosts.add(match.group(1))
    machine_sans = flat.get("v1alpha1:machine.certSANs") or []
    api = [flat[path] for path in ("v1alpha1:cluster.apiServer.certSANs", "KubeAPIServerConfig:certExtraSANs") if path in flat]
    controlplane = any(doc.kind == "KubeAPIServerConfig" for doc in live_docs or []) or "v1alpha1:cluster.apiServer.image" in flat
    split = controlplane and (api[0] if api else []) != machine_sans
    return hosts, split


def _role_default(key, value):
    """Whether key: value is a label or taint Talos's generator gives a role (render.DEFAULT_LABELS, DEFAULT_TAINTS)."""
    return (key, value) in ((render.CP_LABEL, ""), (render.LB_EXCLUDE, ""), (render.CP_LABEL, "NoSchedule"))


def _classify_one(diff, managed, cilium_entries, unmapped=(), mixed_hosts=(), split_sans=False, auth_hosts=()):
    path = diff.path
    if is_secret_path(path):
        return "C", HINT_SECRETS
    if _ENCRYPTION.match(path):  # a key's provider, name or place: what the bundle's secrets do not say
        return "C", HINT_ENCRYPTION
    field = _field_of(path)
    if field in unmapped:
        return "C", HINT_DISAGREE % ("spec." + field)
    match = _MIRROR.match(path)
    if match and match.group(1) in mixed_hosts:
        return "C", HINT_MIRROR_MIXED
    if split_sans and _SANS.match(path):
        return "C", HINT_SANS_SPLIT
    if _IMAGE.match(path):
        return _image_class(diff)
    match = _INLINE.match(path)
    if match:
        name = match.group(2) or match.group(3)
        if managed and name in cilium_entries:
            return "B", None
        return "C", HINT_INLINE
    if _EXTRA.match(path):
        return "C", HINT_INLINE if not _CNI_URLS.match(path) else HINT_CUSTOM_CNI
    if _CNI_URLS.match(path):
        return "C", HINT_CUSTOM_CNI
    if _CNI_NAME.match(path) or _FLANNEL.match(path):
        if managed:
            return "B", None
        values = (diff.rendered, diff.live)
        if _CNI_NAME.match(path) and any(value not in (None, "none", "flannel") for value in values):
            return "C", HINT_CUSTOM_CNI
        return "A", "spec.cni.unmanaged.talosCNI"
    if _PROXY.match(path):
        if managed:
            return "B", None
        return "A", "spec.cni.kubeProxy"
    match = _AUTH.match(path)
    if match and match.group(1) in auth_hosts:
        return "A", "spec.registries[].authSecretRef (the credentials of its Secret)"
    if _REG_AUTH.match(path):
        return "C", HINT_REGISTRY_AUTH
    if _ARGS.search(path) and not all(value is None or isinstance(value, str) for value in (diff.rendered, diff.live)):
        return "C", HINT_ARGS_LIST
    match = _ROLE_LABEL.match(path)
    if match and diff.live is None and diff.rendered is not None and _role_default(match.group(4), diff.rendered):
        return "C", HINT_ROLE_LABEL
    if path == "UnattendedInstallConfig:provisioning.diskSelector.match":
        if all(value is None or _DISK_EQUALITY.match(str(value)) for value in (diff.rendered, diff.live)):
            return "A", HINT_INSTALL
        return "C", HINT_INSTALL
    for pattern, _field, hint in _CLASS_A:
        if pattern.search(path):
            return "A", hint
    if _MIRROR.match(path):
        return "C", HINT_MIRROR_MIXED
    if _NETWORK.match(path):
        return "C", HINT_NETWORK
    if path.startswith(("v1alpha1:machine.install.", "UnattendedInstallConfig:")):
        return "C", HINT_INSTALL
    return "C", HINT_OTHER


class Drift:
    """The classified differences between a render and a live config."""

    def __init__(self, differences, contract=None):
        self.differences = differences
        self.contract = contract

    def of_class(self, cls):
        return [diff for diff in self.differences if diff.cls == cls]

    @property
    def zero(self):
        return not self.differences

    @property
    def blocked(self):
        return bool(self.of_class("C"))

    @property
    def secret_drift(self):
        return any(diff.secret for diff in self.differences)

    def counts(self):
        return dict((cls, len(self.of_class(cls))) for cls in ("A", "B", "C"))

    def key(self):
        """What two contracts' drifts are compared by: the paths and their classes."""
        return tuple((diff.path, diff.cls) for diff in self.differences)

    def hints(self):
        """Class C paths grouped under their hint: [{"hint", "paths"}], each hint once."""
        groups = []
        index = {}
        for diff in self.of_class("C"):
            if diff.hint not in index:
                index[diff.hint] = len(groups)
                groups.append({"hint": diff.hint, "paths": []})
            groups[index[diff.hint]]["paths"].append(diff.path)
        return groups

    def patch(self):
        """The paths an apply would change, or None: nothing is applied while anything is class C."""
        if self.blocked:
            return None
        return [diff.path for diff in self.differences]

    def to_dict(self):
        return {
            "contract": None if self.contract is None else str(self.contract),
            "zero": self.zero,
            "counts": self.counts(),
            "A": [diff.to_dict() for diff in self.of_class("A")],
            "B": [diff.to_dict() for diff in self.of_class("B")],
            "C": [diff.to_dict() for diff in self.of_class("C")],
            "hints": self.hints(),
            "secret_drift": self.secret_drift,
        }

    def lines(self):
        """Plan lines: one per class A/B path, one per class C hint (with its paths)."""
        out = []
        for cls, label in (("A", "representable"), ("B", "Ichor-owned, needs consent")):
            for diff in self.of_class(cls):
                out.append("class %s (%s): %s %s" % (cls, label, diff.change, diff.path))
        for group in self.hints():
            out.append("class C (blocks): %s: %s" % (group["hint"], ", ".join(group["paths"])))
        return out


def classify(differences, cluster_spec, rendered_docs=None, live_docs=None, unmapped=()):
    """Set cls and hint on each Difference for the cluster spec's CNI mode; returns a Drift.

    unmapped: cluster spec fields adoption did not read because the machines disagree on them
    (adopt.unmapped()); their paths are class C.
    """
    cluster_spec = specs.cluster(cluster_spec)
    managed = cluster_spec["cni"]["preset"] == "cilium"
    cilium_entries = set()
    if managed:
        names = set()
        for diff in differences:
            match = _INLINE.match(diff.path)
            if match:
                names.add(match.group(2) or match.group(3))
        for name in names:
            for docs in (rendered_docs or [], live_docs or []):
                if specs.is_cilium_manifest(_inline_contents(docs, name)):
                    cilium_entries.add(name)
    mixed_hosts, split_sans = _representable(live_docs) if differences else ((), False)
    auth_hosts = set(registry_auth.refs(cluster_spec))
    for diff in differences:
        diff.cls, diff.hint = _classify_one(diff, managed, cilium_entries, unmapped, mixed_hosts, split_sans, auth_hosts)
    return Drift(differences)


def drift(rendered_docs, live_docs, cluster_spec, contract=None, unmapped=()):
    """Compare and classify in one call."""
    result = classify(compare(rendered_docs, live_docs), cluster_spec, rendered_docs, live_docs, unmapped)
    result.contract = contract
    return result


def mask_docs(docs):
    """Copies of the documents with every secret value replaced by the redaction marker (for --diff)."""
    return [documents.Document(doc.kind, doc.name, secret_paths.mask_body(doc.label, doc.body)) for doc in docs]
