"""The reference machine configs in tests/fixtures/configs, made by REAL Talos machinery code.

tests/configgen (Go, built at machinery v1.12.7, v1.13.9 and v1.14.1) writes, per version contract and
generator, one directory per case: secrets.yaml (``talosctl gen secrets``), controlplane.conf and
worker.conf (``talosctl gen config --with-secrets``, with comments as talosctl writes them) and
case.json (the options used). scripts/gen-config-fixtures regenerates them. These tests need no Go:
they check the fixtures' shape and that each config says what its case.json says, in the form the
contract emits (what we observed machinery emit, not what the notes guessed).
"""

import base64
import glob
import json
import os

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGS = os.path.join(REPO, "tests", "fixtures", "configs")

GENERATED = {  # contract -> machinery versions that generated it
    "v1.12": ["v1.12.7", "v1.14.1"],
    "v1.13": ["v1.13.9", "v1.14.1"],
    "v1.14": ["v1.14.1"],
}
UPGRADED = ["v1.12.7-to-v1.14.1", "v1.13.9-to-v1.14.1"]
CASES = sorted([
    "basic", "cert-sans", "cilium-inline", "cni-custom", "cni-none", "inline-other", "install-custom",
    "k8s-older", "kitchen-sink", "kube-proxy-disabled", "kubeprism-off", "kubeprism-port",
    "mirrors-override", "mirrors-plain", "subnets", "sysctls-kmods",
])
# Cases that state what no spec field holds (case.json "unrepresentable"), for the drift rule and the
# secret paths: tests/configgen/src/cases_extra.go.
EXTRA_CASES = sorted([
    "images-air-gapped", "images-digest", "k8s-upgrade-halfway", "luks-legacy", "luks-volume", "mirrors-mixed", "network-content", "secrets-legacy",
    "secrets-typed", "worker-label-empty",
])
# Cases of the typed spec fields (case.json "cluster_fields", "machine_fields"): static networking, bonds,
# VLANs, VIPs, time servers, node labels and taints, kubelet and component arguments, audit and admission:
# tests/configgen/src/cases_fields.go.
FIELD_CASES = sorted([
    "audit-admission", "components-args", "kubelet-extra", "net-bond-vlan", "net-static", "node-labels-taints",
    "vip", "vlan-vip",
])

# Typed documents machinery v1.14.1 emits at contract v1.14 for every case (besides the v1alpha1 one).
TYPED_ALWAYS_BOTH = {
    "DiscoveryServiceConfig", "DiscoveryIdentityConfig", "UnattendedInstallConfig", "ResolverConfig",
    "VolumeConfig", "FilesystemTrimConfig", "SecurityProfileConfig", "HostnameConfig",
    "KubeClusterConfig", "KubeNodeConfig", "KubeletConfig", "KubeNetworkConfig", "KubeAPIServerCAConfig",
}
TYPED_ALWAYS_CONTROLPLANE = TYPED_ALWAYS_BOTH | {
    "KubeAggregatorCAConfig", "KubeAdmissionControlConfig", "KubeAuditPolicyConfig",
    "KubeAuthenticationConfig", "KubeAuthorizerConfig", "KubeEtcdEncryptionConfig",
    "KubeServiceAccountConfig", "KubeAPIServerConfig", "KubeControllerManagerConfig",
    "KubeSchedulerConfig", "KubeProxyConfig", "KubeCoreDNSConfig",
}
TYPED_OPTIONAL = {  # present depending on the case
    "KubePrismConfig", "KubeFlannelCNIConfig", "KubeExternalManifestConfig", "KubeInlineManifestConfig",
    "SysctlConfig", "KernelModuleConfig", "RegistryMirrorConfig",
}
# At contracts v1.12 and v1.13 (both generators) only these typed documents appear.
LEGACY_TYPED = {"HostnameConfig", "RegistryMirrorConfig"}
# What is left in the v1alpha1 document at contract v1.14.
V1ALPHA1_AT_114 = {
    "controlplane": ({"type", "token", "ca", "certSANs", "features"}, {"token", "etcd"}),
    "worker": ({"type", "token", "ca", "certSANs", "features"}, {"token"}),
}


def _case_dirs(cases):
    dirs = []
    for contract, gens in GENERATED.items():
        for gen in gens:
            for case in cases:
                dirs.append(("%s/%s/%s" % (contract, gen, case), contract, gen, False))
    for up in UPGRADED:
        old = up.split("-to-", maxsplit=1)[0]
        contract = "v1." + old.split(".")[1]
        for case in cases:
            dirs.append(("upgraded/%s/%s" % (up, case), contract, old, True))
    return dirs


CASE_DIRS = _case_dirs(CASES)
IDS = [d[0] for d in CASE_DIRS]
EXTRA_DIRS = _case_dirs(EXTRA_CASES)
ALL_DIRS = CASE_DIRS + EXTRA_DIRS
FIELD_DIRS = _case_dirs(FIELD_CASES)


class Fixture:
    def __init__(self, rel, contract, generator, upgraded):
        self.rel = rel
        self.path = os.path.join(CONFIGS, rel)
        self.contract = contract
        self.generator = generator
        self.upgraded = upgraded
        with open(os.path.join(self.path, "case.json")) as f:
            self.case = json.load(f)
        with open(os.path.join(self.path, "secrets.yaml")) as f:
            self.bundle = yaml.safe_load(f)
        self.docs = {}
        for role in ("controlplane", "worker"):
            with open(os.path.join(self.path, role + ".conf")) as f:
                self.docs[role] = [d for d in yaml.safe_load_all(f) if d is not None]

    @property
    def typed(self):
        return self.contract == "v1.14"

    def v1alpha1(self, role):
        found = [d for d in self.docs[role] if d.get("version") == "v1alpha1"]
        assert len(found) == 1, "%s/%s: expected one v1alpha1 document" % (self.rel, role)
        return found[0]

    def kinds(self, role):
        return [d["kind"] for d in self.docs[role] if "kind" in d]

    def doc(self, role, kind, name=None):
        found = [d for d in self.docs[role] if d.get("kind") == kind and (name is None or d.get("name") == name)]
        assert len(found) <= 1, "%s/%s: %s %s is duplicated" % (self.rel, role, kind, name)
        return found[0] if found else None


@pytest.fixture(scope="module", params=CASE_DIRS, ids=IDS)
def fx(request):
    return Fixture(*request.param)


@pytest.fixture(scope="module", params=ALL_DIRS, ids=[d[0] for d in ALL_DIRS])
def any_fx(request):
    """Every case, those a spec reproduces and the unrepresentable ones."""
    return Fixture(*request.param)


def _pem(b64):
    return base64.b64decode(b64).decode()


def test_fixture_tree_is_complete():
    found = sorted(os.path.relpath(os.path.dirname(p), CONFIGS)
                   for p in glob.glob(os.path.join(CONFIGS, "**", "case.json"), recursive=True))
    assert found == sorted(d[0] for d in ALL_DIRS + FIELD_DIRS)
    for rel in found:
        for name in ("secrets.yaml", "controlplane.conf", "worker.conf", "case.json"):
            assert os.path.isfile(os.path.join(CONFIGS, rel, name)), "%s/%s missing" % (rel, name)


def test_case_json_describes_the_fixture(any_fx):
    fx = any_fx
    c = fx.case
    for key in ("cluster_name", "endpoint", "kubernetes_version", "install_disk", "install_image",
                "install_wipe", "cert_sans", "registry_mirrors", "sysctls", "kernel_modules", "kubeprism",
                "kube_proxy_disabled", "cni", "inline_manifests", "pod_subnets", "service_subnets",
                "contract", "talos_version", "machinery_version", "patches", "gen_options"):
        assert key in c, "%s: case.json lacks %s" % (fx.rel, key)
    assert c["name"] == os.path.basename(fx.rel)
    assert c["contract"] == fx.contract
    assert c["machinery_version"] == fx.generator
    if fx.upgraded:
        assert c["talos_version"] == "v1.14.1" and "upgraded_by" in c
    else:
        assert c["talos_version"] == fx.generator
    assert c["cni"]["name"] in ("flannel", "none", "custom")


def test_bundle_shape(any_fx):
    fx = any_fx
    b = fx.bundle
    assert set(b) == {"cluster", "secrets", "trustdinfo", "certs"}
    assert set(b["cluster"]) == {"id", "secret"}
    assert set(b["secrets"]) == {"bootstraptoken", "secretboxencryptionsecret"}
    assert set(b["certs"]) == {"etcd", "k8s", "k8saggregator", "k8sserviceaccount", "os"}
    assert set(b["certs"]["k8sserviceaccount"]) == {"key"}
    headers = {name: _pem(b["certs"][name]["key"]).splitlines()[0] for name in b["certs"]}
    assert headers == {
        "etcd": "-----BEGIN EC PRIVATE KEY-----",
        "k8s": "-----BEGIN EC PRIVATE KEY-----",
        "k8saggregator": "-----BEGIN EC PRIVATE KEY-----",
        "k8sserviceaccount": "-----BEGIN RSA PRIVATE KEY-----",
        "os": "-----BEGIN ED25519 PRIVATE KEY-----",
    }
    for token in (b["secrets"]["bootstraptoken"], b["trustdinfo"]["token"]):
        left, right = token.split(".")
        assert len(left) == 6 and len(right) == 16
    for value in (b["cluster"]["id"], b["cluster"]["secret"], b["secrets"]["secretboxencryptionsecret"]):
        assert len(base64.b64decode(value.replace("-", "+").replace("_", "/"))) == 32


def test_controlplane_carries_the_bundle(any_fx):
    fx = any_fx
    b = fx.bundle
    v1 = fx.v1alpha1("controlplane")
    assert v1["machine"]["ca"]["crt"] == b["certs"]["os"]["crt"]
    assert v1["machine"]["ca"]["key"] == b["certs"]["os"]["key"]
    assert v1["machine"]["token"] == b["trustdinfo"]["token"]
    assert v1["cluster"]["token"] == b["secrets"]["bootstraptoken"]
    assert v1["cluster"]["etcd"]["ca"] == b["certs"]["etcd"]
    if fx.typed:
        ident = fx.doc("controlplane", "DiscoveryIdentityConfig")
        assert (ident["clusterID"], ident["clusterSecret"]) == (b["cluster"]["id"], b["cluster"]["secret"])
        api_ca = fx.doc("controlplane", "KubeAPIServerCAConfig")["issuingCA"]
        assert api_ca == {"cert": _pem(b["certs"]["k8s"]["crt"]), "key": _pem(b["certs"]["k8s"]["key"])}
        agg = fx.doc("controlplane", "KubeAggregatorCAConfig")["issuingCA"]
        assert agg == {"cert": _pem(b["certs"]["k8saggregator"]["crt"]),
                       "key": _pem(b["certs"]["k8saggregator"]["key"])}
        sa = fx.doc("controlplane", "KubeServiceAccountConfig")["issuer"]
        assert sa["privateKey"] == _pem(b["certs"]["k8sserviceaccount"]["key"])
        assert sa["issuerURL"] == fx.case["endpoint"]
        enc = fx.doc("controlplane", "KubeEtcdEncryptionConfig")["config"]
        assert enc["resources"][0]["providers"] == [
            {"secretbox": {"keys": [{"name": "key2", "secret": b["secrets"]["secretboxencryptionsecret"]}]}}]
    else:
        cl = v1["cluster"]
        assert (cl["id"], cl["secret"]) == (b["cluster"]["id"], b["cluster"]["secret"])
        assert cl["ca"] == b["certs"]["k8s"]
        assert cl["aggregatorCA"] == b["certs"]["k8saggregator"]
        assert cl["serviceAccount"] == b["certs"]["k8sserviceaccount"]
        assert cl["secretboxEncryptionSecret"] == b["secrets"]["secretboxencryptionsecret"]


def test_worker_carries_only_part_of_the_bundle(any_fx):
    fx = any_fx
    b = fx.bundle
    v1 = fx.v1alpha1("worker")
    assert v1["machine"]["ca"]["crt"] == b["certs"]["os"]["crt"]
    assert not v1["machine"]["ca"].get("key")
    assert v1["machine"]["token"] == b["trustdinfo"]["token"]
    assert v1["cluster"]["token"] == b["secrets"]["bootstraptoken"]
    assert "etcd" not in v1["cluster"]
    if fx.typed:
        assert fx.doc("worker", "KubeAPIServerCAConfig") == {
            "apiVersion": "v1alpha1", "kind": "KubeAPIServerCAConfig",
            "acceptedCAs": [_pem(b["certs"]["k8s"]["crt"])]}
        for kind in ("KubeAggregatorCAConfig", "KubeServiceAccountConfig", "KubeEtcdEncryptionConfig"):
            assert fx.doc("worker", kind) is None
    else:
        assert v1["cluster"]["ca"]["crt"] == b["certs"]["k8s"]["crt"]
        assert not v1["cluster"]["ca"].get("key")
        for key in ("aggregatorCA", "serviceAccount", "secretboxEncryptionSecret"):
            assert not v1["cluster"].get(key)


def test_documents_by_contract(fx):
    for role in ("controlplane", "worker"):
        kinds = fx.kinds(role)
        v1 = fx.v1alpha1(role)
        assert fx.docs[role][0] is v1, "the v1alpha1 document comes first"
        if fx.typed:
            always = TYPED_ALWAYS_CONTROLPLANE if role == "controlplane" else TYPED_ALWAYS_BOTH
            assert always <= set(kinds), sorted(always - set(kinds))
            assert set(kinds) <= always | TYPED_OPTIONAL, sorted(set(kinds) - always - TYPED_OPTIONAL)
            machine_keys, cluster_keys = V1ALPHA1_AT_114[role]
            assert set(v1["machine"]) - {"network", "registries"} <= machine_keys
            assert {k for k, v in v1["cluster"].items() if v not in ({}, [], None)} == cluster_keys
        else:
            assert set(kinds) <= LEGACY_TYPED, sorted(set(kinds) - LEGACY_TYPED)
            assert kinds.count("HostnameConfig") == 1
            assert fx.doc(role, "HostnameConfig") == {"apiVersion": "v1alpha1", "kind": "HostnameConfig",
                                                      "auto": "stable"}
            for key in ("type", "token", "ca", "kubelet", "install", "features"):
                assert key in v1["machine"], "legacy machine.%s missing" % key
            for key in ("id", "secret", "clusterName", "controlPlane", "network", "token", "ca", "discovery"):
                assert key in v1["cluster"], "legacy cluster.%s missing" % key
            if role == "controlplane":
                for key in ("apiServer", "controllerManager", "proxy", "scheduler", "etcd", "aggregatorCA",
                            "serviceAccount", "secretboxEncryptionSecret"):
                    assert key in v1["cluster"], "legacy cluster.%s missing" % key


def test_cluster_identity(any_fx):
    fx = any_fx
    c = fx.case
    for role in ("controlplane", "worker"):
        if fx.typed:
            kc = fx.doc(role, "KubeClusterConfig")
            assert kc["clusterName"] == c["cluster_name"]
            assert kc["endpoint"] == c["endpoint"]
        else:
            cl = fx.v1alpha1(role)["cluster"]
            assert cl["clusterName"] == c["cluster_name"]
            assert cl["controlPlane"]["endpoint"] == c["endpoint"]


def test_versions_and_install(fx):
    c = fx.case
    k8s = c["kubernetes_version"].lstrip("v")
    for role in ("controlplane", "worker"):
        v1 = fx.v1alpha1(role)
        if fx.typed:
            assert fx.doc(role, "KubeletConfig")["image"] == "ghcr.io/siderolabs/kubelet:v" + k8s
            ui = fx.doc(role, "UnattendedInstallConfig")
            assert ui["installer"] == {"image": c["install_image"]}
            assert ui["provisioning"] == {"diskSelector": {"match": 'disk.dev_path == "%s"' % c["install_disk"]},
                                          "wipe": c["install_wipe"]}
            assert "install" not in v1["machine"]
        else:
            assert v1["machine"]["kubelet"]["image"] == "ghcr.io/siderolabs/kubelet:v" + k8s
            inst = v1["machine"]["install"]
            want = (c["install_disk"], c["install_image"], c["install_wipe"])
            assert (inst["disk"], inst["image"], inst["wipe"]) == want
            assert inst["grubUseUKICmdline"] is True
    if fx.typed:
        assert fx.doc("controlplane", "KubeAPIServerConfig")["image"] == "registry.k8s.io/kube-apiserver:v" + k8s
    else:
        cl = fx.v1alpha1("controlplane")["cluster"]
        assert cl["apiServer"]["image"] == "registry.k8s.io/kube-apiserver:v" + k8s
        assert cl["proxy"]["image"] == "registry.k8s.io/kube-proxy:v" + k8s


def test_cert_sans(any_fx):
    fx = any_fx
    sans = fx.case["cert_sans"]
    for role in ("controlplane", "worker"):
        assert (fx.v1alpha1(role)["machine"]["certSANs"] or []) == sans
    if fx.typed:
        assert fx.doc("controlplane", "KubeAPIServerConfig").get("certExtraSANs", []) == sans
    else:
        assert fx.v1alpha1("controlplane")["cluster"]["apiServer"].get("certSANs", []) == sans


def test_registry_mirrors(fx):
    mirrors = fx.case["registry_mirrors"]
    for role in ("controlplane", "worker"):
        docs = {d["name"]: d for d in fx.docs[role] if d.get("kind") == "RegistryMirrorConfig"}
        assert sorted(docs) == sorted(mirrors)
        for host, m in mirrors.items():
            d = docs[host]
            want = [{"url": u, "overridePath": True} if m["override_path"] else {"url": u} for u in m["endpoints"]]
            assert d["endpoints"] == want
            assert d.get("skipFallback", False) == m["skip_fallback"]
        # the legacy field is never used for mirrors at contracts >= v1.12 (an empty placeholder may show)
        assert not (fx.v1alpha1(role)["machine"].get("registries") or {}).get("mirrors")


def test_sysctls_and_kernel_modules(any_fx):
    fx = any_fx
    c = fx.case
    for role in ("controlplane", "worker"):
        v1 = fx.v1alpha1(role)
        if fx.typed:
            sc = fx.doc(role, "SysctlConfig")
            assert (sc["params"] if sc else {}) == c["sysctls"]
            assert [d["name"] for d in fx.docs[role] if d.get("kind") == "KernelModuleConfig"] == c["kernel_modules"]
            assert not v1["machine"].get("sysctls") and not v1["machine"].get("kernel")
        else:
            assert (v1["machine"].get("sysctls") or {}) == c["sysctls"]
            modules = ((v1["machine"].get("kernel") or {}).get("modules") or [])
            assert [m["name"] for m in modules] == c["kernel_modules"]


def test_kubeprism(any_fx):
    fx = any_fx
    kp = fx.case["kubeprism"]
    for role in ("controlplane", "worker"):
        if fx.typed:
            d = fx.doc(role, "KubePrismConfig")
            assert (d is not None) == kp["enabled"]
            if d:
                assert d["port"] == kp["port"]
        else:
            legacy = fx.v1alpha1(role)["machine"]["features"].get("kubePrism")
            if kp["enabled"]:
                assert legacy == {"enabled": True, "port": kp["port"]}
            else:
                assert legacy is None  # WithKubePrismPort(0): the section is left out


def test_kube_proxy_cni_and_manifests(fx):
    c = fx.case
    if fx.typed:
        proxy = fx.doc("controlplane", "KubeProxyConfig")
        assert proxy.get("enabled", True) is (not c["kube_proxy_disabled"])
        flannel = fx.doc("controlplane", "KubeFlannelCNIConfig")
        ext = [d for d in fx.docs["controlplane"] if d.get("kind") == "KubeExternalManifestConfig"]
        if c["cni"]["name"] == "flannel":
            assert flannel == {"apiVersion": "v1alpha1", "kind": "KubeFlannelCNIConfig",
                               "backendType": "vxlan", "backendPort": 4789}
            assert ext == []
        elif c["cni"]["name"] == "none":
            assert flannel is None and ext == []
        else:
            assert flannel is None
            assert [(d["name"], d["url"]) for d in ext] == [("custom-cni", u) for u in c["cni"]["urls"]]
        inline = [{"name": d["name"], "contents": d["manifest"]}
                  for d in fx.docs["controlplane"] if d.get("kind") == "KubeInlineManifestConfig"]
        assert inline == c["inline_manifests"]
        for kind in ("KubeProxyConfig", "KubeFlannelCNIConfig", "KubeExternalManifestConfig",
                     "KubeInlineManifestConfig"):
            assert kind not in fx.kinds("worker")
    else:
        for role in ("controlplane", "worker"):
            cl = fx.v1alpha1(role)["cluster"]
            assert bool((cl.get("proxy") or {}).get("disabled")) == c["kube_proxy_disabled"]
            cni = cl["network"].get("cni")
            if c["cni"]["name"] == "flannel":
                assert cni is None
            elif c["cni"]["name"] == "none":
                assert cni == {"name": "none"}
            else:
                assert cni == {"name": "custom", "urls": c["cni"]["urls"]}
        cp = fx.v1alpha1("controlplane")["cluster"]
        assert (cp.get("inlineManifests") or []) == c["inline_manifests"]
        assert not fx.v1alpha1("worker")["cluster"].get("inlineManifests")


def test_subnets(any_fx):
    fx = any_fx
    c = fx.case
    for role in ("controlplane", "worker"):
        if fx.typed:
            net = fx.doc(role, "KubeNetworkConfig")
        else:
            net = fx.v1alpha1(role)["cluster"]["network"]
        assert net["podSubnets"] == c["pod_subnets"]
        assert net["serviceSubnets"] == c["service_subnets"]
        assert net["dnsDomain"] == "cluster.local"


def test_inline_manifest_kinds_present():
    """The matrix has a Cilium inline manifest and a non-Cilium one, in every contract."""
    for contract, gens in GENERATED.items():
        for gen in gens:
            with open(os.path.join(CONFIGS, contract, gen, "cilium-inline", "case.json")) as f:
                cilium = json.load(f)["inline_manifests"]
            with open(os.path.join(CONFIGS, contract, gen, "inline-other", "case.json")) as f:
                other = json.load(f)["inline_manifests"]
            assert "kind: DaemonSet" in cilium[0]["contents"] and "name: cilium" in cilium[0]["contents"]
            assert "cilium" not in other[0]["contents"]


def test_upgraded_configs_keep_the_legacy_form():
    """A v1.12/v1.13 config loaded and re-encoded by v1.14.1 machinery is unchanged (no migration)."""
    for up in UPGRADED:
        old = up.split("-to-", maxsplit=1)[0]
        contract = "v1." + old.split(".")[1]
        for case in CASES + EXTRA_CASES:
            for role in ("controlplane", "worker"):
                with open(os.path.join(CONFIGS, "upgraded", up, case, role + ".conf")) as f:
                    upgraded = [d for d in yaml.safe_load_all(f) if d is not None]
                with open(os.path.join(CONFIGS, contract, old, case, role + ".conf")) as f:
                    original = [d for d in yaml.safe_load_all(f) if d is not None]
                assert [d.get("kind", "v1alpha1") for d in upgraded] == [d.get("kind", "v1alpha1") for d in original]
                assert upgraded[0]["cluster"]["clusterName"] == original[0]["cluster"]["clusterName"]
                assert upgraded[0]["machine"]["ca"] == original[0]["machine"]["ca"]


def test_fixtures_hold_no_unexpected_files():
    allowed = {"secrets.yaml", "controlplane.conf", "worker.conf", "case.json"}
    for root, _dirs, files in os.walk(CONFIGS):
        extra = set(files) - allowed
        assert not extra, "%s: %s" % (root, sorted(extra))


@pytest.fixture(scope="module", params=EXTRA_DIRS, ids=[d[0] for d in EXTRA_DIRS])
def extra(request):
    return Fixture(*request.param)


def _leaf(doc, path):
    for part in path:
        doc = doc[part]
    return doc


def test_extra_cases_state_what_no_spec_field_holds(extra):
    """Each unrepresentable case holds what its name says, in the form machinery wrote it."""
    fx = extra
    name = fx.case["name"]
    assert fx.case["unrepresentable"]
    for role in ("controlplane", "worker"):
        v1 = fx.v1alpha1(role)
        if name == "worker-label-empty":
            labels = fx.doc(role, "KubeNodeConfig").get("labels", {}) if fx.typed else v1["machine"].get("nodeLabels", {})
            assert (labels.get("node-role.kubernetes.io/worker") == "") is (role == "worker")
        elif name == "luks-legacy":
            keys = v1["machine"]["systemDiskEncryption"]
            assert keys["state"]["keys"] == [{"slot": 0, "nodeID": {}}]
            assert keys["ephemeral"]["keys"][1] == {"slot": 1, "tpm": {}}
            assert len(keys["ephemeral"]["keys"][0]["static"]["passphrase"]) == 24
        elif name == "luks-volume":
            assert fx.doc(role, "VolumeConfig", "STATE")["encryption"]["keys"] == [{"slot": 0, "nodeID": {}}, {"slot": 1, "tpm": {}}]
            assert _leaf(fx.doc(role, "VolumeConfig", "EPHEMERAL"), ("encryption", "keys", 0, "static", "passphrase"))
        elif name == "images-air-gapped":
            kubelet = fx.doc(role, "KubeletConfig")["image"] if fx.typed else v1["machine"]["kubelet"]["image"]
            assert kubelet == "registry.corp.example:5000/siderolabs/kubelet:v" + fx.case["kubernetes_version"]
        elif name == "images-digest":
            kubelet = fx.doc(role, "KubeletConfig")["image"] if fx.typed else v1["machine"]["kubelet"]["image"]
            assert kubelet.startswith("ghcr.io/siderolabs/kubelet:v%s@sha256:" % fx.case["kubernetes_version"])
        elif name == "k8s-upgrade-halfway":
            kubelet = fx.doc(role, "KubeletConfig")["image"] if fx.typed else v1["machine"]["kubelet"]["image"]
            assert not kubelet.endswith(":v" + fx.case["kubernetes_version"])
        elif name == "mirrors-mixed":
            assert [bool(e.get("overridePath")) for e in fx.doc(role, "RegistryMirrorConfig", "docker.io")["endpoints"]] == [True, False]
        elif name == "network-content":
            assert v1["machine"]["network"]["interfaces"] == [{"interface": "eth0", "dhcp": True}]
        elif name == "secrets-legacy":
            assert v1["machine"]["registries"]["config"]["ghcr.io"]["auth"]["password"]
            assert v1["machine"]["network"]["interfaces"][0]["wireguard"]["privateKey"]
            assert v1["machine"]["env"]["https_proxy"].startswith("http://proxy-user:")
        elif name == "secrets-typed":
            assert fx.doc(role, "RegistryAuthConfig", "ghcr.io")["password"]
            assert fx.doc(role, "WireguardConfig", "wg0")["peers"][0]["presharedKey"]
            assert "jointoken=" in fx.doc(role, "SideroLinkConfig")["apiUrl"]
            for kind in ("UserVolumeConfig", "RawVolumeConfig", "SwapVolumeConfig"):
                assert [d for d in fx.docs[role] if d.get("kind") == kind][0]["encryption"]["keys"][0]["static"]["passphrase"]
            assert (fx.doc(role, "EnvironmentConfig") is None) is (fx.contract == "v1.12")
        else:
            pytest.fail("no check for the extra case %s" % name)
