"""AWX as it really runs (issue 44): each job template's job through ansible-runner as AWX runs it (tests/integration/awx.py:
a private data dir with an execution environment's HOME in it, the credential types' injectors, the survey's answers),
the private data dir then removed as AWX removes it; what the guide (docs/awx/README.md) says lasts is still there - the
persistent volume's files, the cluster's bundle Secret - and nothing else of the job is. An inventory sync with the
managed-cluster credential alone builds the inventory."""

import base64
import datetime
import os
import stat

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.config import secrets
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim import flow
from ansible_collections.maesh.ichor.plugins.module_utils.talos import talosconfig

from tests.integration import test_adopt_plan, test_init
from tests.integration.ansible_env import REPO
from tests.integration.awx import AwxJob
from tests.integration.test_inventory_plugin import _expected, _plain
from tests.integration.test_upgrade import _inventory as _lab_inventory

pytestmark = pytest.mark.lab

cilium_charts = test_init.cilium_charts
cilium_lab = test_init.cilium_lab
init_cleanup = test_init.init_cleanup
workloads = test_adopt_plan.workloads
adoption_cleanup = test_adopt_plan.adoption_cleanup

INIT_FILES = {"ichor_init_secrets_file": "secrets.yaml", "ichor_init_talosconfig_file": "talosconfig",
              "ichor_init_kubeconfig_file": "kubeconfig"}


def _volume(tmp_path):
    """The persistent volume mounted into the execution environment (a PVC at /ichor in the container group's pod)."""
    path = tmp_path / "volume"
    path.mkdir(mode=0o700)
    return path


def _stored_bundle(kube):
    """The bundle Secret ichor-system/ichor-secrets-bundle holds, as text (what the guide's kubectl command prints)."""
    stored = kube.get("v1", "Secret", "ichor-secrets-bundle", "ichor-system")
    assert stored is not None, "no bundle Secret in the cluster"
    return base64.b64decode(stored["data"]["bundle.yaml"]).decode("utf-8")


def _gone(job):
    """The private data dir removed as AWX removes it: what the job had there, now gone."""
    left = job.remove()
    assert left and not os.path.exists(job.private)
    assert not [path for path in left if os.path.exists(path)]
    return left


def test_init_as_awx_runs_it_keeps_its_files_on_the_volume_and_its_bundle_in_the_cluster(
        talos_kube_lab, kube_lab, cilium_lab, cilium_charts, tmp_path, init_cleanup):
    """The init templates' survey, answered with ~ paths (a shell habit): the plan job refuses them before anything is
    sent (~ is the private data dir in an execution environment). Answered with the volume's paths: the run job makes
    the cluster; once its private data dir is removed, the bundle, talosconfig and kubeconfig are on the volume (0600)
    and the bundle Secret in the cluster holds the same bundle. Then the guide's way back: the three files lost, the
    bundle read back from the Secret, the init_credentials template (docs/awx/init_credentials.yml in the project)
    with the same answers mints the talosconfig and fetches the kubeconfig; the init template, launched again with
    them, sends no config and no second bootstrap, and renews a talosconfig whose certificate ends within 30 days."""
    lab = talos_kube_lab(controlplanes=1, workers=1, mode="maintenance", bootstrapped=False, version=release.TALOS)
    chart = test_init._cilium(cilium_lab, kube_lab, cilium_charts)
    inventory, unused_keep = test_init._inventory(lab, tmp_path)
    hosts = yaml.safe_load(open(inventory))
    hosts["all"].pop("vars")
    volume = _volume(tmp_path)
    survey = dict(chart, ichor_init_cluster_name="lab", ichor_init_kube_proxy="enabled", ichor_init_tunnel="vxlan")

    plan = AwxJob(tmp_path / "plan", "init", home_in_job=True)
    plan.inventory(hosts)
    rc, out = plan.run(dict(survey, **dict((k, "~/clusters/lab/" + v) for k, v in INIT_FILES.items())),
                       cmdline="--check", job_id=20)
    said = " ".join(out.split())
    assert rc == 2 and ("ichor_init_secrets_file is %s/clusters/lab/secrets.yaml, inside this job's private data "
                        "directory %s, which is removed with the job" % (plan.private, plan.private)) in said, out[-3000:]
    assert [lab.control.calls(m["name"]) for m in lab.machines] == [{}, {}]  # nothing was sent, not even a read
    _gone(plan)

    answers = dict(survey, **dict((k, str(volume / v)) for k, v in INIT_FILES.items()))
    made = AwxJob(tmp_path / "run", "init", home_in_job=True)
    made.inventory(hosts)
    rc, out = made.run(answers, job_id=21)
    assert rc == 0, out[-6000:]
    _gone(made)
    assert sorted(os.listdir(str(volume))) == sorted(INIT_FILES.values())
    for name in INIT_FILES.values():
        assert stat.S_IMODE(os.stat(str(volume / name)).st_mode) == 0o600, name
    bundle = secrets.load(str(volume / "secrets.yaml"))
    # the kubeconfig on the volume reaches the cluster, whose Secret holds the volume's bundle
    kept = KubeClient(kubeconfig=str(volume / "kubeconfig"))
    assert secrets.parse(_stored_bundle(kept)).fingerprint() == bundle.fingerprint()
    applied = dict((m["name"], lab.control.calls(m["name"]).get("ApplyConfiguration", 0)) for m in lab.machines)
    assert applied == {"cp-1": 1, "worker-1": 1} and lab.control.calls("cp-1").get("Bootstrap") == 1

    # the volume's files lost; the bundle read back from the Secret with a kubeconfig that can read ichor-system (the
    # managed-cluster credential's), as the guide's kubectl command does
    text = _stored_bundle(KubeClient(kubeconfig=kube_lab.kubeconfig))
    for name in INIT_FILES.values():
        os.remove(str(volume / name))
    fd = os.open(str(volume / "secrets.yaml"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    credentials = AwxJob(tmp_path / "credentials", "init_credentials", home_in_job=True,
                         project_playbook=os.path.join(REPO, "docs", "awx", "init_credentials.yml"))
    credentials.inventory(hosts)
    asked = dict((k, answers[k]) for k in ["ichor_init_cluster_name"] + list(INIT_FILES))
    rc, out = credentials.run(asked, job_id=22)
    assert rc == 0, out[-6000:]
    _gone(credentials)
    assert sorted(os.listdir(str(volume))) == sorted(INIT_FILES.values())
    for name in INIT_FILES.values():
        assert stat.S_IMODE(os.stat(str(volume / name)).st_mode) == 0o600, name
    minted = yaml.safe_load(open(str(volume / "talosconfig")))
    assert minted["context"] == "lab" and minted["contexts"]["lab"]["endpoints"] == [lab.address("cp-1")]
    assert secrets.parse(_stored_bundle(KubeClient(kubeconfig=str(volume / "kubeconfig")))).fingerprint() == \
        bundle.fingerprint()
    # renewal: a talosconfig whose certificate ends in 10 days; the init template, launched again with the same
    # answers, mints a new one (valid a year) and sends no config and no second bootstrap
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    (volume / "talosconfig").write_text(secrets.admin_talosconfig(bundle, "lab", [lab.address("cp-1")], now=now - (
        secrets.ADMIN_VALIDITY - datetime.timedelta(days=10))))
    assert _days_left(volume / "talosconfig", bundle, now) == 10
    again = AwxJob(tmp_path / "again", "init", home_in_job=True)
    again.inventory(hosts)
    rc, out = again.run(answers, job_id=23)
    assert rc == 0, out[-6000:]
    _gone(again)
    assert _days_left(volume / "talosconfig", bundle, now) >= 364
    assert stat.S_IMODE(os.stat(str(volume / "talosconfig")).st_mode) == 0o600
    assert dict((m["name"], lab.control.calls(m["name"]).get("ApplyConfiguration", 0)) for m in lab.machines) == applied
    assert lab.control.calls("cp-1").get("Bootstrap") == 1


def _days_left(path, bundle, now):
    """Whole days until the client certificate of the talosconfig at ``path`` (context lab) ends."""
    found = talosconfig.load(str(path), context="lab")
    return secrets.client_cert_seconds_left(bundle, found.credentials.crt.reveal(), now) // 86400


def test_adopt_as_awx_runs_it_keeps_its_etcd_snapshot_on_the_volume(
        talos_kube_lab, kube_lab, workloads, tmp_path, adoption_cleanup):
    """The adopt templates with the managed-cluster credential: the snapshot directory answered with ~/... is refused
    by the plan job before anything is read; answered with the volume's directory, the run job adopts the cluster and
    its etcd snapshot is on the volume once the private data dir (the injected talosconfig and kubeconfig with it) is
    removed; the bundle is in the cluster's Secret."""
    lab = test_adopt_plan._flannel_cluster(talos_kube_lab, workloads, workers=1)
    hosts = yaml.safe_load(open(_lab_inventory(lab, tmp_path)))
    volume = _volume(tmp_path)
    credential = {"talosconfig": open(lab.talosconfig).read(), "kubeconfig": open(kube_lab.kubeconfig).read(),
                  "cluster": "k8s-older"}
    survey = {"ichor_adopt_recover_from": "cp-1", "ichor_cni_unmanaged": "true", "ichor_accept_changes": "false",
              "ichor_accept_cilium_diff": "false", "ichor_accept_cilium_changes": "false",
              "ichor_adopt_delete_cilium_orphans": "false", "ichor_adopt_cilium_chart": "",
              "ichor_adopt_cilium_chart_digest": "", "ichor_adopt_cilium_chart_repository": ""}

    plan = AwxJob(tmp_path / "plan", "adopt", home_in_job=True)
    plan.inventory(hosts)
    plan.credential_of_type("managed_cluster", credential)
    rc, out = plan.run(dict(survey, ichor_adopt_etcd_snapshot_dir="~/etcd"), cmdline="--check", job_id=30)
    said = " ".join(out.split())
    assert rc == 2 and ("ichor_adopt_etcd_snapshot_dir is %s/etcd, inside this job's private data directory %s, "
                        "which is removed with the job" % (plan.private, plan.private)) in said, out[-3000:]
    assert [lab.control.calls(m["name"]) for m in lab.machines] == [{}, {}]
    _gone(plan)

    run = AwxJob(tmp_path / "run", "adopt", home_in_job=True)
    run.inventory(hosts)
    run.credential_of_type("managed_cluster", credential)
    injected = list(run.injected)
    rc, out = run.run(dict(survey, ichor_adopt_etcd_snapshot_dir=str(volume / "etcd"), ichor_adopt_confirm=True),
                      job_id=31)
    assert rc == 0 and "worker-1: released (hold lifted)" in out, out[-6000:]
    left = _gone(run)
    assert set(injected) <= set(os.path.abspath(path) for path in left)  # the credentials' files went with the job
    (snapshot,) = list((volume / "etcd").iterdir())
    assert snapshot.name.startswith("k8s-older-") and snapshot.name.endswith(".db")
    assert stat.S_IMODE(os.stat(str(snapshot)).st_mode) == 0o600 and snapshot.stat().st_size > 0
    assert lab.control.calls("cp-1").get("EtcdSnapshot") == 1
    fixture = secrets.load(os.path.join(test_adopt_plan.BASIC, "secrets.yaml"))
    kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
    assert secrets.parse(_stored_bundle(kube)).fingerprint() == fixture.fingerprint()
    assert cluster_record.read(kube).get("held") == {}


def test_an_inventory_sync_with_the_managed_cluster_credential_alone_builds_the_inventory(talos_kube_lab, tmp_path):
    """The project's talos.yml names the plugin and nothing else; the sync gets TALOSCONFIG and KUBECONFIG (files in its
    private data dir) from the managed-cluster credential and no extra variable: the machines with their roles and
    versions from discovery, and the pending group from the cluster record (read with the injected kubeconfig).
    Without the credential the same sync finds no talosconfig and fails. The variables the plugin sets on the group
    all name the sync's files, which are gone when it ends: a job's credential names its own."""
    lab = talos_kube_lab(controlplanes=1, workers=2)
    kube = KubeClient(kubeconfig=lab.kube.kubeconfig)
    uuid = "4c4c4544-0000-0000-0000-000000000044"
    cluster_record.update(kube, lambda data: flow.add_pending(data, uuid, "10.5.0.98", "2026-12-01T12:00:00Z"))
    source = "---\nplugin: maesh.ichor.talos\n"
    try:
        bare = AwxJob(tmp_path / "bare", home_in_job=True)
        rc, found, out = bare.inventory_update(source, update_id=40)
        assert rc != 0 and found is None, out[-3000:]
        assert "cannot read talosconfig %s/.talos/config" % bare.private in " ".join(out.split()), out[-3000:]

        sync = AwxJob(tmp_path / "sync", home_in_job=True)
        sync.credential_of_type("managed_cluster", {"talosconfig": open(lab.talosconfig).read(),
                                                    "kubeconfig": open(lab.kube.kubeconfig).read(), "cluster": "lab"})
        assert set(sync.credential_vars) >= {"ichor_talosconfig", "ichor_kubeconfig"}  # the type has them; unused here
        rc, found, out = sync.inventory_update(source, update_id=41)
        assert rc == 0 and found is not None, out[-3000:]
        assert not os.path.exists(os.path.join(sync.private, "env", "extravars"))
    finally:
        kube.delete("v1", "ConfigMap", cluster_record.NAME, cluster_record.NAMESPACE)
    data = _plain(found)
    roles, machines = _expected(lab)
    groups = dict((group, sorted(data.get(group, {}).get("hosts", []))) for group in ("controlplane", "worker", "pending"))
    assert groups == {"controlplane": roles["controlplane"], "worker": roles["worker"], "pending": ["10.5.0.98"]}
    hostvars = data["_meta"]["hostvars"]
    for host, machine in machines.items():
        assert (hostvars[host]["ansible_host"], hostvars[host]["ichor_role"], hostvars[host]["ichor_talos_version"]) == (
            machine["address"], machine["role"], machine["version"])
    assert hostvars["10.5.0.98"]["ichor_uuid"] == uuid
    shared = data["all"]["vars"]
    assert shared["ichor_inventory_source"] == "discovery"
    injected = dict((os.path.basename(path), path) for path in sync.injected)
    assert shared["ichor_talosconfig"] == injected["tmp_managed_cluster_talosconfig"]
    assert shared["ichor_kubeconfig"] == injected["tmp_managed_cluster_kubeconfig"]
    _gone(sync)
    assert not os.path.exists(shared["ichor_talosconfig"]) and not os.path.exists(shared["ichor_kubeconfig"])
