"""The rollout's gates that judge objects (rollout/gates.py) and the drain (k8s/drain.py), on generated Pods (seeded,
bounded), with a fake API server for the drain: which Pods are stuck, the batch gate against its baseline, which gates a
machine is held to, and a drain that evicts what kubectl drain evicts, asks again for what a budget holds back, and
names what is left."""

import random

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.k8s import drain
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import gates


def _pod(rng, name, node=None):
    phase = rng.choice(["Pending", "Running", "Succeeded", "Failed"])
    waiting = rng.choice([None, "CrashLoopBackOff", "ImagePullBackOff", "ContainerCreating"])
    meta = {"name": name, "namespace": "kube-system", "uid": "uid-" + name}
    if rng.random() < 0.2:
        meta["deletionTimestamp"] = "2026-12-07T00:00:00Z"
    owner = rng.choice([None, "DaemonSet", "ReplicaSet"])
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "x", "controller": True}]
    if rng.random() < 0.1:
        meta["annotations"] = {drain.MIRROR: "hash"}
    status = {"phase": phase}
    if waiting:
        status["containerStatuses"] = [{"name": "c", "state": {"waiting": {"reason": waiting}}}]
    return {"metadata": meta, "spec": {"nodeName": node}, "status": status}


@pytest.mark.parametrize("seed", range(1, 101))
def test_a_pod_is_stuck_when_pending_or_crash_looping_and_not_being_deleted(seed):
    rng = random.Random(seed)
    pod = _pod(rng, "p")
    meta, status = pod["metadata"], pod["status"]
    crash = any(c["state"]["waiting"]["reason"] == "CrashLoopBackOff" for c in status.get("containerStatuses", []))
    expected = "deletionTimestamp" not in meta and (status["phase"] == "Pending" or crash)
    assert gates.stuck(pod) is expected


class FakeKube:
    """Pods by name; an eviction a budget holds back answers False ``holds[name]`` times, then evicts."""

    def __init__(self, pods, holds=None):
        self.pods = dict((p["metadata"]["name"], p) for p in pods)
        self.holds = dict(holds or {})
        self.evicted = []
        self.nodes = {}

    def list(self, api_version, kind, namespace=None, label_selector=None, field_selector=None, cached=False):
        assert kind == "Pod"
        items = list(self.pods.values())
        if namespace:
            items = [p for p in items if p["metadata"]["namespace"] == namespace]
        if field_selector:
            node = field_selector.split("=", 1)[1]
            items = [p for p in items if p["spec"].get("nodeName") == node]
        return items

    def evict(self, name, namespace, uid=None):
        if self.holds.get(name):
            self.holds[name] -= 1
            return False
        self.evicted.append(name)
        self.pods[name]["metadata"]["deletionTimestamp"] = "now"  # its kubelet stops it: gone at the next look
        return True

    def settle(self):
        for name in [n for n, p in self.pods.items() if p["metadata"].get("deletionTimestamp")]:
            del self.pods[name]

    def get(self, api_version, kind, name, namespace=None):
        return self.nodes.get(name)

    def apply(self, obj, field_manager, dry_run=False, force=True):
        node = self.nodes.setdefault(obj["metadata"]["name"], {"spec": {}})
        node["spec"].update(obj["spec"])
        node["metadata"] = {"managedFields": [{"manager": field_manager,
                                               "fieldsV1": {"f:spec": {"f:unschedulable": {}}}}]}


@pytest.mark.parametrize("seed", range(1, 61))
def test_the_batch_gate_holds_against_its_baseline_and_names_the_new_ones(seed):
    rng = random.Random(seed)
    before_pods = [_pod(rng, "b%d" % i) for i in range(rng.randint(0, 8))]
    kube = FakeKube(before_pods)
    before = gates.stuck_pods(kube)
    added = [_pod(rng, "n%d" % i) for i in range(rng.randint(0, 4))]
    kube.pods.update((p["metadata"]["name"], p) for p in added)
    passed, detail = gates.no_more_stuck(kube, before)
    now = gates.stuck_pods(kube)
    assert passed is (len(now) <= len(before))
    if not passed:
        assert all(name in detail for name in now if name not in before)


def test_which_gates_a_machine_is_held_to():
    assert [g for g in gates.ORDER if gates.applies(g, "controlplane", True, True)] == list(gates.ORDER)
    assert [g for g in gates.ORDER if gates.applies(g, "worker", False, True)] == ["version", "node_ready"]
    assert [g for g in gates.ORDER if gates.applies(g, "controlplane", True, False)] == ["version", "etcd"]


@pytest.mark.parametrize("seed", range(1, 61))
def test_a_drain_evicts_what_kubectl_drain_evicts_and_asks_again_for_what_a_budget_holds(seed):
    rng = random.Random(seed)
    pods = [_pod(rng, "p%d" % i, node=rng.choice(["n1", "n2", "n3"])) for i in range(rng.randint(0, 12))]
    movable = [p["metadata"]["name"] for p in pods if p["spec"]["nodeName"] in ("n1", "n2")
               and not p["metadata"].get("deletionTimestamp")
               and not (p["metadata"].get("annotations") or {}).get(drain.MIRROR)
               and not any(o["kind"] == "DaemonSet" for o in p["metadata"].get("ownerReferences", []))]
    holds = dict((name, rng.randint(0, 2)) for name in movable if rng.random() < 0.3)
    kube = FakeKube(pods, holds)
    run = drain.Drain(kube, ["n1", "n2"])
    for _round in range(4):
        if run.step():
            break
        kube.settle()
    assert sorted(kube.evicted) == sorted(movable)  # each once, none left in place, none of another Node
    assert run.step() and run.blocking() == []
    untouched = [p for p in kube.pods.values() if p["spec"]["nodeName"] == "n3"]
    assert all(p["metadata"]["name"] not in kube.evicted for p in untouched)


def test_a_drain_names_the_pods_a_budget_holds_back():
    rng = random.Random(7)
    pod = _pod(rng, "db-0", node="n1")
    pod["metadata"].pop("deletionTimestamp", None)
    pod["metadata"].pop("annotations", None)
    pod["metadata"]["ownerReferences"] = [{"kind": "StatefulSet", "name": "db", "controller": True}]
    kube = FakeKube([pod], {"db-0": 99})
    run = drain.Drain(kube, ["n1"])
    assert not run.step()
    assert run.blocking("n1") == ["kube-system/db-0 (a PodDisruptionBudget does not allow its eviction)"]


def test_cordon_leaves_a_node_the_operator_cordoned():
    kube = FakeKube([])
    assert drain.cordon(kube, "gone") is None
    kube.nodes["n1"] = {"spec": {}}
    kube.nodes["n2"] = {"spec": {"unschedulable": True}}
    assert drain.cordon(kube, "n1") is True and kube.nodes["n1"]["spec"]["unschedulable"] is True
    assert drain.cordon(kube, "n2") is False
    # a run that stopped between its cordon and its uncordon: the next run finds the cordon its own and lifts it
    assert drain.cordon(kube, "n1") is True
    drain.uncordon(kube, "n1")
    assert kube.nodes["n1"]["spec"]["unschedulable"] is False
    # the operator cordons it later (kubectl cordon moves the field to its manager): theirs, kept
    kube.nodes["n1"] = {"spec": {"unschedulable": True}, "metadata": {"managedFields": [
        {"manager": drain.FIELD_MANAGER, "fieldsV1": {"f:metadata": {}}},
        {"manager": "kubectl-cordon", "fieldsV1": {"f:spec": {"f:unschedulable": {}}}}]}}
    assert drain.cordon(kube, "n1") is False
