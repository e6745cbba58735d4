"""The takeover itself on the lab's real API server, real helm and the real chart (seed 0103 A2, A3, A4, A8): the
release stored in ichor-system with every object kept in kube-system, the foreign records backed up byte for byte
and deleted, the cluster record, no pod template changed by an empty gate, the repair of a stopped run, a rerun
changing nothing. Every takeover runs as the installer bundle's ichor-cilium-release ServiceAccount, bound to exactly
the rules generated from the chart (tests/lab/cilium/rbac.py), never as the lab's admin."""

import base64
import json
import os
import signal
import subprocess
import time

import pytest
import yaml
from kubernetes import client as k8s

from ansible_collections.maesh.ichor.plugins.module_utils.cilium import pipeline, record, takeover
from ansible_collections.maesh.ichor.plugins.module_utils.cilium.errors import CiliumError
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient

from tests.integration.test_cilium_takeover import Conn, _params, playbook
from tests.lab.cilium import fixtures, rbac_fixtures
from tests.lab.cilium.fixtures import TALOS_VALUES, merged

pytestmark = pytest.mark.lab

cilium_charts = fixtures.cilium_charts
cilium_lab = fixtures.cilium_lab
cilium_caller = rbac_fixtures.cilium_caller

USER_VALUES = {"debug": {"enabled": True}, "cluster": {"name": "prod"}}


def _run(kube_lab, cilium_charts, check=False, **extra):
    params = dict(_params(kube_lab, cilium_charts, **extra), wait=True, wait_timeout=60.0)
    return takeover.run(params, Conn(params["kubeconfig"]), check)


def _secrets(lab, namespace, selector):
    return sorted(lab.core.list_namespaced_secret(namespace, label_selector=selector).items, key=lambda s: s.metadata.name)


def _templates(lab):
    ds = lab.apps.read_namespaced_daemon_set("cilium", "kube-system")
    op = lab.apps.read_namespaced_deployment("cilium-operator", "kube-system")
    return ds.metadata.generation, lab.kube.api.sanitize_for_serialization(ds.spec.template), \
        lab.kube.api.sanitize_for_serialization(op.spec.template)


def _no_chart_object_in_ichor_system(kube_lab, lab):
    client = KubeClient(kubeconfig=kube_lab.kubeconfig)
    for doc in yaml.safe_load_all(open(lab.manifests[-1])):
        if doc and doc["metadata"].get("namespace"):
            assert client.get(doc["apiVersion"], doc["kind"], doc["metadata"]["name"], "ichor-system") is None, doc["kind"]


def _cluster_record(lab):
    return json.loads(lab.core.read_namespaced_config_map("ichor-cluster", "ichor-system").data["record"])


def test_a2_a4_a_helm_installed_cilium_is_taken_over_its_record_backed_up_and_no_pod_template_changes(
        cilium_lab, cilium_charts, kube_lab, cilium_caller):
    lab = cilium_lab(nodes=2)
    lab.helm_install("1.20", merged(TALOS_VALUES, USER_VALUES))
    # a second revision, as a user's later helm upgrade leaves it: helm keeps both records
    kube_lab.helm("upgrade", "cilium", cilium_charts["1.20"]["chart"], "-n", "kube-system",
                  "-f", lab.file("values.json", merged(TALOS_VALUES, USER_VALUES)))
    lab.wait_ready()
    foreign = sorted(lab.records(), key=lambda s: s.metadata.name)
    assert [s.metadata.labels["status"] for s in foreign] == ["superseded", "deployed"]
    generation, ds_template, op_template = _templates(lab)
    caller = cilium_caller()
    result = _run(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig)
    assert result["changed"] is True and result["gate"] == []
    # ours: revision 1 in ichor-system, deployed, made with the effective values; every object still in kube-system
    (ours,) = lab.records("ichor-system")
    assert (ours.metadata.labels["status"], ours.metadata.labels["version"]) == ("deployed", "1")
    release = record.decode(ours.data["release"])
    assert release["config"] == result["values"] and release["config"]["namespaceOverride"] == "kube-system"
    _no_chart_object_in_ichor_system(kube_lab, lab)
    ds = lab.apps.read_namespaced_daemon_set("cilium", "kube-system")
    assert (ds.metadata.annotations["meta.helm.sh/release-name"], ds.metadata.annotations["meta.helm.sh/release-namespace"],
            ds.metadata.labels["app.kubernetes.io/managed-by"]) == ("cilium", "ichor-system", "Helm")
    # A4: an empty gate restarts nothing: the DaemonSet's generation and both pod templates are unchanged
    after = _templates(lab)
    assert after[0] == generation and after[1] == ds_template and after[2] == op_template
    # each foreign record: backed up byte for byte into its own Secret, then deleted
    assert lab.records() == []
    backups = _secrets(lab, "ichor-system", "ichor.maesh.dev/backup-of")
    assert [b.metadata.name for b in backups] == ["ichor-cilium-prior.kube-system.sh.helm.release.v1.cilium.v1",
                                                  "ichor-cilium-prior.kube-system.sh.helm.release.v1.cilium.v2"]
    for backup, record_secret in zip(backups, foreign):
        assert backup.data == record_secret.data and backup.type == "Opaque" and "owner" not in backup.metadata.labels
        assert backup.metadata.annotations["ichor.maesh.dev/backup-uid"] == record_secret.metadata.uid
    assert sorted(result["backups"], key=lambda b: b["record"]) == [
        {"record": "kube-system/" + r.metadata.name, "backup": "ichor-system/" + b.metadata.name, "uid": r.metadata.uid}
        for b, r in zip(backups, foreign)]
    assert _cluster_record(lab)["cilium"] == {"release": "ichor-system/cilium", "chart": "1.20.4",
                                              "values": USER_VALUES, "tunnel": "vxlan", "kubeProxy": "replaced"}
    # a second run changes nothing and writes nothing
    mark = kube_lab.audit_mark()
    again = _run(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig)
    assert again["changed"] is False
    assert again["plan"][-1] == "Cilium 1.20.4 is already the Helm release ichor-system/cilium: nothing to take over"
    assert kube_lab.mutating_requests(since=mark, user=caller.user, namespace="ichor-system") == []
    assert [e for e in kube_lab.mutating_requests(since=mark, user=caller.user, namespace="kube-system")
            if (e.get("objectRef") or {}).get("subresource") != "status"] == []


def test_a3_a_cilium_cli_record_is_taken_over_with_its_values_and_tunnel(
        cilium_lab, cilium_charts, kube_lab, cilium_caller):
    lab = cilium_lab(nodes=1)
    user = {"tunnelProtocol": "geneve", "operator": {"replicas": 1}, "debug": {"enabled": True}}
    lab.cli_install("1.20", merged(TALOS_VALUES, user), cluster_name="lab-one")
    lab.wait_ready()
    (foreign,) = lab.records()
    result = _run(kube_lab, cilium_charts, kubeconfig=cilium_caller().kubeconfig)
    assert result["user_values"] == {"cluster": {"name": "lab-one"}, "debug": {"enabled": True},
                                     "operator": {"replicas": 1}}
    assert result["cilium"]["tunnel"] == "geneve" and result["gate"] == []
    assert lab.records() == [] and _secrets(lab, "ichor-system", "ichor.maesh.dev/backup-of")[0].data == foreign.data
    config = lab.core.read_namespaced_config_map("cilium-config", "kube-system").data
    assert (config["tunnel-protocol"], config["cluster-name"]) == ("geneve", "lab-one")
    assert _cluster_record(lab)["cilium"]["tunnel"] == "geneve"


def test_a1_like_a_record_less_cilium_is_taken_over_and_an_older_minor_is_upgraded(
        cilium_lab, cilium_charts, kube_lab, cilium_caller):
    lab = cilium_lab(nodes=2)
    lab.template_apply("1.19", merged(TALOS_VALUES, USER_VALUES))
    lab.wait_ready()
    lab.render("1.20", TALOS_VALUES)  # what the takeover installs, for teardown
    result = _run(kube_lab, cilium_charts, cilium_values=merged(TALOS_VALUES, USER_VALUES), accept_cilium_diff=True,
                  kubeconfig=cilium_caller().kubeconfig)
    assert result["step"] == "upgrade" and result["records"] == [] and result.get("backups") == []
    image = lab.apps.read_namespaced_daemon_set("cilium", "kube-system").spec.template.spec.containers[0].image
    assert image == "quay.io/cilium/cilium:v1.20.4"
    assert lab.core.read_namespaced_config_map("cilium-config", "kube-system").data["cluster-name"] == "prod"
    assert _cluster_record(lab)["cilium"]["values"] == USER_VALUES


def _start_killable_takeover(kube_lab, cilium_charts, values_path, kubeconfig):
    """helm as the takeover runs it (as its caller), with --wait so that it stays in its pending-install record: the
    lab's Deployments never get the ReplicaSet helm waits for."""
    return subprocess.Popen([kube_lab.bins["helm"], "upgrade", "--install", "cilium", cilium_charts["1.20"]["chart"],
                             "--namespace", "ichor-system", "--create-namespace", "--take-ownership", "-f", values_path,
                             "--wait", "--timeout", "5m"], env=kube_lab.helm_env(kubeconfig), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def test_a8_helm_killed_after_the_upgrade_started_the_rerun_repairs_and_completes(cilium_lab, cilium_charts,
                                                                                  kube_lab, cilium_caller):
    lab = cilium_lab(nodes=2)
    lab.helm_install("1.20", merged(TALOS_VALUES, USER_VALUES))
    lab.wait_ready()
    (foreign,) = lab.records()
    kubeconfig = cilium_caller().kubeconfig
    planned = _run(kube_lab, cilium_charts, check=True, kubeconfig=kubeconfig)
    proc = _start_killable_takeover(kube_lab, cilium_charts, lab.file("values.json", planned["values"]), kubeconfig)
    deadline = time.monotonic() + 60
    while not [s for s in lab.records("ichor-system") if s.metadata.labels["status"] == "pending-install"]:
        assert time.monotonic() < deadline and proc.poll() is None, "helm never left a pending-install record"
        time.sleep(0.1)
    time.sleep(1.0)  # helm is past the object updates, in its wait
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    (pending,) = lab.records("ichor-system")
    assert pending.metadata.labels["status"] == "pending-install"
    # the objects helm updated before it was killed roll out first (the health precondition waits for nothing)
    lab.wait_ready()
    result = _run(kube_lab, cilium_charts, kubeconfig=kubeconfig)
    repair = ("repair: delete ichor-system/sh.helm.release.v1.cilium.v1 (pending-install, left by a run that was "
              "stopped; uid %s), then take over" % pending.metadata.uid)
    assert repair in result["plan"]
    (ours,) = lab.records("ichor-system")
    assert ours.metadata.labels["status"] == "deployed" and ours.metadata.uid != pending.metadata.uid
    assert lab.records() == [] and _secrets(lab, "ichor-system", "ichor.maesh.dev/backup-of")[0].data == foreign.data
    assert record.decode(ours.data["release"])["config"]["debug"] == {"enabled": True}  # nothing lost
    assert _run(kube_lab, cilium_charts, kubeconfig=kubeconfig)["changed"] is False


def test_a8_stopped_after_helm_before_the_records_were_retired_the_rerun_finishes_the_hand_over(
        cilium_lab, cilium_charts, kube_lab, cilium_caller):
    lab = cilium_lab(nodes=2)
    lab.helm_install("1.20", merged(TALOS_VALUES, USER_VALUES))
    lab.wait_ready()
    (foreign,) = lab.records()
    kubeconfig = cilium_caller().kubeconfig
    planned = _run(kube_lab, cilium_charts, check=True, kubeconfig=kubeconfig)
    kube_lab.helm("upgrade", "--install", "cilium", cilium_charts["1.20"]["chart"], "--namespace", "ichor-system",
                  "--create-namespace", "--take-ownership", "-f", lab.file("values.json", planned["values"]),
                  kubeconfig=kubeconfig)
    lab.wait_ready()  # helm's upgrade rolls the operator; a takeover refuses while it rolls out
    result = _run(kube_lab, cilium_charts, kubeconfig=kubeconfig)
    assert result["plan"][1].endswith("but the foreign records are still there (a run stopped before retiring them): "
                                      "finish the hand-over")
    assert not [line for line in result["plan"] if line.startswith("takeover: helm")]
    assert [s.metadata.labels["version"] for s in lab.records("ichor-system")] == ["1"]  # no second helm run
    assert lab.records() == [] and _secrets(lab, "ichor-system", "ichor.maesh.dev/backup-of")[0].data == foreign.data
    assert _run(kube_lab, cilium_charts, kubeconfig=kubeconfig)["changed"] is False


def test_the_module_takes_over_and_a_rerun_reports_no_change(cilium_lab, cilium_charts, kube_lab, tmp_path,
                                                             cilium_caller):
    lab = cilium_lab(nodes=2)
    lab.helm_install("1.20", TALOS_VALUES)
    lab.wait_ready()
    args = dict(kubeconfig=cilium_caller().kubeconfig, chart=cilium_charts["1.20"]["chart"], helm=kube_lab.bins["helm"],
                wait_timeout=60)
    first = playbook(tmp_path, False, **args)[0]
    assert first["changed"] is True and not first.get("failed") and len(first["backups"]) == 1
    second = playbook(tmp_path, False, **args)[0]
    assert second["changed"] is False and not second.get("failed")


def test_a5_an_accepted_gate_takes_over_keeping_the_extra_annotation_and_configmap_and_the_chart_args_win(
        cilium_lab, cilium_charts, kube_lab, cilium_caller):
    """What the gate reports is what the takeover does: a live-only annotation is kept (helm's three-way merge leaves
    fields it never set), an argument the chart does not render is gone, an object outside the chart is untouched."""
    lab = cilium_lab(nodes=2)
    lab.helm_install("1.20", TALOS_VALUES)
    ds = lab.apps.read_namespaced_daemon_set("cilium", "kube-system")
    chart_args = list(ds.spec.template.spec.containers[0].args)
    lab.apps.patch_namespaced_daemon_set("cilium", "kube-system", {
        "metadata": {"annotations": {"example.com/owner": "team-net"}},
        "spec": {"template": {"spec": {"containers": [{"name": "cilium-agent",
                                                       "args": chart_args + ["--enable-extra-thing=true"]}]}}}})
    lab.core.create_namespaced_config_map("kube-system", {"metadata": {"name": "cilium-extra"}, "data": {"a": "b"}})
    lab.extra.append(("v1", "ConfigMap", "kube-system", "cilium-extra"))
    lab.wait_ready()
    extra = lab.core.read_namespaced_config_map("cilium-extra", "kube-system")
    caller = cilium_caller()
    result = _run(kube_lab, cilium_charts, accept_cilium_diff=True, kubeconfig=caller.kubeconfig)
    assert result["changed"] is True
    assert sorted(e["change"] for e in result["gate"]) == ["differs", "live only, kept"]
    ds = lab.apps.read_namespaced_daemon_set("cilium", "kube-system")
    assert ds.metadata.annotations["example.com/owner"] == "team-net"
    assert ds.metadata.annotations["meta.helm.sh/release-namespace"] == "ichor-system"
    assert ds.spec.template.spec.containers[0].args == chart_args
    kept = lab.core.read_namespaced_config_map("cilium-extra", "kube-system")
    assert (kept.metadata.uid, kept.metadata.resource_version, kept.data) == (
        extra.metadata.uid, extra.metadata.resource_version, {"a": "b"})
    # a rerun: the release is ours now, nothing to take over
    again = _run(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig)
    assert again["changed"] is False


def test_the_talos_capability_and_cgroup_keys_are_made_to_match_the_talos_guide(
        cilium_lab, cilium_charts, kube_lab, cilium_caller):
    """Owned keys the takeover sets to the Talos guide's values without accept_cilium_changes (they are the guide's,
    not a choice): a Cilium installed with cgroup auto-mount on and a capability missing is planned as 'match', and
    the takeover leaves the guide's cgroup root and capabilities running."""
    lab = cilium_lab(nodes=2)
    off_guide = merged(TALOS_VALUES, {"cgroup": {"autoMount": {"enabled": True}, "hostRoot": "/run/cilium/cgroupv2"}})
    off_guide["securityContext"]["capabilities"]["ciliumAgent"] = [
        c for c in TALOS_VALUES["securityContext"]["capabilities"]["ciliumAgent"] if c != "SYS_RESOURCE"]
    lab.helm_install("1.20", off_guide)
    lab.wait_ready()
    caller = cilium_caller()
    planned = _run(kube_lab, cilium_charts, check=True, accept_cilium_diff=True, kubeconfig=caller.kubeconfig)
    rows = dict((row["key"], row) for row in planned["owned"])
    assert rows["cgroup.autoMount.enabled"]["action"] == "match" and rows["cgroup.hostRoot"]["action"] == "match"
    assert rows["securityContext.capabilities.ciliumAgent"]["action"] == "match"
    assert "owned cgroup.hostRoot: /run/cilium/cgroupv2 -> /sys/fs/cgroup (made to match the Talos guide)" in planned["plan"]
    taken = _run(kube_lab, cilium_charts, accept_cilium_diff=True, kubeconfig=caller.kubeconfig)
    assert taken["changed"] is True
    assert lab.core.read_namespaced_config_map("cilium-config", "kube-system").data["cgroup-root"] == "/sys/fs/cgroup"
    ds = lab.apps.read_namespaced_daemon_set("cilium", "kube-system")
    agent = [c for c in ds.spec.template.spec.containers if c.name == "cilium-agent"][0]
    assert "SYS_RESOURCE" in agent.security_context.capabilities.add
    # helm's take-ownership merge keeps what only the live object has, and the gate said so before consent: the
    # auto-mount init container the guide does not render stays until its owner removes it
    kept = [e for e in planned["gate"] if e["object"] == "DaemonSet kube-system/cilium"
            and e["path"].startswith("spec.template.spec.initContainers[mount-cgroup]")]
    assert kept and all(e["change"] == "live only, kept" for e in kept), kept
    assert "mount-cgroup" in [c.name for c in ds.spec.template.spec.init_containers or []]


def test_a_foreign_record_is_deleted_only_while_it_is_the_secret_that_was_read(cilium_lab, kube_lab):
    """The UID precondition on the real API server: a record Secret replaced since it was read (same name, another
    UID) is refused with the takeover's message and stays; the one read is deleted."""
    lab = cilium_lab(nodes=1)
    lab.helm_install("1.20", TALOS_VALUES)
    kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
    read = record.Record(kube.get("v1", "Secret", "sh.helm.release.v1.cilium.v1", "kube-system"))
    secret = lab.core.read_namespaced_secret("sh.helm.release.v1.cilium.v1", "kube-system")
    lab.core.delete_namespaced_secret(secret.metadata.name, "kube-system")
    lab.core.create_namespaced_secret("kube-system", {"metadata": {"name": secret.metadata.name,
                                                                   "labels": secret.metadata.labels},
                                                      "type": secret.type, "data": secret.data})
    with pytest.raises(CiliumError, match="changed since this run read it"):
        pipeline.delete_record(kube, read)
    again = lab.core.read_namespaced_secret(secret.metadata.name, "kube-system")
    assert again.metadata.uid != secret.metadata.uid
    pipeline.delete_record(kube, record.Record(kube.get("v1", "Secret", secret.metadata.name, "kube-system")))
    assert lab.records() == []


# The hubble certificates made by the chart's cron job: its Job is named after a hash of its spec, so that a chart
# bump renames it and the release's own upgrade deletes the old one. A takeover is another release's install: the old
# Job is the foreign release's, and the collection's chart no longer renders it.
CRONJOB_CERTS = {"hubble": {"tls": {"auto": {"method": "cronJob"}}}}


def _certs_jobs(lab):
    jobs = k8s.BatchV1Api(lab.kube.api).list_namespaced_job("kube-system",
                                                            label_selector="k8s-app=hubble-generate-certs")
    return sorted(jobs.items, key=lambda j: j.metadata.name)


def _old_certs_job(lab):
    """A foreign Cilium 1.19 with the cron job's certificates, ready; its Job (the one the takeover to 1.20 leaves)."""
    lab.helm_install("1.19", merged(TALOS_VALUES, CRONJOB_CERTS))
    lab.render("1.20", merged(TALOS_VALUES, CRONJOB_CERTS))  # what the takeover installs, for teardown
    lab.wait_ready()
    (job,) = _certs_jobs(lab)
    assert job.metadata.annotations["meta.helm.sh/release-name"] == "cilium"
    return job


def test_what_the_foreign_release_owned_and_the_chart_no_longer_renders_is_shown_kept_and_recorded(
        cilium_lab, cilium_charts, kube_lab, cilium_caller):
    """Issue 26 (5): the old release's hubble-generate-certs Job outlives an upgrade takeover, owned by no release. The
    gate names it (check mode writes nothing), the takeover keeps it untouched and says so, and the cluster record
    lists it; without consent nothing of it is deleted."""
    lab = cilium_lab(nodes=2)
    old = _old_certs_job(lab)
    ref = "Job kube-system/%s" % old.metadata.name
    caller = cilium_caller()
    mark = kube_lab.audit_mark()
    planned = _run(kube_lab, cilium_charts, check=True, accept_cilium_diff=True, kubeconfig=caller.kubeconfig)
    assert kube_lab.mutating_requests(since=mark, user=caller.user) == []
    orphan = {"object": ref, "apiVersion": "batch/v1", "uid": old.metadata.uid, "release": "kube-system/cilium",
              "action": "keep"}
    assert planned["orphans"] == [orphan]
    line = ("gate: %s: owned by the foreign release kube-system/cilium, not rendered by chart 1.20.4: it stays, owned "
            "by no release, after the takeover (set delete_orphans to delete it)" % ref)
    assert line in planned["plan"]
    keep = "keep: %s (uid %s), owned by no release; it is listed in the cluster record ichor-system/ichor-cluster" % (
        ref, old.metadata.uid)
    assert keep in planned["plan"]
    result = _run(kube_lab, cilium_charts, accept_cilium_diff=True, kubeconfig=caller.kubeconfig)
    assert result["changed"] is True and result["step"] == "upgrade"
    assert result["orphans"] == [orphan] and line in result["plan"] and keep in result["plan"]
    assert "cluster record: cilium = release ichor-system/cilium, tunnel vxlan, the user's values, 1 object owned by " \
        "no release (%s)" % ref in result["plan"]
    names = [j.metadata.name for j in _certs_jobs(lab)]
    assert old.metadata.name in names and len(names) == 2  # the chart's new Job beside the old one
    (kept,) = [j for j in _certs_jobs(lab) if j.metadata.name == old.metadata.name]
    assert kept.metadata.uid == old.metadata.uid
    assert _cluster_record(lab)["cilium"]["orphans"] == [dict((k, v) for k, v in orphan.items() if k != "action")]
    assert lab.records() == []  # the foreign records are retired as before
    assert _secrets(lab, "ichor-system", "ichor.maesh.dev/backup-of=orphan") == []


def test_with_consent_the_orphans_are_backed_up_read_back_and_deleted_after_the_hand_over(
        cilium_lab, cilium_charts, kube_lab, cilium_caller):
    lab = cilium_lab(nodes=2)
    old = _old_certs_job(lab)
    ref = "Job kube-system/%s" % old.metadata.name
    caller = cilium_caller()
    result = _run(kube_lab, cilium_charts, accept_cilium_diff=True, delete_orphans=True, kubeconfig=caller.kubeconfig)
    assert result["changed"] is True
    assert [(o["object"], o["uid"], o["action"]) for o in result["orphans"]] == [(ref, old.metadata.uid, "delete")]
    assert [j.metadata.name for j in _certs_jobs(lab)] != [] and \
        old.metadata.name not in [j.metadata.name for j in _certs_jobs(lab)]
    (backup,) = _secrets(lab, "ichor-system", "ichor.maesh.dev/backup-of=orphan")
    saved = json.loads(base64.b64decode(backup.data["object"]))
    assert (saved["kind"], saved["metadata"]["name"], saved["metadata"]["uid"]) == ("Job", old.metadata.name,
                                                                                    old.metadata.uid)
    assert backup.metadata.annotations["ichor.maesh.dev/backup-of"] == ref
    plan = result["plan"]
    deleted = "deleted: %s (uid %s; its backup ichor-system/%s read back identical)" % (
        ref, old.metadata.uid, backup.metadata.name)
    assert deleted in plan
    # after the hand-over (our record deployed, Cilium ready), before the foreign records are retired
    assert plan.index(deleted) > [i for i, l in enumerate(plan) if l.startswith("ready: ")][0]
    assert plan.index(deleted) < [i for i, l in enumerate(plan) if l.startswith("deleted: foreign record")][0]
    assert "orphans" not in _cluster_record(lab)["cilium"]
