"""Fuzz the readers of a live machine config (issue 26), the text a machine returns as its MachineConfig: every
mutation of a real control plane's config (the typed documents of contract v1.14 and the legacy form of v1.12;
as bytes, as YAML of a mutated tree, nested, huge) is read or refused with one ConfigError line that holds none
of the config's keys, tokens or secrets.

Targets: ``live-config-secrets`` (config.documents.parse through config.yamlio's guard, then the secrets reader:
config.secrets.from_config, validate and same_cluster, what talos_secrets' recover and talos_machine_config do
with it), ``live-config-facts`` (config.talos_side.facts, what talos_facts reports of the config),
``live-config-adopt`` (config.adopt.read and config.images, what adopt maps of it) and ``image-references`` (every
reader of an image reference). Budget and the maintainer's command: tests/unit/conftest.py."""

import base64
import os

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.common import images as image_refs
from ansible_collections.maesh.ichor.plugins.module_utils.config import adopt, documents, drift, images, secrets, \
    talos_side, yamlio
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from tests.unit.conftest import mutate_bytes, mutate_tree

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "configs")
CASES = [os.path.join(FIXTURES, "v1.14", "v1.14.1", "kitchen-sink"), os.path.join(FIXTURES, "v1.12", "v1.12.7", "kitchen-sink")]


def _read(path):
    with open(path, "rb") as handle:
        return handle.read()


CONFIGS = [_read(os.path.join(case, "controlplane.conf")) for case in CASES]
TREES = [list(yaml.safe_load_all(text)) for text in CONFIGS]


def _secret_values():
    """The configs' secrets as a message could show them: tokens and secrets as they are, each key's PEM body and its
    base64 past the PEM header."""
    values = set()
    for case in CASES:
        bundle = yaml.safe_load(_read(os.path.join(case, "secrets.yaml")))
        values.update([bundle["cluster"]["secret"], bundle["secrets"]["bootstraptoken"], bundle["trustdinfo"]["token"],
                       bundle["secrets"]["secretboxencryptionsecret"]])
        for pair in bundle["certs"].values():
            pem = base64.b64decode(pair["key"]).decode()
            values.add("".join(line for line in pem.splitlines() if not line.startswith("-----")))
            values.add(pair["key"][48:])
    return sorted(values)


SECRETS = _secret_values()


def _text(docs):
    try:
        return yaml.safe_dump_all(docs, allow_unicode=True).encode("utf-8", "surrogateescape")
    except (yaml.YAMLError, RecursionError, UnicodeError, TypeError):
        return repr(docs).encode("utf-8", "surrogateescape")


def mutated(rng):
    """A mutated config: as bytes, or the YAML of a mutated document tree, or past the size limit."""
    which = rng.randrange(len(CONFIGS))
    op = rng.random()
    if op < 0.45:
        return mutate_bytes(CONFIGS[which], rng)
    if op < 0.95:
        docs = mutate_tree(TREES[which], rng)
        return _text(docs if isinstance(docs, list) else [docs])
    filler = rng.choice([b"# x\n", b"---\na: [1, 2]\n", b"a" * 1000])
    return CONFIGS[which] + filler * (yamlio.MAX_SIZE // len(filler))


def _recover(text):
    """What talos_secrets' recover does with a control plane's config, and talos_machine_config's check of the bundle
    against it."""
    docs = documents.parse(text)
    bundle = secrets.validate(secrets.from_config(docs), "v1.14")
    other = secrets.same_cluster(bundle, docs)
    assert other is None or isinstance(other, str)
    assert bundle.fingerprint()
    return bundle


def _facts(text):
    facts = talos_side.facts(text)
    for field in ("config_role", "form"):
        assert isinstance(facts[field], str)
    assert isinstance(facts["cni"]["name"], str)
    assert all(isinstance(m["name"], str) and isinstance(m["cilium"], bool) for m in facts["inline_manifests"])
    return facts


def test_the_valid_configs_read():
    for text in CONFIGS:
        assert _recover(text).fingerprint()
        assert _facts(text)["config_role"] == "controlplane"


def test_fuzz_live_config_secrets(fuzz, fresh_redaction):
    run = fuzz("live-config-secrets")
    for index, rng in run.cases():
        fresh_redaction(forget=SECRETS)
        given = mutated(rng)
        run.check(lambda: _recover(given), index, given, SECRETS)


def test_fuzz_live_config_facts(fuzz, fresh_redaction):
    run = fuzz("live-config-facts")
    for index, rng in run.cases():
        fresh_redaction(forget=SECRETS)
        given = mutated(rng)
        run.check(lambda: _facts(given), index, given, SECRETS)


def _with_inline_manifest(contents):
    docs = [dict(doc) for doc in TREES[0]]
    for doc in docs:
        if doc.get("kind") == "KubeInlineManifestConfig":
            doc["manifest"] = contents
    return yaml.safe_dump_all(docs)


def test_an_inline_manifest_of_text_or_lists_is_not_cilium():
    """Found with --fuzz-seed 9, case 222 of live-config-facts: a manifest whose documents are not mappings (a text, a
    list) raised AttributeError in config.spec.is_cilium_manifest."""
    for contents in ("just text\n", "- 1\n- 2\n", "---\nx\n---\n[a]\n"):
        facts = _facts(_with_inline_manifest(contents))
        assert facts["inline_manifests"] and not any(m["cilium"] for m in facts["inline_manifests"])


def test_a_config_past_the_limits_is_refused_in_one_line():
    for text, said in ((CONFIGS[0] + b"#" * yamlio.MAX_SIZE, "is larger than %d bytes" % yamlio.MAX_SIZE),
                       (CONFIGS[0] + b"---\nx: " + b"[" * 200 + b"]" * 200 + b"\n", "nests deeper than 128 levels"),
                       (b"a: &a [1, 2, 3, 4, 5, 6, 7, 8]\n" + b"".join(b"%c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c]\n" % (
                           (c, c) + (c - 1,) * 8) for c in range(98, 106)), "holds more than 500000 values")):
        with pytest.raises(ConfigError) as exc:
            documents.parse(text)
        assert exc.value.message == "the machine config %s" % said


def _adopt(text):
    """What adopt maps of a live config (config.adopt.read, the cluster spec and the machine's), with the component
    images the inspection reads from it (config.images)."""
    docs = documents.parse(text)
    adopted = adopt.read([("cp-1", docs, "v1.14.1")])
    assert isinstance(adopted.cluster["kubernetesVersion"], str) and isinstance(adopted.unmapped, list)
    for component, version in images.component_versions(docs).items():
        assert component in images.COMPONENTS and version.startswith("v")
    return adopted


def test_fuzz_live_config_adopt(fuzz, fresh_redaction):
    """Target ``live-config-adopt``: config.adopt.read and config.images.component_versions over mutated live
    configs."""
    run = fuzz("live-config-adopt")
    for index, rng in run.cases():
        fresh_redaction(forget=SECRETS)
        given = mutated(rng)
        run.check(lambda: _adopt(given), index, given, SECRETS)


IMAGES = ["ghcr.io/siderolabs/kubelet:v1.36.3", "registry.k8s.io/kube-apiserver:v1.36.3@sha256:" + "ab" * 32,
          "registry.corp.example:5000/a/b/kube-proxy:1.36.3", "[fd00::1]:5000/installer:v1.14.5-rc.1+b"]


def _image(text):
    """Every reader of an image reference: the parser (common.images), the tag's version (config.images), the drift's
    comparison of two references (config.drift)."""
    version = images.tag_version(text)
    assert version is None or version.startswith("v")
    ref = image_refs.parse(text)
    assert str(ref) == text
    return drift.minor_back(text, IMAGES[0]), version


def test_fuzz_image_references(fuzz):
    """Target ``image-references``: common.images.parse, config.images.tag_version and config.drift.minor_back over
    mutated references (bytes, code points, parts swapped)."""
    run = fuzz("image-references")
    for index, rng in run.cases():
        given = IMAGES[rng.randrange(len(IMAGES))]
        for _round in range(rng.randint(1, 3)):
            given = mutate_bytes(given.encode("utf-8"), rng).decode("utf-8", rng.choice(["replace", "ignore"]))
        run.check(lambda: _image(given), index, given)
