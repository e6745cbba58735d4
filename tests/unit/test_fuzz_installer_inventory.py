"""Fuzz the installer's inventory read back (issue 26): every mutation of a valid ConfigMap ichor-installer-inventory
(its object and the JSON list under ``objects``) is read into refs and warnings, each warning one short line, and
what it reads is written back as it was. Budget and the maintainer's command: tests/unit/conftest.py.

Target: ``installer-inventory`` (installer.inventory.parse, then inventory.data of its refs)."""

import json

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.installer import inventory
from ansible_collections.maesh.ichor.plugins.module_utils.installer.objects import Ref
from tests.unit.conftest import MESSAGE_LIMIT, mutate_bytes, mutate_tree

NS = "ichor-system"
MARKER = "ICHORfuzzINVENTORYmarker0123456789abcdefXYZ"
REFS = [Ref("v1", "ServiceAccount", NS, "a"), Ref("rbac.authorization.k8s.io/v1", "ClusterRole", None, "r"),
        Ref("apps/v1", "Deployment", NS, "ui")]


def valid():
    return inventory.configmap(REFS, NS)


def use(given):
    """Parse, check the warnings' shape, and write what was read back."""
    refs, warnings = inventory.parse(given)
    for warning in warnings:
        assert "\n" not in warning and len(warning) < MESSAGE_LIMIT, warning[:2000]
        assert MARKER not in warning
    assert len(warnings) <= inventory.MAX_WARNINGS + 1
    if refs is not None:
        for ref in refs:
            assert all(isinstance(v, str) for v in (ref.api_version, ref.kind, ref.name))
        inventory.data(refs)
    return refs, warnings


def test_fuzz_installer_inventory(fuzz):
    run = fuzz("installer-inventory")
    text = valid()["data"]["objects"].encode()
    items = json.loads(text)
    for index, rng in run.cases():
        op = rng.random()
        if op < 0.4:  # the list's JSON, mutated as bytes (the API server gives text; bad UTF-8 is replaced)
            mutated = mutate_bytes(text, rng).decode("utf-8", rng.choice(["replace", "surrogateescape"]))
            given = dict(valid(), data={"objects": mutated})
        elif op < 0.8:  # valid JSON of a mutated list
            try:
                given = dict(valid(), data={"objects": json.dumps(mutate_tree(items + [{"name": MARKER}], rng))})
            except (ValueError, TypeError, RecursionError):
                given = dict(valid(), data={"objects": "["})
        else:  # the ConfigMap object itself
            given = mutate_tree(valid(), rng)
        run.check(lambda: use(given), index, given, [MARKER])


def _ignored(where, why=""):
    return ["the installer inventory %s cannot be parsed%s; it is ignored and nothing it lists is pruned"
            % (where, why)]


WHERE = "%s/%s" % (NS, inventory.INVENTORY_NAME)

# The inventory's old reader raised KeyError on a ConfigMap without metadata and RecursionError on deep JSON.
FOUND = [
    ({"data": {"objects": "[]"}}, ([], [])),
    ({"metadata": None, "data": {"objects": "{"}}, (None, _ignored(inventory.INVENTORY_NAME))),
    ({"metadata": {}, "data": {"objects": "[" * 100000 + "]" * 100000}}, (None, _ignored(inventory.INVENTORY_NAME))),
    (dict(valid(), data={"objects": "[" * 10 + "]" * 10}), (None, _ignored(WHERE, " (it nests deeper than 4 levels)"))),
    (dict(valid(), data={"objects": "[%s]" % ", ".join(["1"] * 600000)}),
     (None, _ignored(WHERE, " (it is larger than 1048576 bytes)"))),
    (dict(valid(), data={"objects": "[\"\udcff\"]"}), (None, _ignored(WHERE, " (it is not UTF-8 text (character 3))"))),
    (dict(valid(), data={"objects": 5}), (None, _ignored(WHERE))),
    (dict(valid(), data=["objects"]), (None, _ignored(WHERE))),
    (["a"], (None, ["the installer inventory %s is not a ConfigMap; it is ignored and nothing it lists is pruned"
                    % inventory.INVENTORY_NAME])),
]


@pytest.mark.parametrize("given, expected", FOUND, ids=["found-%d" % i for i in range(len(FOUND))])
def test_found_by_probing(given, expected):
    assert use(given) == expected


def test_a_namespace_that_is_not_one_is_left_out_of_the_warnings():
    given = dict(valid(), metadata={"namespace": "x\n" * 1000}, data={"objects": "{"})
    assert use(given) == (None, _ignored(inventory.INVENTORY_NAME))


def test_entries_with_names_no_object_has_are_skipped_and_many_are_counted():
    good = {"apiVersion": "v1", "kind": "ServiceAccount", "namespace": NS, "name": "a"}
    items = [good, dict(good, name="a\nb"), dict(good, kind="K" * 254), dict(good, namespace="n s")] + [1] * 30
    refs, warnings = use(dict(valid(), data={"objects": json.dumps(items)}))
    assert refs == [Ref("v1", "ServiceAccount", NS, "a")]
    assert warnings[:3] == ["the installer inventory %s: entry %d of 34 is malformed (%s); it is skipped and nothing "
                            "is pruned for it" % (WHERE, n, why) for n, why in [
                                (2, "name is not a name of at most 253 printable characters"),
                                (3, "kind is not a name of at most 253 printable characters"),
                                (4, "namespace is not a name of at most 253 printable characters")]]
    assert len(warnings) == inventory.MAX_WARNINGS + 1
    assert warnings[-1] == ("the installer inventory %s: 13 more entries are malformed; they are skipped and nothing "
                            "is pruned for them" % WHERE)
