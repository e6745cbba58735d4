"""release_check against the lab, whose machines start from real Talos configs (tests/fixtures/configs): a
behind cluster, a newer machine and a newer Kubernetes refused before any write, a two-minor Kubernetes gap
refused, a config the engine cannot render refused, and a desired change validated against the record.
(The up-to-date cluster is the end of the roll in test_upgrade.py.)"""

import json

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient

from tests import versions
from tests.integration.ansible_env import REPO, ansible_playbook, write_inventory

pytestmark = pytest.mark.lab

PLAYBOOK = REPO + "/tests/integration/playbooks/release_check.yml"
CONFIGS = REPO + "/tests/fixtures/configs/"
V113_K8S_135 = CONFIGS + "v1.13/v1.13.9/k8s-older"  # contract v1.13, Talos v1.13.9, Kubernetes 1.35.4
WRITES = ("ApplyConfiguration", "Upgrade", "Reboot", "Reset", "Pull", "Bootstrap", "EtcdLeaveCluster")


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


def _no_write(lab, mark):
    assert lab.kube.mutating_requests(since=mark, user="lab-admin", namespace="ichor-system") == []
    for m in lab.machines:
        calls = lab.control.calls(m["name"])
        assert not [c for c in calls if any(c.endswith(w) for w in WRITES)], calls


@pytest.mark.floor
def test_behind_cluster(talos_kube_lab, tmp_path):
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=1, workers=2, version="v1.13.9")
    proc = _run(lab, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = _result(proc)
    assert result["components"] == {"talos": "behind", "contract": "behind", "kubernetes": "behind"}
    assert result["step"] == "talos"
    # the machines' configs are in the v1.13 form: the config step is planned after the Talos step, not hidden
    assert [s["step"] for s in result["steps"]] == ["talos", "config", "kubernetes"]
    assert result["config_pending"] == [
        {"name": "cp-1", "form": "v1.13", "drop": []}, {"name": "worker-1", "form": "v1.13", "drop": []},
        {"name": "worker-2", "form": "v1.13", "drop": []}]
    assert result["steps"][0]["machines"] == ["cp-1", "worker-1", "worker-2"]
    plan = "\n".join(result["plan"])
    assert "Kubernetes        v1.35.4  %-7s  Behind" % release.KUBERNETES in plan
    assert "Version contract  v1.13    %-7s  Behind" % release.CONTRACT in plan


def test_newer_machine_refused_before_any_write(talos_kube_lab, tmp_path):
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=1, workers=1, version="v1.13.9",
                         overrides=[{"name": "worker-1", "version": versions.TALOS_NEWER}])
    mark = lab.kube.audit_mark()
    proc = _run(lab, tmp_path)
    assert proc.returncode != 0
    assert "Talos on worker-1 is %s, newer than the release set's %s" % (versions.TALOS_NEWER, release.TALOS) in proc.stdout
    _no_write(lab, mark)


def test_newer_kubernetes_refused_before_any_write(talos_kube_lab, tmp_path):
    # machinery v1.14.1's default Kubernetes (1.37.0) is newer than the set's
    lab = talos_kube_lab(case=CONFIGS + "v1.14/v1.14.1/basic", controlplanes=1, workers=1, version=release.TALOS)
    mark = lab.kube.audit_mark()
    proc = _run(lab, tmp_path)
    assert proc.returncode != 0
    assert "is v1.37.0, newer than the release set's %s" % release.KUBERNETES in proc.stdout
    _no_write(lab, mark)


def test_two_minor_kubernetes_gap_refused(talos_kube_lab, tmp_path):
    lab = talos_kube_lab(case=CONFIGS + "v1.12/v1.12.7/k8s-older", controlplanes=1, workers=0, version="v1.12.7")
    proc = _run(lab, tmp_path)
    assert proc.returncode != 0
    assert "Kubernetes v1.34.12 is more than one minor behind the release set's %s" % release.KUBERNETES in proc.stdout


def test_a_config_the_engine_cannot_render_is_refused_before_any_step(talos_kube_lab, tmp_path):
    # an inline manifest other than Cilium's has no spec field: a whole-config render would drop it
    lab = talos_kube_lab(case=CONFIGS + "v1.13/v1.13.9/inline-other", controlplanes=1, workers=0, version="v1.13.9")
    mark = lab.kube.audit_mark()
    proc = _run(lab, tmp_path)
    assert proc.returncode != 0
    assert "cp-1: its live config is not what the cluster's spec renders at any contract" in proc.stdout
    assert "bring the machine to its spec first" in proc.stdout
    _no_write(lab, mark)


def test_desired_change_validated_against_the_record(talos_kube_lab, tmp_path):
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=1, workers=0, version="v1.13.9")
    kube = KubeClient(kubeconfig=lab.kube.kubeconfig)
    cluster_record.update(kube, lambda d: d.update(talos="v1.13.9", kubernetes="v1.35.4", contract="v1.13"))
    proc = _run(lab, tmp_path, "-e", '{"ichor_desired": {"talos": "v1.14.1"}}')
    assert proc.returncode != 0 and "talos v1.14.1 is not the release set's %s" % release.TALOS in proc.stdout
    proc = _run(lab, tmp_path, "-e", '{"ichor_desired": {"talos": "%s", "kubernetes": "v1.35.4"}}' % release.TALOS)
    assert proc.returncode == 0, proc.stdout


@pytest.mark.parametrize("module", ["release_check", "config_upgrade", "kubernetes_upgrade"])
def test_a_machine_without_a_role_is_one_line(talos_lab, tmp_path, module):
    lab = talos_lab(controlplanes=1, workers=0)
    play = tmp_path / "play.yml"
    play.write_text(yaml.safe_dump([{"hosts": "localhost", "connection": "local", "gather_facts": False,
                                     "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"},
                                     "tasks": [{"maesh.ichor.%s" % module: {
                                         "talosconfig": lab.talosconfig,
                                         "machines": [{"name": "cp-1", "node": lab.address("cp-1")}]}}]}]))
    proc = ansible_playbook("-i", "localhost,", str(play))
    assert proc.returncode != 0
    assert "missing required arguments: role found in machines" in proc.stdout, proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def _require_record_play(lab, tmp_path):
    play = tmp_path / "require_record.yml"
    play.write_text(yaml.safe_dump([{"hosts": "localhost", "connection": "local", "gather_facts": False,
                                     "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"},
                                     "tasks": [{"maesh.ichor.release_check": {
                                         "talosconfig": lab.talosconfig, "kubeconfig": lab.kube.kubeconfig,
                                         "machines": [{"name": m["name"], "node": m["address"], "role": m["role"]}
                                                      for m in lab.machines],
                                         "require_record": True}}]}]))
    return str(play)


def test_require_record_refuses_a_cluster_without_a_record_before_reading_a_machine(talos_kube_lab, tmp_path):
    """Issue 26 section 7: what the rollout runs (require_record) refuses a cluster adopt never adopted and init never
    made, in one line naming both, before any machine is read; with a record it judges the cluster."""
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=1, workers=1, version="v1.13.9")
    play = _require_record_play(lab, tmp_path)
    mark = lab.kube.audit_mark()
    lab.control.reset_timeline()
    proc = ansible_playbook("-i", "localhost,", play, "--check")
    assert proc.returncode != 0
    assert ("no cluster record ichor-system/ichor-cluster: maesh.ichor has not adopted or initialised this cluster; "
            "adopt it with maesh.ichor.adopt (a running cluster) or make it with maesh.ichor.init, then plan the "
            "upgrade again; nothing was written") in proc.stdout, proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr
    assert lab.control.timeline() == []
    _no_write(lab, mark)
    kube = KubeClient(kubeconfig=lab.kube.kubeconfig)
    cluster_record.update(kube, lambda d: d.update(talos="v1.13.9", kubernetes="v1.35.4", contract="v1.13"))
    proc = ansible_playbook("-i", "localhost,", play, "--check")
    assert proc.returncode == 0, proc.stdout
    assert "next step: talos" in proc.stdout
