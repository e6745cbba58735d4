"""module_utils.installer's pure parts: reading a bundle, the inventory's form, the prune rules (ADR 0111) and
the snapshot's form."""

import json
import re

import pytest
import yaml

from tests import collection_path

collection_path.ensure()

# pylint: disable=wrong-import-position
from ansible_collections.maesh.ichor.plugins.module_utils.installer import (  # noqa: E402
    bundle, inventory, objects, prune, snapshot)
from ansible_collections.maesh.ichor.plugins.module_utils.installer.errors import BundleError, InstallerError  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.installer.objects import Ref  # noqa: E402

NS = "ichor-system"
MARK = {objects.MARK_KEY: objects.MARK_VALUE}


def namespaced(api_version, kind):
    return kind not in ("ClusterRole", "Namespace", "CustomResourceDefinition")


def test_a_bundle_is_read_stamped_and_namespaced(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "20-list.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "a"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "r", "namespace": "ignored", "labels": {"x": "y"}}}]}))
    (tmp_path / "b" / "10-cm.yml").write_text("---\n" + yaml.safe_dump(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "elsewhere"}}) + "---\n")
    (tmp_path / "b" / "README.md").write_text("not a manifest")
    objs = bundle.load([str(tmp_path / "b")], NS, namespaced)
    assert [str(Ref.of(o)) for o in objs] == ["ConfigMap elsewhere/c", "ServiceAccount %s/a" % NS, "ClusterRole r"]
    assert objs[2]["metadata"]["labels"] == dict(MARK, x="y")
    assert [str(Ref.of(o)) for o in bundle.apply_order(objs)] == [
        "ServiceAccount %s/a" % NS, "ClusterRole r", "ConfigMap elsewhere/c"]


@pytest.mark.parametrize("content, message", [
    ("a: [", "bundle file {path} cannot be read as YAML (ParserError)"),
    ("apiVersion: v1\nkind: ConfigMap\n", "bundle file {path} holds an object without apiVersion, kind or metadata.name"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
     "ConfigMap %s/c is in the bundle twice ({path} and {path})" % NS),
])
def test_a_bundle_that_cannot_be_applied_is_refused_in_one_line(tmp_path, content, message):
    path = tmp_path / "bundle.yaml"
    path.write_text(content)
    with pytest.raises(BundleError) as exc:
        bundle.load([str(path)], NS, namespaced)
    assert exc.value.message == message.format(path=path)


def test_the_inventory_round_trips_and_an_unparseable_one_is_a_warning():
    refs = [Ref("v1", "ServiceAccount", NS, "a"), Ref("rbac.authorization.k8s.io/v1", "ClusterRole", None, "r")]
    cm = inventory.configmap(refs, NS)
    assert cm["metadata"]["labels"] == MARK
    assert inventory.parse(cm) == (sorted(refs, key=lambda r: r.kind), [])
    assert inventory.parse(None) == (None, [])
    for text in ("{not json", "{}", "null", "7"):
        bad = dict(cm, data={"objects": text})
        assert inventory.parse(bad) == (None, ["the installer inventory %s/%s cannot be parsed; it is ignored and nothing "
                                               "it lists is pruned" % (NS, inventory.INVENTORY_NAME)])


def test_a_malformed_inventory_entry_is_skipped_with_a_warning_and_the_others_kept():
    good = {"apiVersion": "v1", "kind": "ServiceAccount", "namespace": NS, "name": "a"}
    items = [good, {"kind": "ServiceAccount"}, "a string", dict(good, name=7), dict(good, kind=["x"]),
             dict(good, apiVersion=""), dict(good, namespace={"n": 1}), dict(good, name={"a": 1}), good,
             dict(good, kind=None)]
    cm = {"metadata": {"name": inventory.INVENTORY_NAME, "namespace": NS}, "data": {"objects": json.dumps(items)}}
    refs, warnings = inventory.parse(cm)
    assert refs == [Ref("v1", "ServiceAccount", NS, "a")]
    prefix = "the installer inventory %s/%s: entry " % (NS, inventory.INVENTORY_NAME)
    suffix = " it is skipped and nothing is pruned for it"
    assert warnings == [prefix + "%d of 10 is malformed (%s);" % (n, why) + suffix for n, why in [
        (2, "apiVersion is missing"), (3, "not an object"), (4, "name is not a non-empty string"),
        (5, "kind is not a non-empty string"), (6, "apiVersion is not a non-empty string"),
        (7, "namespace is not a string"), (8, "name is not a non-empty string"), (10, "kind is missing")]]


def test_candidates_are_the_dropped_objects_of_prunable_kinds_in_the_namespace():
    kept = Ref("v1", "ServiceAccount", NS, "kept")
    previous = [kept, Ref("v1", "ServiceAccount", NS, "dropped"), Ref("apps/v1", "Deployment", NS, "ui"),
                Ref("v1", "Secret", NS, "ca"), Ref("v1", "ServiceAccount", "kube-system", "cilium"),
                Ref("rbac.authorization.k8s.io/v1", "Role", NS, "ichor-installer"),
                Ref("apiextensions.k8s.io/v1", "CustomResourceDefinition", None, "widgets.example.com"),
                Ref("rbac.authorization.k8s.io/v1", "ClusterRole", None, "old")]
    found, skipped = prune.candidates(previous, [Ref("v1", "ServiceAccount", NS, "kept")], NS)
    assert [str(r) for r in found] == ["ServiceAccount %s/dropped" % NS, "Deployment %s/ui" % NS, "ClusterRole old"]
    assert [(str(r), why) for r, why in skipped] == [
        ("Secret %s/ca" % NS, "Secret is not a kind the installer prunes"),
        ("ServiceAccount kube-system/cilium", "in namespace kube-system, not the installer's %s" % NS),
        ("Role %s/ichor-installer" % NS, "the installer's own object"),
        ("CustomResourceDefinition widgets.example.com", "CustomResourceDefinition is not a kind the installer prunes")]
    assert prune.candidates(None, [], NS) == ([], [])
    # one object served at two versions is one object
    assert Ref("apps/v1beta1", "Deployment", NS, "ui") == Ref("apps/v1", "Deployment", NS, "ui")


def test_the_renamed_role_is_a_candidate_unless_the_bundle_ships_its_old_name():
    renamed = prune.RENAMED_OBJECTS[0]
    assert prune.renamed_candidates([]) == [renamed]
    assert prune.renamed_candidates([Ref("rbac.authorization.k8s.io/v1", "ClusterRole", None, renamed.ref.name)]) == []


def test_the_owner_check():
    marked = {"metadata": {"name": "a", "labels": MARK}}
    assert prune.owner_check(marked) == (True, "dropped from the bundle and carries %s=%s" % (
        objects.MARK_KEY, objects.MARK_VALUE))
    assert prune.owner_check(None) == (False, "already gone")
    assert prune.owner_check({"metadata": {"labels": MARK, "deletionTimestamp": "now"}}) == (
        False, "already being deleted (Terminating); not touched")
    assert prune.owner_check({"metadata": {"labels": {}}})[0] is False
    renamed = prune.RENAMED_OBJECTS[0]
    assert prune.owner_check({"metadata": {"labels": {"app.kubernetes.io/name": "ichor"}}}, renamed) == (
        True, "renamed to ichor-ichor-override-role in the bundle and carries app.kubernetes.io/name=ichor")
    assert prune.owner_check(marked, renamed) == (False, "does not carry app.kubernetes.io/name=ichor")


def test_the_snapshot_form():
    live = {"apiVersion": "v1", "kind": "ConfigMap", "status": {},
            "metadata": {"name": "c", "namespace": NS, "uid": "u1", "resourceVersion": "7", "managedFields": []},
            "data": {"v": "1"}}
    entry = snapshot.entry(Ref.of(live), live)
    assert entry == {"ref": {"apiVersion": "v1", "kind": "ConfigMap", "namespace": NS, "name": "c"}, "uid": "u1",
                     "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": NS},
                                "data": {"v": "1"}}}
    text = snapshot.encode([entry], "run-1")
    decoded = snapshot.decode(text)
    assert (decoded.run_id, decoded.entries) == ("run-1", [entry])
    secret = snapshot.secret(text, NS)
    secret["metadata"].update(uid="u9", resourceVersion="12")
    found = snapshot.from_secret(secret)
    assert (found.run_id, found.entries, found.uid, found.version) == ("run-1", [entry], "u9", "12")
    assert found.describe() == "run run-1 (1 objects)"
    for bad in ('{"schema": 1, "run": "r", "entries": []}', "[]", '{"schema": 2, "entries": []}',
                '{"schema": 2, "run": 5, "entries": []}', '{"schema": 2, "run": "", "entries": []}'):
        with pytest.raises(snapshot.Unreadable) as exc:
            snapshot.decode(bad)
        assert exc.value.message == "not an installer snapshot"
    with pytest.raises(InstallerError):
        snapshot.decode("{not json")
    with pytest.raises(InstallerError):
        snapshot.from_secret({"data": {}})


def test_run_ids_differ_and_say_when():
    ids = set(snapshot.new_run_id() for n in range(100))
    assert len(ids) == 100
    assert all(re.match(r"^\d{8}T\d{6}Z-[0-9a-f]{12}$", i) for i in ids)
