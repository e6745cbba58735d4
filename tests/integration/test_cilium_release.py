"""cilium_release on the lab's real API server with real helm and the real charts (tests/lab/cilium): a values change
applied and kept in the cluster record; after a takeover of a 1.19 install (an upgrade to the set's 1.20 by the
takeover's version rule) nothing left to do; the collection's own 1.19 release upgraded to 1.20; a skipped minor
refused; operator replicas with one Node and with two; a failing helm apply retried; check mode writing nothing;
a second run changing nothing; the CNI-unmanaged preset refused; no release of ours refused; the install at init;
a pending-upgrade record left by a killed helm repaired; the rollout's cilium step after a Kubernetes step."""

import json
import os
import signal
import stat
import subprocess
import tarfile
import time

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.common import release as release_set
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import record, release, takeover
from ansible_collections.maesh.ichor.plugins.module_utils.cilium.errors import Refused
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient

from tests.integration.ansible_env import ansible_playbook
from tests.integration.test_cilium_takeover import Conn, _reader, _resource_versions
from tests.lab.agent import MANAGED
from tests.lab.cilium import fixtures, rbac_fixtures
from tests.lab.cilium.fixtures import TALOS_VALUES, merged

pytestmark = pytest.mark.lab

cilium_charts = fixtures.cilium_charts
cilium_lab = fixtures.cilium_lab
cilium_caller = rbac_fixtures.cilium_caller

USER_VALUES = {"debug": {"enabled": True}, "cluster": {"name": "prod"}}


def _params(kube_lab, cilium_charts, **extra):
    params = dict(chart=cilium_charts["1.20"]["chart"], chart_digest=None, helm=kube_lab.bins["helm"],
                  kubeconfig=kube_lab.kubeconfig, kubeconfig_content=None, kube_context=None, timeout=30.0,
                  install=False, cilium_values=None, kube_proxy=None, tunnel=None, kubeprism_port=7445,
                  control_planes=None, wait=True, wait_timeout=60.0)
    params.update(extra)
    return params


def _run(kube_lab, cilium_charts, check=False, **extra):
    params = _params(kube_lab, cilium_charts, **extra)
    return release.run(params, Conn(params["kubeconfig"]), check)


def _refused(kube_lab, cilium_charts, **extra):
    with pytest.raises(Refused) as info:
        _run(kube_lab, cilium_charts, **extra)
    return info.value


def _take_over(kube_lab, cilium_charts, **extra):
    params = dict(chart=cilium_charts["1.20"]["chart"], chart_digest=None, helm=kube_lab.bins["helm"],
                  kubeconfig=kube_lab.kubeconfig, kubeconfig_content=None, kube_context=None, timeout=30.0,
                  kube_proxy=None, kubeprism_port=7445, cilium_values=None, accept_cilium_changes=False,
                  accept_cilium_diff=False, wait=True, wait_timeout=60.0)
    params.update(extra)
    return takeover.run(params, Conn(params["kubeconfig"]), False)


def _cluster_record(lab):
    return json.loads(lab.core.read_namespaced_config_map("ichor-cluster", "ichor-system").data["record"])


def _ours(lab):
    return [(s.metadata.labels["version"], s.metadata.labels["status"],
             record.decode(s.data["release"])["chart"]["metadata"]["version"]) for s in lab.records("ichor-system")]


def _config(lab):
    return lab.core.read_namespaced_config_map("cilium-config", "kube-system").data


def _image(lab):
    return lab.apps.read_namespaced_daemon_set("cilium", "kube-system").spec.template.spec.containers[0].image


def _operator_replicas(lab):
    return lab.apps.read_namespaced_deployment("cilium-operator", "kube-system").spec.replicas


def _writes(kube_lab, mark, user="lab-admin"):
    """The writes of user (the admin by default) since mark, besides the lab agent's status updates."""
    return [e for e in kube_lab.mutating_requests(since=mark, user=user)
            if (e.get("objectRef") or {}).get("subresource") != "status"]


def test_a_values_change_is_applied_kept_in_the_cluster_record_and_a_second_run_changes_nothing(
        cilium_lab, cilium_charts, kube_lab, cilium_caller):
    lab = cilium_lab(nodes=2)
    lab.helm_install("1.20", merged(TALOS_VALUES, USER_VALUES))
    lab.wait_ready()
    caller = cilium_caller()  # the bundle's ServiceAccount, bound to exactly its rules
    _take_over(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig)
    # right after the takeover: the user's values from the cluster record, nothing to apply
    same = _run(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig)
    assert same["changed"] is False and same["step"] == "none" and same["values_source"] == "cluster_record"
    assert same["gate"] == [] and same["user_values"] == USER_VALUES
    changed_values = {"debug": {"enabled": False}, "cluster": {"name": "prod"}, "bpf": {"monitorAggregation": "low"}}
    lab.render("1.20", merged(TALOS_VALUES, changed_values))
    result = _run(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig, cilium_values=changed_values)
    assert result["changed"] is True and result["step"] == "values" and result["attempts"] == 1
    assert "values: debug.enabled: true -> false" in result["plan"]
    assert 'values: bpf.monitorAggregation: unset -> "low"' in result["plan"]
    assert any(e["object"] == "ConfigMap kube-system/cilium-config" and e["path"] == "data.debug" for e in result["gate"])
    config = _config(lab)
    assert (config["debug"], config["monitor-aggregation"]) == ("false", "low")
    assert _ours(lab) == [("1", "superseded", "1.20.4"), ("2", "deployed", "1.20.4")]
    assert _cluster_record(lab)["cilium"]["values"] == changed_values
    # the next run takes the values from the cluster record: nothing to change, nothing written
    mark = kube_lab.audit_mark()
    again = _run(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig)
    assert again["changed"] is False and again["user_values"] == changed_values and again["gate"] == []
    assert kube_lab.mutating_requests(since=mark, user=caller.user, namespace="ichor-system") == []
    assert [e for e in kube_lab.mutating_requests(since=mark, user=caller.user, namespace="kube-system")
            if (e.get("objectRef") or {}).get("subresource") != "status"] == []


def test_after_the_takeover_of_a_1_19_install_the_release_is_at_the_set_already(cilium_lab, cilium_charts, kube_lab, cilium_caller):
    lab = cilium_lab(nodes=2)
    lab.helm_install("1.19", TALOS_VALUES)
    lab.wait_ready()
    caller = cilium_caller()  # the bundle's ServiceAccount, bound to exactly its rules
    lab.render("1.20", TALOS_VALUES)
    taken = _take_over(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig, accept_cilium_diff=True)
    assert taken["step"] == "upgrade"  # the takeover's version rule: one minor lower is taken over as an upgrade
    result = _run(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig)
    assert result["changed"] is False and result["step"] == "none"
    assert result["release"] == {"revision": 1, "status": "deployed", "chart": "1.20.4"}
    assert _image(lab) == "quay.io/cilium/cilium:v1.20.4"


def test_the_collections_1_19_release_is_upgraded_to_1_20_one_minor(cilium_lab, cilium_charts, kube_lab, cilium_caller):
    lab = cilium_lab(nodes=2)
    lab.older_collection_release("1.19", USER_VALUES, nodes=2)
    caller = cilium_caller()  # the bundle's ServiceAccount, bound to exactly its rules
    assert _image(lab) == "quay.io/cilium/cilium:v1.19.5"
    lab.render("1.20", merged(TALOS_VALUES, USER_VALUES), namespace="ichor-system")
    planned = _run(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig, check=True)
    assert planned["changed"] is True and planned["step"] == "upgrade" and _ours(lab) == [("1", "deployed", "1.19.5")]
    assert "upgrade: chart 1.19.5 -> 1.20.4" in planned["plan"]
    image = [e for e in planned["gate"] if e["object"] == "DaemonSet kube-system/cilium"
             and e["path"] == "spec.template.spec.containers[cilium-agent].image"]
    assert [(e["live"], e["chart"]) for e in image] == [("quay.io/cilium/cilium:v1.19.5", "quay.io/cilium/cilium:v1.20.4")]
    result = _run(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig)
    assert result["changed"] is True and result["release"] == {"revision": 2, "status": "deployed", "chart": "1.20.4"}
    assert _image(lab) == "quay.io/cilium/cilium:v1.20.4" and _config(lab)["cluster-name"] == "prod"
    assert _ours(lab) == [("1", "superseded", "1.19.5"), ("2", "deployed", "1.20.4")]
    assert _cluster_record(lab)["cilium"]["chart"] == "1.20.4"
    assert _cluster_record(lab)["cilium"]["values"] == USER_VALUES
    assert _run(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig)["changed"] is False


def test_a_skipped_minor_is_refused_and_nothing_is_written(cilium_lab, cilium_charts, kube_lab, cilium_caller):
    lab = cilium_lab(nodes=2)
    lab.older_collection_release("1.18", {}, nodes=2)
    caller = cilium_caller()  # the bundle's ServiceAccount, bound to exactly its rules
    mark = kube_lab.audit_mark()
    refused = _refused(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig)
    assert refused.message == ("the Cilium release runs chart 1.18.6, more than one minor below 1.20.4: Cilium moves "
                               "one minor at a time; upgrade it to 1.19 first with a maesh.ichor whose release set has "
                               "that minor")
    assert refused.result["plan"][-1] == "refused: " + refused.message
    assert _ours(lab) == [("1", "deployed", "1.18.6")] and _image(lab) == "quay.io/cilium/cilium:v1.18.6"
    assert _writes(kube_lab, mark, caller.user) == []


def _add_node(lab, name):
    lab.core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        MANAGED: lab.owner, "kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}}})


def test_install_at_init_and_operator_replicas_with_one_node_and_with_two(cilium_lab, cilium_charts, kube_lab, cilium_caller):
    lab = cilium_lab(nodes=1)
    caller = cilium_caller()  # the bundle's ServiceAccount, bound to exactly its rules
    refused = _refused(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig)
    assert refused.message == ("no Helm release ichor-system/cilium of the collection exists: run cilium_takeover "
                               "first (or set install for a cluster without Cilium)")
    installed = _run(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig, install=True, kube_proxy="replaced", tunnel="geneve",
                     cilium_values=USER_VALUES)
    lab.render("1.20", installed["values"], namespace="ichor-system")  # for teardown
    assert installed["step"] == "install" and installed["cilium"]["operator_replicas"] == 1
    assert _operator_replicas(lab) == 1 and _config(lab)["tunnel-protocol"] == "geneve"
    assert _ours(lab) == [("1", "deployed", "1.20.4")]
    assert _cluster_record(lab)["cilium"] == {"release": "ichor-system/cilium", "chart": "1.20.4", "values": USER_VALUES,
                                              "tunnel": "geneve", "kubeProxy": "replaced"}
    assert _run(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig, install=True)["changed"] is False
    # a second Node (NotReady counts too): the chart's default of two replicas
    _add_node(lab, lab.owner + "-node-extra")
    two = _run(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig)
    assert two["step"] == "values" and two["cilium"]["operator_replicas"] is None and _operator_replicas(lab) == 2
    assert "values: operator.replicas: 1 -> unset" in two["plan"]
    assert "operator replicas: the chart's default (2 Nodes)" in two["plan"]
    # one control plane in the spec, workers included: one replica
    one_cp = _run(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig, control_planes=1)
    assert one_cp["step"] == "values" and _operator_replicas(lab) == 1
    assert "operator replicas: 1 (2 Nodes, 1 control planes in the spec)" in one_cp["plan"]
    # install refuses a Cilium that runs but is not ours
    lab.core.delete_namespaced_secret("sh.helm.release.v1.cilium.v1", "ichor-system")
    lab.core.delete_namespaced_secret("sh.helm.release.v1.cilium.v2", "ichor-system")
    lab.core.delete_namespaced_secret("sh.helm.release.v1.cilium.v3", "ichor-system")
    assert _refused(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig, install=True).message == (
        "Cilium 1.20.4 runs here (DaemonSet kube-system/cilium) and is not the collection's release: run "
        "cilium_takeover first; install is for a cluster without Cilium")


def _failing_helm(tmp_path, real, failures):
    """A helm that fails its first ``failures`` upgrades (as an API server that is briefly away would)."""
    count = tmp_path / "upgrades"
    path = tmp_path / "helm"
    path.write_text("#!/bin/sh\nif [ \"$1\" = upgrade ]; then\n  n=$(cat %s 2>/dev/null || echo 0); n=$((n+1))\n"
                    "  echo $n > %s\n  if [ $n -le %d ]; then echo 'Error: UPGRADE FAILED: the server is currently "
                    "unable to handle the request' >&2; exit 1; fi\nfi\nexec %s \"$@\"\n" % (count, count, failures, real))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path), count


def test_a_failing_apply_is_retried_with_backoff(cilium_lab, cilium_charts, kube_lab, tmp_path, cilium_caller):
    lab = cilium_lab(nodes=2)
    lab.helm_install("1.20", merged(TALOS_VALUES, USER_VALUES))
    lab.wait_ready()
    caller = cilium_caller()  # the bundle's ServiceAccount, bound to exactly its rules
    _take_over(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig)
    helm, count = _failing_helm(tmp_path, kube_lab.bins["helm"], failures=2)
    result = _run(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig, helm=helm, cilium_values={"debug": {"enabled": False}})
    assert result["attempts"] == 3 and count.read_text().strip() == "3"
    failed = [line for line in result["plan"] if line.startswith("attempt ")]
    assert [line.split(":")[0] for line in failed] == ["attempt 1 of 6 failed, next in 5s",
                                                       "attempt 2 of 6 failed, next in 10s"]
    assert "the server is currently unable to handle the request" in failed[0]
    assert _ours(lab)[-1] == ("2", "deployed", "1.20.4") and _config(lab)["debug"] == "false"


def test_check_mode_writes_nothing_and_diff_shows_before_and_after(cilium_lab, cilium_charts, kube_lab, kube_namespace):
    lab = cilium_lab(nodes=2)
    lab.helm_install("1.20", merged(TALOS_VALUES, USER_VALUES))
    lab.wait_ready()
    _take_over(kube_lab, cilium_charts)
    lab.agent.stop(remove_nodes=False)  # statuses stay as they are: every resourceVersion is stable now
    reader = _reader(kube_lab, kube_namespace)
    before = _resource_versions(kube_lab, open(lab.manifests[-1]).read())
    records = [(s.metadata.name, s.metadata.resource_version) for s in lab.records("ichor-system")]
    cm = lab.core.read_namespaced_config_map("ichor-cluster", "ichor-system").metadata.resource_version
    mark = kube_lab.audit_mark()
    result = _run(kube_lab, cilium_charts, check=True, kubeconfig=reader, cilium_values={"debug": {"enabled": False}})
    assert result["changed"] is True and result["step"] == "values" and "attempts" not in result
    values_diff = result["diff"][0]
    assert "enabled: true" in values_diff["before"] and "enabled: false" in values_diff["after"]
    assert any("debug: 'false'" in d["after"] for d in result["diff"][1:])
    user = "system:serviceaccount:%s:takeover" % kube_namespace
    assert kube_lab.mutating_requests(since=mark, user=user) == []
    assert _resource_versions(kube_lab, open(lab.manifests[-1]).read()) == before
    assert [(s.metadata.name, s.metadata.resource_version) for s in lab.records("ichor-system")] == records
    assert lab.core.read_namespaced_config_map("ichor-cluster", "ichor-system").metadata.resource_version == cm


def test_the_unmanaged_preset_is_refused(cilium_lab, cilium_charts, kube_lab, cilium_caller):
    lab = cilium_lab(nodes=1)
    caller = cilium_caller()  # the bundle's ServiceAccount, bound to exactly its rules
    kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
    # as adopt writes it (the record refuses the preset without the adoption marker)
    cluster_record.update(kube, lambda data: data.update(cluster={"cni": {"preset": "unmanaged"}},
                                                         adoption={"adopted": True}))
    try:
        mark = kube_lab.audit_mark()
        refused = _refused(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig, install=True)
        assert refused.message == "the CNI is not managed by Ichor (spec.cni.preset: unmanaged)"
        assert _writes(kube_lab, mark, caller.user) == []
        assert lab.records("ichor-system") == []
    finally:
        cluster_record.update(kube, lambda data: [data.pop(key, None) for key in ("cluster", "adoption")])


def _playbook(tmp_path, check, **args):
    task = {"maesh.ichor.cilium_release": args, "register": "ichor_result", "ignore_errors": True}
    save = {"ansible.builtin.copy": {"content": "{{ ichor_result | to_json }}", "dest": str(tmp_path / "result.json")},
            "check_mode": False, "diff": False}
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [task, save],
             "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"}}]
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump(play))
    temp = tmp_path / "tmp"  # the run's own temp dir: what helm's files leave behind is this run's alone
    temp.mkdir(exist_ok=True)
    proc = ansible_playbook(str(path), "-i", "localhost,", "-c", "local", *(["--check", "--diff"] if check else []),
                            env={"TMPDIR": str(temp)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads((tmp_path / "result.json").read_text()), proc.stdout


def test_the_module_plans_applies_and_reruns_without_change(cilium_lab, cilium_charts, kube_lab, tmp_path):
    lab = cilium_lab(nodes=2)
    lab.helm_install("1.20", merged(TALOS_VALUES, USER_VALUES))
    lab.wait_ready()
    _take_over(kube_lab, cilium_charts)
    args = dict(kubeconfig=kube_lab.kubeconfig, chart=cilium_charts["1.20"]["chart"], helm=kube_lab.bins["helm"],
                cilium_values={"debug": {"enabled": False}}, wait_timeout=60)
    planned, out = _playbook(tmp_path, True, **args)
    assert planned["changed"] is True and not planned.get("failed") and planned["step"] == "values"
    assert "enabled: false" in out  # --diff shows the values after
    assert _config(lab)["debug"] == "true"
    first = _playbook(tmp_path, False, **args)[0]
    assert first["changed"] is True and not first.get("failed") and "diff" not in first
    assert _config(lab)["debug"] == "false"
    second = _playbook(tmp_path, False, **args)[0]
    assert second["changed"] is False and not second.get("failed")
    assert not [name for name in os.listdir(str(tmp_path / "tmp")) if name.startswith("ichor-helm-")]


def test_the_rollouts_cilium_step_upgrades_1_19_to_1_20_after_a_kubernetes_step(
        talos_kube_lab, cilium_charts, kube_lab, tmp_path):
    from tests.integration.test_upgrade import V114_K8S_136, _inventory, _upgrade
    lab = talos_kube_lab(case=V114_K8S_136, controlplanes=1, workers=1, version=release_set.TALOS)
    cilium = fixtures.CiliumLab(kube_lab, cilium_charts, str(tmp_path))  # the talos lab's agent marks it ready
    try:
        cilium.older_collection_release("1.19", USER_VALUES, nodes=2)
        cilium.render("1.20", merged(TALOS_VALUES, USER_VALUES, {"operator": {"replicas": 1}}), namespace="ichor-system")
        inv = _inventory(lab, tmp_path, ichor_upgrade_cilium_chart=cilium_charts["1.20"]["chart"],
                         ichor_upgrade_helm=kube_lab.bins["helm"])
        proc = _upgrade(inv, "--check")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "next step: kubernetes" in proc.stdout and "then: cilium" in proc.stdout, proc.stdout
        assert "Cilium            1.19.5   1.20.4   Behind" in proc.stdout, proc.stdout
        proc = _upgrade(inv, "-e", "ichor_upgrade_follow=true")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        tasks = [line.split(":", 1)[-1].split("]")[0].strip() for line in proc.stdout.splitlines()
                 if line.startswith("TASK [")]
        ran = [t for t in tasks if t in ("Upgrade Kubernetes (control planes, kube-proxy, kubelets; no reboot)",
                                         "Upgrade the Cilium release to the release set's chart")]
        assert ran == ["Upgrade Kubernetes (control planes, kube-proxy, kubelets; no reboot)",
                       "Upgrade the Cilium release to the release set's chart"], tasks
        assert _image(cilium) == "quay.io/cilium/cilium:v1.20.4" and _config(cilium)["cluster-name"] == "prod"
        assert _ours(cilium) == [("1", "superseded", "1.19.5"), ("2", "deployed", "1.20.4")]
        assert _operator_replicas(cilium) == 1  # one control plane in the inventory
        stored = _cluster_record(cilium)
        assert (stored["kubernetes"], stored["cilium"]["chart"], stored["cilium"]["values"]) == (
            release_set.KUBERNETES, "1.20.4", USER_VALUES)
        proc = _upgrade(inv)
        assert proc.returncode == 0 and "changed=0" in proc.stdout, proc.stdout
        assert "the cluster is at the release set; nothing to do" in proc.stdout
    finally:
        cilium.cleanup()


def test_a_pending_upgrade_left_by_a_killed_helm_is_repaired_and_the_release_applied(
        cilium_lab, cilium_charts, kube_lab, cilium_caller):
    lab = cilium_lab(nodes=2)
    lab.helm_install("1.20", merged(TALOS_VALUES, USER_VALUES))
    lab.wait_ready()
    caller = cilium_caller()  # the bundle's ServiceAccount, bound to exactly its rules
    taken = _take_over(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig)
    # helm upgrade as a run would start it, with --wait so that it stays pending (the lab's Deployments never get
    # the ReplicaSet helm waits for), killed there
    values = merged(taken["values"], {"debug": {"enabled": False}})
    proc = subprocess.Popen([kube_lab.bins["helm"], "upgrade", "cilium", cilium_charts["1.20"]["chart"], "--namespace",
                             "ichor-system", "-f", lab.file("values.json", values), "--wait", "--timeout", "5m"],
                            env=kube_lab.helm_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not [s for s in lab.records("ichor-system") if s.metadata.labels["status"] == "pending-upgrade"]:
        assert time.monotonic() < deadline and proc.poll() is None, "helm never left a pending-upgrade record"
        time.sleep(0.1)
    time.sleep(1.0)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    pending = lab.records("ichor-system")[-1]
    assert (pending.metadata.labels["version"], pending.metadata.labels["status"]) == ("2", "pending-upgrade")
    result = _run(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig)  # the cluster record's values: debug still enabled
    assert ("repair: delete ichor-system/sh.helm.release.v1.cilium.v2 (pending-upgrade, left by a run that was "
            "stopped; uid %s)" % pending.metadata.uid) in result["plan"]
    assert "repaired: deleted ichor-system/sh.helm.release.v1.cilium.v2" in result["plan"]
    assert result["changed"] is True and result["step"] == "values"
    newest = lab.records("ichor-system")[-1]
    assert newest.metadata.uid != pending.metadata.uid and _ours(lab)[-1] == ("2", "deployed", "1.20.4")
    assert _config(lab)["debug"] == "true"
    assert _run(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig)["changed"] is False


def test_a_release_of_a_newer_chart_is_refused_as_a_downgrade(cilium_lab, cilium_charts, kube_lab, tmp_path,
                                                              cilium_caller):
    """A release of ours at a chart newer than the set's (a later maesh.ichor ran here) is never moved back."""
    lab = cilium_lab(nodes=2)
    newer = tmp_path / "newer"
    newer.mkdir()
    with tarfile.open(cilium_charts["1.20"]["chart"]) as archive:
        archive.extractall(str(tmp_path / "source"), filter="data")
    kube_lab.helm("package", str(tmp_path / "source" / "cilium"), "-d", str(newer), "--version", "1.21.0",
                  "--app-version", "1.21.0")
    chart = str(newer / "cilium-1.21.0.tgz")
    values = merged(TALOS_VALUES, {"namespaceOverride": "kube-system"})
    lab.apply_crds("1.20")
    lab.render("1.20", values, namespace="ichor-system")  # for teardown
    kube_lab.helm("install", "cilium", chart, "--namespace", "ichor-system", "--create-namespace", "--take-ownership",
                  "-f", lab.file("values.json", values))
    lab.wait_ready()
    caller = cilium_caller()
    mark = kube_lab.audit_mark()
    refused = _refused(kube_lab, cilium_charts, kubeconfig=caller.kubeconfig)
    assert refused.message.startswith("the Cilium release runs chart 1.21.0, newer than this collection's 1.20.4: "
                                      "refusing a downgrade"), refused.message
    assert _writes(kube_lab, mark, caller.user) == []
    assert [v for v, unused_status, unused_chart in _ours(lab)] == ["1"]
