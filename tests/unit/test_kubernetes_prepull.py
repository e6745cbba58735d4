"""The Kubernetes step's pre-pull (issue 46): before anything is applied, each component image the step renders is
pulled on every machine it changes, as talosctl 1.14's upgrade-k8s pre-pulls them (pkg/cluster/kubernetes/
talos_managed.go, prePullImages): a control plane's kube-apiserver, kube-controller-manager and kube-scheduler into
containerd's CRI namespace, every machine's kubelet into the system namespace, kube-proxy not at all; the machines in
parallel through the Talos client's fan_out, bounded by its one limit; a machine that cannot pull fails the step named
with nothing applied; a machine without ImageService (Talos v1.12, Unimplemented) is skipped and the plan says so.

The fake world is test_rollout_steps's: real Talos configs, real protobuf replies, a fake Kubernetes API."""

import asyncio

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.common import fanout, release
from ansible_collections.maesh.ichor.plugins.module_utils.config import documents
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import kubernetes_step, talos_step
from ansible_collections.maesh.ichor.plugins.module_utils.rollout.errors import UpgradeFailed
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors
from ansible_collections.maesh.ichor.plugins.module_utils.talos.proto import common_pb2
from tests.unit.test_rollout_steps import CONFIGS, V114, World, conns  # noqa: F401 pylint: disable=unused-import

TARGET = release.KUBERNETES
APISERVER = "registry.k8s.io/kube-apiserver:" + TARGET
CONTROLLER_MANAGER = "registry.k8s.io/kube-controller-manager:" + TARGET
SCHEDULER = "registry.k8s.io/kube-scheduler:" + TARGET
KUBELET = "ghcr.io/siderolabs/kubelet:" + TARGET
CRI, SYSTEM = common_pb2.NS_CRI, common_pb2.NS_SYSTEM


def _docs(role):
    with open("%s/%s/%s.conf" % (CONFIGS, V114, role)) as handle:
        return documents.parse(handle.read())


def _pulls(world):
    """(machine, image, driver, namespace) of every ImagePull sent, in order."""
    return [(name, req.image_ref, req.containerd.driver, req.containerd.namespace)
            for call, name, req in world.requests if call == "ImagePull"]


# --- which images, in which namespace ---------------------------------------------------------------------------

def test_the_namespaces_are_talos_own_enum_values():
    assert kubernetes_step.CONTAINERD_NS_CRI == common_pb2.NS_CRI
    assert talos_step.CONTAINERD_NS_SYSTEM == common_pb2.NS_SYSTEM
    assert talos_step.CONTAINERD_DRIVER_CRI == common_pb2.CRI


def test_a_control_plane_pulls_its_static_pod_images_into_cri_and_its_kubelet_into_system():
    # the real v1.14.1 config (Kubernetes 1.36.3): what it names is what is pulled; kube-proxy is not pre-pulled
    assert kubernetes_step.prepull_images(True, _docs("controlplane")) == [
        ("registry.k8s.io/kube-apiserver:v1.36.3", CRI), ("registry.k8s.io/kube-controller-manager:v1.36.3", CRI),
        ("registry.k8s.io/kube-scheduler:v1.36.3", CRI), ("ghcr.io/siderolabs/kubelet:v1.36.3", SYSTEM)]


def test_a_worker_pulls_its_kubelet_only_into_system():
    assert kubernetes_step.prepull_images(False, _docs("worker")) == [("ghcr.io/siderolabs/kubelet:v1.36.3", SYSTEM)]


def test_the_images_are_the_references_the_render_names_a_registry_override_digest_and_suffix_kept():
    docs = _docs("controlplane")
    for doc in docs:
        if doc.kind == "KubeletConfig":
            doc.body["image"] = "mirror.example.com:5000/siderolabs/kubelet:v1.36.6-fat"
        if doc.kind == "KubeAPIServerConfig":
            doc.body["image"] = "mirror.example.com/k8s/kube-apiserver:v1.36.6@sha256:" + "a" * 64
    pulls = dict(kubernetes_step.prepull_images(True, docs))
    assert pulls["mirror.example.com:5000/siderolabs/kubelet:v1.36.6-fat"] == SYSTEM
    assert pulls["mirror.example.com/k8s/kube-apiserver:v1.36.6@sha256:" + "a" * 64] == CRI


def test_the_request_is_talos_steps_with_the_namespace_set():
    req = kubernetes_step.pull_request(APISERVER, CRI)
    assert (req.image_ref, req.containerd.driver, req.containerd.namespace) == (APISERVER, common_pb2.CRI, CRI)
    req = kubernetes_step.pull_request(KUBELET, SYSTEM)
    assert req == talos_step.pull_request(KUBELET)  # the kubelet: exactly the installer's request


# --- the step ---------------------------------------------------------------------------------------------------

def test_check_mode_plans_the_pulls_on_one_line_and_sends_nothing(conns):
    world = World(V114, {"*": release.TALOS}, workers=2)
    result = kubernetes_step.run(world.params(), conns(world), True, clock=world.clock)
    assert result["plan"][0] == (
        "pull before anything is applied (ImageService.Pull): %s (k8s.io namespace), %s (k8s.io namespace), %s (k8s.io "
        "namespace) on 1 machine; %s (system namespace) on 3 machines" % (
            APISERVER, CONTROLLER_MANAGER, SCHEDULER, KUBELET))
    assert result["plan"][1].startswith("cp-1: control plane")
    assert result["pulled"] == [
        dict(image=APISERVER, namespace="k8s.io", machines=["cp-1"], skipped=[]),
        dict(image=CONTROLLER_MANAGER, namespace="k8s.io", machines=["cp-1"], skipped=[]),
        dict(image=SCHEDULER, namespace="k8s.io", machines=["cp-1"], skipped=[]),
        dict(image=KUBELET, namespace="system", machines=["cp-1", "worker-1", "worker-2"], skipped=[])]
    assert world.writes == []


def test_every_image_is_pulled_on_every_machine_before_the_first_apply(conns):
    world = World(V114, {"*": release.TALOS}, workers=2)
    result = kubernetes_step.run(world.params(), conns(world), False, clock=world.clock)
    calls = [w[0] for w in world.writes]
    first_apply = calls.index("ApplyConfiguration")
    assert set(calls[:first_apply]) == {"ImagePull"} and "ImagePull" not in calls[first_apply:]
    assert sorted(_pulls(world)) == sorted(
        [("cp-1", APISERVER, common_pb2.CRI, CRI), ("cp-1", CONTROLLER_MANAGER, common_pb2.CRI, CRI),
         ("cp-1", SCHEDULER, common_pb2.CRI, CRI), ("cp-1", KUBELET, common_pb2.CRI, SYSTEM)]
        + [(w, KUBELET, common_pb2.CRI, SYSTEM) for w in ("worker-1", "worker-2")])
    assert [p[1] for p in _pulls(world) if p[0] == "cp-1"] == [APISERVER, CONTROLLER_MANAGER, SCHEDULER, KUBELET]
    assert result["pulled"][-1] == dict(image=KUBELET, namespace="system", machines=["cp-1", "worker-1", "worker-2"],
                                        skipped=[])
    # a machine already at the set is not pulled on again: the rerun has nothing to do
    world.writes.clear()
    again = kubernetes_step.run(world.params(), conns(world), False, clock=world.clock)
    assert world.writes == [] and "pulled" not in again


def test_only_the_machines_the_step_changes_pull(conns):
    world = World(V114, {"*": release.TALOS}, workers=2)
    done = world.machine("worker-2")
    done.config = done.config.replace("kubelet:v1.36.3", "kubelet:" + TARGET)
    kubernetes_step.run(world.params(), conns(world), False, clock=world.clock)
    assert sorted(set(p[0] for p in _pulls(world))) == ["cp-1", "worker-1"]


def _failing_pull(world, name, image_part, status="NOT_FOUND", said="error pulling image: not found"):
    answer = world.answer

    def answer_with_fault(call, request, node):
        m = world.machines[node]
        if call == "ImagePull" and m.name == name and image_part in request.image_ref:
            world.writes.append((call, m.name))
            world.requests.append((call, m.name, request))
            raise errors.call_error(node, status, said, call=call)
        return answer(call, request, node)

    world.answer = answer_with_fault


def test_a_machine_that_cannot_pull_fails_the_step_named_with_nothing_applied(conns):
    world = World(V114, {"*": release.TALOS}, workers=2)
    _failing_pull(world, "worker-1", "kubelet")
    with pytest.raises(UpgradeFailed) as exc:
        kubernetes_step.run(world.params(), conns(world), False, clock=world.clock)
    message = exc.value.message
    assert message.startswith("the Kubernetes images could not be pulled on 1 machine (worker-1); nothing was applied: "
                              "worker-1: %s: 10.5.0.3: NOT_FOUND (ImagePull)" % KUBELET), message
    assert "error pulling image: not found" in message and message.endswith("and rerun")
    assert [w for w in world.writes if w[0] != "ImagePull"] == []  # no apply, no DaemonSet
    # every other machine was pulled on (in parallel), and the result says which pulled what
    assert sorted(set(p[0] for p in _pulls(world))) == ["cp-1", "worker-1", "worker-2"]
    assert exc.value.result["pulled"][-1] == dict(image=KUBELET, namespace="system", machines=["cp-1", "worker-2"],
                                                  skipped=[])


def test_a_control_plane_missing_one_image_is_named_with_that_image_and_stops_its_pulls(conns):
    world = World(V114, {"*": release.TALOS}, workers=1)
    _failing_pull(world, "cp-1", "kube-controller-manager", status="UNKNOWN", said="dial tcp: i/o timeout")
    with pytest.raises(UpgradeFailed) as exc:
        kubernetes_step.run(world.params(), conns(world), False, clock=world.clock)
    assert "(cp-1); nothing was applied: cp-1: %s: 10.5.0.2: UNKNOWN" % CONTROLLER_MANAGER in exc.value.message
    assert [p[1] for p in _pulls(world) if p[0] == "cp-1"] == [APISERVER, CONTROLLER_MANAGER]
    assert "ApplyConfiguration" not in [w[0] for w in world.writes]


def test_a_v112_machine_is_not_pulled_on_and_the_plan_says_so(conns):
    world = World(V114, {"cp-1": release.TALOS, "*": "v1.12.7"}, workers=2)
    check = kubernetes_step.run(world.params(), conns(world), True, clock=world.clock)
    assert check["plan"][:2] == [
        "pull before anything is applied (ImageService.Pull): %s (k8s.io namespace), %s (k8s.io namespace), %s (k8s.io "
        "namespace), %s (system namespace) on 1 machine" % (APISERVER, CONTROLLER_MANAGER, SCHEDULER, KUBELET),
        "no pull before the step on worker-1, worker-2: Talos v1.12 has no ImageService (each image is pulled when its "
        "component starts)"]
    assert check["pulled"][-1] == dict(image=KUBELET, namespace="system", machines=["cp-1"],
                                       skipped=["worker-1", "worker-2"])
    kubernetes_step.run(world.params(), conns(world), False, clock=world.clock)
    assert set(p[0] for p in _pulls(world)) == {"cp-1"}
    assert [w[1] for w in world.writes if w[0] == "ApplyConfiguration"][-2:] == ["worker-1", "worker-2"]


def test_a_machine_answering_unimplemented_is_skipped_as_talosctl_skips_it(conns):
    world = World(V114, {"*": release.TALOS}, workers=1)
    _failing_pull(world, "worker-1", "kubelet", status="UNIMPLEMENTED", said="unknown service machine.ImageService")
    result = kubernetes_step.run(world.params(), conns(world), False, clock=world.clock)
    assert result["pulled"][-1] == dict(image=KUBELET, namespace="system", machines=["cp-1"], skipped=["worker-1"])
    assert "worker-1" in [w[1] for w in world.writes if w[0] == "ApplyConfiguration"]


def test_the_pulls_go_through_fan_out_and_its_one_limit(conns, monkeypatch):
    world = World(V114, {"*": release.TALOS}, workers=fanout.CONCURRENCY + 4)
    state = dict(now=0, most=0)
    conn = conns(world)
    made = conn.talos

    def talos(maintenance=False, dial_only=None):
        client = made(maintenance, dial_only)
        invoke = client._invoke  # pylint: disable=protected-access

        async def slow(call, request, node=None, timeout=None):
            if call != "ImagePull":
                return await invoke(call, request, node, timeout)
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
            await asyncio.sleep(0.001)
            state["now"] -= 1
            return await invoke(call, request, node, timeout)

        client._invoke = slow  # pylint: disable=protected-access
        return client

    monkeypatch.setattr(conn, "talos", talos)
    kubernetes_step.run(world.params(), conn, False, clock=world.clock)
    assert len(set(p[0] for p in _pulls(world))) == fanout.CONCURRENCY + 5
    assert state["most"] == fanout.CONCURRENCY  # in parallel, never beyond the limit
