"""module_utils.installer's stages (apply_run, prune_run, restore) without Ansible and without a lab: an
Installer over a fake KubeClient that keeps objects in a dict, records every write and fails on demand."""

import base64
import copy
import itertools
import json
import os
import stat

import pytest
import yaml

from tests import collection_path

collection_path.ensure()

# pylint: disable=wrong-import-position
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.installer import (  # noqa: E402
    inventory, objects, prune, snapshot, stages)
from ansible_collections.maesh.ichor.plugins.module_utils.installer.errors import (  # noqa: E402
    BundleError, InstallerError, RunFailed)
from ansible_collections.maesh.ichor.plugins.module_utils.installer.live import Installer  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import Conflict, KubeError, NotFound  # noqa: E402

NS = "ichor-system"
MARK = {objects.MARK_KEY: objects.MARK_VALUE}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "PriorityClass",
                  "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}


RUN = "20261201T080000Z-000000000001"


class Resource:
    def __init__(self, namespaced):
        self.namespaced = namespaced


class FakeKube:
    """The KubeClient calls the Installer makes, over a dict. ``fail`` maps (verb, name) to the error to raise
    (or to a function that raises it)."""

    def __init__(self):
        self.store = {}
        self.writes = []
        self.fail = {}
        self.unserved = set()  # kinds API discovery no longer knows (a custom resource whose CRD is gone)
        self._ids = itertools.count(1)
        self.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})

    @staticmethod
    def _key(api_version, kind, name, namespace):
        group = api_version.split("/", 1)[0] if "/" in api_version else ""
        return (group, kind, namespace or "", name)

    def _obj_key(self, obj):
        meta = obj["metadata"]
        return self._key(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))

    def _check(self, verb, name):
        error = self.fail.get((verb, name))
        if callable(error):
            error()
        elif error is not None:
            raise error

    def _stored(self, obj, previous=None):
        obj = copy.deepcopy(obj)
        meta = obj["metadata"]
        if obj["kind"] == "Secret" and "stringData" in obj:
            data = obj.setdefault("data", {})
            for key, value in obj.pop("stringData").items():
                data[key] = base64.b64encode(value.encode()).decode()
        meta["uid"] = (previous or {}).get("metadata", {}).get("uid") or "uid-%d" % next(self._ids)
        meta["resourceVersion"] = str(next(self._ids))
        meta.pop("deletionTimestamp", None)
        return obj

    def _namespace_exists(self, obj):
        ns = obj["metadata"].get("namespace")
        if ns and self._key("v1", "Namespace", ns, None) not in self.store:
            raise NotFound("namespaces %s not found" % ns, status=404)

    def put(self, obj):
        """Set up the world (not a write of the code under test)."""
        stored = self._stored(obj)
        self.store[self._obj_key(stored)] = stored
        return stored

    def resource(self, api_version, kind):
        if kind in self.unserved:
            raise KubeError("the API server does not serve %s %s" % (api_version, kind))
        return Resource(kind not in CLUSTER_SCOPED)

    def get(self, api_version, kind, name, namespace=None):
        self.resource(api_version, kind)
        self._check("get", name)
        obj = self.store.get(self._key(api_version, kind, name, namespace))
        return copy.deepcopy(obj)

    def apply(self, obj, field_manager, dry_run=False, force=True):
        assert field_manager == objects.FIELD_MANAGER
        self._namespace_exists(obj)
        key = self._obj_key(obj)
        previous = self.store.get(key)
        new = self._stored(obj, previous)
        if dry_run:
            self._check("dry-run", obj["metadata"]["name"])
            return new
        self._check("apply", obj["metadata"]["name"])
        self.writes.append(("apply", key))
        self.store[key] = new
        return copy.deepcopy(new)

    def create(self, obj, dry_run=False):
        assert not dry_run
        self._namespace_exists(obj)
        self._check("create", obj["metadata"]["name"])
        key = self._obj_key(obj)
        if key in self.store:
            raise Conflict("create: 409 AlreadyExists", status=409)
        self.writes.append(("create", key))
        self.store[key] = self._stored(obj)
        return copy.deepcopy(self.store[key])

    def replace(self, obj, dry_run=False):
        assert not dry_run
        self._check("replace", obj["metadata"]["name"])
        key = self._obj_key(obj)
        live = self.store.get(key)
        if live is None:
            raise NotFound("update: 404", status=404)
        if obj["metadata"].get("resourceVersion") not in (None, live["metadata"]["resourceVersion"]):
            raise Conflict("update: 409 Conflict", status=409)
        self.writes.append(("replace", key))
        self.store[key] = self._stored(obj, live)
        return copy.deepcopy(self.store[key])

    def delete(self, api_version, kind, name, namespace=None, uid=None, resource_version=None, dry_run=False):
        assert not dry_run
        self._check("delete", name)
        key = self._key(api_version, kind, name, namespace)
        live = self.store.get(key)
        if live is None:
            raise NotFound("delete: 404", status=404)
        if uid and live["metadata"]["uid"] != uid:
            raise Conflict("delete: 409 Conflict: the UID in the precondition does not match", status=409)
        if resource_version and live["metadata"]["resourceVersion"] != resource_version:
            raise Conflict("delete: 409 Conflict: the resourceVersion in the precondition does not match", status=409)
        self.writes.append(("delete", key))
        del self.store[key]

    # what the tests look at
    def live(self, kind, name, namespace=NS):
        api_version = "rbac.authorization.k8s.io/v1" if kind == "ClusterRole" else "v1"
        return self.get(api_version, kind, name, namespace if kind not in CLUSTER_SCOPED else None)


class Conn:
    """The runner's Connections, as far as the stages use them."""

    def __init__(self, kube):
        self._kube = kube

    def kube(self):
        return self._kube


def sa(name, ns=NS):
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": ns}}


def cm(name, value="1"):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS}, "data": {"v": value}}


def cr(name):
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}


@pytest.fixture
def kube():
    return FakeKube()


@pytest.fixture
def write(tmp_path):
    """write(name, objects) -> the bundle paths of a one-file bundle."""
    def _write(name, objs):
        directory = tmp_path / name
        directory.mkdir()
        (directory / "bundle.yaml").write_text(yaml.safe_dump_all(objs))
        return [str(directory)]
    return _write


def installer(kube, paths, **kwargs):
    """An Installer of run RUN unless told otherwise."""
    kwargs.setdefault("run_id", RUN)
    return Installer(kube, paths, **kwargs)


def install(kube, paths, check=False, **kwargs):
    """One run as the role makes it: apply then prune, each with its own Installer, both with a new run id."""
    kwargs.setdefault("run_id", snapshot.new_run_id())
    applied = stages.apply_run(installer(kube, paths, **kwargs), check)
    pruned = stages.prune_run(installer(kube, paths, **kwargs), check)
    return applied, pruned


def test_a_first_run_snapshots_applies_prunes_nothing_and_records_its_inventory(kube, write):
    paths = write("v1", [sa("a"), cm("c"), cr("r")])
    applied = stages.apply_run(installer(kube, paths), False)
    assert applied["changed"]
    assert applied["plan"] == ["create ServiceAccount %s/a" % NS, "create ClusterRole r", "create ConfigMap %s/c" % NS,
                               "recorded the objects to apply in the inventory %s/%s (3 objects)" % (
                                   NS, inventory.INVENTORY_NAME)]
    assert [c["action"] for c in applied["changes"]] == ["create"] * 3
    assert applied["changes"][0]["object"] == {"apiVersion": "v1", "kind": "ServiceAccount", "namespace": NS,
                                               "name": "a"}
    assert applied["prune"] == [] and applied["warnings"] == []
    assert kube.live("ServiceAccount", "a")["metadata"]["labels"] == MARK
    # the snapshot says the three were absent, so a restore would delete them
    saved = snapshot.from_secret(kube.live("Secret", snapshot.SNAPSHOT_NAME))
    assert saved.run_id == RUN and applied["run_id"] == RUN
    assert [e["object"] for e in saved.entries] == [None, None, None]
    # the inventory lists them before they are applied: written right after the snapshot
    first_apply = next(i for i, w in enumerate(kube.writes) if w[0] == "apply" and w[1][1] != "Secret")
    assert kube.writes.index(("create", ("", "ConfigMap", NS, inventory.INVENTORY_NAME))) < first_apply
    recorded, warnings = inventory.parse(kube.live("ConfigMap", inventory.INVENTORY_NAME))
    assert warnings == [] and sorted(str(r) for r in recorded) == sorted(
        ["ServiceAccount %s/a" % NS, "ConfigMap %s/c" % NS, "ClusterRole r"])

    pruned = stages.prune_run(installer(kube, paths), False)
    assert pruned["changed"] and pruned["pruned"] == [] and pruned["kept"] == []
    assert pruned["plan"] == []  # the inventory is already what it should be; the snapshot is gone
    assert kube.live("Secret", snapshot.SNAPSHOT_NAME) is None


def test_check_mode_plans_the_whole_run_and_writes_nothing(kube, write):
    install(kube, write("v1", [sa("a"), sa("b"), cm("c")]))
    before = len(kube.writes)
    applied, pruned = install(kube, write("v2", [sa("a"), cm("c", value="2")]), check=True)
    assert kube.writes[before:] == []
    assert applied["changed"] and pruned["changed"]
    assert applied["plan"] == ["update ConfigMap %s/c" % NS,
                               "prune ServiceAccount %s/b: dropped from the bundle and carries %s=%s" % (
                                   NS, objects.MARK_KEY, objects.MARK_VALUE)]
    assert applied["prune"] == [{"action": "prune", "object": {"apiVersion": "v1", "kind": "ServiceAccount",
                                                               "namespace": NS, "name": "b"},
                                 "reason": "dropped from the bundle and carries %s=%s" % (
                                     objects.MARK_KEY, objects.MARK_VALUE)}]
    assert [(d["before_header"], "v: '1'" in d["before"], "v: '2'" in d["after"]) for d in applied["diff"]] == [
        ("ConfigMap %s/c" % NS, True, True), ("ServiceAccount %s/b" % NS, False, False)]
    assert pruned["plan"][-1] == "write the inventory %s/%s (2 objects)" % (NS, inventory.INVENTORY_NAME)


def test_a_rerun_writes_nothing_and_is_not_changed(kube, write):
    paths = write("v1", [sa("a"), cm("c")])
    install(kube, paths)
    before = len(kube.writes)
    applied, pruned = install(kube, paths)
    assert not applied["changed"] and not pruned["changed"]
    assert applied["plan"] == [] and pruned["plan"] == []
    assert kube.writes[before:] == []


def test_the_prune_deletes_only_marked_prunable_objects_of_its_namespace(kube, write):
    kube.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    install(kube, write("v1", [sa("old"), sa("unmarked"), sa("elsewhere", ns="other"), cm("settings"), cr("old-role"),
                               sa("ichor-installer-extra")]))
    person = kube.live("ServiceAccount", "unmarked")
    person["metadata"]["labels"] = {}
    kube.put(person)
    applied, pruned = install(kube, write("v2", [sa("new")]))
    assert sorted(pruned["pruned"]) == ["ClusterRole old-role", "ServiceAccount %s/old" % NS]
    assert kube.live("ServiceAccount", "old") is None and kube.live("ClusterRole", "old-role") is None
    kept = dict((k["object"], k["reason"]) for k in pruned["kept"])
    assert kept == {
        "ServiceAccount %s/unmarked" % NS: "does not carry %s=%s (not installed by the installer, or relabelled by a "
                                           "person)" % (objects.MARK_KEY, objects.MARK_VALUE),
        "ServiceAccount other/elsewhere": "in namespace other, not the installer's %s" % NS,
        "ConfigMap %s/settings" % NS: "ConfigMap is not a kind the installer prunes",
        "ServiceAccount %s/ichor-installer-extra" % NS: "the installer's own object"}
    for name in ("unmarked", "settings", "ichor-installer-extra"):
        assert kube.live("ConfigMap" if name == "settings" else "ServiceAccount", name) is not None
    assert kube.live("ServiceAccount", "elsewhere", namespace="other") is not None
    assert [p["action"] for p in applied["prune"]].count("prune") == 2


def test_a_failed_apply_restores_the_cluster(kube, write):
    install(kube, write("v1", [cm("c", value="before")]))
    before = kube.live("ConfigMap", "c")
    kube.fail[("apply", "z")] = KubeError("apply ConfigMap %s/z: 422 Invalid" % NS, status=422)
    with pytest.raises(RunFailed) as exc:
        # applied in this order: the ServiceAccount, c, then z fails
        stages.apply_run(installer(kube, write("v2", [sa("a"), cm("c", value="after"), cm("z")])), False)
    assert isinstance(exc.value, IchorError)
    assert exc.value.message == ("apply failed: apply ConfigMap %s/z: 422 Invalid; the cluster was restored to "
                                 "what it was before the run" % NS)
    assert exc.value.result["restored"] == []
    assert exc.value.result["plan"][0] == "create ServiceAccount %s/a" % NS
    assert kube.live("ServiceAccount", "a") is None
    assert objects.comparable(kube.live("ConfigMap", "c")) == objects.comparable(before)
    assert kube.live("Secret", snapshot.SNAPSHOT_NAME) is None


def test_a_snapshot_that_cannot_be_written_stops_the_run_before_any_change(kube, write):
    kube.fail[("apply", snapshot.SNAPSHOT_NAME)] = KubeError("apply Secret: 403 Forbidden", status=403)
    with pytest.raises(RunFailed) as exc:
        stages.apply_run(installer(kube, write("v1", [sa("a")])), False)
    assert exc.value.message == "apply failed: apply Secret: 403 Forbidden; nothing was written"
    assert kube.live("ServiceAccount", "a") is None


def test_a_failed_delete_restores_and_names_what_was_re_created(kube, write):
    install(kube, write("v1", [sa("a-first"), sa("z-blocked"), cm("settings", value="before")]))
    v2 = write("v2", [cm("settings", value="after")])
    assert stages.apply_run(installer(kube, v2), False)["changed"]
    kube.fail[("delete", "z-blocked")] = KubeError("delete ServiceAccount: 403 z-blocked may not be deleted")
    with pytest.raises(RunFailed) as exc:
        stages.prune_run(installer(kube, v2), False)
    message = exc.value.message
    assert message.startswith("prune failed: delete ServiceAccount: 403 z-blocked may not be deleted; the cluster "
                              "was restored to what it was before the run")
    assert message.endswith("(re-created: ServiceAccount %s/a-first)" % NS)
    assert exc.value.result["restored"] == ["ServiceAccount %s/a-first" % NS]
    assert kube.live("ServiceAccount", "a-first") is not None
    assert kube.live("ConfigMap", "settings")["data"] == {"v": "before"}
    assert kube.live("Secret", snapshot.SNAPSHOT_NAME) is None


def test_a_failed_restore_keeps_the_snapshot_and_says_so(kube, write):
    install(kube, write("v1", [sa("a"), sa("b")]))
    v2 = write("v2", [sa("a")])
    stages.apply_run(installer(kube, v2), False)

    def refuse_then_break_reads():
        kube.fail[("get", "b")] = KubeError("get: 500 boom")
        raise KubeError("delete: 500 boom")

    kube.fail[("delete", "b")] = refuse_then_break_reads
    with pytest.raises(RunFailed) as exc:
        stages.prune_run(installer(kube, v2), False)
    assert exc.value.message == ("prune failed: delete: 500 boom; RESTORE FAILED (get: 500 boom): the snapshot is "
                                 "kept for installer_restore")
    assert kube.live("Secret", snapshot.SNAPSHOT_NAME) is not None


def test_an_object_re_created_after_the_check_is_kept(kube, write):
    install(kube, write("v1", [sa("a"), sa("gone")]))
    v2 = write("v2", [sa("a")])
    stages.apply_run(installer(kube, v2), False)
    old_uid = kube.live("ServiceAccount", "gone")["metadata"]["uid"]
    kube.store.pop(("", "ServiceAccount", NS, "gone"))
    kube.put(dict(sa("gone"), metadata={"name": "gone", "namespace": NS, "labels": MARK}))
    pruned = stages.prune_run(installer(kube, v2), False)
    assert kube.live("ServiceAccount", "gone")["metadata"]["uid"] != old_uid
    assert pruned["pruned"] == []
    assert {"object": "ServiceAccount %s/gone" % NS, "reason": "re-created since it was checked (new UID)"} in \
        pruned["kept"]


def test_an_inventory_that_cannot_be_written_after_the_prune_is_a_warning_and_still_lists_what_was_pruned(kube, write):
    install(kube, write("v1", [sa("a"), sa("b")]))
    v2 = write("v2", [sa("a")])
    stages.apply_run(installer(kube, v2), False)
    kube.fail[("replace", inventory.INVENTORY_NAME)] = KubeError("update ConfigMap: 403 Forbidden", status=403)
    pruned = stages.prune_run(installer(kube, v2), False)
    warning = ("the installer inventory could not be written (update ConfigMap: 403 Forbidden); it still lists what "
               "this run pruned, and the next run finds those gone")
    assert pruned["changed"] and pruned["pruned"] == ["ServiceAccount %s/b" % NS] and pruned["warnings"] == [warning]
    assert pruned["plan"][-1] == "WARNING: " + warning
    assert kube.live("Secret", snapshot.SNAPSHOT_NAME) is None
    assert sorted(r.name for r in inventory.parse(kube.live("ConfigMap", inventory.INVENTORY_NAME))[0]) == ["a", "b"]
    del kube.fail[("replace", inventory.INVENTORY_NAME)]
    unused_applied, pruned = install(kube, v2)  # the next run finds b gone and writes the inventory without it
    assert [r.name for r in inventory.parse(kube.live("ConfigMap", inventory.INVENTORY_NAME))[0]] == ["a"]


def test_an_inventory_that_cannot_be_recorded_before_the_apply_stops_the_run_with_nothing_applied(kube, write):
    install(kube, write("v1", [sa("a")]))
    kube.fail[("replace", inventory.INVENTORY_NAME)] = KubeError("update ConfigMap: 403 Forbidden", status=403)
    with pytest.raises(RunFailed, match="apply failed: update ConfigMap: 403 Forbidden; the cluster was restored"):
        stages.apply_run(installer(kube, write("v2", [sa("a"), sa("new")])), False)
    assert kube.live("ServiceAccount", "new") is None and kube.live("Secret", snapshot.SNAPSHOT_NAME) is None


def test_a_run_stopped_after_its_apply_leaves_its_objects_listed_and_a_later_run_prunes_them(kube, write):
    v1 = write("v1", [sa("a")])
    install(kube, v1)
    stages.apply_run(installer(kube, write("v2", [sa("a"), sa("new"), cr("role")]), run_id="killed"), False)
    listed = sorted(str(r) for r in inventory.parse(kube.live("ConfigMap", inventory.INVENTORY_NAME))[0])
    assert listed == ["ClusterRole role", "ServiceAccount %s/a" % NS, "ServiceAccount %s/new" % NS]
    unused_applied, pruned = install(kube, v1)
    assert sorted(pruned["pruned"]) == ["ClusterRole role", "ServiceAccount %s/new" % NS]
    assert [r.name for r in inventory.parse(kube.live("ConfigMap", inventory.INVENTORY_NAME))[0]] == ["a"]


def test_what_the_owner_check_keeps_stays_listed_and_is_pruned_once_it_carries_the_mark_again(kube, write):
    install(kube, write("v1", [sa("a"), sa("b")]))
    relabelled = kube.live("ServiceAccount", "b")
    relabelled["metadata"]["labels"] = {}
    kube.store[kube._obj_key(relabelled)] = relabelled  # pylint: disable=protected-access
    v2 = write("v2", [sa("a")])
    unused_applied, pruned = install(kube, v2)
    assert pruned["pruned"] == [] and [k["object"] for k in pruned["kept"]] == ["ServiceAccount %s/b" % NS]
    assert sorted(r.name for r in inventory.parse(kube.live("ConfigMap", inventory.INVENTORY_NAME))[0]) == ["a", "b"]
    relabelled["metadata"]["labels"] = dict(MARK)
    kube.store[kube._obj_key(relabelled)] = relabelled  # pylint: disable=protected-access
    unused_applied, pruned = install(kube, v2)
    assert pruned["pruned"] == ["ServiceAccount %s/b" % NS]


class Killed(BaseException):
    """A run's process ending (SIGKILL) at a write: no handler of the stages runs."""


# Objects of the kinds the installer prunes: the bundles of the interleaving property are drawn from them.
POOL = [sa("s%d" % i) for i in range(5)] + [cr("r%d" % i) for i in range(3)]


def _marked_pool_objects(kube):
    names = set(o["metadata"]["name"] for o in POOL)
    return sorted("%s %s" % (key[1], key[3]) for key, obj in kube.store.items()
                  if key[3] in names and (obj["metadata"].get("labels") or {}).get(objects.MARK_KEY))


def _listed(kube):
    refs = inventory.parse(kube.live("ConfigMap", inventory.INVENTORY_NAME))[0] or []
    return sorted("%s %s" % (r.kind, r.name) for r in refs)


def _kill_at(writes):
    """A fault hook: the stage's process ends at its ``writes``-th write (never with None)."""
    left = [writes]

    def count():
        if left[0] is not None:
            left[0] -= 1
            if left[0] <= 0:
                raise Killed()
    return count


def test_any_interleaving_of_installs_loses_no_object_and_one_calm_run_converges(kube, write):
    """Two and three runs with different bundles, their stages interleaved in a seeded random order, some killed at a
    random write (no rescue runs, as after SIGKILL), with no lock between them (what the lock prevents, the inventory
    must still survive): after every stage every marked object that exists is listed in the inventory, and one calm
    run with any bundle leaves exactly that bundle in the cluster and in the inventory, and no snapshot."""
    import random
    for case in range(60):
        rng = random.Random("interleave:%d" % case)
        kube.__init__()
        install(kube, write("base-%d" % case, rng.sample(POOL, rng.randint(1, len(POOL)))))
        runs = []
        for index in range(rng.choice((2, 3))):
            paths = write("b-%d-%d" % (case, index), rng.sample(POOL, rng.randint(1, len(POOL))))
            runs.append({"paths": paths, "id": "run-%d-%d" % (case, index), "stages": [stages.apply_run, stages.prune_run],
                         "kill_at": rng.choice([None, None] + list(range(1, 12)))})
        while any(r["stages"] for r in runs):
            run = rng.choice([r for r in runs if r["stages"]])
            stage = run["stages"].pop(0)
            count = _kill_at(run["kill_at"])
            for verb in ("apply", "create", "replace", "delete"):
                for obj in POOL + [{"metadata": {"name": n}} for n in (inventory.INVENTORY_NAME, snapshot.SNAPSHOT_NAME)]:
                    kube.fail[(verb, obj["metadata"]["name"])] = count
            try:
                stage(installer(kube, run["paths"], run_id=run["id"]), False)
            except Killed:
                run["stages"] = []
            except RunFailed:
                run["stages"] = []
            finally:
                kube.fail.clear()
            assert set(_marked_pool_objects(kube)) <= set(_listed(kube)), "case %d" % case
        last = [o for o in POOL if rng.random() < 0.5] or [POOL[0]]
        install(kube, write("calm-%d" % case, last))
        want = sorted("%s %s" % (o["kind"], o["metadata"]["name"]) for o in last)
        assert _marked_pool_objects(kube) == want, "case %d" % case
        assert _listed(kube) == want, "case %d" % case
        assert kube.live("Secret", snapshot.SNAPSHOT_NAME) is None, "case %d" % case


def test_an_unparseable_inventory_is_ignored_with_a_warning_and_the_renamed_role_is_pruned(kube, write):
    renamed = prune.RENAMED_OBJECTS[0]
    kube.put(dict(cr(renamed.ref.name), metadata={"name": renamed.ref.name,
                                                  "labels": {"app.kubernetes.io/name": "ichor"}}))
    kube.put(dict(sa("listed"), metadata={"name": "listed", "namespace": NS, "labels": MARK}))
    kube.put({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": inventory.INVENTORY_NAME, "namespace": NS},
              "data": {"objects": "{not json"}})
    applied, pruned = install(kube, write("v1", [sa("a")]))
    warning = ("the installer inventory %s/%s cannot be parsed; it is ignored and nothing it lists is pruned"
               % (NS, inventory.INVENTORY_NAME))
    assert applied["warnings"] == [warning] and "WARNING: " + warning in applied["plan"]
    assert "NOTICE: ClusterRole %s was renamed to %s in the bundle; the old object is still present" % (
        renamed.ref.name, renamed.new_name) in applied["plan"]
    assert pruned["pruned"] == ["ClusterRole %s" % renamed.ref.name]
    assert kube.live("ServiceAccount", "listed") is not None


def test_the_renamed_role_without_its_label_is_kept(kube, write):
    renamed = prune.RENAMED_OBJECTS[0]
    kube.put(cr(renamed.ref.name))
    applied, pruned = install(kube, write("v1", [sa("a")]))
    assert applied["prune"][0]["action"] == "keep"
    assert pruned["pruned"] == [] and kube.live("ClusterRole", renamed.ref.name) is not None
    assert pruned["kept"] == [{"object": "ClusterRole %s" % renamed.ref.name,
                               "reason": "does not carry app.kubernetes.io/name=ichor"}]


def test_a_secret_in_the_bundle_never_reaches_a_diff(kube, write):
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": NS},
              "stringData": {"token": "MARKER-not-for-the-diff"}}
    applied = stages.apply_run(installer(kube, write("v1", [secret])), True)
    assert "MARKER" not in repr(applied) and "<masked>" in applied["diff"][0]["after"]


def test_a_namespace_created_by_the_same_bundle_plans_as_a_create(kube, write):
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fresh"}}
    applied = stages.apply_run(installer(kube, write("v1", [ns, sa("a", ns="fresh")])), True)
    assert applied["plan"] == ["create Namespace fresh", "create ServiceAccount fresh/a"]


def test_restore_puts_the_snapshot_back_and_drops_it(kube, write):
    install(kube, write("v1", [sa("a"), cm("c", value="before")]))
    stages.apply_run(installer(kube, write("v2", [sa("a"), sa("b"), cm("c", value="after")])), False)
    # a step between apply and prune failed: the role calls installer_restore
    conn = Conn(kube)
    params = dict(namespace=NS, snapshot_file=None, run_id=RUN)
    before = len(kube.writes)
    planned = stages.run_stage(stages.restore, params, conn, True)
    assert planned == dict(changed=True, restored=[], plan=["restore ServiceAccount %s/b" % NS,
                                                            "restore ConfigMap %s/c" % NS])
    assert kube.writes[before:] == []
    done = stages.run_stage(stages.restore, params, conn, False)
    assert done["changed"] and done["restored"] == []
    assert kube.live("ServiceAccount", "b") is None and kube.live("ConfigMap", "c")["data"] == {"v": "before"}
    assert kube.live("Secret", snapshot.SNAPSHOT_NAME) is None
    assert stages.run_stage(stages.restore, params, conn, False) == dict(
        changed=False, plan=["no installer snapshot: nothing to restore"], restored=[])


def test_a_failed_restore_keeps_the_snapshot(kube, write):
    install(kube, write("v1", [cm("c", value="before")]))
    stages.apply_run(installer(kube, write("v2", [cm("c", value="after")])), False)
    kube.fail[("replace", "c")] = KubeError("update ConfigMap: 409 Conflict", status=409)
    with pytest.raises(InstallerError) as exc:
        stages.run_stage(stages.restore, dict(namespace=NS, snapshot_file=None, run_id=RUN), Conn(kube), False)
    assert exc.value.message == "restore failed: update ConfigMap: 409 Conflict; the snapshot is kept"
    assert exc.value.result == dict(plan=["restore ConfigMap %s/c" % NS])
    assert kube.live("Secret", snapshot.SNAPSHOT_NAME) is not None


def test_a_snapshot_file_is_0600_and_serves_the_restore(kube, write, tmp_path):
    path = str(tmp_path / "snapshot.json")
    install(kube, write("v1", [cm("c", value="before")]), snapshot_file=path)
    stages.apply_run(installer(kube, write("v2", [cm("c", value="after")]), snapshot_file=path), False)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert kube.live("Secret", snapshot.SNAPSHOT_NAME) is None
    stages.run_stage(stages.restore, dict(namespace=NS, snapshot_file=path, run_id=RUN), Conn(kube), False)
    assert kube.live("ConfigMap", "c")["data"] == {"v": "before"} and not os.path.exists(path)


def test_failures_before_a_plan_carry_an_empty_one(kube, tmp_path):
    path = tmp_path / "snapshot.json"
    path.write_text("{not json")
    with pytest.raises(InstallerError) as exc:
        stages.run_stage(stages.restore, dict(namespace=NS, snapshot_file=str(path), run_id=RUN), Conn(kube), False)
    assert exc.value.result == dict(plan=[])
    missing = str(tmp_path / "nowhere")
    with pytest.raises(BundleError) as exc:
        stages.run_stage(stages.apply_run, dict(bundle=[missing], namespace=NS, snapshot_file=None), Conn(kube), False)
    assert exc.value.message == "bundle path %s does not exist" % missing
    # installer_apply's failures carry the run's id, for the restore of the same run
    assert exc.value.result == dict(plan=[], run_id=exc.value.result["run_id"]) and exc.value.result["run_id"]


def test_a_bug_is_not_turned_into_a_one_line_failure(kube, write):
    paths = write("v1", [sa("a")])
    kube.fail[("get", "a")] = RuntimeError("a bug")
    with pytest.raises(RuntimeError):
        stages.run_stage(stages.apply_run, dict(bundle=paths, namespace=NS, snapshot_file=None), Conn(kube), True)


# -- issue 12: the snapshot file ---------------------------------------------------------------

def test_the_snapshot_file_is_a_new_0600_file_whatever_was_there(kube, write, tmp_path):
    directory = tmp_path / "state"
    directory.mkdir(mode=0o700)
    path = directory / "snapshot.json"
    path.write_text("old Secret values")
    os.chmod(str(path), 0o644)
    old_inode = os.stat(str(path)).st_ino
    install(kube, write("v1", [cm("c", value="before")]))
    stages.apply_run(installer(kube, write("v2", [cm("c", value="after")]), snapshot_file=str(path)), False)
    assert stat.S_IMODE(os.stat(str(path)).st_mode) == 0o600
    assert os.stat(str(path)).st_ino != old_inode  # a new file renamed over the old one, not the old one rewritten
    assert snapshot.decode(path.read_text()).run_id == RUN
    assert sorted(os.listdir(str(directory))) == ["snapshot.json"]  # no temporary file left


def test_a_link_at_the_snapshot_path_is_replaced_not_written_through(kube, write, tmp_path):
    directory = tmp_path / "state"
    directory.mkdir(mode=0o700)
    target = tmp_path / "elsewhere.txt"
    target.write_text("not the snapshot's")
    path = directory / "snapshot.json"
    os.symlink(str(target), str(path))
    stages.apply_run(installer(kube, write("v1", [cm("c")]), snapshot_file=str(path)), False)
    assert not os.path.islink(str(path)) and stat.S_IMODE(os.stat(str(path)).st_mode) == 0o600
    assert target.read_text() == "not the snapshot's"


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757, 0o1777])
def test_a_snapshot_file_in_a_directory_others_can_write_is_refused(kube, write, tmp_path, mode):
    directory = tmp_path / "shared"
    directory.mkdir()
    os.chmod(str(directory), mode)
    path = str(directory / "snapshot.json")
    message = ("refusing the snapshot file %s: its directory %s is writable by others (mode %04o); choose a directory "
               "only its owner can write" % (path, directory, mode))
    for check in (True, False):
        with pytest.raises(InstallerError) as exc:
            stages.run_stage(stages.apply_run, dict(bundle=write("v-%s" % check, [sa("a")]), namespace=NS,
                                                    snapshot_file=path), Conn(kube), check)
        assert exc.value.message == message
    with pytest.raises(InstallerError) as exc:
        stages.run_stage(stages.restore, dict(namespace=NS, snapshot_file=path, run_id=RUN), Conn(kube), False)
    assert exc.value.message == message
    assert kube.writes == [] and os.listdir(str(directory)) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_a_snapshot_file_in_another_users_directory_is_refused(kube, write, tmp_path):
    directory = tmp_path / "theirs"
    directory.mkdir(mode=0o700)
    os.chown(str(directory), 12345, 12345)
    path = str(directory / "snapshot.json")
    with pytest.raises(InstallerError) as exc:
        stages.apply_run(installer(kube, write("v1", [sa("a")]), snapshot_file=path), False)
    assert exc.value.message == ("refusing the snapshot file %s: its directory %s belongs to uid 12345, not to this "
                                 "user (uid 0) or root" % (path, directory))
    assert kube.writes == []


# -- issue 12: a snapshot another run left -----------------------------------------------------

KILLED = "20261201T070000Z-00000000dead"


def role_run(kube, paths, run_id, check=False):
    """The installer role: apply (it makes the id; here given, to know it), prune with it; on failure, restore with
    the id the apply returned. Returns (apply result, prune result or None, restore result or None)."""
    applied = pruned = restored = None
    try:
        applied = stages.apply_run(installer(kube, paths, run_id=run_id), check)
        pruned = stages.prune_run(installer(kube, paths, run_id=run_id), check)
    except IchorError as exc:
        applied = applied or dict(exc.result or {}, failed=True)
        restored = stages.run_stage(stages.restore, dict(namespace=NS, snapshot_file=None,
                                                         run_id=applied.get("run_id", run_id)), Conn(kube), check)
    return applied, pruned, restored


def killed_run(kube, write):
    """v1 installed; v2 applied by run KILLED, killed before its prune: its snapshot is left."""
    install(kube, write("v1", [sa("a"), sa("old"), cm("c", value="before")]))
    v2 = write("v2", [sa("a"), sa("new"), cm("c", value="after")])
    stages.apply_run(installer(kube, v2, run_id=KILLED), False)
    assert snapshot.from_secret(kube.live("Secret", snapshot.SNAPSHOT_NAME)).run_id == KILLED
    return v2


def leftover_warning(count=3):
    return ("the installer snapshot in the Secret %s/%s is of run %s (%d objects), which did not finish: this run never "
            "restores it; this run's snapshot replaces it, or this run's prune removes it (to roll that run back "
            "instead, run installer_restore with run_id %s first)" % (NS, snapshot.SNAPSHOT_NAME, KILLED, count, KILLED))


def test_a_failed_plan_after_a_killed_run_does_not_restore_that_runs_snapshot(kube, write):
    v2 = killed_run(kube, write)
    before = copy.deepcopy(kube.store)
    writes = len(kube.writes)
    # the next run fails in its dry-run plan (before it writes anything): the role restores with its own id
    kube.fail[("dry-run", "c")] = KubeError("apply ConfigMap %s/c: 422 Invalid" % NS, status=422)
    applied, pruned, restored = role_run(kube, write("v3", [sa("a"), sa("new"), cm("c", value="v3")]), "run-n")
    assert applied["failed"] and pruned is None
    assert restored["changed"] is False and restored["restored"] == []
    line = ("the installer snapshot in the Secret %s/%s is of run %s (3 objects), not of this run (run-n): not "
            "restored; to restore it, give run_id %s" % (NS, snapshot.SNAPSHOT_NAME, KILLED, KILLED))
    assert restored["plan"] == [line] and restored["warnings"] == [line]
    # nothing was written: what run KILLED applied stays, and so does its snapshot
    assert kube.writes[writes:] == [] and kube.store == before
    assert kube.live("ServiceAccount", "new") is not None and kube.live("ConfigMap", "c")["data"] == {"v": "after"}
    del kube.fail[("dry-run", "c")]
    # its plan names the snapshot left behind, in check mode too
    checked = stages.apply_run(installer(kube, v2, run_id="run-c"), True)
    assert leftover_warning() in checked["warnings"] and "WARNING: " + leftover_warning() in checked["plan"]


def test_restore_by_hand_needs_the_id_of_the_snapshot_it_restores(kube, write):
    killed_run(kube, write)
    conn = Conn(kube)
    writes = len(kube.writes)
    without = stages.run_stage(stages.restore, dict(namespace=NS, snapshot_file=None, run_id=None), conn, False)
    line = ("the installer snapshot in the Secret %s/%s is of run %s (3 objects), and no run_id was given: not "
            "restored; to restore it, give run_id %s" % (NS, snapshot.SNAPSHOT_NAME, KILLED, KILLED))
    assert without == dict(changed=False, plan=[line], restored=[], warnings=[line])
    assert kube.writes[writes:] == []
    planned = stages.run_stage(stages.restore, dict(namespace=NS, snapshot_file=None, run_id=KILLED), conn, True)
    assert planned["changed"] and kube.writes[writes:] == []
    done = stages.run_stage(stages.restore, dict(namespace=NS, snapshot_file=None, run_id=KILLED), conn, False)
    assert done["changed"]
    # v1 again: v2's new object gone, the ConfigMap as before, the snapshot dropped
    assert kube.live("ServiceAccount", "new") is None and kube.live("ConfigMap", "c")["data"] == {"v": "before"}
    assert kube.live("ServiceAccount", "old") is not None and kube.live("Secret", snapshot.SNAPSHOT_NAME) is None


def test_the_next_successful_run_replaces_the_snapshot_left_behind(kube, write):
    v2 = killed_run(kube, write)
    # the rerun of v2 has nothing to apply but the prune run KILLED did not make: its own snapshot replaces the old
    applied, pruned, restored = role_run(kube, v2, "run-n")
    assert restored is None
    assert applied["changed"] and leftover_warning() in applied["warnings"]
    assert pruned["pruned"] == ["ServiceAccount %s/old" % NS]
    assert kube.live("Secret", snapshot.SNAPSHOT_NAME) is None
    assert kube.live("ServiceAccount", "new") is not None and kube.live("ConfigMap", "c")["data"] == {"v": "after"}


def test_a_run_with_nothing_to_snapshot_drops_the_snapshot_left_behind(kube, write):
    v1 = write("v1", [sa("a"), cm("c", value="before")])
    install(kube, v1)
    stages.apply_run(installer(kube, write("v2", [sa("a"), sa("b")]), run_id=KILLED), False)
    # a person puts v1 back by hand: the next run of v1 has nothing to apply or prune, only the old snapshot
    kube.store.pop(("", "ServiceAccount", NS, "b"))
    for check in (True, False):
        applied, pruned, restored = role_run(kube, v1, "run-n", check=check)
        assert restored is None
        assert applied["changed"] is False and applied["warnings"] == [leftover_warning(1)]
        drop = "the snapshot in the Secret %s/%s left by run %s (1 objects)" % (NS, snapshot.SNAPSHOT_NAME, KILLED)
        assert pruned["changed"] is True and pruned["plan"][-1] == ("drop " if check else "dropped ") + drop
    assert kube.live("Secret", snapshot.SNAPSHOT_NAME) is None
    assert kube.live("ServiceAccount", "a") is not None and kube.live("ConfigMap", "c") is not None


def test_the_prune_never_uses_another_runs_snapshot(kube, write):
    install(kube, write("v1", [sa("a"), sa("b")]))
    v2 = write("v2", [sa("a")])
    stages.apply_run(installer(kube, v2, run_id=KILLED), False)
    # a prune given another run's id: b is planned, but it is not in that run's snapshot, so it is not deleted
    pruned = stages.prune_run(installer(kube, v2, run_id="run-n"), False)
    assert pruned["pruned"] == [] and kube.live("ServiceAccount", "b") is not None
    assert {"object": "ServiceAccount %s/b" % NS, "reason": "not in the run's snapshot; not deleted"} in pruned["kept"]


def test_a_snapshot_replaced_meanwhile_is_not_deleted(kube, write):
    install(kube, write("v1", [sa("a")]))
    v2 = write("v2", [sa("a"), sa("b")])
    mine = installer(kube, v2, run_id=KILLED)
    stages.apply_run(mine, False)
    found = mine.load_snapshot()
    stages.apply_run(installer(kube, write("v3", [sa("a"), sa("c")]), run_id="run-n"), False)
    assert mine.delete_snapshot(found) is False
    assert snapshot.from_secret(kube.live("Secret", snapshot.SNAPSHOT_NAME)).run_id == "run-n"


def test_a_snapshot_that_cannot_be_read_is_replaced_not_restored(kube, write):
    v1 = write("v1", [sa("a")])
    install(kube, v1)
    kube.put({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": snapshot.SNAPSHOT_NAME, "namespace": NS},
              "data": {"snapshot": "bm90IGpzb24="}})
    applied, pruned, restored = role_run(kube, v1, "run-n")
    assert restored is None
    warning = ("the installer snapshot in the Secret %s/%s cannot be read (Expecting value: line 1 column 1 (char 0)): "
               "this run never restores it; this run's snapshot replaces it, or this run's prune removes it"
               % (NS, snapshot.SNAPSHOT_NAME))
    assert applied["warnings"] == [warning] and not applied["changed"]
    assert pruned["changed"] and kube.live("Secret", snapshot.SNAPSHOT_NAME) is None


# -- issue 12: inventory entries that name nothing this server holds -----------------------------

def widget(name):
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name, "namespace": NS},
            "spec": {"size": 1}}


def test_an_inventory_entry_of_a_kind_no_longer_served_is_skipped_with_a_warning(kube, write):
    install(kube, write("v1", [sa("a"), sa("old"), widget("w")]))
    # the CRD is deleted: its custom resources go, and discovery no longer knows the kind
    kube.store.pop(("example.com", "Widget", NS, "w"))
    kube.unserved.add("Widget")
    applied, pruned = install(kube, write("v2", [sa("a")]))
    warning = ("the installer inventory %s/%s lists Widget %s/w, but the API server no longer serves example.com/v1 "
               "Widget; it is skipped and not pruned" % (NS, inventory.INVENTORY_NAME, NS))
    assert applied["warnings"] == [warning] and "WARNING: " + warning in applied["plan"]
    assert pruned["warnings"] == [warning] and pruned["pruned"] == ["ServiceAccount %s/old" % NS]
    refs, warnings = inventory.parse(kube.live("ConfigMap", inventory.INVENTORY_NAME))
    assert warnings == []
    assert refs == [objects.Ref("v1", "ServiceAccount", NS, "a")]
    # rewritten without it: the next run says nothing
    applied, pruned = install(kube, write("v3", [sa("a")]))
    assert applied["warnings"] == [] and not applied["changed"] and not pruned["changed"]


def test_malformed_inventory_entries_are_skipped_and_the_others_pruned(kube, write):
    paths = write("v1", [sa("a"), sa("b")])
    install(kube, paths)
    shipped_role = cr("shipped")
    stored = json.loads(kube.live("ConfigMap", inventory.INVENTORY_NAME)["data"]["objects"])
    stored += [{"apiVersion": 1, "kind": "ServiceAccount", "namespace": NS, "name": "a"}, ["not", "an", "object"],
               {"apiVersion": "v1", "kind": "ServiceAccount", "namespace": NS, "name": ["x"]},
               # a namespaced kind without a namespace, a cluster-scoped one with the installer's namespace
               {"apiVersion": "v1", "kind": "ServiceAccount", "namespace": None, "name": "a"},
               {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "namespace": NS, "name": "shipped"}]
    kube.store[("", "ConfigMap", NS, inventory.INVENTORY_NAME)]["data"]["objects"] = json.dumps(stored)
    v2 = write("v2", [sa("a"), shipped_role])
    applied, pruned = install(kube, v2)
    where = "%s/%s" % (NS, inventory.INVENTORY_NAME)
    assert applied["warnings"] == [
        "the installer inventory %s: entry 3 of 7 is malformed (apiVersion is not a non-empty string); it is skipped and "
        "nothing is pruned for it" % where,
        "the installer inventory %s: entry 4 of 7 is malformed (not an object); it is skipped and nothing is pruned for "
        "it" % where,
        "the installer inventory %s: entry 5 of 7 is malformed (name is not a non-empty string); it is skipped and "
        "nothing is pruned for it" % where,
        "the installer inventory %s lists ServiceAccount a, but ServiceAccount is namespaced and the entry has no "
        "namespace; it is skipped and not pruned" % where,
        "the installer inventory %s lists ClusterRole %s/shipped, but ClusterRole is cluster-scoped and the entry has a "
        "namespace; it is skipped and not pruned" % (where, NS)]
    # the well-formed entries still count: b is pruned; the ClusterRole the bundle ships is not
    assert pruned["pruned"] == ["ServiceAccount %s/b" % NS]
    assert kube.live("ClusterRole", "shipped") is not None
    assert install(kube, v2)[0]["warnings"] == []


# -- issue 11 §4: check mode and a real run agree on changed ---------------------------------------

def _scenario(kube, write, name):
    """A cluster state and the bundle of the next run."""
    v1 = write("v1", [sa("a"), sa("b"), cm("c")])
    install(kube, v1)
    if name == "nothing":
        return v1
    if name == "inventory deleted":
        kube.store.pop(("", "ConfigMap", NS, inventory.INVENTORY_NAME))
        return v1
    if name == "inventory lists a gone object":
        kube.store.pop(("", "ServiceAccount", NS, "b"))
        return write("v2", [sa("a"), cm("c")])
    if name == "update":
        return write("v2", [sa("a"), sa("b"), cm("c", value="2")])
    if name == "prune only":
        return write("v2", [sa("a"), cm("c")])
    if name == "snapshot left by another run":
        stages.apply_run(installer(kube, write("v2", [sa("a"), sa("b"), cm("c"), sa("d")]), run_id=KILLED), False)
        kube.store.pop(("", "ServiceAccount", NS, "d"))
        return v1
    raise AssertionError(name)


@pytest.mark.parametrize("name, apply_changed, prune_changed", [
    ("nothing", False, False),
    ("inventory deleted", False, True),
    ("inventory lists a gone object", False, True),
    ("update", True, True),
    ("prune only", True, True),
    ("snapshot left by another run", False, True),
])
def test_check_mode_and_a_real_run_agree_on_changed(kube, write, name, apply_changed, prune_changed):
    paths = _scenario(kube, write, name)
    twin = copy.deepcopy(kube)
    writes = len(kube.writes)
    checked = stages.apply_run(installer(kube, paths), True)
    assert kube.writes[writes:] == []
    real = stages.apply_run(installer(twin, paths), False)
    assert checked["changed"] is real["changed"] is apply_changed
    assert (twin.writes[writes:] != []) is apply_changed  # changed is whether it wrote
    # the prune, on the state the real apply left
    before_prune = copy.deepcopy(twin)
    checked = stages.prune_run(installer(before_prune, paths), True)
    real = stages.prune_run(installer(twin, paths), False)
    assert checked["changed"] is real["changed"] is prune_changed
