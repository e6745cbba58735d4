"""Init (seed 0113 decision 2; seed 0103 section 2; ADR 0128) against the lab: simulated Talos machines in
maintenance mode, the real API server, real helm and the real Cilium chart, through ansible-playbook."""

import os
import stat

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils import release
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient

from tests.integration.ansible_env import ansible_playbook
from tests.lab.cilium import fixtures as cilium_fixtures
from tests.lab.cilium.fixtures import TALOS_VALUES, merged

pytestmark = pytest.mark.lab

cilium_charts = cilium_fixtures.cilium_charts
cilium_lab = cilium_fixtures.cilium_lab


def _inventory(lab, tmp_path, names=None, **extra):
    """The inventory an operator writes for init: each machine's address and expected UUID."""
    keep = tmp_path / "keep"
    keep.mkdir(mode=0o700, exist_ok=True)
    groups = {"controlplane": {"hosts": {}}, "worker": {"hosts": {}}}
    for m in lab.machines:
        if names is None or m["name"] in names:
            groups[m["role"]]["hosts"][m["name"]] = {"ansible_host": m["address"], "ichor_uuid": m["uuid"]}
    variables = {"ichor_init_cluster_name": "lab", "ichor_init_secrets_file": str(keep / "secrets.yaml"),
                 "ichor_init_talosconfig_file": str(keep / "talosconfig"),
                 "ichor_init_kubeconfig_file": str(keep / "kubeconfig")}
    variables.update(extra)
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump({"all": {"vars": variables, "children": groups}}))
    return str(path), keep


def _init(inv, *extra):
    proc = ansible_playbook("-i", inv, "maesh.ichor.init", *extra)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return proc


KUBE_PROXY = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "kube-proxy", "namespace": "kube-system"},
              "spec": {"selector": {"matchLabels": {"k8s-app": "kube-proxy"}}, "template": {
                  "metadata": {"labels": {"k8s-app": "kube-proxy"}},
                  "spec": {"containers": [{"name": "kube-proxy", "image": "registry.k8s.io/kube-proxy:%s" % release.KUBERNETES}]}}}}


@pytest.fixture
def init_cleanup(kube_lab):
    """Init writes into the shared API server: the record, the bundle Secret, the lock and the kube-proxy DaemonSet
    (Talos's bootstrap manifests deploy it: the lab has it made by the test) go again afterwards."""
    yield
    kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
    if kube.get("apps/v1", "DaemonSet", "kube-proxy", "kube-system") is not None:
        kube.delete("apps/v1", "DaemonSet", "kube-proxy", "kube-system")
    for api_version, kind, name in (("v1", "Secret", "ichor-secrets-bundle"), ("v1", "ConfigMap", "ichor-cluster"),
                                    ("coordination.k8s.io/v1", "Lease", "ichor-cluster-lock")):
        if kube.get(api_version, kind, name, "ichor-system") is not None:
            kube.delete(api_version, kind, name, "ichor-system")


def test_three_control_planes_and_two_workers_from_maintenance_mode_to_a_ready_cluster(
        talos_kube_lab, kube_lab, cilium_lab, cilium_charts, tmp_path, init_cleanup):
    lab = talos_kube_lab(controlplanes=3, workers=2, mode="maintenance", bootstrapped=False, version=release.TALOS)
    cilium = cilium_lab(nodes=0)
    # what the install leaves (its objects in kube-system: namespaceOverride), for teardown
    cilium.render("1.20", merged(TALOS_VALUES, {"namespaceOverride": "kube-system"}), namespace="ichor-system")
    inv, keep = _inventory(lab, tmp_path, ichor_init_cilium_chart=cilium_charts["1.20"]["chart"],
                           ichor_init_helm=kube_lab.bins["helm"])
    mark = kube_lab.audit_mark()
    planned = _init(inv, "--check")
    assert planned.returncode == 0, planned.stdout[-6000:]
    assert "PLAN (check mode: nothing was written)" in planned.stdout
    assert "etcd: bootstrapped once, on cp-1" in planned.stdout
    for m in lab.machines:
        assert "%s (%s): maintenance mode, UUID %s: gets the %s config at contract %s" % (
            m["name"], m["address"], m["uuid"], m["role"], release.CONTRACT) in planned.stdout
        assert "ApplyConfiguration" not in lab.control.calls(m["name"])
    assert os.listdir(str(keep)) == []
    assert kube_lab.mutating_requests(since=mark, user="lab-admin") == []
    # Talos deploys kube-proxy from its bootstrap manifests (kube-proxy enabled); nothing runs them in the lab
    KubeClient(kubeconfig=kube_lab.kubeconfig).apply(KUBE_PROXY, "lab")

    made = _init(inv)
    assert made.returncode == 0, made.stdout[-8000:]
    state = dict((m["name"], m) for m in lab.control.machines())
    assert all(m["mode"] == "configured" for m in state.values()), state
    assert sum(lab.control.calls(m["name"]).get("Bootstrap", 0) for m in lab.machines) == 1
    for name in ("secrets.yaml", "talosconfig", "kubeconfig"):
        assert stat.S_IMODE(os.stat(str(keep / name)).st_mode) == 0o600, name
    kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
    record = cluster_record.read(kube)
    assert record.get("cluster")["cni"]["preset"] == "cilium" and record.get("contract") == release.CONTRACT
    assert sorted(record.get("nodes")) == sorted(m["name"] for m in lab.machines) and not record.get("held")
    assert record.get("cilium")["release"] == "ichor-system/cilium"
    assert kube.get("v1", "Secret", "ichor-secrets-bundle", "ichor-system") is not None

    again = _init(inv)
    assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout[-8000:]
    assert sum(lab.control.calls(m["name"]).get("Bootstrap", 0) for m in lab.machines) == 1
