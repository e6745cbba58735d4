"""The orphans of a Cilium takeover without a cluster (issue 26, section 5): what the foreign release's records list
minus what the chart renders, which of those are live and still the foreign release's, their backups, their deletion
by UID (restored when a delete fails), the plan lines, and the version refusal's "refused:" line."""

import json

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.cilium import orphans, record, takeover
from ansible_collections.maesh.ichor.plugins.module_utils.cilium.errors import CiliumError, Refused
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.errors import Conflict, KubeError, NotFound

from tests.unit.test_cilium_backend import _flow, _running
from tests import helm_record

CLUSTER_SCOPED = ("ClusterRole", "ClusterRoleBinding", "Namespace")
OWNED = {"meta.helm.sh/release-name": "cilium", "meta.helm.sh/release-namespace": "kube-system"}


def _namespaced(api_version, kind):
    return None if kind == "Gone" else kind not in CLUSTER_SCOPED


def _doc(kind, name, namespace=None, api_version="v1", **extra):
    meta = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return dict({"apiVersion": api_version, "kind": kind, "metadata": meta}, **extra)


def _record(revision, docs, status="superseded", name="cilium", namespace="kube-system"):
    release = {"name": name, "namespace": namespace, "version": revision, "config": {},
               "manifest": "".join("---\n# Source: cilium/templates/x.yaml\n" + yaml.safe_dump(d) for d in docs)}
    return record.Record({"metadata": {"name": record.secret_name(name, revision), "namespace": namespace,
                                       "uid": "rec-%d" % revision,
                                       "labels": {"name": name, "owner": "helm", "status": status,
                                                  "version": str(revision)}},
                          "type": record.TYPE, "data": {"release": helm_record.encode(release)}})


CHART = [_doc("ConfigMap", "cilium-config", "kube-system"), _doc("DaemonSet", "cilium", "kube-system", "apps/v1"),
         _doc("ClusterRole", "cilium", api_version="rbac.authorization.k8s.io/v1"),
         _doc("Job", "hubble-generate-certs-new", "kube-system", "batch/v1")]
RELAY = [_doc("Deployment", "hubble-relay", None, "apps/v1"), _doc("ConfigMap", "hubble-relay-config", "kube-system")]
OLD_JOB = _doc("Job", "hubble-generate-certs-old", "kube-system", "batch/v1")


def test_what_the_records_list_and_the_chart_does_not_render():
    """Every revision counts (a failed upgrade's record lists less than what runs), each object once; an object written
    without a namespace is where helm put it; identities ignore the API version, not the group; a cluster-scoped
    object written with a namespace is still the same object."""
    old_role = _doc("ClusterRole", "cilium", "kube-system", "rbac.authorization.k8s.io/v1beta1")
    v1 = _record(1, CHART[:3] + RELAY + [OLD_JOB, old_role])
    v2 = _record(2, CHART[:3] + [OLD_JOB], status="failed")
    found = orphans.not_rendered([v2, v1], CHART, _namespaced, "ichor-system")
    assert found == [
        ("batch/v1", "Job", "kube-system", "hubble-generate-certs-old", ("kube-system", "cilium")),
        ("apps/v1", "Deployment", "kube-system", "hubble-relay", ("kube-system", "cilium")),
        ("v1", "ConfigMap", "kube-system", "hubble-relay-config", ("kube-system", "cilium"))]
    # the chart's objects written without a namespace land in the release's (ichor-system), not in kube-system
    bare = [_doc("ConfigMap", "cilium-config")]
    keys = orphans.rendered_keys(bare, _namespaced, "ichor-system")
    assert keys == {("", "ConfigMap", "ichor-system", "cilium-config")}
    # a record that cannot be decoded is named, not fatal
    broken = _record(3, [])
    broken.secret["data"]["release"] = "bm90IGEgcmVsZWFzZQ=="
    notes = []
    assert orphans.listed([broken], _namespaced, notes) == []
    ref = "kube-system/sh.helm.release.v1.cilium.v3"
    assert notes == ["%s: the Helm record %s is not a Helm release (base64, base64, gzip, JSON); the objects it lists "
                     "are not checked" % (ref, ref)]


class Kube:
    """get, create, replace, delete over a dict of objects (Secrets get a uid and a resourceVersion when written)."""

    def __init__(self, objects=(), fail_delete=None, forbidden=(), served=True):
        self.objects = {}
        for obj in objects:
            self._put(obj)
        self.fail_delete = fail_delete or {}
        self.forbidden = forbidden
        self.served = served
        self.calls = []
        self.count = 0

    def _put(self, obj):
        meta = obj["metadata"]
        self.objects[(obj["kind"], meta.get("namespace"), meta["name"])] = json.loads(json.dumps(obj))

    def resource(self, api_version, kind):
        if kind == "Gone":
            raise KubeError("the API server does not serve %s %s" % (api_version, kind))
        return type("R", (), {"namespaced": kind not in CLUSTER_SCOPED})

    def get(self, api_version, kind, name, namespace=None):
        if name in self.forbidden:
            raise KubeError("get %s %s/%s: 403 Forbidden" % (kind, namespace, name), status=403)
        found = self.objects.get((kind, namespace, name))
        return json.loads(json.dumps(found)) if found is not None else None

    def create(self, obj):
        self.calls.append(("create", obj["kind"], obj["metadata"]["name"]))
        self.count += 1
        obj = json.loads(json.dumps(obj))
        obj["metadata"].update({"uid": "new-%d" % self.count, "resourceVersion": str(self.count)})
        self._put(obj)
        return obj

    def replace(self, obj):
        self.calls.append(("replace", obj["kind"], obj["metadata"]["name"]))
        return self.create(obj)

    def delete(self, api_version, kind, name, namespace=None, uid=None):
        self.calls.append(("delete", kind, name, uid))
        if name in self.fail_delete:
            raise self.fail_delete[name]
        key = (kind, namespace, name)
        if key not in self.objects:
            raise NotFound("gone", status=404)
        if self.objects[key]["metadata"].get("uid") != uid:
            raise Conflict("uid", status=409)
        del self.objects[key]


_OWNED = object()  # the default: the foreign release's annotations (None: none at all)


def _live(doc, uid, annotations=_OWNED, namespace="kube-system"):
    annotations = OWNED if annotations is _OWNED else annotations
    obj = json.loads(json.dumps(doc))
    if obj["kind"] not in CLUSTER_SCOPED:
        obj["metadata"]["namespace"] = obj["metadata"].get("namespace") or namespace
    obj["metadata"].update({"uid": uid, "resourceVersion": "7", "annotations": dict(annotations or {})})
    obj["status"] = {"ready": 1}
    return obj


def test_only_a_live_object_still_carrying_the_foreign_release_is_its_orphan():
    listed = RELAY + [OLD_JOB, _doc("ConfigMap", "users-own", "kube-system"),
                      _doc("ConfigMap", "taken", "kube-system"), _doc("Secret", "secret-one", "kube-system"),
                      _doc("Gone", "x", "kube-system", "example.com/v1"), _doc("ConfigMap", "gone", "kube-system")]
    kube = Kube([_live(RELAY[0], "u-relay"), _live(RELAY[1], "u-relay-config"),
                 _live(OLD_JOB, "u-job", dict(OWNED, **{orphans.RESOURCE_POLICY: "keep"})),
                 _live(listed[3], "u-users", annotations=None),
                 _live(listed[4], "u-taken", {"meta.helm.sh/release-name": "other",
                                              "meta.helm.sh/release-namespace": "apps"})],
                forbidden=("secret-one",))
    found, notes = orphans.find(kube, [_record(1, CHART + listed, status="deployed")], CHART, "ichor-system")
    assert [(o.ref, o.uid, o.release_ref, o.policy_keep) for o in found] == [
        ("ConfigMap kube-system/hubble-relay-config", "u-relay-config", "kube-system/cilium", False),
        ("Deployment kube-system/hubble-relay", "u-relay", "kube-system/cilium", False),
        ("Job kube-system/hubble-generate-certs-old", "u-job", "kube-system/cilium", True)]
    assert notes == [
        "ConfigMap kube-system/users-own: listed by the foreign release kube-system/cilium, not rendered by the chart, "
        "but it carries no Helm release's ownership annotations: not its orphan, left alone",
        "ConfigMap kube-system/taken: listed by the foreign release kube-system/cilium, not rendered by the chart, but "
        "owned by the Helm release apps/other now: not its orphan, left alone",
        "Secret kube-system/secret-one: listed by the foreign release kube-system/cilium, not rendered by the chart, "
        "cannot be read (get Secret kube-system/secret-one: 403 Forbidden): not checked; look for it yourself",
        "Gone kube-system/x: listed by the foreign release kube-system/cilium, not rendered by the chart, and the API "
        "server does not serve example.com/v1: not checked; look for it yourself"]
    assert found[0].summary() == {"object": "ConfigMap kube-system/hubble-relay-config", "apiVersion": "v1",
                                  "uid": "u-relay-config", "release": "kube-system/cilium", "action": "keep"}
    lines = orphans.lines(found, "chart 1.20.4", consent=True)
    assert lines[0] == ("gate: ConfigMap kube-system/hubble-relay-config: owned by the foreign release "
                        "kube-system/cilium, not rendered by chart 1.20.4: deleted after the hand-over "
                        "(delete_orphans), backed up first")
    assert lines[2].endswith("it stays (helm.sh/resource-policy: keep), owned by no release, after the takeover; "
                             "delete it yourself when nothing needs it")
    assert orphans.lines(found, "chart 1.20.4", consent=False)[0].endswith(
        "it stays, owned by no release, after the takeover (set delete_orphans to delete it)")


def test_a_backup_name_is_a_valid_secret_name_and_the_backup_holds_the_object_whole():
    job = orphans.Orphan("batch/v1", "Job", "kube-system", "hubble-generate-certs-old", ("kube-system", "cilium"),
                         _live(OLD_JOB, "u-job"))
    assert orphans.backup_name(job) == "ichor-cilium-orphan.job.batch.kube-system.hubble-generate-certs-old"
    role = orphans.Orphan("rbac.authorization.k8s.io/v1", "ClusterRole", None, "system:cilium-extra",
                          ("kube-system", "cilium"))
    name = orphans.backup_name(role)
    assert name.startswith("ichor-cilium-orphan.clusterrole.rbac.authorization.k8s.io.cluster.system-cilium-extra.")
    assert orphans.backup_name(role) == name and len(name) <= 253
    long = orphans.Orphan("v1", "ConfigMap", "kube-system", "x" * 253, ("kube-system", "cilium"))
    assert len(orphans.backup_name(long)) <= 253
    secret = orphans.backup_secret(job, "ichor-system")
    assert secret["metadata"]["labels"][orphans.BACKUP_OF] == "orphan" and secret["type"] == "Opaque"
    assert secret["metadata"]["annotations"] == {
        orphans.BACKUP_OF: "Job kube-system/hubble-generate-certs-old", orphans.BACKUP_UID: "u-job",
        orphans.BACKUP_RELEASE: "kube-system/cilium"}
    assert orphans.decode(secret["data"]["object"]) == job.live


def test_a_job_is_restorable_without_what_the_server_made_for_it():
    labels = {"controller-uid": "u-job", "a": "b", "batch.kubernetes.io/controller-uid": "u"}
    live = _live(dict(OLD_JOB, spec={"selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-job"}},
                                     "template": {"metadata": {"labels": labels}}}), "u-job")
    out = orphans.restorable(live)
    assert "uid" not in out["metadata"] and "resourceVersion" not in out["metadata"] and "status" not in out
    assert "selector" not in out["spec"] and out["spec"]["template"]["metadata"]["labels"] == {"a": "b"}
    assert out["metadata"]["annotations"] == OWNED and live["spec"]["selector"]  # the input is not changed
    manual = dict(live, spec=dict(live["spec"], manualSelector=True))
    assert orphans.restorable(manual)["spec"]["selector"]


def _orphans(kube, consent=True):
    found, _notes = orphans.find(kube, [_record(1, CHART + RELAY + [OLD_JOB], status="deployed")], CHART,
                                 "ichor-system")
    for orphan in found:
        orphan.delete = consent and not orphan.policy_keep
    return found


def test_with_consent_every_backup_is_read_back_before_the_first_delete_and_deletes_carry_the_uid():
    kube = Kube([_live(RELAY[0], "u-relay"), _live(RELAY[1], "u-relay-config"), _live(OLD_JOB, "u-job")])
    said, result = [], {}
    done = orphans.Retirement(kube, "ichor-system", said.append, result).run(_orphans(kube))
    assert [c[0] for c in kube.calls] == ["create", "create", "create", "delete", "delete", "delete"]
    assert [c[1:] for c in kube.calls if c[0] == "delete"] == [
        ("ConfigMap", "hubble-relay-config", "u-relay-config"), ("Deployment", "hubble-relay", "u-relay"),
        ("Job", "hubble-generate-certs-old", "u-job")]
    assert [d["uid"] for d in done] == ["u-relay-config", "u-relay", "u-job"]
    assert done[2]["backup"] == "ichor-system/ichor-cilium-orphan.job.batch.kube-system.hubble-generate-certs-old"
    assert said[-1] == ("deleted: Job kube-system/hubble-generate-certs-old (uid u-job; its backup ichor-system/"
                        "ichor-cilium-orphan.job.batch.kube-system.hubble-generate-certs-old read back identical)")
    backup = kube.get("v1", "Secret", "ichor-cilium-orphan.job.batch.kube-system.hubble-generate-certs-old",
                      "ichor-system")
    assert orphans.decode(backup["data"]["object"])["metadata"]["uid"] == "u-job"
    assert kube.get("batch/v1", "Job", "hubble-generate-certs-old", "kube-system") is None
    # without consent nothing is written
    kube = Kube([_live(OLD_JOB, "u-job")])
    assert orphans.Retirement(kube, "ichor-system", said.append, result).run(_orphans(kube, consent=False)) == []
    assert kube.calls == []


def test_an_object_changed_since_it_was_checked_is_not_deleted():
    kube = Kube([_live(RELAY[0], "u-relay"), _live(RELAY[1], "u-relay-config"), _live(OLD_JOB, "u-job")])
    found = _orphans(kube)
    kube._put(_live(RELAY[0], "u-relay-again"))  # re-created since the plan (another uid)
    del kube.objects[("Job", "kube-system", "hubble-generate-certs-old")]  # gone meanwhile
    said = []
    done = orphans.Retirement(kube, "ichor-system", said.append, {}).run(found)
    assert [d["object"] for d in done] == ["ConfigMap kube-system/hubble-relay-config"]
    assert "kept: Deployment kube-system/hubble-relay changed since it was checked (another uid or owner); it is not " \
           "deleted: look at it yourself" in said
    assert "gone already: Job kube-system/hubble-generate-certs-old (uid u-job)" in said
    assert kube.get("apps/v1", "Deployment", "hubble-relay", "kube-system")["metadata"]["uid"] == "u-relay-again"
    # re-created between the read and the delete: the UID precondition keeps it
    kube = Kube([_live(OLD_JOB, "u-job")], fail_delete={"hubble-generate-certs-old": Conflict("uid", status=409)})
    said = []
    assert orphans.Retirement(kube, "ichor-system", said.append, {}).run(_orphans(kube)) == []
    assert said[-1] == ("kept: Job kube-system/hubble-generate-certs-old was re-created since it was checked (another "
                        "uid); it is not deleted")


def test_a_failed_delete_restores_what_this_run_deleted_and_keeps_the_records():
    denied = KubeError("delete Job kube-system/hubble-generate-certs-old: 403 Forbidden", status=403)
    kube = Kube([_live(RELAY[0], "u-relay"), _live(RELAY[1], "u-relay-config"), _live(OLD_JOB, "u-job")],
                fail_delete={"hubble-generate-certs-old": denied})
    said, result = [], {"plan": []}
    with pytest.raises(CiliumError) as info:
        orphans.Retirement(kube, "ichor-system", said.append, result).run(_orphans(kube))
    assert info.value.message == (
        "deleting Job kube-system/hubble-generate-certs-old failed (delete Job kube-system/hubble-generate-certs-old: "
        "403 Forbidden); the 2 objects deleted before it were created again from their backups (Deployment "
        "kube-system/hubble-relay, ConfigMap kube-system/hubble-relay-config); the foreign records are kept: fix it "
        "and rerun")
    assert info.value.result is result
    relay = kube.get("apps/v1", "Deployment", "hubble-relay", "kube-system")
    assert relay["metadata"]["annotations"] == OWNED and "status" not in relay
    assert kube.get("v1", "ConfigMap", "hubble-relay-config", "kube-system") is not None
    assert said[-2:] == [
        "restored: Deployment kube-system/hubble-relay from ichor-system/ichor-cilium-orphan.deployment.apps."
        "kube-system.hubble-relay (a new uid)",
        "restored: ConfigMap kube-system/hubble-relay-config from ichor-system/ichor-cilium-orphan.configmap."
        "kube-system.hubble-relay-config (a new uid)"]


def test_a_backup_that_holds_another_object_or_does_not_read_back_stops_before_any_delete():
    kube = Kube([_live(OLD_JOB, "u-job")])
    found = _orphans(kube)
    other = orphans.backup_secret(found[0], "ichor-system")
    other["metadata"]["annotations"][orphans.BACKUP_UID] = "u-earlier"
    kube._put(other)
    with pytest.raises(CiliumError, match="holds another object \\(uid u-earlier\\) than Job kube-system/"
                                          "hubble-generate-certs-old \\(uid u-job\\); it is kept and nothing is "
                                          "deleted"):
        orphans.Retirement(kube, "ichor-system", lambda line: None, {}).run(found)
    assert not [c for c in kube.calls if c[0] == "delete"]
    # the same object, changed since an earlier run's backup: the backup is replaced, then read back
    kube = Kube([_live(OLD_JOB, "u-job")])
    found = _orphans(kube)
    earlier = orphans.backup_secret(found[0], "ichor-system")
    earlier["data"]["object"] = orphans.encode({"older": True})
    kube._put(earlier)
    orphans.Retirement(kube, "ichor-system", lambda line: None, {}).run(found)
    assert [c[0] for c in kube.calls] == ["replace", "create", "delete"]

    class Lossy(Kube):
        def create(self, obj):
            obj = dict(obj, data={"object": orphans.encode({"truncated": True})})
            return Kube.create(self, obj)
    kube = Lossy([_live(OLD_JOB, "u-job")])
    with pytest.raises(CiliumError, match="is not what was written; nothing is deleted"):
        orphans.Retirement(kube, "ichor-system", lambda line: None, {}).run(_orphans(kube))
    assert kube.get("batch/v1", "Job", "hubble-generate-certs-old", "kube-system") is not None


def test_the_takeover_plans_its_orphans_kept_or_deleted_and_check_mode_writes_nothing():
    kube = Kube([_live(RELAY[0], "u-relay"), _live(OLD_JOB, "u-job", dict(OWNED, **{orphans.RESOURCE_POLICY: "keep"}))])
    for consent in (False, True):
        flow = takeover.Takeover({"delete_orphans": consent}, kube, helm=None)
        flow.foreign = [_record(1, CHART + RELAY[:1] + [OLD_JOB], status="deployed")]
        flow._orphans(json.loads(json.dumps(CHART)), "chart 1.20.4")  # pylint: disable=protected-access
        flow.chart_version = "1.20.4"
        flow._steps()  # pylint: disable=protected-access
        result = flow.plan.result
        assert [(o["object"], o["action"]) for o in result["orphans"]] == [
            ("Deployment kube-system/hubble-relay", "delete" if consent else "keep"),
            ("Job kube-system/hubble-generate-certs-old", "keep")]
        plan = result["plan"]
        assert plan[0] == ("diff gate: 2 objects of the foreign release that chart 1.20.4 does not render (Helm's "
                           "take-ownership leaves them owned by no release)")
        assert "keep: Job kube-system/hubble-generate-certs-old (uid u-job), owned by no release; it is listed in " \
               "the cluster record ichor-system/ichor-cluster" in plan
        relay = [line for line in plan if "Deployment kube-system/hubble-relay" in line and not line.startswith("gate")]
        if consent:
            assert relay == ["back up Deployment kube-system/hubble-relay into ichor-system/ichor-cilium-orphan."
                             "deployment.apps.kube-system.hubble-relay, read it back, then delete it (uid u-relay, "
                             "only if still the same object and the foreign release's), before the foreign records "
                             "are retired"]
            assert [d["after_header"] for d in result["diff"]] == ["Deployment kube-system/hubble-relay (deleted: "
                                                                   "delete_orphans)"]
        else:
            assert relay == ["keep: Deployment kube-system/hubble-relay (uid u-relay), owned by no release; it is "
                             "listed in the cluster record ichor-system/ichor-cluster"]
            assert result["diff"] == []
    assert kube.calls == []  # planning reads only
    # no foreign record (a record-less Cilium): nothing to list
    flow = takeover.Takeover({"delete_orphans": True}, kube, helm=None)
    flow._orphans(CHART, "chart 1.20.4")  # pylint: disable=protected-access
    assert flow.plan.result["orphans"] == [] and flow.plan.lines == []


@pytest.mark.parametrize("version, message", [
    ("1.18.6", "refused: Cilium 1.18.6 is more than one minor below the chart 1.20.4: upgrade it with the tool that "
               "installed it first (to 1.19), then run the takeover again"),
    ("1.21.0", "refused: Cilium 1.21.0 is newer than this collection's chart 1.20.4: a takeover would downgrade it; "
               "use a maesh.ichor whose release set has Cilium 1.21")])
def test_a_version_refusal_ends_the_plan_with_its_refused_line(version, message):
    with pytest.raises(Refused) as info:
        _flow(_running(version=version))
    assert info.value.result["plan"][-1] == message == "refused: " + info.value.message
