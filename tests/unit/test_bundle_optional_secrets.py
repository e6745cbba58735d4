"""Every optional secret of machinery's secrets bundle is recovered and rendered back (issue 42 §3).

tests/fixtures/bundles/<contract>/<variant>/ holds bundles machinery made (tests/configgen ``bundles``) with each
optional secret present or absent: the Secrets encryption keys (secretbox only, aescbc only as clusters made before
Talos 1.3 have it, both) and the service account key (RSA, or ECDSA as before Talos 1.7), with the configs
``talosctl gen config --with-secrets`` makes from them at each contract. The property, over every variant and
contract: recover the bundle from the control plane's config -> it is machinery's bundle file -> render both roles ->
zero drift. The same property runs on freshly generated bundles with machinery as the judge in
tests/integration/test_configgen.py.

Regenerate: ``tests/configgen/build.sh``, then ``configgen-<v> bundles --contract <v> --out tests/fixtures/bundles/<v>``
with each contract's own binary, files made 0644.
"""

import glob
import json
import os
import random

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.common.redact import REDACTED
from ansible_collections.maesh.ichor.plugins.module_utils.config import documents, drift, render, secret_paths, secrets
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from tests import config_cases

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUNDLES = os.path.join(REPO, "tests", "fixtures", "bundles")
VARIANT_DIRS = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(BUNDLES, "*", "*", "variant.json")))
ROLES = ("controlplane", "worker")
AESCBC_PATH = "v1alpha1:cluster.aescbcEncryptionSecret"


def _id(variant_dir):
    return os.path.relpath(variant_dir, BUNDLES)


def _read(path):
    with open(path) as handle:
        return handle.read()


def load(variant_dir):
    """(variant, machinery's bundle file parsed, {role: live docs}, cluster spec, machine spec)."""
    variant = json.loads(_read(os.path.join(variant_dir, "variant.json")))
    live = dict((role, documents.parse(_read(os.path.join(variant_dir, role + ".conf")))) for role in ROLES)
    cluster_spec, machine_spec = config_cases.spec_of_case(variant["case"])
    return variant, secrets.load(os.path.join(variant_dir, "secrets.yaml")), live, cluster_spec, machine_spec


def _encryption_providers(docs):
    doc = documents.find(docs, "KubeEtcdEncryptionConfig")
    return documents.get_path(doc.body, "config.resources")[0]["providers"]


def test_every_variant_at_every_contract():
    names = set((v.split(os.sep)[-2], v.split(os.sep)[-1]) for v in VARIANT_DIRS)
    assert names == set((contract, "%s-%s" % (enc, sa)) for contract in ("v1.12", "v1.13", "v1.14")
                        for enc in ("secretbox", "aescbc", "both") for sa in ("rsa", "ecdsa"))


@pytest.mark.parametrize("variant_dir", VARIANT_DIRS, ids=_id)
def test_recover_render_zero_drift(variant_dir):
    variant, reference, live, cluster_spec, machine_spec = load(variant_dir)
    bundle = secrets.from_config(live["controlplane"])
    assert bundle == reference  # every optional secret, none added
    assert bundle.to_object()["secrets"] == reference.to_object()["secrets"]
    assert bool(bundle.secretbox_secret.reveal()) == variant["secretbox"]
    assert bool(bundle.aescbc_secret.reveal()) == variant["aescbc"]
    secrets.validate(bundle, variant["case"]["contract"])
    assert secrets.parse(bundle.to_yaml()) == bundle
    with open(os.path.join(variant_dir, "secrets.yaml")) as handle:  # machinery's file: the same keys, the same order
        assert list(secrets.yamlio.load_one(handle.read())["secrets"]) == list(bundle.to_object()["secrets"])
    for role in ROLES:
        rendered = render.render(bundle, cluster_spec, config_cases.for_role(machine_spec, role))
        found = drift.drift(rendered, live[role], cluster_spec)
        assert found.zero, [diff.path for diff in found.differences]


def _with_aescbc(legacy):
    """The variant dirs that hold an aescbc secret, at the legacy contracts (legacy) or at v1.14."""
    return [d for d in VARIANT_DIRS if (_id(d).split(os.sep)[0] != "v1.14") == legacy and not _id(d).split(os.sep)[1].startswith("secretbox")]


@pytest.mark.parametrize("variant_dir", _with_aescbc(legacy=True), ids=_id)
def test_moving_to_v1_14_keeps_every_key(variant_dir):
    """A legacy config's keys go into the v1.14 encryption config with the providers, names and order kube-apiserver
    runs with now (Talos's own encryption configuration): nothing moves from aescbc to secretbox."""
    unused_variant, unused_reference, live, cluster_spec, machine_spec = load(variant_dir)
    bundle = secrets.from_config(live["controlplane"])
    legacy = documents.find(live["controlplane"], documents.LEGACY).body["cluster"]
    expected = []
    if legacy.get("secretboxEncryptionSecret"):
        expected.append({"secretbox": {"keys": [{"name": "key2", "secret": legacy["secretboxEncryptionSecret"]}]}})
    expected.append({"aescbc": {"keys": [{"name": "key1", "secret": legacy["aescbcEncryptionSecret"]}]}})
    docs = render.render(bundle, dict(cluster_spec, versionContract="v1.14"), config_cases.for_role(machine_spec, "controlplane"))
    assert _encryption_providers(docs) == expected
    assert secrets.from_config(docs) == bundle


@pytest.mark.parametrize("variant_dir", _with_aescbc(legacy=False), ids=_id)
def test_machinery_v1_14_generator_form_is_never_rendered_over(variant_dir):
    """Machinery v1.14.1's generator writes a bundle's aescbc secret as a secretbox key key1 (variant.json keeps its
    providers): no bundle renders that key, so it is refused outright (aescbc only) or blocks as class C."""
    variant, reference, live, cluster_spec, machine_spec = load(variant_dir)
    generated = json.loads(variant["generator_encryption"])
    assert generated[-1] == {"secretbox": {"keys": [{"name": "key1", "secret": reference.aescbc_secret.reveal()}]}}
    docs = [documents.Document(doc.kind, doc.name, doc.body) for doc in live["controlplane"]]
    doc = documents.find(docs, "KubeEtcdEncryptionConfig")
    doc.body["config"]["resources"][0]["providers"] = generated
    if not variant["secretbox"]:
        with pytest.raises(ConfigError) as err:
            secrets.from_config(docs)
        text = str(err.value)
        assert "neither a secretbox key key2 nor an aescbc key key1" in text and "\n" not in text
        assert reference.aescbc_secret.reveal() not in text
        return
    bundle = secrets.from_config(docs)
    assert not bundle.aescbc_secret.reveal()
    found = drift.drift(render.render(bundle, cluster_spec, config_cases.for_role(machine_spec, "controlplane")), docs, cluster_spec)
    assert found.blocked and found.patch() is None
    assert all(diff.cls == "C" and diff.path.startswith("KubeEtcdEncryptionConfig:") for diff in found.differences)
    assert set(diff.hint for diff in found.differences) <= {drift.HINT_SECRETS, drift.HINT_ENCRYPTION}
    assert reference.aescbc_secret.reveal() not in json.dumps(found.to_dict()) + "\n".join(found.lines())


@pytest.mark.parametrize("contract", ["v1.12", "v1.13", "v1.14"])
def test_drift_never_moves_aescbc_to_secretbox(contract):
    """A bundle that swaps the cluster's aescbc key for a secretbox one is class C: nothing is applied, nothing printed."""
    unused, reference, live, cluster_spec, machine_spec = load(os.path.join(BUNDLES, contract, "aescbc-rsa"))
    obj = reference.to_object()
    del obj["secrets"]["aescbcencryptionsecret"]
    obj["secrets"]["secretboxencryptionsecret"] = secrets.generate().secretbox_secret.reveal()
    swapped = secrets.validate(secrets.from_object(obj))
    found = drift.drift(render.render(swapped, cluster_spec, config_cases.for_role(machine_spec, "controlplane")), live["controlplane"],
                        cluster_spec)
    assert found.differences and found.blocked and found.patch() is None
    assert set(diff.cls for diff in found.differences) == {"C"}
    assert set(diff.hint for diff in found.differences) <= {drift.HINT_SECRETS, drift.HINT_ENCRYPTION}
    assert any(diff.secret for diff in found.differences)
    shown = json.dumps(found.to_dict()) + "\n".join(found.lines())
    assert reference.aescbc_secret.reveal() not in shown and swapped.secretbox_secret.reveal() not in shown


def test_aescbc_secret_is_a_bundle_field_and_masked():
    assert secret_paths.is_bundle(AESCBC_PATH) and drift.is_secret_path(AESCBC_PATH)
    assert secret_paths.is_bundle("KubeEtcdEncryptionConfig:config.resources[0].providers[1].aescbc.keys[0].secret")
    unused, reference, live, unused_cluster, unused_machine = load(os.path.join(BUNDLES, "v1.12", "both-ecdsa"))
    masked = drift.mask_docs(live["controlplane"])
    assert documents.find(masked, documents.LEGACY).body["cluster"]["aescbcEncryptionSecret"] == REDACTED
    assert reference.aescbc_secret.reveal() not in documents.emit(masked)
    assert reference.aescbc_secret.reveal() not in repr(reference) + str(reference.aescbc_secret)


def test_no_encryption_key_refused_in_one_line():
    unused, reference, live, unused_cluster, unused_machine = load(os.path.join(BUNDLES, "v1.13", "aescbc-rsa"))
    docs = [documents.Document(doc.kind, doc.name, doc.body) for doc in live["controlplane"]]
    cluster = dict(docs[0].body["cluster"])
    del cluster["aescbcEncryptionSecret"]
    docs[0] = documents.legacy(dict(docs[0].body, cluster=cluster))
    with pytest.raises(ConfigError) as err:
        secrets.from_config(docs)
    assert str(err.value) == ("the control plane config has neither cluster.secretboxEncryptionSecret nor "
                              "cluster.aescbcEncryptionSecret, so the secrets bundle cannot be recovered")
    obj = reference.to_object()
    del obj["secrets"]["aescbcencryptionsecret"]
    with pytest.raises(ConfigError, match="^the secrets bundle has neither secrets.secretboxencryptionsecret nor "
                                          "secrets.aescbcencryptionsecret$"):
        secrets.from_object(obj)


def test_property_mixed_optional_secrets_seeded():
    """Seeded, bounded: bundles whose optional secrets come from different machinery bundles, each present or absent,
    rendered at a random contract and role, recovered, rendered again: the same bundle and zero drift."""
    rand = random.Random(11)
    pool = [load(d) for d in VARIANT_DIRS]
    for unused_round in range(40):
        base = rand.choice(pool)[1].to_object()
        keep = rand.choice([("secretbox",), ("aescbc",), ("secretbox", "aescbc")])
        held = {}
        for name in ("secretbox", "aescbc"):
            donors = [item[1] for item in pool if getattr(item[1], name + "_secret").reveal()]
            held[name] = getattr(rand.choice(donors), name + "_secret").reveal()
        base["secrets"] = dict([("bootstraptoken", base["secrets"]["bootstraptoken"])]
                               + [("%sencryptionsecret" % name, held[name]) for name in ("aescbc", "secretbox") if name in keep])
        base["certs"]["k8sserviceaccount"] = rand.choice(pool)[1].to_object()["certs"]["k8sserviceaccount"]
        bundle = secrets.validate(secrets.from_object(base))
        unused_variant, unused_reference, unused_live, cluster_spec, machine_spec = rand.choice(pool)
        contract = rand.choice(["v1.12", "v1.13", "v1.14"])
        cluster_spec = dict(cluster_spec, versionContract=contract)
        docs = render.render(bundle, cluster_spec, config_cases.for_role(machine_spec, "controlplane"))
        again = secrets.from_config(docs)
        assert again == bundle, (contract, keep)
        for role in ROLES:
            first = render.render(bundle, cluster_spec, config_cases.for_role(machine_spec, role))
            assert drift.drift(render.render(again, cluster_spec, config_cases.for_role(machine_spec, role)), first, cluster_spec).zero
