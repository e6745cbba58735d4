"""maesh.ichor.status against the lab: a cluster maesh.ichor.init made (3 control planes and a worker, the collection's
Cilium), read as it is (nothing to report, exit 0, the same in check mode, no write in the audit log), then each
condition injected alone and taken back: the finding names the machine, path or object, with its severity, and
nothing else is reported."""

import datetime
import os
import random
import re
import stat
import time

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.cilium import record as helm_record
from ansible_collections.maesh.ichor.plugins.module_utils.config import secrets
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record, lock
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient
from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine, talosconfig
from ansible_collections.maesh.ichor.plugins.module_utils.talos.client import TalosClient

from tests.helm_record import encode as encoded_record
from tests.integration import test_init
from tests.integration.ansible_env import REPO, ansible_playbook

pytestmark = pytest.mark.lab

cilium_charts = test_init.cilium_charts
cilium_lab = test_init.cilium_lab
init_cleanup = test_init.init_cleanup


USER = "ichor-status"  # the run's own client certificate: its requests are told apart in the audit log
WRITES = ("ApplyConfiguration", "Reboot", "Reset", "Upgrade", "Bootstrap", "EtcdRemoveMemberByID", "EtcdLeaveCluster")


def _status(ctx, *extra, acknowledging=False):
    """One run: (the process, its finding lines, the report). It writes nothing: no write in the API server's audit
    log, no writing call on any machine; an acknowledgement writes the cluster record and its lock, nothing else."""
    lab, inv, tmp_path, kube_lab = ctx
    report = tmp_path / "status.md"
    if report.exists():
        report.unlink()
    mark = kube_lab.audit_mark()
    calls = dict((m["name"], lab.control.calls(m["name"])) for m in lab.machines)
    proc = ansible_playbook("-i", inv, "maesh.ichor.status", "-e", "ichor_status_report=%s" % report, *extra)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    kube_lab.audit_barrier()
    writes = [(e["verb"], e["objectRef"]["resource"], e["objectRef"].get("name")) for e in
              kube_lab.mutating_requests(since=mark, user=USER)]
    if acknowledging:
        assert set(writes) == {("update", "configmaps", "ichor-cluster"), ("create", "leases", "ichor-cluster-lock"),
                               ("delete", "leases", "ichor-cluster-lock")}, writes
    else:
        assert writes == []
    assert [e for e in kube_lab.audit_events(since=mark) if e["user"]["username"] == USER], "the run read nothing"
    for m in lab.machines:
        after = lab.control.calls(m["name"])
        assert [c for c in WRITES if after.get(c, 0) != calls[m["name"]].get(c, 0)] == [], m["name"]
    lines = [line.strip().strip('",') for line in proc.stdout.splitlines()]
    found = [line for line in lines if line.startswith(("critical: ", "warning: ", "info: "))]
    return proc, sorted(set(found)), report.read_text() if report.exists() else None


def _expect(ctx, rc, *wanted):
    """The run's exit code and its findings: exactly ``wanted`` (each a line's start), each in the report too."""
    proc, found, report = _status(ctx)
    assert (proc.returncode != 0) == (rc != 0), proc.stdout[-6000:]
    assert len(found) == len(wanted) and all(any(f.startswith(w) for f in found) for w in wanted), (found, wanted)
    for line in found:
        assert line.split(": ", 2)[-1].split(";")[0].replace("|", "\\|")[:60] in report, (line, report)
    return found


class Env:
    """What a condition changes: the lab, the API server (as its admin) and the Talos API (init's talosconfig)."""

    def __init__(self, lab, kube, talos, keep):
        self.lab, self.kube, self.talos, self.keep = lab, kube, talos, keep
        self.worker = [m for m in lab.machines if m["role"] == "worker"][0]


# Each condition: inject it, return (the findings it makes, each a line's start; whether one is critical; undo).
def drifted(env):
    """A sysctl set by hand on the worker (class A drift)."""
    node = env.worker["address"]
    before = env.talos.run(machine.get_resource(env.talos, machine.res.MACHINE_CONFIG, node))["spec"]
    docs = list(yaml.safe_load_all(before))
    docs[0]["machine"].setdefault("sysctls", {})["vm.max_map_count"] = "262144"
    machine.apply_config(env.talos, node, yaml.safe_dump_all(docs))
    return (["critical: machines %s: class A drift: remove v1alpha1:machine.sysctls.vm.max_map_count" %
             env.worker["name"]], True, lambda: machine.apply_config(env.talos, node, before))


def held(env, days=1):
    """A machine adopt holds: a warning while recent, critical once held longer than ichor_status_hold_days."""
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - days * 86400))
    cluster_record.update(env.kube, lambda d: d.update(held={"cp-2": "class B needs consent"},
                                                       adoption=dict(d.get("adoption") or {}, at=at)))
    line = "machines cp-2: held (class B needs consent); for %.1f days" % days
    return (["critical: " + line + ", longer than" if days > 14 else "warning: " + line], days > 14,
            lambda: cluster_record.update(env.kube, lambda d: (d.pop("held"), d.pop("adoption"))))


def pending(env):
    """A machine reclaim registered that has not joined."""
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 3 * 86400))
    cluster_record.update(env.kube, lambda d: d.update(machines=[{"uuid": "u-pending", "address": "127.0.0.99",
                                                                  "state": "pending", "source": "reclaim", "at": at}]))
    return (["info: machines 127.0.0.99: pending (registered by reclaim, 3.0 days ago)"], False,
            lambda: cluster_record.update(env.kube, lambda d: d.pop("machines")))


def stranger(env):
    """A Node the record does not know."""
    env.kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "stranger-1"}})
    return (["warning: machines stranger-1: a Node the cluster runs that the cluster record does not"], False,
            lambda: env.kube.delete("v1", "Node", "stranger-1"))


RBAC = "rbac.authorization.k8s.io/v1"


def bundle_object_deleted(env):
    """An object of the collection's bundle deleted (judged by server-side apply dry runs, not writes)."""
    binding = env.kube.get(RBAC, "RoleBinding", "ichor-installer", "ichor-system")
    env.kube.delete(RBAC, "RoleBinding", "ichor-installer", "ichor-system")
    for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
        binding["metadata"].pop(key, None)
    return (["warning: installer RoleBinding ichor-system/ichor-installer: missing: deleted out of band"], False,
            lambda: env.kube.create(binding))


def bundle_object_changed(env):
    """A Role of the bundle changed by hand."""
    def verbs(value):
        role = env.kube.get(RBAC, "Role", "ichor-installer", "ichor-system")
        role["rules"][0]["verbs"] = value
        env.kube.replace(role)
    verbs(["get", "create", "delete", "update"])
    return (["warning: installer Role ichor-system/ichor-installer: changed out of band at rules[0].verbs; "], False,
            lambda: verbs(["get", "create", "delete"]))


def daemonset_edited(env):
    """The Cilium DaemonSet edited by hand: the diff gate of the deployed revision names it."""
    def annotate(value):
        daemonset = env.kube.get("apps/v1", "DaemonSet", "cilium", "kube-system")
        annotations = daemonset["spec"]["template"]["metadata"].setdefault("annotations", {})
        if value is None:
            del annotations["edited-by"]
        else:
            annotations["edited-by"] = value
        env.kube.replace(daemonset)
    annotate("hand")
    return (["warning: cilium DaemonSet kube-system/cilium: differs from what revision "], False,
            lambda: annotate(None))


def orphan(env):
    """An object the foreign release made, kept by the takeover (the record lists it): owned by no release."""
    leftover = env.kube.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "cilium-leftover", "namespace": "kube-system", "annotations": {
            "meta.helm.sh/release-name": "cilium", "meta.helm.sh/release-namespace": "kube-system"}}})
    cluster_record.update(env.kube, lambda d: d["cilium"].update(orphans=[{
        "object": "ConfigMap kube-system/cilium-leftover", "apiVersion": "v1", "uid": leftover["metadata"]["uid"],
        "release": "kube-system/cilium"}]))
    return (["warning: cilium ConfigMap kube-system/cilium-leftover: owned by no release: the Cilium release "
             "kube-system/cilium made it"], False,
            lambda: env.kube.delete("v1", "ConfigMap", "cilium-leftover", "kube-system"))


def release_failed(env):
    """The collection's Cilium release failed (its newest record says so, in its label and its release, as Helm
    writes it)."""
    def label(value):
        (newest,) = [s for s in env.kube.list("v1", "Secret", "ichor-system", label_selector="owner=helm,name=cilium")
                     if s["metadata"]["labels"]["status"] != "superseded"]
        newest["metadata"]["labels"]["status"] = value
        release = helm_record.decode(newest["data"]["release"])
        release["info"]["status"] = value
        newest["data"]["release"] = encoded_record(release)
        env.kube.replace(newest)
        return helm_record.Record(newest).revision
    revision = label("failed")
    return (["critical: cilium ichor-system/cilium: Helm release revision %s is failed" % revision], True,
            lambda: label("deployed"))


def credential_ending(env):
    """The talosconfig the run uses replaced by one whose client certificate ends in 10 days."""
    path = env.keep / "talosconfig"
    before = path.read_text()
    minted = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0) - (
        secrets.ADMIN_VALIDITY - datetime.timedelta(days=10))
    cps = [m["address"] for m in env.lab.machines if m["role"] == "controlplane"]
    path.write_text(secrets.admin_talosconfig(secrets.load(str(env.keep / "secrets.yaml")), "lab", cps, now=minted))
    return (["critical: credentials talosconfig client certificate: expires in "], True,
            lambda: path.write_text(before))


CONDITIONS = (drifted, held, pending, stranger, bundle_object_deleted, bundle_object_changed, daemonset_edited,
              orphan, release_failed, credential_ending)


@pytest.fixture
def managed(talos_kube_lab, kube_lab, cilium_lab, cilium_charts, tmp_path, init_cleanup):
    """A cluster init made, and the inventory status reads it with (init's talosconfig and kubeconfig)."""
    lab = talos_kube_lab(controlplanes=3, workers=1, mode="maintenance", bootstrapped=False, version=release.TALOS)
    inv, keep = test_init._inventory(lab, tmp_path, **test_init._cilium(cilium_lab, kube_lab, cilium_charts))
    made = test_init._init(inv)
    assert made.returncode == 0, made.stdout[-8000:]
    data = yaml.safe_load(open(inv))
    kubeconfig = kube_lab.client_kubeconfig(str(keep / "status.kubeconfig"), USER)
    data["all"]["vars"].update(ichor_talosconfig=str(keep / "talosconfig"), ichor_kubeconfig=kubeconfig)
    with open(inv, "w") as handle:
        yaml.safe_dump(data, handle)
    return lab, inv, keep


def _talos(keep):
    return TalosClient(context=talosconfig.load(path=str(keep / "talosconfig")))


def test_a_clean_cluster_has_nothing_to_report_and_each_condition_is_found_alone(managed, kube_lab, tmp_path):
    lab, inv, keep = managed
    ctx = (lab, inv, tmp_path, kube_lab)
    kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
    proc, found, report = _status(ctx)
    assert proc.returncode == 0 and found == [], proc.stdout[-6000:]
    assert "status: nothing to report (0 critical, 0 warning, 0 info)" in proc.stdout
    assert "Position: up to date" in report and "| cp-1 |" in report
    assert stat.S_IMODE(os.stat(str(tmp_path / "status.md")).st_mode) == 0o600
    checked, found_checked, report_checked = _status(ctx, "--check")
    assert checked.returncode == 0 and found_checked == [] and "nothing to report" in report_checked

    # a changed machine config: a sysctl set by hand on worker-1 (class A: a machine spec field covers it)
    worker = [m for m in lab.machines if m["role"] == "worker"][0]
    talos = _talos(keep)
    before = talos.run(machine.get_resource(talos, machine.res.MACHINE_CONFIG, worker["address"]))["spec"]
    docs = list(yaml.safe_load_all(before))
    docs[0]["machine"].setdefault("sysctls", {})["vm.max_map_count"] = "262144"
    machine.apply_config(talos, worker["address"], yaml.safe_dump_all(docs))
    (line,) = _expect(ctx, 1, "critical: machines %s: class A drift: " % worker["name"])
    assert "vm.max_map_count" in line

    # acknowledged: the plan says what would be recorded (check mode writes nothing), the run records it, and it is
    # a warning from then on; a path found later is critical still
    planned, found, unused_report = _status(ctx, "-e", "ichor_status_acknowledge=true", "--check")
    assert planned.returncode != 0 and found == [line], found
    assert "acknowledge: would record 1 drift path(s) as known in the cluster record" in planned.stdout
    done, found, unused_report = _status(ctx, "-e", "ichor_status_acknowledge=true", acknowledging=True)
    assert done.returncode == 0 and found == [line.replace("critical", "warning", 1) + " (acknowledged)"], found
    record = cluster_record.read(kube).data["status"]
    assert len(record["acknowledged"]) == 1 and record["by"]
    _expect(ctx, 0, line.replace("critical", "warning", 1) + " (acknowledged)")
    docs[0]["machine"]["sysctls"]["net.core.somaxconn"] = "4096"
    machine.apply_config(talos, worker["address"], yaml.safe_dump_all(docs))
    _expect(ctx, 1, line.replace("critical", "warning", 1) + " (acknowledged)",
            "critical: machines %s: class A drift: remove v1alpha1:machine.sysctls.net.core.somaxconn" % worker["name"])
    # another run holds the cluster lock: the acknowledgement is refused, naming it, and nothing is recorded
    lock.acquire(kube, "maesh-ichor-other-run", duration=120)
    refused, unused_found, unused_report = _status(ctx, "-e", "ichor_status_acknowledge=true")
    assert refused.returncode != 0 and "is held by maesh-ichor-other-run" in refused.stdout, refused.stdout[-3000:]
    assert cluster_record.read(kube).data["status"] == record
    lock.release(kube, "maesh-ichor-other-run")
    machine.apply_config(talos, worker["address"], before)
    _expect(ctx, 0)
    # acknowledged again with no drift left: the list is emptied, and the same drift would be critical once more
    emptied, found, unused_report = _status(ctx, "-e", "ichor_status_acknowledge=true", acknowledging=True)
    assert emptied.returncode == 0 and found == [] and cluster_record.read(kube).data["status"]["acknowledged"] == []

    # each condition alone: found with its severity, and nothing else (a condition not quite taken back would be
    # found with the next one); all taken back, nothing to report
    env = Env(lab, kube, talos, keep)
    for condition in CONDITIONS + (lambda e: held(e, days=20),):  # a hold longer than ichor_status_hold_days
        wanted, critical, undo = condition(env)
        _expect(ctx, 1 if critical else 0, *wanted)
        undo()
    _expect(ctx, 0)

    # the certificate's days, as the run counts them (its condition above matched the line's start)
    unused_wanted, unused_critical, undo = credential_ending(env)
    proc, found, unused_report = _status(ctx)
    undo()
    assert proc.returncode != 0 and len(found) == 1, found
    assert re.match(r"critical: credentials talosconfig client certificate: expires in (9\.9|10\.0) days", found[0]), found

    # etcd lost a member: cp-3 is no member any more
    cps = [m["address"] for m in lab.machines if m["role"] == "controlplane"]
    members = talos.call("EtcdMemberList", node=cps[0]).messages[0].members
    (third,) = [m for m in members if "%s:" % lab.address("cp-3") in m.peer_urls[0]]
    talos.call("EtcdRemoveMemberByID", machine.talos_client.request_type("EtcdRemoveMemberByID")(member_id=third.id),
               node=cps[0])
    _expect(ctx, 1, "critical: etcd cp-3: a control plane that is no etcd member")
    talos.close()


def test_each_condition_combined_with_two_others_in_a_seeded_order_is_found(managed, kube_lab, tmp_path):
    """The conditions shuffled from a seed (``ICHOR_STATUS_SEED``) and taken three at a time (the last three wrap
    around to the first), so that each is combined with two others, injected in that order: the run finds exactly
    theirs, fails when one is critical, and is clean once they are undone. ``ICHOR_STATUS_ROUNDS`` shuffles (1 by
    default) is a maintainer's longer run."""
    lab, inv, keep = managed
    ctx = (lab, inv, tmp_path, kube_lab)
    rng = random.Random(int(os.environ.get("ICHOR_STATUS_SEED", "30")))
    talos = _talos(keep)
    env = Env(lab, KubeClient(kubeconfig=kube_lab.kubeconfig), talos, keep)
    for unused_round in range(int(os.environ.get("ICHOR_STATUS_ROUNDS", "1"))):
        order = rng.sample(CONDITIONS, len(CONDITIONS))
        for start in range(0, len(order), 3):
            drawn = (order + order)[start:start + 3]
            injected = [condition(env) for condition in drawn]
            wanted = [line for lines, unused_critical, unused_undo in injected for line in lines]
            _expect(ctx, 1 if any(c for unused_lines, c, unused_undo in injected) else 0, *wanted)
            for unused_lines, unused_critical, undo in reversed(injected):
                undo()
    _expect(ctx, 0)
    talos.close()


@pytest.mark.floor
def test_as_an_awx_schedule_runs_it_the_job_fails_when_a_person_is_needed_and_leaks_no_secret(managed, kube_lab,
                                                                                              tmp_path):
    """The job template of docs/awx/job_templates.yml through ansible-runner, the managed-cluster credential injected:
    a clean cluster's job succeeds with the status as its artifact; a condition that needs a person fails the job (what
    AWX's failure notification fires on), naming it; no credential in anything the jobs left."""
    from tests.integration.awx import AwxJob, kubeconfig_markers
    from tests.integration.test_reclaim import marked_talosconfig
    lab, inv, keep = managed
    job = AwxJob(tmp_path / "runner", "status")
    job.inventory(yaml.safe_load(open(inv)))
    marked = str(tmp_path / "marked-talosconfig")
    data = yaml.safe_load(open(inv))["all"]["vars"]
    markers = marked_talosconfig(lab, marked, source=data["ichor_talosconfig"]) + \
        kubeconfig_markers(data["ichor_kubeconfig"])
    with open(marked) as talos, open(data["ichor_kubeconfig"]) as kube:
        job.credential_of_type("managed_cluster", {"talosconfig": talos.read(), "kubeconfig": kube.read(),
                                                   "cluster": "lab"})
    template = yaml.safe_load(open(os.path.join(REPO, "docs", "awx", "job_templates.yml")))["status_schedule"]
    survey = dict((q["variable"], q["default"]) for q in template["survey_spec"]["spec"])
    rc, clean = job.run(survey, job_id=1)
    assert rc == 0 and "status: nothing to report" in clean, clean[-4000:]
    status = job.artifacts()["ichor_status"]
    assert status["needs_person"] is False and status["findings"] == [] and len(status["machines"]) == 4, status

    talos = _talos(keep)
    (wanted,), unused_critical, undo = drifted(Env(lab, KubeClient(kubeconfig=kube_lab.kubeconfig), talos, keep))
    rc, failed = job.run(survey, job_id=2)
    assert rc != 0 and wanted in failed, failed[-4000:]
    assert job.artifacts()["ichor_status"]["needs_person"] is True
    undo()
    talos.close()
    assert job.sweep(markers, [clean, failed]) == []
