"""Fuzz the installer's bundle manifests (issue 12): every mutation of a valid bundle file is read into objects
the API client can send (JSON data, with apiVersion, kind and a name) or refused with one BundleError line
that never quotes the manifests (a Secret's data among them). Budget and the maintainer's command:
tests/unit/conftest.py.

Target: ``installer-bundle`` (installer.bundle.load)."""

import json

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.installer import bundle
from ansible_collections.maesh.ichor.plugins.module_utils.installer.errors import BundleError
from ansible_collections.maesh.ichor.plugins.module_utils.installer.objects import Ref
from tests.unit.conftest import mutate_bytes, mutate_tree

NS = "ichor-system"
MARKER = "ICHORfuzzBUNDLEmarker0123456789abcdefXYZ"
CLUSTER_SCOPED = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "PriorityClass"}
SERVED = CLUSTER_SCOPED | {"ConfigMap", "Secret", "ServiceAccount", "Deployment", "Service", "Role", "RoleBinding"}


class NotServed(IchorError):
    pass


def namespaced(api_version, kind):
    """API discovery, as the installer asks it (an unknown kind is a clean KubeError there)."""
    if kind not in SERVED:
        raise NotServed("the API server does not serve %s %s" % (api_version, kind))
    return kind not in CLUSTER_SCOPED


def valid_docs():
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token", "labels": {"app": "x"}},
         "stringData": {"token": MARKER}},
        {"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "other"},
             "data": {"a": "1", "when": "2026-01-01"}},
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "agent"},
             "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "a", "image": "x:1"}]}}}}]},
    ]


def _text(docs):
    try:
        return yaml.safe_dump_all(docs if isinstance(docs, list) else [docs], allow_unicode=True).encode(
            "utf-8", "surrogateescape")
    except (yaml.YAMLError, RecursionError, UnicodeError, TypeError):  # TypeError: keys of several types to sort
        return json.dumps(docs, default=str).encode()


def read(path):
    objects = bundle.apply_order(bundle.load([str(path)], NS, namespaced))
    for obj in objects:
        json.dumps(obj, allow_nan=False)  # what the API client sends
        ref = Ref.of(obj)
        assert all(isinstance(v, str) and v for v in (ref.api_version, ref.kind, ref.name))
        assert ref.namespace is None or isinstance(ref.namespace, str)
    return objects


def test_fuzz_installer_bundle(fuzz, tmp_path):
    run = fuzz("installer-bundle")
    base = _text(valid_docs())
    path = tmp_path / "bundle.yaml"
    for index, rng in run.cases():
        if rng.random() < 0.5:
            given = _text(mutate_tree(valid_docs(), rng))
        else:
            given = mutate_bytes(base, rng)
        path.write_bytes(given)
        run.check(lambda: read(path), index, given, [MARKER])


def test_a_valid_bundle_reads(tmp_path):
    path = tmp_path / "bundle.yaml"
    path.write_bytes(_text(valid_docs()))
    objects = read(path)
    assert [o["kind"] for o in objects] == ["Namespace", "ConfigMap", "Secret", "Deployment"]
    assert objects[1]["data"]["when"] == "2026-01-01"  # a date stays text, as kubectl reads it


_OBJ = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"
_LAUGHS = b"".join(b"l%d: &l%d [%s]\n" % (i, i, b", ".join([b"*l%d" % (i - 1)] * 9) if i else b"x") for i in range(9))

# Found with --fuzz-seed 12 (the old load raised UnicodeDecodeError, TypeError, AttributeError, or returned what
# the API client cannot send, or discovery was asked about a kind of a million characters): cases 0 (bytes that
# are not UTF-8), 2 (a list as the name: unhashable), 8 (a text document), 15 (.inf), 204 (!!timestamp x),
# 370 and 446 (kinds that are no kind); the others are their kin.
FOUND = [
    (_OBJ + b"x: \xff\n", "cannot be read as YAML (ReaderError)"),
    (b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [a]}\n", "holds an object without apiVersion, kind or metadata.name"),
    (b"just text\n", "document 1 holds an object that is not a mapping"),
    (_OBJ + b"data: {a: .inf}\n", "document 1 holds a number JSON cannot carry (.nan or .inf)"),
    (b"kind: [List]\n", "holds an object without apiVersion, kind or metadata.name"),
    (b"kind: List\nitems: 5\n", "document 1 is a List whose items are not a list"),
    (b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, labels: [1]}\n", "document 1 holds an object whose metadata.labels"),
    (b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: [1]}\n", "document 1 holds an object whose metadata.namespace"),
    (b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: 'a\\nb'}\n", "metadata.namespace is not a Kubernetes"),
    (_OBJ + b"data: {a: !!binary aGk=}\n", "document 1 holds a bytes value"),
    (_OBJ + b"data: {a: !!set {x}}\n", "document 1 holds a set value"),
    (_OBJ + b"data: {1: x}\n", "document 1 holds a mapping key that is not text"),
    (_OBJ + b"data: {a: " + b"9" * 5000 + b"}\n", "cannot be read as YAML (ValueError)"),
    (_OBJ + b"data: {a: !!int x}\n", "cannot be read as YAML (ValueError)"),
    (b"apiVersion: v1\nkind: " + b"A" * 10 ** 6 + b"\nmetadata: {name: a}\n", "an object whose kind is not a Kubernetes kind"),  # 446
    (b"apiVersion: v1\nkind: 'N- - x'\nmetadata: {name: a}\n", "an object whose kind is not a Kubernetes kind"),  # 370
    (b"apiVersion: 'v1 ['\nkind: A\nmetadata: {name: a}\n", "an object whose apiVersion is not a Kubernetes API version"),
    (b"apiVersion: v1\nkind: A\nmetadata: {name: a, namespace: 'a b'}\n", "metadata.namespace is not a Kubernetes namespace"),
    (b"apiVersion: v1\nkind: A\nmetadata: {name: '" + b"a" * 300 + b"'}\n", "an object whose metadata.name is not a Kubernetes name"),
    (_OBJ + b"data: {a: !!timestamp x}\n", "cannot be read as YAML (AttributeError)"),                  # 204
    (_OBJ + b"data: {a: !!bool ''}\n", "cannot be read as YAML (KeyError)"),
    (_OBJ + b"data: {a: !!int ''}\n", "cannot be read as YAML (IndexError)"),
    (_OBJ + b"data: &a [*a]\n", "values nested deeper than 128 levels"),
    (_OBJ + _LAUGHS, "more than 500000 values once its aliases are expanded"),
    (_OBJ + b"data:\n" + b"".join(b"  " * i + b"a:\n" for i in range(1, 200)) + b"  " * 200 + b"x\n",
     "values nested deeper than 128 levels"),
]


@pytest.mark.parametrize("given, expected", FOUND, ids=["found-%d" % i for i in range(len(FOUND))])
def test_found_by_fuzzing(given, expected, tmp_path):
    path = tmp_path / "bundle.yaml"
    path.write_bytes(given)
    with pytest.raises(BundleError) as exc:
        read(path)
    assert expected in exc.value.message


def test_a_namespaced_object_with_a_null_namespace_goes_to_the_installers(tmp_path):
    path = tmp_path / "bundle.yaml"
    path.write_bytes(b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: null}\n")
    assert read(path)[0]["metadata"]["namespace"] == NS
