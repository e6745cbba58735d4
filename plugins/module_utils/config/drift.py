# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Drift between a rendered and a live machine config, in three classes, and contract probing.

Both sides are normalised the same way before comparing: documents keyed by kind and name, empty
values dropped (talosctl's commented files carry placeholders the canonical form drops), and registry
mirrors from ``machine.registries.mirrors`` and from ``RegistryMirrorConfig`` documents folded into one
representation (``registries/<host>``), so the same mirrors in either form are not drift.

Each differing path is sorted into

* class A, representable: a spec field covers it (install, registries, cert SANs, subnets, name and
  endpoint, Kubernetes version, KubePrism, hostname, the Talos CNI and kube-proxy setting in
  unmanaged mode) or it is captured as a patch (sysctls, kernel modules);
* class B, Ichor-owned, only with ``cni.preset: cilium``: the Cilium inline entry, flannel removal
  (``KubeFlannelCNIConfig``, ``cluster.network.cni``) and kube-proxy when ``replaced``. Listed, need
  consent, do not block. With ``preset: unmanaged`` no CNI item is ever class B;
* class C, unrepresentable: everything else, including every secret field (a bundle that is not this
  cluster's). Blocks the machine; paths that share a hint are reported under it once.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.maesh.ichor.plugins.module_utils.config import contracts, documents
from ansible_collections.maesh.ichor.plugins.module_utils.config import render as renderer
from ansible_collections.maesh.ichor.plugins.module_utils.config import spec as specs
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.common.redact import REDACTED

REGISTRIES = "registries"

HINT_SECRETS = ("the secrets bundle is not this cluster's: recover it from one of its control planes "
                "(maesh.ichor.talos_secrets) and render again; nothing is applied with another cluster's secrets")
HINT_INSTALL = "spec.install (disk, image, wipe); other install options and disk selectors have no field"
HINT_REGISTRIES = "spec.registries (host, endpoints, overridePath, skipFallback)"
HINT_REGISTRY_AUTH = "registry credentials and TLS are never mapped: create the TalosCluster with spec.registries[].authSecretRef"
HINT_CERT_SANS = "spec.certSANs (machine.certSANs and the API server SANs, one list)"
HINT_CUSTOM_CNI = "Talos-applied CNI manifest URLs are not representable; keep them in the node's own tooling"
HINT_INLINE = "inline and extra manifests other than Cilium's are not representable; keep them in the node's own tooling"
HINT_OTHER = "no spec field covers this path"

_SECRET = [re.compile(pattern) for pattern in (
    r"^v1alpha1:machine\.token$", r"^v1alpha1:machine\.ca\.", r"^v1alpha1:cluster\.(id|secret|token|secretboxEncryptionSecret)$",
    r"^v1alpha1:cluster\.(ca|aggregatorCA|serviceAccount|etcd\.ca)\.", r"^v1alpha1:cluster\.aescbcEncryptionSecret$",
    r"^DiscoveryIdentityConfig:", r"^KubeAPIServerCAConfig:", r"^KubeAggregatorCAConfig:", r"^KubeEtcdEncryptionConfig:",
    r"^KubeServiceAccountConfig:issuer\.privateKey$",
)]

# (pattern, class, hint) for class A; the first match wins. Class B/C rules are in classify().
_CLASS_A = [
    (r"^v1alpha1:machine\.install\.(disk|image|wipe)$", HINT_INSTALL),
    (r"^UnattendedInstallConfig:(installer\.image|provisioning\.wipe)$", HINT_INSTALL),
    (r"^registries/[^:]+:", HINT_REGISTRIES),
    (r"^v1alpha1:machine\.certSANs$", HINT_CERT_SANS),
    (r"^v1alpha1:cluster\.apiServer\.certSANs$", HINT_CERT_SANS),
    (r"^KubeAPIServerConfig:certExtraSANs$", HINT_CERT_SANS),
    (r"^v1alpha1:machine\.sysctls\.", "spec.sysctls"),
    (r"^SysctlConfig:(params\.|$)", "spec.sysctls"),
    (r"^v1alpha1:machine\.kernel\.modules", "spec.kernelModules"),
    (r"^KernelModuleConfig/", "spec.kernelModules"),
    (r"^v1alpha1:cluster\.network\.(dnsDomain|podSubnets|serviceSubnets)$", "spec.network"),
    (r"^KubeNetworkConfig:(dnsDomain|podSubnets|serviceSubnets)$", "spec.network"),
    (r"^v1alpha1:cluster\.(clusterName|controlPlane\.endpoint)$", "spec.name and spec.endpoint"),
    (r"^KubeClusterConfig:(clusterName|endpoint)$", "spec.name and spec.endpoint"),
    (r"^KubeServiceAccountConfig:issuer\.issuerURL$", "spec.endpoint"),
    (r"^v1alpha1:machine\.kubelet\.image$", "spec.kubernetesVersion"),
    (r"^v1alpha1:cluster\.(apiServer|controllerManager|scheduler|proxy)\.image$", "spec.kubernetesVersion"),
    (r"^Kube(let|APIServer|ControllerManager|Scheduler|Proxy)Config:image$", "spec.kubernetesVersion"),
    (r"^v1alpha1:machine\.features\.kubePrism\.(enabled|port)$", "spec.kubePrism"),
    (r"^KubePrismConfig:(port)?$", "spec.kubePrism"),
    (r"^HostnameConfig:(hostname|auto)$", "machine hostname"),
]
_CLASS_A = [(re.compile(pattern), hint) for pattern, hint in _CLASS_A]

_DISK_EQUALITY = re.compile(r'^\s*disk\.(dev_path|wwid|serial|symlinks|bus_path)\s*==\s*"[^"]+"\s*$')
_CNI_NAME = re.compile(r"^v1alpha1:cluster\.network\.cni\.name$")
_CNI_URLS = re.compile(r"^(v1alpha1:cluster\.network\.cni\.urls|KubeExternalManifestConfig/custom-cni:)")
_FLANNEL = re.compile(r"^KubeFlannelCNIConfig:")
_PROXY = re.compile(r"^(v1alpha1:cluster\.proxy\.disabled|KubeProxyConfig:enabled)$")
_INLINE = re.compile(r"^(v1alpha1:cluster\.inlineManifests\[([^\]]+)\]|KubeInlineManifestConfig/([^:]+):)")
_EXTRA = re.compile(r"^(v1alpha1:cluster\.extraManifests|KubeExternalManifestConfig/)")
_REG_AUTH = re.compile(r"^(v1alpha1:machine\.registries\.config|RegistryAuthConfig/|RegistryTLSConfig/)")


_SENSITIVE = re.compile(r"(^v1alpha1:machine\.registries\.config|^RegistryAuthConfig/|^RegistryTLSConfig/|password|[Tt]oken|[Kk]ey$)")


def is_secret_path(path):
    """A field of the secrets bundle (drift there means the bundle is not this cluster's)."""
    return any(pattern.search(path) for pattern in _SECRET)


def is_sensitive_path(path):
    """A field whose value is never printed: the bundle's, and registry credentials and TLS."""
    return is_secret_path(path) or bool(_SENSITIVE.search(path))


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
        if is_sensitive_path(self.path):
            out["rendered"] = None if self.rendered is None else REDACTED
            out["live"] = None if self.live is None else REDACTED
        else:
            out["rendered"] = self.rendered
            out["live"] = self.live
        return out

    def __repr__(self):
        return "Difference(%s %s %s)" % (self.cls, self.change, self.path)


# ---------------------------------------------------------------------------- normalisation


def _mirror_entry(endpoints, override, skip):
    return {"endpoints": endpoints, "overridePath": override, "skipFallback": skip}


def normalise(docs):
    """{path: value} for a config, with mirrors in one form and empty values dropped."""
    flat = {}
    mirrors = {}
    for doc in docs:
        if doc.kind == "RegistryMirrorConfig" and doc.name:
            body = doc.body
            urls, overrides = [], []
            for item in body.get("endpoints") or []:
                item = item if isinstance(item, dict) else {"url": item}
                urls.append(item.get("url"))
                overrides.append(bool(item.get("overridePath")))
            override = overrides[0] if overrides and len(set(overrides)) == 1 else overrides
            mirrors[doc.name] = _mirror_entry(urls, override, bool(body.get("skipFallback")))
            continue
        if doc.kind == documents.LEGACY:
            legacy_mirrors = documents.get_path(doc.body, "machine.registries.mirrors") or {}
            if legacy_mirrors:
                body = dict(doc.body)
                body["machine"] = dict(body["machine"])
                body["machine"]["registries"] = dict(body["machine"]["registries"])
                del body["machine"]["registries"]["mirrors"]
                for host, entry in legacy_mirrors.items():
                    entry = entry or {}
                    mirrors.setdefault(host, _mirror_entry(list(entry.get("endpoints") or []), bool(entry.get("overridePath")),
                                                           bool(entry.get("skipFallback"))))
                doc = documents.legacy(body)
        flat.update(documents.paths(doc))
    for host, entry in mirrors.items():
        flat.update(_mirror_paths(host, entry))
    return flat


def _mirror_paths(host, entry):
    prefix = "%s/%s:" % (REGISTRIES, host)
    out = {prefix + "endpoints": list(entry["endpoints"])}
    if entry["overridePath"]:
        out[prefix + "overridePath"] = entry["overridePath"]
    if entry["skipFallback"]:
        out[prefix + "skipFallback"] = True
    return out


def _form(docs):
    flat = {}
    for doc in docs:
        flat.update(documents.paths(doc, keep_empty=True))
    return flat


def compare(rendered_docs, live_docs):
    """Sorted list of Difference (unclassified) between two document lists."""
    rendered = normalise(rendered_docs)
    live = normalise(live_docs)
    out = []
    for path in sorted(set(rendered) | set(live)):
        left, right = rendered.get(path), live.get(path)
        if left != right:
            out.append(Difference(path, left, right))
    return out


def form_differences(rendered_docs, live_docs):
    """How many empty placeholders differ (``machine.network: {}`` and the like): a probing tie-break."""
    rendered = _form(rendered_docs)
    live = _form(live_docs)
    count = 0
    for path in set(rendered) | set(live):
        left, right = rendered.get(path), live.get(path)
        if left != right and (left in ({}, [], "") or right in ({}, [], "")):
            count += 1
    return count


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


_UNMAPPED = {
    "registries": (re.compile(r"^(registries/|RegistryMirrorConfig)"), HINT_REGISTRIES + ": the machines do not all state the same mirrors"),
    "certSANs": (re.compile(r"^(v1alpha1:machine\.certSANs|v1alpha1:cluster\.apiServer\.certSANs|KubeAPIServerConfig:certExtraSANs)$"),
                 HINT_CERT_SANS + ": the machines do not all state the same SANs"),
}


def _classify_one(diff, managed, cilium_entries, unmapped=()):
    path = diff.path
    if is_secret_path(path):
        return "C", HINT_SECRETS
    for field in unmapped:
        pattern, hint = _UNMAPPED[field]
        if pattern.search(path):
            return "C", hint
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
    if _REG_AUTH.match(path):
        return "C", HINT_REGISTRY_AUTH
    if path == "UnattendedInstallConfig:provisioning.diskSelector.match":
        if all(value is None or _DISK_EQUALITY.match(str(value)) for value in (diff.rendered, diff.live)):
            return "A", HINT_INSTALL
        return "C", HINT_INSTALL
    if path.startswith("RegistryMirrorConfig"):
        return "A", HINT_REGISTRIES
    for pattern, hint in _CLASS_A:
        if pattern.search(path):
            return "A", hint
    if path.startswith(("v1alpha1:machine.install.", "UnattendedInstallConfig:")):
        return "C", HINT_INSTALL
    return "C", HINT_OTHER


class Drift:
    """The classified differences between a render and a live config."""

    def __init__(self, differences, contract=None, form=0):
        self.differences = differences
        self.contract = contract
        self.form = form

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

    unmapped: spec fields adoption could not map (``registries``, ``certSANs``: the machines disagree);
    their paths are class C.
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
    for diff in differences:
        diff.cls, diff.hint = _classify_one(diff, managed, cilium_entries, unmapped)
    return Drift(differences)


def drift(rendered_docs, live_docs, cluster_spec, contract=None, unmapped=()):
    """Compare and classify in one call."""
    result = classify(compare(rendered_docs, live_docs), cluster_spec, rendered_docs, live_docs, unmapped)
    result.contract = contract
    result.form = form_differences(rendered_docs, live_docs)
    return result


# ---------------------------------------------------------------------------- probing


def probe(bundle, cluster_spec, machine_spec, live_docs, running_version, unmapped=()):
    """Render at each contract from the running version down to v1.12 and compare with live.

    Returns (chosen contract name, {contract: Drift}). The choice: fewest class C paths; then fewest
    differences; then fewest differing placeholders (v1.12's ``machine.network: {}``); then the
    highest contract.
    """
    if isinstance(live_docs, (str, bytes)):
        live_docs = documents.parse(live_docs)
    results = {}
    order = contracts.probe_order(running_version)
    for contract in order:
        spec_at = dict(cluster_spec, versionContract=contract.name)
        try:
            rendered = renderer.render(bundle, spec_at, machine_spec, contract.name)
        except ConfigError:
            continue
        results[contract.name] = drift(rendered, live_docs, spec_at, contract.name, unmapped)
    if not results:
        raise ConfigError("no contract from %s down to v1.12 can render this spec" % running_version)
    ranked = sorted(results.items(), key=lambda item: (item[1].counts()["C"], len(item[1].differences), item[1].form,
                                                       [-part for part in contracts.parse_version(item[0])]))
    return ranked[0][0], results


def mask_docs(docs):
    """Copies of the documents with every secret value replaced by the redaction marker (for --diff)."""
    out = []
    for doc in docs:
        body = _mask(doc.label, doc.body, "")
        out.append(documents.Document(doc.kind, doc.name, body))
    return out


def _mask(label, value, prefix):
    if isinstance(value, dict):
        return dict((key, _mask(label, item, "%s.%s" % (prefix, key) if prefix else key)) for key, item in value.items())
    if isinstance(value, list):
        return [_mask(label, item, prefix) for item in value]
    if value in (None, "") or not isinstance(value, str):
        return value
    if is_sensitive_path("%s:%s" % (label, prefix)) or "PRIVATE KEY" in value:
        return REDACTED
    return value
