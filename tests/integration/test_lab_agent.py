"""The lab's two halves wired together: Nodes follow the simulated machines, workloads become
ready (or never do), and a control plane's Kubeconfig call gives a kubeconfig for the real API
server. Also the cluster record helpers against that API server."""

import os
import time

import pytest
from kubernetes import client as k8s

from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import Conflict, KubeClient
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as tc
from ansible_collections.maesh.ichor.plugins.module_utils.talos import kubeconfig as talos_kubeconfig
from ansible_collections.maesh.ichor.plugins.module_utils.talos import talosconfig

from tests.lab.agent import kubelet_version

pytestmark = pytest.mark.lab


def _wait(predicate, timeout=20, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


def _nodes(kube, owner):
    core = k8s.CoreV1Api(kube.api_client())
    return dict((n.metadata.name, n) for n in core.list_node(label_selector="lab.maesh.dev/agent=%s" % owner).items)


def _ready(node):
    return [c.status for c in node.status.conditions if c.type == "Ready"] == ["True"]


def test_nodes_follow_the_machines(talos_kube_lab, tmp_path):
    lab = talos_kube_lab(controlplanes=1, workers=2, mixed_versions=True)
    owner = lab.agent.owner
    nodes = _wait(lambda: len(_nodes(lab.kube, owner)) == 3 and _nodes(lab.kube, owner), what="3 nodes")
    for m in lab.machines:
        node = nodes[m["hostname"]]
        assert node.status.node_info.os_image == "Talos (%s)" % m["version"]
        assert node.status.node_info.kubelet_version.startswith("v1.")
        assert [a.address for a in node.status.addresses if a.type == "InternalIP"] == [m["address"]]
        assert _ready(node)
    assert "node-role.kubernetes.io/control-plane" in nodes["cp-1"].metadata.labels
    # a reboot makes the Node NotReady, then Ready again
    worker = lab.machine("worker-2")
    lab.control.set_timing("worker-2", reboot_seconds=2.0)
    with tc.TalosClient(talosconfig.load(lab.talosconfig), timeout=5) as client:
        client.call("Reboot", node=worker["address"])
        _wait(lambda: not _ready(_nodes(lab.kube, owner)["worker-2"]), what="NotReady during the reboot")
        _wait(lambda: _ready(_nodes(lab.kube, owner)["worker-2"]), what="Ready after the reboot")
        # a reset to maintenance removes the Node
        reset = tc.request_type("Reset")(graceful=False, reboot=True)
        for label in ("STATE", "EPHEMERAL"):
            reset.system_partitions_to_wipe.add(label=label, wipe=True)
        client.call("Reset", reset, node=worker["address"])
    _wait(lambda: "worker-2" not in _nodes(lab.kube, owner), what="the Node to go after the reset")


def test_kubeconfig_call_reaches_the_api_server(talos_kube_lab):
    lab = talos_kube_lab(controlplanes=1, workers=1)
    with tc.TalosClient(talosconfig.load(lab.talosconfig), timeout=5) as client:
        kubeconfig = talos_kubeconfig.kubeconfig_bytes(client.call("Kubeconfig", node=lab.machines[0]["address"]))
    kube = KubeClient(kubeconfig_content=kubeconfig.decode())
    assert kube.get("v1", "Node", "cp-1") is not None
    assert kube.raw_get("/version").count("v1.36") == 1


def test_workloads_become_ready_or_never(talos_kube_lab, kube_namespace):
    lab = talos_kube_lab(controlplanes=1, workers=1)
    kube = KubeClient(kubeconfig=lab.kube.kubeconfig)
    template = {"metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "image": "registry.example/x:1"}]}}
    for name, never in (("ready", False), ("stuck", True)):
        annotations = {"lab.maesh.dev/never-ready": "true"} if never else {}
        kube.create({"apiVersion": "apps/v1", "kind": "Deployment",
                     "metadata": {"name": name, "namespace": kube_namespace, "annotations": annotations},
                     "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "x"}}, "template": template}})
        kube.create({"apiVersion": "apps/v1", "kind": "DaemonSet",
                     "metadata": {"name": name, "namespace": kube_namespace, "annotations": annotations},
                     "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": template}})
    _wait(lambda: (kube.get("apps/v1", "Deployment", "ready", kube_namespace).get("status") or {})
          .get("readyReplicas") == 2, what="the Deployment ready")
    _wait(lambda: (kube.get("apps/v1", "DaemonSet", "ready", kube_namespace).get("status") or {})
          .get("numberReady", 0) >= 2, what="the DaemonSet ready")
    time.sleep(1)
    assert not (kube.get("apps/v1", "Deployment", "stuck", kube_namespace).get("status") or {}).get("readyReplicas")
    assert not (kube.get("apps/v1", "DaemonSet", "stuck", kube_namespace).get("status") or {}).get("numberReady")


def test_cluster_record_updates_are_conditional(kube_lab):
    kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
    existing = kube.get("v1", "ConfigMap", cluster_record.NAME, cluster_record.NAMESPACE)
    if existing is not None:
        kube.delete("v1", "ConfigMap", cluster_record.NAME, cluster_record.NAMESPACE)
    before, after, changed = cluster_record.update(kube, lambda d: d.update(talos="v1.14.1"))
    assert changed and before == {"schema": 1} and after == {"schema": 1, "talos": "v1.14.1"}
    assert cluster_record.read(kube).get("talos") == "v1.14.1"
    # the same update again changes nothing and writes nothing
    mark = kube_lab.audit_mark()
    assert cluster_record.update(kube, lambda d: d.update(talos="v1.14.1"))[2] is False
    assert kube_lab.mutating_requests(since=mark) == []
    # two runs that read the same version: the second write is refused
    first = cluster_record.read(kube)
    second = cluster_record.read(kube)
    first.data["kubernetes"] = "v1.36.6"
    kube.replace(cluster_record.encode(first))
    second.data["kubernetes"] = "v1.35.0"
    with pytest.raises(Conflict):
        kube.replace(cluster_record.encode(second))
    assert cluster_record.read(kube).get("kubernetes") == "v1.36.6"
    # a record written by a newer collection is refused
    newer = cluster_record.read(kube)
    newer.data["schema"] = 99
    kube.replace(cluster_record.encode(newer))
    with pytest.raises(cluster_record.RecordError) as exc:
        cluster_record.read(kube)
    assert "newer" in str(exc.value)
    kube.delete("v1", "ConfigMap", cluster_record.NAME, cluster_record.NAMESPACE)


CASES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "configs")


def test_nodes_of_a_lab_from_a_fixture_case(talos_kube_lab):
    # the case's configs name Kubernetes 1.35.4 (machine.kubelet.image); --kubernetes-version is ignored
    lab = talos_kube_lab(case=os.path.join(CASES, "v1.13/v1.13.9/k8s-older"), version="v1.13.9",
                         controlplanes=1, workers=1)
    owner = lab.agent.owner
    nodes = _wait(lambda: len(_nodes(lab.kube, owner)) == 2 and _nodes(lab.kube, owner), what="2 nodes")
    assert sorted(nodes) == sorted(lab.node_name(n) for n in ("cp-1", "worker-1"))  # Talos's names, not the lab's
    for node in nodes.values():
        assert node.status.node_info.kubelet_version == "v1.35.4"
        assert node.status.node_info.os_image == "Talos (v1.13.9)"


def test_kubelet_version_of_typed_kubelet_config():
    for role in ("controlplane", "worker"):
        with open(os.path.join(CASES, "v1.14/v1.14.1/basic", role + ".conf")) as fh:
            text = fh.read()
        assert "machine:\n" in text and "\nkind: KubeletConfig\n" in text  # no machine.kubelet: typed only
        assert kubelet_version(text, "default") == "v1.37.0"
    with open(os.path.join(CASES, "v1.13/v1.13.9/k8s-older", "worker.conf")) as fh:
        assert kubelet_version(fh.read(), "default") == "v1.35.4"
    assert kubelet_version("version: v1alpha1\nmachine: {type: worker}\n", "default") == "default"
    assert kubelet_version("apiVersion: v1alpha1\nkind: KubeletConfig\nimage: registry:5000/kubelet@sha256:ab\n",
                           "default") == "default"
    assert kubelet_version(": [", "default") == "default"


def _pod(core, namespace, name, node, labels=None, annotations=None):
    core.create_namespaced_pod(namespace, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
        "spec": {"nodeName": node, "automountServiceAccountToken": False,
                 "containers": [{"name": "c", "image": "registry.example/x:1"}]}})


def _pod_state(core, namespace, name):
    """(phase, Ready condition) of the Pod, or None once it is gone."""
    from kubernetes.client.rest import ApiException
    try:
        pod = core.read_namespaced_pod(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    ready = [c.status for c in pod.status.conditions or [] if c.type == "Ready"]
    return pod.status.phase, (ready or [None])[0]


def _evict(core, namespace, name):
    core.create_namespaced_pod_eviction(name, namespace, k8s.V1Eviction(
        metadata=k8s.V1ObjectMeta(name=name, namespace=namespace)))


def _default_service_account(core, namespace):
    """Pods need their ServiceAccount, and the lab runs no controller that makes ``default``."""
    from kubernetes.client.rest import ApiException
    try:
        core.create_namespaced_service_account(namespace, {"metadata": {"name": "default"}})
    except ApiException as exc:
        if exc.status != 409:
            raise


def test_pods_on_agent_nodes_run_and_an_eviction_completes(talos_kube_lab, kube_namespace):
    """The agent plays the kubelet: a bound Pod becomes Running and Ready (a never-ready one stays Pending), and an
    eviction (a graceful delete) is confirmed, so the Pod goes as a drain expects."""
    lab = talos_kube_lab(controlplanes=1, workers=1)
    core = k8s.CoreV1Api(lab.kube.api_client())
    _default_service_account(core, kube_namespace)
    node = lab.node_name("worker-1")
    _wait(lambda: node in _nodes(lab.kube, lab.agent.owner), what="the worker's Node")
    _pod(core, kube_namespace, "web", node)
    _pod(core, kube_namespace, "stuck", node, annotations={"lab.maesh.dev/never-ready": "true"})
    _wait(lambda: _pod_state(core, kube_namespace, "web") == ("Running", "True"), what="the Pod Running and Ready")
    pod = core.read_namespaced_pod("web", kube_namespace)
    assert pod.status.host_ip == lab.address("worker-1") and pod.status.container_statuses[0].ready
    time.sleep(1)
    assert _pod_state(core, kube_namespace, "stuck")[0] == "Pending"
    _evict(core, kube_namespace, "web")
    _wait(lambda: _pod_state(core, kube_namespace, "web") is None, timeout=20, what="the evicted Pod gone")
    # a plain graceful delete is confirmed the same way
    core.delete_namespaced_pod("stuck", kube_namespace, grace_period_seconds=30)
    _wait(lambda: _pod_state(core, kube_namespace, "stuck") is None, timeout=20, what="the deleted Pod gone")


def test_a_pod_disruption_budget_blocks_an_eviction(talos_kube_lab, kube_namespace):
    """kube-controller-manager's disruption controller computes the budget from the Pods the agent made ready; the
    Eviction API then refuses (429) what would break it, and allows it once the budget allows a disruption."""
    from kubernetes.client.rest import ApiException
    lab = talos_kube_lab(controlplanes=1, workers=2)
    core = k8s.CoreV1Api(lab.kube.api_client())
    policy = k8s.PolicyV1Api(lab.kube.api_client())
    _default_service_account(core, kube_namespace)
    nodes = [lab.node_name(n) for n in ("worker-1", "worker-2")]
    _wait(lambda: set(nodes) <= set(_nodes(lab.kube, lab.agent.owner)), what="the workers' Nodes")
    for i, node in enumerate(nodes):
        _pod(core, kube_namespace, "db-%d" % i, node, labels={"app": "db"})
    policy.create_namespaced_pod_disruption_budget(kube_namespace, {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "db"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"}}}})

    def computed(healthy, allowed):
        budget = policy.read_namespaced_pod_disruption_budget("db", kube_namespace)
        status = budget.status
        return status is not None and status.observed_generation == budget.metadata.generation and \
            status.current_healthy == healthy and status.disruptions_allowed == allowed

    _wait(lambda: computed(2, 0), timeout=30, what="the budget computed: 2 healthy, no disruption allowed")
    with pytest.raises(ApiException) as exc:
        _evict(core, kube_namespace, "db-0")
    assert exc.value.status == 429 and "disruption budget" in exc.value.body
    time.sleep(1)
    assert _pod_state(core, kube_namespace, "db-0") == ("Running", "True")
    policy.patch_namespaced_pod_disruption_budget("db", kube_namespace, {"spec": {"minAvailable": 1}})
    _wait(lambda: computed(2, 1), timeout=30, what="the budget to allow one disruption")
    _evict(core, kube_namespace, "db-0")
    _wait(lambda: _pod_state(core, kube_namespace, "db-0") is None, timeout=20, what="the evicted Pod gone")
    _wait(lambda: computed(1, 0), timeout=30, what="the budget at 1 healthy")
    with pytest.raises(ApiException) as exc:
        _evict(core, kube_namespace, "db-1")
    assert exc.value.status == 429
