"""Fuzz the kubeconfig's reader (issue 26): every mutation of a valid kubeconfig (as kubeconfig_content, as a file,
as two files KUBECONFIG merges; as bytes, as YAML of a mutated tree, nested, huge) is read and checked or refused
with one KubeError line that holds none of its credentials, and what is read is what the client takes. Budget and
the maintainer's command: tests/unit/conftest.py.

Target: ``kubeconfig`` (k8s.kubeconfig.load through its guard, check, Kubeconfig)."""

import base64
import json
import os

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.k8s import kubeconfig
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.errors import KubeError
from tests.unit.conftest import LEAK_WINDOW, mutate_bytes, mutate_tree

TOKEN = "ICHORfuzzKUBEtoken0123456789abcdefXYZ"
KEY = base64.b64encode(b"-----BEGIN EC PRIVATE KEY-----\nICHORfuzzKUBEkeyMIIBmarker\n-----END EC PRIVATE KEY-----\n")
KEY = KEY.decode()


def valid():
    return {"apiVersion": "v1", "kind": "Config", "current-context": "admin@lab",
            "clusters": [{"name": "lab", "cluster": {"server": "https://10.0.0.1:6443",
                                                     "certificate-authority-data": "Q0EK"}}],
            "users": [{"name": "admin", "user": {"client-certificate-data": "Q1JUCg==", "client-key-data": KEY}},
                      {"name": "sa", "user": {"token": TOKEN}}],
            "contexts": [{"name": "admin@lab", "context": {"cluster": "lab", "user": "admin"}},
                         {"name": "sa@lab", "context": {"cluster": "lab", "user": "sa", "namespace": "x"}}]}


TEXT = yaml.safe_dump(valid()).encode()


def use(config):
    """What the client does with a kubeconfig it loaded: the fields it reads."""
    assert isinstance(config.cluster, dict) and isinstance(config.user, dict)
    assert config.source.server is None or isinstance(config.source.server, str)
    str(config.source)
    return config


def _text(tree):
    """A mutated tree as text: JSON (YAML too), as fast to write as a case should be; repr when it is not JSON."""
    try:
        return json.dumps(tree, ensure_ascii=False).encode("utf-8", "surrogateescape")
    except (ValueError, RecursionError, UnicodeError, TypeError):
        return repr(tree).encode("utf-8", "surrogateescape")


def test_fuzz_kubeconfig(fuzz, fresh_redaction, tmp_path):
    run = fuzz("kubeconfig")
    one, other = str(tmp_path / "one"), str(tmp_path / "other")
    with open(other, "wb") as handle:
        handle.write(TEXT)
    for index, rng in run.cases():
        fresh_redaction(forget=[TOKEN, KEY])  # a credential a case registered must not hide the next case's leak
        op = rng.random()
        text = mutate_bytes(TEXT, rng) if op < 0.5 else _text(mutate_tree(valid(), rng))
        context = rng.choice([None, None, None, "sa@lab", "nope", "x" * 5000])
        how = rng.random()
        if how < 0.6:  # the option kubeconfig_content, as Ansible gives it (text)
            given = dict(kubeconfig_content=text.decode("utf-8", rng.choice(["replace", "surrogateescape"])))
        else:
            with open(one, "wb") as handle:
                handle.write(text)
            if how < 0.85:  # the option kubeconfig
                given = dict(kubeconfig=one)
            else:  # KUBECONFIG naming two files, merged
                given = dict(environ={"KUBECONFIG": os.pathsep.join([one, other] if rng.random() < 0.5 else [other, one])})

        def call(given=given, context=context):  # pylint: disable=dangerous-default-value
            return use(kubeconfig.load(context=context, **given))
        # a credential a mutation copied elsewhere (a context's name) is no longer one: messages name contexts
        secrets = [value for value in (TOKEN, KEY) if text.count(value[:LEAK_WINDOW].encode()) <= 1]
        run.check(call, index, text, secrets)


def _content(text):
    with pytest.raises(KubeError) as exc:
        kubeconfig.load(kubeconfig_content=text)
    return exc.value.message


# The old reader used PyYAML's pure loader with no limit: a tag that cannot be built raised IndexError or
# AttributeError, a deep document RecursionError; names of other shapes or any length went into the messages.
FOUND = [
    ("a: !!int ''\n", "the option kubeconfig_content is not valid YAML"),
    ("a: !!timestamp x\n", "the option kubeconfig_content is not valid YAML"),
    ("a: " + "[" * 50000, "the option kubeconfig_content is not valid YAML"),
    ("a: " + "[" * 40 + "]" * 40, "the option kubeconfig_content nests deeper than 32 levels"),
    ("a: " + "x" * (5 * 1024 * 1024), "the option kubeconfig_content is larger than 4194304 bytes"),
    ("a: \udcff\n", "the option kubeconfig_content is not UTF-8 text (character 4)"),
    ("contexts: 5\n", "the kubeconfig given as kubeconfig_content holds no contexts"),
    ("contexts: [{name: a, context: x}]\ncurrent-context: a\n",
     'the kubeconfig given as kubeconfig_content: context "a" is not a mapping'),
    ("contexts: [{name: a, context: {cluster: c}}]\nclusters: [{name: c, cluster: [x]}]\ncurrent-context: a\n",
     'the kubeconfig given as kubeconfig_content: cluster "c" is not a mapping'),
    ("contexts: [{name: a, context: {cluster: c}}]\nclusters: [{name: c, cluster: {server: [x]}}]\n"
     "current-context: a\n",
     'the kubeconfig given as kubeconfig_content: cluster "c" has a server that is not a URL'),
    ("contexts: [{name: a, context: {cluster: c}}]\nclusters: [{name: c, cluster: {server: 'https://[::1:6443'}}]\n"
     "current-context: a\n", 'the kubeconfig given as kubeconfig_content: cluster "c" has a server that is not a URL'),
    ("contexts: [{name: a, context: {cluster: c}}]\nclusters: [{name: c, cluster: {server: 'https://h:99999'}}]\n"
     "current-context: a\n", 'the kubeconfig given as kubeconfig_content: cluster "c" has a server that is not a URL'),
    ("contexts: [{name: a, context: {cluster: [c]}}]\ncurrent-context: a\n",
     'the kubeconfig given as kubeconfig_content: context "a" names cluster (a list), which it does not define'),
    ("contexts: [{name: a, context: {cluster: c}}]\ncurrent-context: [a]\n",
     "the kubeconfig given as kubeconfig_content has no context (a list); it has: a (option kube_context)"),
    ("contexts: [{name: a, context: {cluster: c}}]\ncurrent-context: %s\n" % ("b" * 5000),
     "the kubeconfig given as kubeconfig_content has no context (a name of 5000 characters); it has: a (option "
     "kube_context)"),
    ("contexts: [%s]\n" % ", ".join("{name: c%d}" % i for i in range(30)),
     "the kubeconfig given as kubeconfig_content sets no current-context; choose one with the option kube_context: "
     + ", ".join("c%d" % i for i in range(20)) + " and 10 more"),
]


@pytest.mark.parametrize("content, expected", FOUND, ids=["found-%d" % i for i in range(len(FOUND))])
def test_found_by_probing(content, expected):
    assert _content(content) == expected


def test_a_file_is_read_through_the_guard(tmp_path):
    path = tmp_path / "config"
    path.write_bytes(b"a: " + b"[" * 50000)
    with pytest.raises(KubeError) as exc:
        kubeconfig.load(kubeconfig=str(path))
    assert exc.value.message == "the kubeconfig %s is not valid YAML; check the option kubeconfig" % path
    path.write_bytes(b"a: \xff\n")
    with pytest.raises(KubeError) as exc:
        kubeconfig.load(kubeconfig=str(path))
    assert exc.value.message == "the kubeconfig %s is not UTF-8 text (byte 4); check the option kubeconfig" % path


def test_a_valid_kubeconfig_loads_as_content_and_merged(tmp_path, fresh_redaction):  # pylint: disable=unused-argument
    config = use(kubeconfig.load(kubeconfig_content=TEXT.decode(), context="sa@lab"))
    assert (config.user, config.source.server) == ({"token": TOKEN}, "https://10.0.0.1:6443")
    one, other = tmp_path / "one", tmp_path / "other"
    one.write_bytes(TEXT)
    other.write_text("contexts: [{name: x, context: {cluster: lab}}]\nclusters: 7\n")
    merged = use(kubeconfig.load(context="x", environ={"KUBECONFIG": os.pathsep.join([str(other), str(one)])}))
    assert merged.merged and merged.cluster["server"] == "https://10.0.0.1:6443"
