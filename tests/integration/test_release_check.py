"""release_check against the lab: a behind cluster, an up-to-date one, a newer machine refused before
any write, a two-minor Kubernetes gap refused, and a desired change validated against the record."""

import json

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils import release
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient

from tests.integration.ansible_env import REPO, ansible_playbook, write_inventory

pytestmark = [pytest.mark.lab, pytest.mark.modules]

PLAYBOOK = REPO + "/tests/integration/playbooks/release_check.yml"


def _run(lab, tmp_path, *extra):
    inv = write_inventory(lab.state(), str(tmp_path / "inventory.yml"))
    data = yaml.safe_load(open(inv))
    data["all"]["vars"]["ichor_kubeconfig"] = lab.kube.kubeconfig
    data["all"]["hosts"] = {"localhost": {"ansible_connection": "local"}}
    with open(inv, "w") as handle:
        yaml.safe_dump(data, handle)
    return ansible_playbook("-i", inv, PLAYBOOK, *extra)


def _result(proc):
    start = proc.stdout.index('"release": {')
    depth, i = 0, proc.stdout.index("{", start)
    for j in range(i, len(proc.stdout)):
        depth += {"{": 1, "}": -1}.get(proc.stdout[j], 0)
        if depth == 0:
            return json.loads(proc.stdout[i:j + 1])
    raise AssertionError(proc.stdout)


@pytest.fixture(autouse=True)
def _no_record(kube_lab):
    kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
    if kube.get("v1", "ConfigMap", cluster_record.NAME, cluster_record.NAMESPACE):
        kube.delete("v1", "ConfigMap", cluster_record.NAME, cluster_record.NAMESPACE)
    yield


def test_behind_cluster(talos_kube_lab, tmp_path):
    lab = talos_kube_lab(controlplanes=1, workers=2, version="v1.13.9", kubernetes_version="v1.35.4")
    proc = _run(lab, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = _result(proc)
    assert result["components"] == {"talos": "behind", "contract": "behind", "kubernetes": "behind"}
    assert result["step"] == "talos"
    assert [s["step"] for s in result["steps"]] == ["talos", "kubernetes"]
    assert result["steps"][0]["machines"] == ["cp-1", "worker-1", "worker-2"]
    assert "Kubernetes        v1.35.4  v1.36.6  Behind" in "\n".join(result["plan"])


def test_up_to_date_cluster(talos_kube_lab, tmp_path):
    lab = talos_kube_lab(controlplanes=1, workers=1, version=release.TALOS, kubernetes_version=release.KUBERNETES)
    proc = _run(lab, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = _result(proc)
    assert set(result["components"].values()) == {"up_to_date"}
    assert result["step"] == "" and "nothing to do" in result["plan"][-1]


def test_newer_machine_refused_before_any_write(talos_kube_lab, tmp_path):
    lab = talos_kube_lab(controlplanes=1, workers=1, version="v1.13.9", kubernetes_version="v1.35.4",
                         overrides=[{"name": "worker-1", "version": "v1.14.6"}])
    mark = lab.kube.audit_mark()
    proc = _run(lab, tmp_path)
    assert proc.returncode != 0
    assert "Talos on worker-1 is v1.14.6, newer than the release set's v1.14.5" in proc.stdout
    assert lab.kube.mutating_requests(since=mark, user="lab-admin", namespace="ichor-system") == []
    writes = ("ApplyConfiguration", "Upgrade", "Reboot", "Reset", "Pull", "Bootstrap", "EtcdLeaveCluster")
    for m in lab.machines:
        calls = lab.control.calls(m["name"])
        assert not [c for c in calls if any(c.endswith(w) for w in writes)], calls


def test_two_minor_kubernetes_gap_refused(talos_kube_lab, tmp_path):
    lab = talos_kube_lab(controlplanes=1, workers=0, version="v1.13.9", kubernetes_version="v1.34.2")
    proc = _run(lab, tmp_path)
    assert proc.returncode != 0
    assert "Kubernetes v1.34.2 is more than one minor behind the release set's v1.36.6" in proc.stdout


def test_desired_change_validated_against_the_record(talos_kube_lab, tmp_path):
    lab = talos_kube_lab(controlplanes=1, workers=0, version="v1.13.9", kubernetes_version="v1.35.4")
    kube = KubeClient(kubeconfig=lab.kube.kubeconfig)
    cluster_record.update(kube, lambda d: d.update(talos="v1.13.9", kubernetes="v1.35.4", contract="v1.13"))
    proc = _run(lab, tmp_path, "-e", '{"ichor_desired": {"talos": "v1.14.1"}}')
    assert proc.returncode != 0 and "talos v1.14.1 is not the release set's v1.14.5" in proc.stdout
    proc = _run(lab, tmp_path, "-e", '{"ichor_desired": {"talos": "v1.14.5", "kubernetes": "v1.35.4"}}')
    assert proc.returncode == 0, proc.stdout
