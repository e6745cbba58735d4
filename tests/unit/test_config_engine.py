"""The machine-config engine (plugins/module_utils/config) over every fixture that real Talos code made.

For every case in tests/fixtures/configs (contracts v1.12, v1.13, v1.14; generators v1.12.7, v1.13.9,
v1.14.1; and the configs upgraded in place) that a spec reproduces: recover the bundle from
controlplane.conf, build the spec from case.json, render the control plane and the worker, and find zero
drift with our differ. The Go judge (machinery's loader and encoder) checks the same renders in
tests/integration/test_config_render_go.py. The cases made to state what no spec field holds
(case.json ``unrepresentable``) must be reported, by class, and block.
"""

import base64
import re
import glob
import json
import os
import stat
import subprocess
import sys

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.config import adopt, contracts, documents, drift, images, probing, \
    render, secrets, spec
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from tests import config_cases

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGS = os.path.join(REPO, "tests", "fixtures", "configs")
ALL_CASE_DIRS = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(CONFIGS, "*", "*", "*", "case.json")))


def _unrepresentable(case_dir):
    with open(os.path.join(case_dir, "case.json")) as handle:
        return bool(json.load(handle).get("unrepresentable"))


CASE_DIRS = [d for d in ALL_CASE_DIRS if not _unrepresentable(d)]  # a spec reproduces them
EXTRA_CASE_DIRS = [d for d in ALL_CASE_DIRS if _unrepresentable(d)]
ROLES = ("controlplane", "worker")


def _id(case_dir):
    return os.path.relpath(case_dir, CONFIGS)


def _read(path):
    with open(path) as handle:
        return handle.read()


_CACHE = {}


def load_case(case_dir):
    """(case, bundle, cluster spec, machine spec without role, {role: live docs})."""
    if case_dir not in _CACHE:
        case = json.loads(_read(os.path.join(case_dir, "case.json")))
        live = dict((role, documents.parse(_read(os.path.join(case_dir, role + ".conf")))) for role in ROLES)
        bundle = secrets.from_config(live["controlplane"])
        cluster_spec, machine_spec = config_cases.spec_of_case(case)
        _CACHE[case_dir] = (case, bundle, cluster_spec, machine_spec, live)
    return _CACHE[case_dir]


def test_fixture_matrix_is_complete():
    assert len(CASE_DIRS) == 168 and len(EXTRA_CASE_DIRS) == 70  # 16 + 8 field cases, 10 extra; 7 directories each
    contracts_seen = set(json.loads(_read(os.path.join(d, "case.json")))["contract"] for d in ALL_CASE_DIRS)
    assert contracts_seen == {"v1.12", "v1.13", "v1.14"}


# ---------------------------------------------------------------------------- (1) documents + bundle


def _patched_aescbc(case):
    """The aescbc secret a case's patch adds to the control plane beside the bundle's secretbox secret
    (secrets-legacy at the legacy contracts), or None."""
    for patch in case.get("patches") or []:
        match = re.search(r"^\s*aescbcEncryptionSecret: (\S+)$", patch["patch"], re.M)
        if match:
            return match.group(1)
    return None


@pytest.mark.parametrize("case_dir", ALL_CASE_DIRS, ids=_id)
def test_recover_bundle_equals_secrets_file(case_dir):
    case, bundle, unused_cluster, unused_machine, unused_live = load_case(case_dir)
    reference = secrets.load(os.path.join(case_dir, "secrets.yaml"))
    aescbc = _patched_aescbc(case)
    if aescbc:  # every encryption key the config holds is recovered, the patched one too
        obj = reference.to_object()
        obj["secrets"]["aescbcencryptionsecret"] = aescbc
        reference = secrets.from_object(obj)
        assert bundle.aescbc_secret.reveal() == aescbc
    assert bundle == reference
    secrets.validate(bundle, contracts.get(json.loads(_read(os.path.join(case_dir, "case.json")))["contract"]))


def test_documents_keyed_by_kind_and_name():
    docs = documents.parse(_read(os.path.join(CONFIGS, "v1.14", "v1.14.1", "kitchen-sink", "controlplane.conf")))
    keys = [doc.key for doc in docs]
    assert keys[0] == ("v1alpha1", None)
    assert ("KubeAuthorizerConfig", "node") in keys and ("KubeAuthorizerConfig", "rbac") in keys
    assert ("RegistryMirrorConfig", "docker.io") in keys
    assert len(set(keys)) == len(keys)
    again = documents.parse(documents.emit(docs))
    assert [d.body for d in again] == [d.body for d in docs]


def test_duplicate_document_refused():
    text = "apiVersion: v1alpha1\nkind: HostnameConfig\nauto: stable\n---\napiVersion: v1alpha1\nkind: HostnameConfig\nauto: stable\n"
    with pytest.raises(ConfigError, match="two HostnameConfig documents"):
        documents.parse(text)


def test_recover_from_worker_refused():
    docs = documents.parse(_read(os.path.join(CONFIGS, "v1.13", "v1.13.9", "basic", "worker.conf")))
    with pytest.raises(ConfigError) as err:
        secrets.from_config(docs)
    assert "only a control plane" in str(err.value) and "\n" not in str(err.value)


def test_generate_validate_roundtrip_and_key_types(tmp_path):
    bundle = secrets.generate()
    secrets.validate(bundle, contracts.get("v1.14"))
    obj = bundle.to_object()
    assert sorted(obj) == ["certs", "cluster", "secrets", "trustdinfo"]
    assert sorted(obj["certs"]) == ["etcd", "k8s", "k8saggregator", "k8sserviceaccount", "os"]
    assert list(obj["certs"]["k8sserviceaccount"]) == ["key"]
    labels = dict((name, base64.b64decode(pair["key"]).decode().splitlines()[0]) for name, pair in obj["certs"].items())
    assert labels == {
        "os": "-----BEGIN ED25519 PRIVATE KEY-----", "etcd": "-----BEGIN EC PRIVATE KEY-----",
        "k8s": "-----BEGIN EC PRIVATE KEY-----", "k8saggregator": "-----BEGIN EC PRIVATE KEY-----",
        "k8sserviceaccount": "-----BEGIN RSA PRIVATE KEY-----",
    }
    assert secrets.TOKEN.match(obj["secrets"]["bootstraptoken"]) and secrets.TOKEN.match(obj["trustdinfo"]["token"])
    assert len(base64.b64decode(obj["cluster"]["id"])) == 32
    path = tmp_path / "sub" / "secrets.yaml"
    secrets.write(bundle, str(path))
    assert stat.S_IMODE(os.stat(str(path)).st_mode) == 0o600
    assert secrets.load(str(path)) == bundle
    assert os.listdir(str(tmp_path / "sub")) == ["secrets.yaml"]


def test_bundle_never_printed():
    bundle = secrets.generate()
    key = bundle.key("os")
    for text in (repr(bundle), str(bundle), repr(bundle.cluster_secret), str(bundle.bootstrap_token)):
        assert "PRIVATE" not in text and bundle.cluster_secret.reveal() not in text
    assert "<redacted>" in repr(bundle.trustd_token)
    assert key.startswith("-----BEGIN ED25519 PRIVATE KEY-----")


def test_generated_bundle_renders_every_contract():
    bundle = secrets.generate()
    case = json.loads(_read(os.path.join(CONFIGS, "v1.14", "v1.14.1", "kitchen-sink", "case.json")))
    cluster_spec, machine_spec = config_cases.spec_of_case(case)
    for contract in contracts.SUPPORTED:
        for role in ROLES:
            docs = render.render(bundle, dict(cluster_spec, versionContract=contract), config_cases.for_role(machine_spec, role))
            again = secrets.from_config(docs) if role == "controlplane" else None
            if again is not None:
                assert again == bundle


def test_validate_catches_mismatched_key():
    good = secrets.generate()
    other = secrets.generate()
    obj = good.to_object()
    obj["certs"]["etcd"]["key"] = other.to_object()["certs"]["etcd"]["key"]
    with pytest.raises(ConfigError, match="certs.etcd.key does not belong"):
        secrets.validate(secrets.from_object(obj))
    obj = good.to_object()
    obj["certs"]["os"]["key"] = other.to_object()["certs"]["k8s"]["key"]
    with pytest.raises(ConfigError, match="is ECDSA, expected Ed25519"):
        secrets.validate(secrets.from_object(obj))
    obj = good.to_object()
    obj["secrets"]["bootstraptoken"] = "nope"
    with pytest.raises(ConfigError, match="<6>.<16>"):
        secrets.validate(secrets.from_object(obj))


# ---------------------------------------------------------------------------- (2) renderer


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("case_dir", CASE_DIRS, ids=_id)
def test_render_zero_drift(case_dir, role):
    unused_case, bundle, cluster_spec, machine_spec, live = load_case(case_dir)
    rendered = render.render(bundle, cluster_spec, config_cases.for_role(machine_spec, role))
    result = drift.drift(rendered, live[role], cluster_spec)
    assert result.zero, [d.to_dict() for d in result.differences]
    # Same documents in the same order as the fixture (machinery keeps the file's order).
    assert [d.key for d in rendered] == [d.key for d in live[role]]
    # And the emitted text parses back to the same documents.
    assert drift.drift(documents.parse(documents.emit(rendered)), live[role], cluster_spec).zero


def test_render_hostname_and_defaults():
    bundle = load_case(os.path.join(CONFIGS, "v1.14", "v1.14.1", "basic"))[1]
    cluster_spec = {"name": "c", "endpoint": "https://c:6443", "kubernetesVersion": "v1.37.0", "talosVersion": "v1.14.1",
                    "cni": {"preset": "cilium", "kubeProxy": "replaced"}}
    docs = render.render(bundle, cluster_spec, {"role": "worker", "hostname": "w1"})
    assert documents.find(docs, "HostnameConfig").body == {"apiVersion": "v1alpha1", "kind": "HostnameConfig", "hostname": "w1"}
    assert documents.find(docs, "UnattendedInstallConfig").body["installer"]["image"] == "ghcr.io/siderolabs/installer:v1.14.1"
    cp = render.render(bundle, cluster_spec, {"role": "controlplane"})
    assert documents.find(cp, "KubeFlannelCNIConfig") is None
    assert documents.find(cp, "KubeProxyConfig").body["enabled"] is False


# ---------------------------------------------------------------------------- (3) drift and probing


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("case_dir", CASE_DIRS, ids=_id)
def test_probe_picks_the_fixture_contract(case_dir, role):
    case, bundle, cluster_spec, machine_spec, live = load_case(case_dir)
    machine = config_cases.for_role(machine_spec, role)
    chosen, results = probing.probe(bundle, cluster_spec, machine, live[role], case["talos_version"])
    # v1.12 differs from v1.13 only by an empty machine.network: a config whose machine.network has content (the
    # network cases) reads as both, and the cluster settles the tie (probing.settle)
    assert case["contract"] in probing.ties(chosen, results), dict((k, v.counts()) for k, v in results.items())
    assert results[chosen].zero and results[case["contract"]].zero
    expected = [c.name for c in contracts.probe_order(case["talos_version"])]
    if machine.get("kubelet", {}).get("extraMounts"):
        expected = [name for name in expected if name != "v1.14"]  # v1.14 has no kubelet extra mounts: not rendered at
    assert sorted(results) == sorted(expected)
    assert min(expected) == "v1.12"


def test_upgraded_config_at_v114_is_class_c():
    case, bundle, cluster_spec, machine_spec, live = load_case(os.path.join(CONFIGS, "upgraded", "v1.12.7-to-v1.14.1", "basic"))
    chosen, results = probing.probe(bundle, cluster_spec, config_cases.for_role(machine_spec, "controlplane"), live["controlplane"], "v1.14.1")
    assert chosen == "v1.12"
    assert results["v1.14"].counts()["C"] > 20
    assert results["v1.14"].patch() is None


def test_wrong_bundle_shows_secret_drift_and_no_patch():
    unused_case, unused_bundle, cluster_spec, machine_spec, live = load_case(os.path.join(CONFIGS, "v1.14", "v1.14.1", "basic"))
    wrong = load_case(os.path.join(CONFIGS, "v1.14", "v1.14.1", "cni-none"))[1]
    for role in ROLES:
        result = drift.drift(render.render(wrong, cluster_spec, config_cases.for_role(machine_spec, role)), live[role], cluster_spec)
        assert result.secret_drift and result.blocked
        assert result.patch() is None
        secret_paths = [d.path for d in result.of_class("C") if d.secret]
        assert "v1alpha1:machine.token" in secret_paths and "DiscoveryIdentityConfig:clusterSecret" in secret_paths
        assert [g["hint"] for g in result.hints()] == [drift.HINT_SECRETS]
        dumped = json.dumps(result.to_dict())
        assert wrong.trustd_token.reveal() not in dumped and "PRIVATE KEY" not in dumped
    assert secrets.same_cluster(wrong, live["controlplane"]).startswith("the secrets bundle belongs to another cluster")


@pytest.mark.parametrize("contract", ["v1.12", "v1.13", "v1.14"])
def test_registry_mirrors_both_forms_are_not_drift(contract):
    gen = "v1.14.1"
    unused_case, bundle, cluster_spec, machine_spec, live = load_case(os.path.join(CONFIGS, contract, gen, "mirrors-override"))
    docs = [d for d in live["worker"] if d.kind != "RegistryMirrorConfig"]
    legacy_doc = docs[0]
    body = json.loads(json.dumps(legacy_doc.body))
    # as machinery writes them: a flag that is off is left out (overridePath and skipFallback are *bool:
    # an explicit false is a value of its own)
    body["machine"]["registries"] = {"mirrors": dict(
        (r["host"], dict([("endpoints", r["endpoints"])] + [(flag, True) for flag in ("overridePath", "skipFallback") if r[flag]]))
        for r in cluster_spec["registries"])}
    docs[0] = documents.legacy(body)
    rendered = render.render(bundle, cluster_spec, config_cases.for_role(machine_spec, "worker"))
    assert drift.drift(rendered, docs, cluster_spec).zero
    body["machine"]["registries"]["mirrors"]["quay.io"]["skipFallback"] = False
    result = drift.drift(rendered, docs, cluster_spec)
    assert [(d.path, d.cls, d.rendered, d.live) for d in result.differences] == [("registries/quay.io:skipFallback", "A", True, False)]
    del body["machine"]["registries"]["mirrors"]["quay.io"]["skipFallback"]
    result = drift.drift(rendered, docs, cluster_spec)
    assert [(d.path, d.cls, d.rendered, d.live) for d in result.differences] == [("registries/quay.io:skipFallback", "A", True, None)]


def _classes(result):
    return dict((d.path, d.cls) for d in result.differences)


def test_managed_cilium_items_are_class_b():
    unused_case, bundle, cluster_spec, machine_spec, live = load_case(os.path.join(CONFIGS, "v1.14", "v1.14.1", "basic"))
    assert cluster_spec["cni"]["preset"] == "unmanaged"
    managed = dict(cluster_spec, cni={"preset": "cilium", "kubeProxy": "replaced"})
    result = drift.drift(render.render(bundle, managed, config_cases.for_role(machine_spec, "controlplane")), live["controlplane"], managed)
    classes = _classes(result)
    assert classes["KubeProxyConfig:enabled"] == "B"
    assert classes["KubeFlannelCNIConfig:backendType"] == "B"
    assert not result.blocked and result.patch()


def test_unmanaged_never_class_b():
    for contract, gen in (("v1.14", "v1.14.1"), ("v1.12", "v1.12.7")):
        unused_case, bundle, cluster_spec, machine_spec, live = load_case(os.path.join(CONFIGS, contract, gen, "kitchen-sink"))
        assert cluster_spec["cni"]["preset"] == "unmanaged"  # KubePrism on 7446: not an Ichor-managed Cilium
        plain = dict(cluster_spec, inlineManifests=[], cni={"preset": "unmanaged", "unmanaged": {"talosCNI": "default"}, "kubeProxy": "enabled"})
        result = drift.drift(render.render(bundle, plain, config_cases.for_role(machine_spec, "controlplane")), live["controlplane"], plain)
        assert not result.of_class("B")
        classes = _classes(result)
        inline = [p for p in classes if "nlineManifest" in p]
        assert inline and all(classes[p] == "C" for p in inline)
        assert result.blocked and result.patch() is None


def test_managed_cilium_inline_entry_is_class_b_other_inline_is_c():
    unused_case, bundle, cluster_spec, machine_spec, live = load_case(os.path.join(CONFIGS, "v1.13", "v1.13.9", "kitchen-sink"))
    managed = dict(cluster_spec, inlineManifests=[], cni={"preset": "cilium", "kubeProxy": "replaced"},
                   kubePrism={"enabled": True, "port": 7446})
    result = drift.drift(render.render(bundle, managed, config_cases.for_role(machine_spec, "controlplane")), live["controlplane"], managed)
    classes = _classes(result)
    assert classes["v1alpha1:cluster.inlineManifests[cilium].contents"] == "B"
    assert classes["v1alpha1:cluster.inlineManifests[platform-extras].contents"] == "C"
    hints = result.hints()
    assert [g["hint"] for g in hints] == [drift.HINT_INLINE]
    assert len(hints[0]["paths"]) == 2


def test_class_a_mapped_fields():
    unused_case, bundle, cluster_spec, machine_spec, live = load_case(os.path.join(CONFIGS, "v1.14", "v1.14.1", "kitchen-sink"))
    bare = dict(cluster_spec, registries=[], certSANs=[], sysctls={}, kernelModules=[], network={})
    result = drift.drift(render.render(bundle, bare, {"role": "worker"}), live["worker"], bare)
    assert not result.of_class("C"), [d.to_dict() for d in result.of_class("C")]
    hints = set(d.hint for d in result.of_class("A"))
    assert {drift.HINT_INSTALL, drift.HINT_REGISTRIES, drift.HINT_CERT_SANS, "spec.sysctls", "spec.kernelModules", "spec.network"} <= hints


def test_unrepresentable_disk_selector_is_class_c():
    unused_case, bundle, cluster_spec, machine_spec, live = load_case(os.path.join(CONFIGS, "v1.14", "v1.14.1", "basic"))
    docs = list(live["worker"])
    index = [d.kind for d in docs].index("UnattendedInstallConfig")
    body = json.loads(json.dumps(docs[index].body))
    body["provisioning"]["diskSelector"]["match"] = "disk.size > 100u * GB"
    docs[index] = documents.Document("UnattendedInstallConfig", None, body)
    result = drift.drift(render.render(bundle, cluster_spec, config_cases.for_role(machine_spec, "worker")), docs, cluster_spec)
    assert _classes(result) == {"UnattendedInstallConfig:provisioning.diskSelector.match": "C"}


# ---------------------------------------------------------------------------- bad input: one line each


def test_bad_input_one_line_each(tmp_path):
    corrupt = tmp_path / "corrupt.yaml"
    corrupt.write_text("cluster: [unclosed\n")
    cases = [
        lambda: secrets.load(str(corrupt)),
        lambda: secrets.parse("cluster:\n  id: x\n"),
        lambda: documents.parse("machine: [\n  - : :\n"),
        lambda: documents.parse("just a string"),
        lambda: contracts.get("v1.11"),
        lambda: contracts.get("v1.15"),
        lambda: contracts.probe_order("v1.11.5"),
        lambda: spec.cluster({"name": "x"}),
    ]
    for call in cases:
        with pytest.raises(ConfigError) as err:
            call()
        message = str(err.value)
        assert message and "\n" not in message and "Traceback" not in message
    assert "older than the oldest supported (v1.12)" in str(pytest.raises(ConfigError, contracts.get, "v1.11").value)
    assert "newer than the newest supported (v1.14)" in str(pytest.raises(ConfigError, contracts.get, "v1.15.0").value)
    assert os.listdir(str(tmp_path)) == ["corrupt.yaml"]


def test_probe_order():
    assert [c.name for c in contracts.probe_order("v1.14.3")] == ["v1.14", "v1.13", "v1.12"]
    assert [c.name for c in contracts.probe_order("v1.13.0")] == ["v1.13", "v1.12"]
    assert [c.name for c in contracts.probe_order("v1.16.0")] == ["v1.14", "v1.13", "v1.12"]


def test_mask_docs_hides_secrets():
    live = load_case(os.path.join(CONFIGS, "v1.14", "v1.14.1", "kitchen-sink"))[4]["controlplane"]
    text = documents.emit(drift.mask_docs(live))
    assert "PRIVATE KEY" not in text
    bundle = load_case(os.path.join(CONFIGS, "v1.14", "v1.14.1", "kitchen-sink"))[1]
    for value in (bundle.trustd_token, bundle.bootstrap_token, bundle.cluster_secret, bundle.secretbox_secret):
        assert value.reveal() not in text


def test_module_utils_import_without_yaml_and_cryptography():
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('yaml', 'cryptography'):\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from tests import collection_path\n"
        "collection_path.ensure()\n"
        "from ansible_collections.maesh.ichor.plugins.module_utils.config import contracts, documents, drift, render, secrets, spec, yamlio\n"
        "assert not yamlio.HAS_YAML and not secrets.HAS_CRYPTOGRAPHY\n"
        "try:\n"
        "    documents.parse('a: 1')\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ConfigError PyYAML is required")


# ---------------------------------------------------------------------------- class A mapping on adoption

UNREPRESENTABLE = {  # case -> class C hint expected after adoption (controlplane; workers only for cni-custom)
    "cni-custom": drift.HINT_CUSTOM_CNI,
    "inline-other": drift.HINT_INLINE,
    "kitchen-sink": drift.HINT_INLINE,  # KubePrism on 7446: unmanaged, so even the Cilium entry is class C
}


@pytest.mark.parametrize("case_dir", CASE_DIRS, ids=_id)
def test_adoption_maps_class_a_and_probes_the_contract(case_dir):
    case, bundle, unused_cluster, unused_machine, live = load_case(case_dir)
    adopted = adopt.read([(role, live[role], case["talos_version"]) for role in ROLES])
    assert adopted.unmapped == []
    for role, machine_spec in zip(ROLES, adopted.machines):
        chosen, results = probing.probe(bundle, adopted.cluster, machine_spec, live[role], case["talos_version"])
        assert case["contract"] in probing.ties(chosen, results)  # v1.12 and v1.13 alike (see the probe test)
        result = results[case["contract"]]
        assert not result.of_class("A") and not result.of_class("B")
        expected = UNREPRESENTABLE.get(case["name"])
        # Workers carry the CNI only in the legacy form (cluster.network.cni); v1.14 puts it on control planes.
        if expected and (role == "controlplane" or (case["name"] == "cni-custom" and case["contract"] != "v1.14")):
            assert [group["hint"] for group in result.hints()] == [expected]
        else:
            assert result.zero, [d.to_dict() for d in result.differences]


def test_adoption_mirrors_and_sans_only_when_all_agree():
    unused_case, unused_bundle, unused_cluster, unused_machine, live = load_case(os.path.join(CONFIGS, "v1.14", "v1.14.1", "kitchen-sink"))
    one = adopt.from_config(live["worker"], "v1.14.1")[0]
    two = dict(one, registries=one["registries"][:1], certSANs=["other"])
    merged = adopt.merge([one, two])
    assert merged["registries"] == [] and merged["certSANs"] == []
    assert adopt.merge([one, dict(one)])["registries"] == one["registries"]


def test_disagreeing_mirrors_are_class_c_and_credentials_never_printed():
    unused_case, bundle, unused_cluster, unused_machine, live = load_case(os.path.join(CONFIGS, "v1.13", "v1.13.9", "mirrors-plain"))
    one = adopt.from_config(live["worker"], "v1.13.9")
    two = dict(one[0], registries=one[0]["registries"][:1])
    fields = adopt.unmapped([one[0], two])
    assert fields == ["registries"]
    merged = adopt.merge([one[0], two])
    result = drift.drift(render.render(bundle, merged, one[1], "v1.13"), live["worker"], merged, unmapped=fields)
    assert set(d.cls for d in result.differences) == {"C"}
    assert [g["hint"] for g in result.hints()] == [drift.HINT_DISAGREE % "spec.registries"]
    # registry credentials in the legacy form: class C with the authSecretRef hint, value never printed
    docs = list(live["worker"])
    body = json.loads(json.dumps(docs[0].body))
    body["machine"]["registries"] = {"config": {"ghcr.io": {"auth": {"username": "bob", "password": "hunter2-secret"}}}}
    docs[0] = documents.legacy(body)
    cluster_spec = adopt.from_config(live["worker"], "v1.13.9")[0]
    result = drift.drift(render.render(bundle, cluster_spec, one[1], "v1.13"), docs, cluster_spec)
    assert [g["hint"] for g in result.hints()] == [drift.HINT_REGISTRY_AUTH]
    text = json.dumps(result.to_dict()) + "\n".join(result.lines()) + documents.emit(drift.mask_docs(docs))
    assert "hunter2-secret" not in text


# ---------------------------------------------------------------------------- issue 11 §2: no field lost silently


def _extra(contract, gen, name):
    return load_case(os.path.join(CONFIGS, contract, gen, name))


def _paths(result, cls=None):
    return [d.path for d in result.differences if cls is None or d.cls == cls]


@pytest.mark.parametrize("contract,gen", [("v1.12", "v1.12.7"), ("v1.13", "v1.13.9"), ("v1.14", "v1.14.1")])
def test_empty_label_value_is_drift(contract, gen):
    """node-role.kubernetes.io/worker: "" was dropped by flattening; a worker apply would lose the label. It is a
    nodeLabels entry now: drift of class A without it in the spec, read by adoption and rendered back with it."""
    unused_case, bundle, cluster_spec, machine_spec, live = _extra(contract, gen, "worker-label-empty")
    result = drift.drift(render.render(bundle, cluster_spec, config_cases.for_role(machine_spec, "worker")), live["worker"], cluster_spec)
    path = ("KubeNodeConfig:labels." if contract == "v1.14" else "v1alpha1:machine.nodeLabels.") + "node-role.kubernetes.io/worker"
    assert [(d.path, d.cls, d.live, d.change) for d in result.differences] == [(path, "A", "", "remove")]
    worker = adopt.from_config(live["worker"], "v1.14.1")[1]
    assert worker["nodeLabels"] == {"node-role.kubernetes.io/worker": ""}
    assert drift.drift(render.render(bundle, cluster_spec, dict(config_cases.for_role(machine_spec, "worker"), nodeLabels=worker["nodeLabels"])),
                       live["worker"], cluster_spec).zero
    assert drift.drift(render.render(bundle, cluster_spec, config_cases.for_role(machine_spec, "controlplane")), live["controlplane"], cluster_spec).zero


@pytest.mark.parametrize("name,slots", [
    ("luks-volume", ["VolumeConfig/STATE:encryption.keys[0].nodeID", "VolumeConfig/STATE:encryption.keys[1].tpm"]),
    ("luks-legacy", ["v1alpha1:machine.systemDiskEncryption.state.keys[0].nodeID", "v1alpha1:machine.systemDiskEncryption.ephemeral.keys[1].tpm"]),
])
def test_empty_key_slots_are_drift_and_passphrases_masked(name, slots):
    """nodeID: {} and tpm: {} key slots were dropped; the static passphrase was printed (issue 12)."""
    for contract, gen in (("v1.12", "v1.12.7"), ("v1.14", "v1.14.1")):
        unused_case, bundle, cluster_spec, machine_spec, live = _extra(contract, gen, name)
        for role in ROLES:
            result = drift.drift(render.render(bundle, cluster_spec, config_cases.for_role(machine_spec, role)), live[role], cluster_spec)
            assert set(slots) <= set(_paths(result, "C")), _paths(result)
            assert all(d.live == {} for d in result.differences if d.path in slots)
            passphrase = [d.live for d in result.differences if d.path.endswith("static.passphrase")][0]
            assert len(passphrase) == 24
            shown = json.dumps(result.to_dict()) + "\n".join(result.lines()) + documents.emit(drift.mask_docs(live[role]))
            assert passphrase not in shown and "<redacted>" in shown


def test_placeholders_machinery_drops_are_not_drift():
    """talosctl's commented files carry empty placeholders machinery drops; those alone are not drift."""
    unused_case, bundle, cluster_spec, machine_spec, live = load_case(os.path.join(CONFIGS, "v1.12", "v1.12.7", "basic"))
    body = json.loads(json.dumps(live["controlplane"][0].body))
    assert body["cluster"]["extraManifests"] == [] and body["cluster"]["inlineManifests"] == []
    rendered = render.render(bundle, cluster_spec, config_cases.for_role(machine_spec, "controlplane"))
    assert drift.drift(rendered, live["controlplane"], cluster_spec).zero
    body["cluster"]["extraManifests"] = ["https://example.com/x.yaml"]
    docs = [documents.legacy(body)] + live["controlplane"][1:]
    assert _paths(drift.drift(rendered, docs, cluster_spec), "C") == ["v1alpha1:cluster.extraManifests"]


@pytest.mark.parametrize("contract,gen", [("v1.12", "v1.12.7"), ("v1.13", "v1.14.1"), ("v1.14", "v1.14.1")])
def test_images_from_another_registry_are_class_c(contract, gen):
    """An air-gapped cluster's images at the same version were class A (spec.kubernetesVersion): the apply
    would have moved it to the public registries."""
    case, bundle, cluster_spec, machine_spec, live = _extra(contract, gen, "images-air-gapped")
    for role, count in (("controlplane", 5), ("worker", 1)):
        result = drift.drift(render.render(bundle, cluster_spec, config_cases.for_role(machine_spec, role)), live[role], cluster_spec)
        assert len(result.differences) == count and result.blocked
        assert [g["hint"] for g in result.hints()] == [drift.HINT_IMAGE]
        assert all(d.live.startswith("registry.corp.example:5000/") for d in result.differences)
    # adoption reads the version from the tag; the registry stays class C
    adopted = adopt.read([(role, live[role], case["talos_version"]) for role in ROLES])
    chosen, results = probing.probe(bundle, adopted.cluster, adopted.machines[1], live["worker"], case["talos_version"])
    assert chosen == contract and [g["hint"] for g in results[chosen].hints()] == [drift.HINT_IMAGE]
    # the tag alone differing (forward) is still class A, a digest pin is not
    plain = load_case(os.path.join(CONFIGS, contract, gen, "basic"))
    major, minor_, patch = release.parse(plain[2]["kubernetesVersion"])
    newer = dict(plain[2], kubernetesVersion="%d.%d.%d" % (major, minor_, patch + 1))
    result = drift.drift(render.render(plain[1], newer, dict(plain[3], role="worker")), plain[4]["worker"], newer)
    assert [(d.cls, d.hint) for d in result.differences] == [("A", "spec.kubernetesVersion")]
    docs = list(plain[4]["worker"])
    kubelet = documents.find(docs, "KubeletConfig")
    if kubelet is not None:
        pinned = dict(kubelet.body, image=kubelet.body["image"] + "@sha256:" + "a" * 64)
        docs[docs.index(kubelet)] = documents.Document("KubeletConfig", None, pinned)
        result = drift.drift(render.render(plain[1], plain[2], dict(plain[3], role="worker")), docs, plain[2])
        assert [(d.cls, d.hint) for d in result.differences] == [("C", drift.HINT_IMAGE)]


@pytest.mark.parametrize("contract,gen", [("v1.12", "v1.12.7"), ("v1.14", "v1.14.1")])
def test_mirror_with_mixed_override_path_is_class_c(contract, gen):
    """The class A mapping skips such a host; it was classed A ("remove") and unblocked."""
    case, bundle, cluster_spec, machine_spec, live = _extra(contract, gen, "mirrors-mixed")
    adopted = adopt.read([(role, live[role], case["talos_version"]) for role in ROLES])
    assert adopted.cluster["registries"] == []
    for role, machine in zip(ROLES, adopted.machines):
        chosen, results = probing.probe(bundle, adopted.cluster, machine, live[role], case["talos_version"])
        result = results[chosen]
        assert _paths(result) == ["registries/docker.io:endpoints", "registries/docker.io:overridePath"]
        assert [g["hint"] for g in result.hints()] == [drift.HINT_MIRROR_MIXED] and result.patch() is None


def test_mirror_fold_keeps_what_it_does_not_know():
    docs = [documents.typed("RegistryMirrorConfig", {"endpoints": [{"url": "https://m", "newField": "x"}], "other": 1}, name="h:5000")]
    flat = drift.normalise(docs)
    assert flat["registries/h:5000:endpoints[0].newField"] == "x" and flat["registries/h:5000:other"] == 1
    rendered = [documents.typed("RegistryMirrorConfig", {"endpoints": [{"url": "https://m"}]}, name="h:5000")]
    spec_ = {"name": "c", "endpoint": "https://c:6443", "kubernetesVersion": "1.35.0", "talosVersion": "v1.12.7",
             "cni": {"preset": "unmanaged"}}
    result = drift.drift(rendered, docs, spec_)
    assert [(d.path, d.cls) for d in result.differences] == [
        ("registries/h:5000:endpoints[0].newField", "C"), ("registries/h:5000:other", "C")]


@pytest.mark.parametrize("contract,gen", [("v1.13", "v1.13.9"), ("v1.14", "v1.14.1")])
def test_adoption_does_not_depend_on_machine_order(contract, gen):
    """A contract v1.14 worker carries no CNI: read first, it made the control plane's flannel class A "remove"."""
    case, bundle, unused_cluster, unused_machine, live = load_case(os.path.join(CONFIGS, contract, gen, "kitchen-sink"))
    forward = adopt.read([(role, live[role], case["talos_version"]) for role in ROLES])
    backward = adopt.read([(role, live[role], case["talos_version"]) for role in reversed(ROLES)])
    assert forward.cluster == backward.cluster and forward.unmapped == backward.unmapped == []
    assert forward.machines == list(reversed(backward.machines))
    basic = load_case(os.path.join(CONFIGS, contract, gen, "basic"))
    adopted = adopt.read([("w", basic[4]["worker"], case["talos_version"]), ("cp", basic[4]["controlplane"], case["talos_version"])])
    assert adopted.cluster["cni"]["unmanaged"]["talosCNI"] == "default"
    chosen, results = probing.probe(basic[1], adopted.cluster, adopted.machines[1], basic[4]["controlplane"], case["talos_version"])
    assert results[chosen].zero


def test_adoption_compares_every_field_across_machines():
    case, bundle, unused_cluster, unused_machine, live = load_case(os.path.join(CONFIGS, "v1.14", "v1.14.1", "sysctls-kmods"))
    plain = load_case(os.path.join(CONFIGS, "v1.14", "v1.14.1", "basic"))[4]["worker"]
    # a second worker of the same cluster without the sysctls and kernel modules
    other = [d for d in live["worker"] if d.kind not in ("SysctlConfig", "KernelModuleConfig")]
    assert len(other) < len(live["worker"]) and plain
    configs = [("cp", live["controlplane"], "v1.14.1"), ("w1", live["worker"], "v1.14.1"), ("w2", other, "v1.14.1")]
    adopted = adopt.read(configs)
    assert adopted.unmapped == ["sysctls", "kernelModules"]
    assert adopted.unmapped_besides({"sysctls": {}}) == ["kernelModules"] and adopted.unmapped_besides(None) == adopted.unmapped
    assert adopt.read(list(reversed(configs))).cluster == adopted.cluster
    # the value taken does not depend on the order; a machine stating another one is blocked, by field
    blocked = {}
    for (name, docs, unused_ver), machine in zip(configs, adopted.machines):
        chosen, results = probing.probe(bundle, adopted.cluster, machine, docs, "v1.14.1", adopted.unmapped)
        blocked[name] = sorted(g["hint"] for g in results[chosen].hints())
    assert blocked == {"cp": [], "w1": [], "w2": [drift.HINT_DISAGREE % "spec.kernelModules", drift.HINT_DISAGREE % "spec.sysctls"]}


def test_split_sans_are_class_c():
    case, bundle, cluster_spec, machine_spec, live = load_case(os.path.join(CONFIGS, "v1.13", "v1.13.9", "cert-sans"))
    body = json.loads(json.dumps(live["controlplane"][0].body))
    body["cluster"]["apiServer"]["certSANs"] = ["only-the-api.example.com"]
    docs = [documents.legacy(body)] + live["controlplane"][1:]
    adopted = adopt.read([("cp", docs, "v1.13.9")])
    chosen, results = probing.probe(bundle, adopted.cluster, adopted.machines[0], docs, "v1.13.9")
    assert set(g["hint"] for g in results[chosen].hints()) == {drift.HINT_SANS_SPLIT}


def test_tie_is_reported_and_settled_per_cluster():
    """v1.12 and v1.13 configs whose machine.network has content probe alike: decided once for the cluster."""
    case, bundle, unused_cluster, unused_machine, live = load_case(os.path.join(CONFIGS, "upgraded", "v1.12.7-to-v1.14.1", "network-content"))
    adopted = adopt.read([(role, live[role], "v1.14.1") for role in ROLES])
    probed = {}
    for role, machine in zip(ROLES, adopted.machines):
        probed[role] = probing.probe(bundle, adopted.cluster, machine, live[role], "v1.14.1")
        assert probing.ties(*probed[role]) == ["v1.13", "v1.12"]
    chosen, lines = probing.settle(probed)
    assert chosen == {"controlplane": "v1.13", "worker": "v1.13"}
    assert lines == ["contract tie: the configs of controlplane, worker read as v1.12 and v1.13 alike (v1.12 differs from v1.13 only by "
                     "an empty machine.network, which these fill); all taken as v1.13, the newest contract all of them fit "
                     "(no other machine tells)"]
    # one machine of the cluster tells: its Talos (v1.12.7) leaves only v1.12, or its config has machine.network: {}
    probed["old-cp"] = probing.probe(bundle, adopted.cluster, adopted.machines[0], live["controlplane"], "v1.12.7")
    chosen, lines = probing.settle(probed)
    assert chosen == {"controlplane": "v1.12", "worker": "v1.12", "old-cp": "v1.12"}
    assert lines[0].endswith("all taken as v1.12, as old-cp tells (config or Talos version)")
    plain = load_case(os.path.join(CONFIGS, "upgraded", "v1.12.7-to-v1.14.1", "basic"))
    probed = {"w": probed["worker"], "plain": probing.probe(plain[1], plain[2], dict(plain[3], role="worker"), plain[4]["worker"], "v1.14.1")}
    assert probed["plain"][0] == "v1.12"
    assert probing.settle(probed)[0] == {"w": "v1.12", "plain": "v1.12"}
    # nothing tied: nothing to say
    assert probing.settle({"plain": probed["plain"]}) == ({"plain": "v1.12"}, [])


def test_yaml_errors_never_quote_the_document():
    """A YAML error quoted the offending bytes, which can be private key material (issue 12)."""
    key = "MC4CAQAwBQYDK2VwBCIEIHx0bmFkc2Zqa2xhc2RqZmtsYXNqZGZrbGFzZGpma2xq"
    passphrase = "correct-horse-battery-staple"  # a LUKS passphrase: no redaction pattern knows it
    broken = [
        "machine:\n  ca:\n    key: %s\n  token: [%s\n" % (key, key),
        "machine:\n  ca:\n    key: !<tag:%s> x\n" % key,
        "machine: {ca: {key: \"%s\\q\"}}\n" % key,
        "machine:\n  ca: *%s\n" % key,
        "machine:\n\tca: %s\n" % key,
        "a: 1\n" + "[" * 5000 + key,
        ("machine:\n  key: %s\x00\n" % key),
        "machine:\n  systemDiskEncryption: !<tag:%s> {}\n" % passphrase,
        "machine: {passphrase: \"%s\\q\"}\n" % passphrase,
    ]
    messages = []
    for text in broken:
        with pytest.raises(ConfigError) as err:
            documents.parse(text)
        messages.append(str(err.value))
    assert not [m for m in messages if key[:12] in m or "tag:" in m or "horse" in m], messages
    with pytest.raises(ConfigError) as err:  # was a UnicodeDecodeError traceback
        documents.parse(("machine:\n  key: %s\n" % key).encode() + b"\xff\xfe")
    messages.append(str(err.value))
    for message in messages:
        assert message.startswith("the machine config is not valid YAML: ") and "\n" not in message
        assert re.search(r"(line \d+, column \d+|character \d+|byte \d+|nesting too deep)", message), message
    with pytest.raises(ConfigError) as err:
        documents.parse("apiVersion: %s\nkind: X\n" % key)
    assert key not in str(err.value)


def test_environment_values_are_masked_their_names_shown():
    """machine.env is the user's (Talos documents proxies there, and a proxy URL carries a password): masked
    in the drift report and --diff, though machinery's RedactSecrets leaves it; the variable's name stays visible."""
    unused_case, bundle, cluster_spec, machine_spec, live = load_case(os.path.join(CONFIGS, "v1.12", "v1.12.7", "basic"))
    # no credential-like name and no URL password: only the environment rule can mask it
    marker = "ENV-MARKER-7f3a"
    body = json.loads(json.dumps(live["controlplane"][0].body))
    body["machine"]["env"] = {"https_proxy": marker}
    body["cluster"].setdefault("apiServer", {})["env"] = {"HTTP_PROXY": marker}
    docs = [documents.legacy(body)] + live["controlplane"][1:]
    rendered = render.render(bundle, cluster_spec, config_cases.for_role(machine_spec, "controlplane"))
    result = drift.drift(rendered, docs, cluster_spec)
    paths = [d.path for d in result.differences]
    assert "v1alpha1:machine.env.https_proxy" in paths and "v1alpha1:cluster.apiServer.env.HTTP_PROXY" in paths
    shown = json.dumps(result.to_dict()) + "\n".join(result.lines()) + documents.emit(drift.mask_docs(docs))
    assert "ENV-MARKER-7f3a" not in shown and "https_proxy" in shown and "<redacted>" in shown


# CNI-relevant paths: the CNI selection, flannel's document, kube-proxy and KubePrism, in either form.
_CNI_RELEVANT = re.compile(r"^(v1alpha1:cluster\.network\.cni|v1alpha1:cluster\.proxy|v1alpha1:machine\.features\.kubePrism"
                           r"|KubeFlannelCNIConfig|KubeProxyConfig|KubePrismConfig)")


# a custom CNI with manifest URLs is class C (seed 0103 1.1), never rendered: every other case
RENDERED_CNI_CASES = [d for d in ALL_CASE_DIRS if json.loads(_read(os.path.join(d, "case.json")))["cni"]["name"] != "custom"]


@pytest.mark.parametrize("case_dir", RENDERED_CNI_CASES, ids=_id)
def test_an_unmanaged_render_leaves_every_cni_relevant_path_as_the_node_has_it(case_dir):
    """Seed 0103 1.1a: adopted with its CNI unmanaged, a cluster's renders leave the CNI selection, flannel's document,
    kube-proxy and KubePrism byte for byte as the live config states them, at the contract it was made for."""
    case, bundle, unused_cluster, unused_machine, live = load_case(case_dir)
    adopted = adopt.read([(role, live[role], case["talos_version"]) for role in ROLES], preset="unmanaged")
    cluster_spec = dict(adopted.cluster, versionContract=case["contract"], inlineManifests=[])
    for role, machine_spec in zip(ROLES, adopted.machines):
        rendered = render.render(bundle, cluster_spec, machine_spec, case["contract"])
        flat_live, flat_rendered = {}, {}
        for docs, flat in ((live[role], flat_live), (rendered, flat_rendered)):
            for doc in docs:
                flat.update(documents.paths(doc))
        for path in sorted(set(flat_live) | set(flat_rendered)):
            # the kube-proxy image is Kubernetes', not the CNI's (another registry's is class C: images-air-gapped)
            if _CNI_RELEVANT.match(path) and not path.endswith(".image") and path != "KubeProxyConfig:image":
                assert json.dumps(flat_rendered.get(path)) == json.dumps(flat_live.get(path)), (role, path)


GENERATORS = [("v1.12", "v1.12.7"), ("v1.12", "v1.14.1"), ("v1.13", "v1.13.9"), ("v1.13", "v1.14.1"), ("v1.14", "v1.14.1")]


@pytest.mark.parametrize("contract,gen", GENERATORS)
def test_images_pinned_by_digest_are_read_by_their_tag_and_the_digest_reported(contract, gen):
    """Issue 26 §4: machinery accepts name:tag@sha256:...; adoption failed with "the live config does not state the
    cluster name, endpoint and kubelet image". The version is the tag's; the digest is compared and reported (class C:
    no spec field holds it), never dropped by an apply."""
    case, bundle, unused_spec, unused_machine, live = _extra(contract, gen, "images-digest")
    adopted = adopt.read([(role, live[role], case["talos_version"]) for role in ROLES])
    assert adopted.cluster["kubernetesVersion"] == case["kubernetes_version"]
    for index, role in enumerate(ROLES):
        chosen, results = probing.probe(bundle, adopted.cluster, adopted.machines[index], live[role], case["talos_version"])
        found = results[chosen]
        images_seen = [d for d in found.differences if d.path.endswith("image")]
        assert images_seen and all(d.cls == "C" and "@sha256:" in d.to_dict()["live"] for d in images_seen)
        assert all(d.to_dict()["rendered"] == d.live.split("@")[0] for d in images_seen)  # same name and tag
        assert found.blocked


@pytest.mark.parametrize("contract,gen", GENERATORS)
def test_a_kubernetes_upgrade_stopped_halfway_is_never_a_silent_minor_downgrade(contract, gen):
    """Issue 26 §2: the control-plane components a minor ahead of the kubelets. Read at the kubelets' version, the
    API server's image was planned a minor back as class A (applied without consent). Every component image a minor
    behind the one it runs is class C, at any spec."""
    case, bundle, unused_spec, unused_machine, live = _extra(contract, gen, "k8s-upgrade-halfway")
    adopted = adopt.read([(role, live[role], case["talos_version"]) for role in ROLES])
    running = images.component_versions(live["controlplane"])
    assert release.parse(running["kube-apiserver"])[:2] > release.parse(running["kubelet"])[:2]
    assert adopted.cluster["kubernetesVersion"] == running["kubelet"].lstrip("v")
    chosen, results = probing.probe(bundle, adopted.cluster, adopted.machines[0], live["controlplane"], case["talos_version"])
    back = [d for d in results[chosen].differences if d.path.endswith("image")]
    assert len(back) == 4 and all((d.cls, d.hint) == ("C", drift.HINT_DOWNGRADE) for d in back)  # apiserver, cm, sched, proxy
    assert not [d for d in results[chosen].differences if d.cls == "A" and d.path.endswith("image")]
    # the kubelets' minor renders the kubelet as it is; the control plane's minor would move the kubelets forward
    ahead = dict(adopted.cluster, kubernetesVersion=running["kube-apiserver"].lstrip("v"), versionContract=chosen)
    forward = drift.drift(render.render(bundle, ahead, dict(adopted.machines[0], role="controlplane"), chosen),
                          live["controlplane"], ahead, chosen)
    assert [d.cls for d in forward.differences if d.path.endswith("image")] == ["A"]


def test_machines_that_disagree_on_a_registry_mirror_map_none():
    """Issue 26 §2: where machines disagree on a mirror, nothing is mapped (the control planes' was)."""
    plain = load_case(os.path.join(CONFIGS, "v1.14", "v1.14.1", "mirrors-plain"))
    other = load_case(os.path.join(CONFIGS, "v1.14", "v1.14.1", "basic"))
    configs = [("controlplane", plain[4]["controlplane"], "v1.14.1"), ("worker", other[4]["worker"], "v1.14.1")]
    adopted = adopt.read(configs)
    assert "registries" in adopted.unmapped and adopted.cluster["registries"] == []
    assert adopt.read(list(reversed(configs))).cluster == adopted.cluster
