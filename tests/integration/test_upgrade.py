"""The rollout's Talos step through ansible-playbook maesh.ichor.upgrade against the lab: check mode sends
nothing, machines are rolled one at a time to the set, a rerun changes nothing, a machine that does not come
back fails the run, leaves the rest untouched, and the rerun continues from it."""

import time

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils import release

from tests.integration.ansible_env import ansible_playbook, write_inventory

pytestmark = [pytest.mark.lab, pytest.mark.modules]


def _inventory(lab, tmp_path):
    inv = write_inventory(lab.state(), str(tmp_path / "inventory.yml"))
    data = yaml.safe_load(open(inv))
    data["all"]["vars"]["ichor_kubeconfig"] = lab.kube.kubeconfig
    with open(inv, "w") as handle:
        yaml.safe_dump(data, handle)
    return inv


def _versions(lab):
    return dict((m["name"], m["version"]) for m in lab.machines)


def _upgrade_calls(lab):
    return sum(c.get(k, 0) for c in (lab.control.calls(m["name"]) for m in lab.machines)
               for k in ("Upgrade", "ImagePull", "Pull", "LifecycleUpgrade", "/machine.LifecycleService/Upgrade",
                         "/machine.ImageService/Pull", "/machine.MachineService/Upgrade"))


def test_talos_step_rolls_one_machine_at_a_time(talos_kube_lab, tmp_path):
    lab = talos_kube_lab(controlplanes=1, workers=2, version="v1.13.9", kubernetes_version=release.KUBERNETES,
                         overrides=[{"name": "worker-2", "version": "v1.12.7"}])
    inv = _inventory(lab, tmp_path)
    proc = ansible_playbook("-i", inv, "maesh.ichor.upgrade", "--check", "--diff")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PLAN (check mode: nothing was written)" in proc.stdout
    assert "cp-1 (%s): upgrade Talos from v1.13.9 to v1.14.5" % lab.address("cp-1") in proc.stdout
    assert "Talos             v1.12.7  v1.14.5  Behind" in proc.stdout
    assert set(_versions(lab).values()) == {"v1.13.9", "v1.12.7"}
    proc = ansible_playbook("-i", inv, "maesh.ichor.upgrade")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert set(_versions(lab).values()) == {release.TALOS}
    order = [line.split("]")[0].split("[")[-1] for line in proc.stdout.splitlines()
             if line.startswith("changed: [") and "localhost" not in line]
    assert order == ["cp-1", "worker-1", "worker-2"]
    proc = ansible_playbook("-i", inv, "maesh.ichor.upgrade")
    assert proc.returncode == 0 and "changed=0" in proc.stdout, proc.stdout


def test_a_machine_that_does_not_come_back_stops_the_run_and_the_rerun_continues(talos_kube_lab, tmp_path):
    lab = talos_kube_lab(controlplanes=1, workers=2, version="v1.13.9", kubernetes_version=release.KUBERNETES)
    inv = _inventory(lab, tmp_path)
    lab.control.set_timing("worker-1", reboot_seconds=12, upgrade_seconds=12)
    proc = ansible_playbook("-i", inv, "maesh.ichor.upgrade", "-e", "ichor_upgrade_wait=5")
    assert proc.returncode != 0
    assert "worker-1 (%s) did not come back within 5s" % lab.address("worker-1") in proc.stdout, proc.stdout[-3000:]
    assert _versions(lab)["cp-1"] == release.TALOS
    assert _versions(lab)["worker-2"] == "v1.13.9"  # untouched
    lab.wait_for("worker-1", lambda m: m["up"] and m["version"] == release.TALOS, timeout=30)
    time.sleep(1)
    proc = ansible_playbook("-i", inv, "maesh.ichor.upgrade")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cp-1 (%s): already at Talos v1.14.5, skipped" % lab.address("cp-1") in proc.stdout
    assert set(_versions(lab).values()) == {release.TALOS}


def test_follow_rolls_talos_then_kubernetes_and_a_rerun_changes_nothing(talos_kube_lab, tmp_path):
    lab = talos_kube_lab(controlplanes=1, workers=1, version="v1.13.9", kubernetes_version="v1.35.4")
    inv = _inventory(lab, tmp_path)
    proc = ansible_playbook("-i", inv, "maesh.ichor.upgrade", "-e", "ichor_upgrade_follow=true")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert set(_versions(lab).values()) == {release.TALOS}
    for m in lab.machines:
        assert "kubelet:%s" % release.KUBERNETES in m["machine_config"]
    assert "kube-apiserver:%s" % release.KUBERNETES in lab.machine("cp-1")["machine_config"]
    assert lab.machine("worker-1")["stage"] == "running"
    from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
    from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient
    stored = cluster_record.read(KubeClient(kubeconfig=lab.kube.kubeconfig)).data
    assert (stored["talos"], stored["contract"], stored["kubernetes"]) == (release.TALOS, release.CONTRACT,
                                                                           release.KUBERNETES)
    proc = ansible_playbook("-i", inv, "maesh.ichor.upgrade", "-e", "ichor_upgrade_follow=true")
    assert proc.returncode == 0 and "changed=0" in proc.stdout, proc.stdout
    assert "the cluster is at the release set; nothing to do" in proc.stdout


def test_kubernetes_step_alone_check_mode_then_run(talos_kube_lab, tmp_path):
    lab = talos_kube_lab(controlplanes=1, workers=1, version=release.TALOS, kubernetes_version="v1.35.4")
    inv = _inventory(lab, tmp_path)
    proc = ansible_playbook("-i", inv, "maesh.ichor.upgrade", "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cp-1: control plane kube-apiserver to v1.36.6 (no reboot)" in proc.stdout
    assert "worker-1: kubelet kubelet to v1.36.6 (no reboot)" in proc.stdout
    assert "kubelet:v1.35.4" in lab.machine("worker-1")["machine_config"]
    proc = ansible_playbook("-i", inv, "maesh.ichor.upgrade")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "kubelet:v1.36.6" in lab.machine("worker-1")["machine_config"]


def test_removed_api_check_reads_metrics_only_with_the_right_rbac(kube_lab, kube_namespace):
    from ansible_collections.maesh.ichor.plugins.module_utils import upgrade
    from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient, KubeError
    denied = KubeClient(kubeconfig=kube_lab.service_account_kubeconfig(kube_namespace, "no-metrics"))
    with pytest.raises(KubeError) as exc:
        denied.raw_get("/metrics")
    assert "403" in str(exc.value)
    allowed = KubeClient(kubeconfig=kube_lab.service_account_kubeconfig(kube_namespace, "metrics", rbac={
        "cluster_rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}))
    metrics = allowed.raw_get("/metrics")
    assert "apiserver_request_total" in metrics
    # the lab's API server serves no API removed by its own version: the no-hit path
    assert upgrade.removed_apis_in_use(metrics, release.KUBERNETES) == []


def test_etcd_health_needs_a_quorum_of_members(talos_lab):
    from ansible_collections.maesh.ichor.plugins.module_utils import upgrade
    from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as tc
    from ansible_collections.maesh.ichor.plugins.module_utils.talos import talosconfig
    lab = talos_lab(controlplanes=3, workers=0)
    cp1 = lab.address("cp-1")
    with tc.TalosClient(talosconfig.load(lab.talosconfig), timeout=3) as client:
        assert upgrade.etcd_health(client, cp1) == (True, "3 of 3 etcd members healthy")
        lab.control.set_faults("cp-2", unreachable=True)
        assert upgrade.etcd_health(client, cp1) == (True, "2 of 3 etcd members healthy")
        lab.control.set_faults("cp-3", unreachable=True)
        assert upgrade.etcd_health(client, cp1) == (False, "only 1 of 3 etcd members are healthy (no quorum)")
