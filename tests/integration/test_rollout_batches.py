"""The batched Talos rollout (issue 46) through ansible-playbook maesh.ichor.upgrade, on 3 control planes and 20 workers
whose simulated pulls and reboots take time, with batches of 5 and a canary; what each machine served, and when, is the
lab's timeline (the audit of calls):

* every pull of a batch before its first reboot; never two control planes down at once; the etcd leader last, its
  leadership moved (EtcdForfeitLeadership) before it went down; batches of at most 5, each back before the next; the
  canary's soak before the second batch; each gate evaluated;
* a failure injected at each gate stops the rollout at the right machine with nothing beyond it installed or rebooted:
  an installer image one machine cannot pull (the preflight: nothing rebooted), an etcd member unhealthy after its
  reboot, a Node not Ready, a Pod stuck Pending in kube-system; the rerun finishes;
* with a Cilium the collection manages, the Cilium agent on each machine's Node awaited after its reboot: one that is
  never Ready stops the rollout at its machine.
"""

import threading
import time

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record, drain
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient

from tests.integration.ansible_env import ansible_playbook, write_inventory
from tests.integration.test_upgrade import V113_K8S_135, _record, _versions

pytestmark = pytest.mark.lab

WORKERS = 20
BATCH = 5
SOAK = 2
# what changes a machine: none of it may reach a machine beyond the one the rollout stopped at
INSTALLS = ("Upgrade", "Reboot")
CPS = ["cp-1", "cp-2", "cp-3"]


def _lab(talos_kube_lab):
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=3, workers=WORKERS, version="v1.13.9")
    _record(lab, V113_K8S_135)
    for m in lab.machines:  # a real pull and reboot take minutes: here a fraction of a second, each
        lab.control.set_timing(m["name"], reboot_seconds=0.5, upgrade_seconds=0.5)
        lab.control.set_faults(m["name"], pull_seconds=0.2)
    return lab


def _inventory(lab, tmp_path, **extra):
    inv = write_inventory(lab.state(), str(tmp_path / "inventory.yml"))
    data = yaml.safe_load(open(inv))
    data["all"]["vars"].update(ichor_kubeconfig=lab.kube.kubeconfig, ichor_upgrade_worker_batch=BATCH,
                               ichor_upgrade_canary_soak=SOAK, ichor_upgrade_wait_timeout=60,
                               ichor_upgrade_gate_timeouts={"node_ready": 4, "etcd": 4, "pods": 4}, **extra)
    with open(inv, "w") as handle:
        yaml.safe_dump(data, handle)
    return inv


def _workers():
    """The workers in the inventory's order (its hosts are written sorted by name: worker-1, worker-10, ...)."""
    return sorted("worker-%d" % i for i in range(1, WORKERS + 1))


def _batches():
    workers = _workers()
    return [workers[i:i + BATCH] for i in range(0, WORKERS, BATCH)]


def _upgrade(inv, *extra):
    proc = ansible_playbook("-i", inv, "maesh.ichor.upgrade", *extra)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return proc


def _changed(timeline, machines):
    """The calls that install or reboot, and the downs, that reached ``machines``."""
    return [(m, what) for m, what, at in timeline if m in machines and (what in INSTALLS or what.startswith("down:"))]


def _when(timeline, machine, what, last=False):
    times = [t for m, w, t in timeline if m == machine and w == what]
    assert times, (machine, what)
    return times[-1] if last else times[0]


def _first_down(timeline, machines):
    return min(t for m, w, t in timeline if m in machines and w.startswith("down:"))


def _last_boot(timeline, machines):
    return max(t for m, w, t in timeline if m in machines and w == "boot")


def test_a_batched_rollout_pulls_first_keeps_etcd_and_takes_the_leader_last(talos_kube_lab, tmp_path):
    lab = _lab(talos_kube_lab)
    inv = _inventory(lab, tmp_path)
    lab.control.reset_timeline()
    proc = _upgrade(inv)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert set(_versions(lab).values()) == {release.TALOS}
    timeline = lab.control.timeline(at=True)
    # cp-1 bootstrapped etcd and leads it: the order is cp-2, cp-3, then cp-1, its leadership moved first
    assert "order: control plane 3 of 3: cp-1" in proc.stdout, proc.stdout[-4000:]
    downs = [m for m, w, at in timeline if w.startswith("down:")]
    assert [m for m in downs if m in CPS] == ["cp-2", "cp-3", "cp-1"], downs
    assert _when(timeline, "cp-1", "EtcdForfeitLeadership") < _when(timeline, "cp-1", "down:rebooting")
    assert ("cp-2", "EtcdForfeitLeadership") not in [(m, w) for m, w, at in timeline]  # it did not lead
    leaders = [(m, t) for m, w, t in timeline if w == "etcd-leader"]
    assert leaders and leaders[0][0] != "cp-1" and leaders[0][1] < _when(timeline, "cp-1", "down:rebooting")
    # never two control planes down at once
    down = set()
    for m, w, at in timeline:
        if m in CPS and w.startswith("down:"):
            assert not down, (m, down)
            down.add(m)
        elif w == "boot":
            down.discard(m)
    # the control planes before any worker; each batch pulled before its first reboot and back before the next
    groups = [[cp] for cp in ("cp-2", "cp-3", "cp-1")] + _batches()
    for index, group in enumerate(groups):
        first_down = _first_down(timeline, group)
        assert all(_when(timeline, m, "Pull", last=True) < first_down for m in group), "\n".join(
            "%s %s %.2f" % e for e in timeline if e[0] in group and e[1] not in ("Version", "Get", "List"))
        assert all(_when(timeline, m, "Pull") < _first_down(timeline, [x for g in groups for x in g])
                   for m in group)  # the preflight pulled everywhere before the first reboot
        if index + 1 < len(groups):
            assert _last_boot(timeline, group) < _first_down(timeline, groups[index + 1]), group
    # the canary (the first worker batch) soaked before the second batch
    assert _first_down(timeline, _batches()[1]) - _last_boot(timeline, _batches()[0]) >= SOAK
    # each gate evaluated: the step prints its audit after its plan
    for m in CPS:
        for gate in ("version", "node_ready", "etcd"):
            assert '"%s: gate %s passed"' % (m, gate) in proc.stdout, proc.stdout[-4000:]
    for m in _workers():
        for gate in ("version", "node_ready"):
            assert '"%s: gate %s passed"' % (m, gate) in proc.stdout
    for label in ["control plane %d of 3" % i for i in (1, 2, 3)] + ["worker batch %d of 4" % i for i in (1, 2, 3, 4)]:
        assert '"%s: gate pods passed"' % label in proc.stdout
    assert '"worker batch 1 of 4: the canary held for %ss"' % float(SOAK) in proc.stdout
    assert '"cp-1: etcd leadership moved to ' in proc.stdout
    record = cluster_record.read(KubeClient(kubeconfig=lab.kube.kubeconfig))
    assert sorted(record.get("rollout")["done"]) == sorted(CPS + _workers())
    proc = _upgrade(inv)  # converged: nothing to do
    assert proc.returncode == 0 and "Talos             %s  %s  Up to date" % (release.TALOS, release.TALOS) in proc.stdout


def _on(lab, seen, act):
    """Run ``act`` (in a thread) the first time the lab's timeline shows ``seen`` (machine, what)."""
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            if seen in [tuple(e) for e in lab.control.timeline()]:
                act()
                return
            time.sleep(0.05)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return stop


def test_a_failure_at_each_gate_stops_the_rollout_at_its_machine_and_the_rerun_finishes(talos_kube_lab, tmp_path):
    lab = _lab(talos_kube_lab)
    inv = _inventory(lab, tmp_path)
    kube = KubeClient(kubeconfig=lab.kube.kubeconfig)

    # 1. an installer image worker-12 cannot pull: the preflight names it, nothing is installed or rebooted
    lab.control.set_faults("worker-12", pull_error="failed to resolve reference: not found")
    lab.control.reset_timeline()
    proc = _upgrade(inv)
    assert proc.returncode != 0
    assert "preflight failed, nothing was rebooted: installer pulled: could not pull the installer on worker-12" \
        in proc.stdout, proc.stdout[-3000:]
    assert _changed(lab.control.timeline(at=True), CPS + _workers()) == []
    lab.control.set_faults("worker-12", pull_error=None)

    # 2. cp-3's etcd member unhealthy once it is back: the rollout stops at cp-3; cp-1 and the workers untouched
    lab.control.reset_timeline()
    stop = _on(lab, ("cp-3", "down:rebooting"), lambda: lab.control.set_faults("cp-3", etcd_errors="alarm:NOSPACE"))
    proc = _upgrade(inv)
    stop.set()
    assert proc.returncode != 0
    assert "%s: gate etcd: waited 4s for its etcd member to be healthy" % lab.label("cp-3") in proc.stdout, \
        proc.stdout[-3000:]
    assert "the rollout stopped at control plane 2 of 3" in proc.stdout
    assert _changed(lab.control.timeline(at=True), ["cp-1"] + _workers()) == []
    lab.control.set_faults("cp-3", etcd_errors=None)

    # 3. worker-15's Node not Ready after its reboot (the second worker batch): stopped after that batch
    lab.control.reset_timeline()
    hostname = lab.node_name("worker-15")
    stop = _on(lab, ("worker-15", "down:rebooting"), lambda: lab.agent.hold_not_ready(hostname))
    proc = _upgrade(inv)
    stop.set()
    assert proc.returncode != 0
    assert "%s: gate node_ready: waited 4s for its Node %s to be Ready on Talos %s" % (
        lab.label("worker-15"), hostname, release.TALOS) in proc.stdout, proc.stdout[-3000:]
    assert "the rollout stopped after worker batch 2 of 4" in proc.stdout
    assert _changed(lab.control.timeline(at=True), _batches()[2] + _batches()[3]) == []
    lab.agent.hold_not_ready(hostname, False)

    # 4. a Pod stuck Pending in kube-system while the third batch of workers reboots (this rerun's first: the other
    # workers are done) stops the rollout after that batch
    lab.control.reset_timeline()
    _default_service_account(kube)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stuck", "namespace": "kube-system"},
           "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                    "automountServiceAccountToken": False,
                    "nodeSelector": {"lab.maesh.dev/nowhere": "true"}}}
    stop = _on(lab, (_batches()[2][0], "down:rebooting"), lambda: kube.create(pod))
    proc = _upgrade(inv)
    stop.set()
    assert proc.returncode != 0
    assert "worker batch 1 of 2: gate pods: waited 4s for no more Pods stuck Pending or CrashLooping in kube-system " \
           "than the 0 before the batch (now 1: kube-system/stuck)" in proc.stdout, proc.stdout[-3000:]
    assert _changed(lab.control.timeline(at=True), _batches()[3]) == []
    kube.delete("v1", "Pod", "stuck", "kube-system")

    # the rerun finishes
    proc = _upgrade(inv)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert set(_versions(lab).values()) == {release.TALOS}


def _default_service_account(kube):
    """The Pods' ServiceAccount in kube-system (the lab runs no controller that makes it)."""
    if kube.get("v1", "ServiceAccount", "default", "kube-system") is None:
        kube.create({"apiVersion": "v1", "kind": "ServiceAccount",
                     "metadata": {"name": "default", "namespace": "kube-system"}})


def _cilium_agents(kube, lab, never_ready):
    """A Cilium DaemonSet at the release set's Cilium and its agent Pod on every Node, as the DaemonSet controller
    would make them (the lab runs none); the agent reports them Running and Ready, but ``never_ready``'s."""
    _default_service_account(kube)
    labels = {"k8s-app": "cilium"}
    spec = {"containers": [{"name": "cilium-agent", "image": "quay.io/cilium/cilium:%s" % release.CILIUM}],
            "automountServiceAccountToken": False}
    ds = kube.create({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "cilium", "namespace":
                      "kube-system", "labels": labels}, "spec": {"selector": {"matchLabels": labels}, "template": {
                          "metadata": {"labels": labels}, "spec": spec}}})
    owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "cilium", "uid": ds["metadata"]["uid"],
             "controller": True}
    for m in lab.machines:
        node = lab.node_name(m["name"])
        kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": "cilium-%s" % node, "namespace": "kube-system", "labels": labels, "ownerReferences": [owner],
            "annotations": {"lab.maesh.dev/never-ready": "true"} if m["name"] == never_ready else {}},
            "spec": dict(spec, nodeName=node)})


def test_the_cilium_gate_holds_each_machine_to_its_agent(talos_kube_lab, tmp_path):
    """A Cilium the collection manages (the record's preset): after its reboot each machine waits for the Cilium agent
    on its Node to be Ready; worker-2's never is, so the rollout stops there, worker-3 untouched; once it is, the rerun
    finishes."""
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=1, workers=3, version="v1.13.9")
    _record(lab, V113_K8S_135)
    kube = KubeClient(kubeconfig=lab.kube.kubeconfig)
    cluster_record.update(kube, lambda data: data.update(cluster={"cni": {"preset": "cilium"}}))
    _cilium_agents(kube, lab, never_ready="worker-2")
    try:
        _roll_with_an_agent_never_ready(lab, kube, tmp_path)
    finally:  # the API server is the session's: a Cilium left in kube-system would meet the next test's install
        kube.delete("apps/v1", "DaemonSet", "cilium", "kube-system")
        for m in lab.machines:
            if kube.get("v1", "Pod", "cilium-%s" % lab.node_name(m["name"]), "kube-system") is not None:
                kube.delete("v1", "Pod", "cilium-%s" % lab.node_name(m["name"]), "kube-system")


def _roll_with_an_agent_never_ready(lab, kube, tmp_path):
    inv = write_inventory(lab.state(), str(tmp_path / "inventory.yml"))
    data = yaml.safe_load(open(inv))
    data["all"]["vars"].update(ichor_kubeconfig=lab.kube.kubeconfig, ichor_upgrade_wait_timeout=60,
                               ichor_upgrade_gate_timeouts={"cilium": 3})
    with open(inv, "w") as handle:
        yaml.safe_dump(data, handle)
    lab.control.reset_timeline()
    proc = _upgrade(inv)
    assert proc.returncode != 0
    hostname = lab.node_name("worker-2")
    assert "%s: gate cilium: waited 3s for the Cilium agent Pod on Node %s to be Ready" % (
        lab.label("worker-2"), hostname) in proc.stdout, proc.stdout[-3000:]
    assert "the rollout stopped after worker batch 2 of 3" in proc.stdout, proc.stdout[-3000:]
    for m in ("cp-1", "worker-1"):
        assert '"%s: gate cilium passed"' % m in proc.stdout, proc.stdout[-3000:]
    assert _changed(lab.control.timeline(at=True), ["worker-3"]) == []
    pod = kube.get("v1", "Pod", "cilium-%s" % hostname, "kube-system")
    pod["metadata"]["annotations"] = {}
    kube.replace(pod)  # the agent now reports it Ready
    proc = _upgrade(inv)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert set(_versions(lab).values()) == {release.TALOS}


def test_a_cordon_a_stopped_run_left_is_lifted_by_the_next_and_an_operators_is_kept(kube_lab):
    """The real API server's field managers say whose cordon a Node carries: a run killed between its cordon and its
    uncordon leaves the collection's, which the next run's rollout lifts after the reboot; kubectl's is kept."""
    kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
    name = "cordon-%d" % int(time.time() * 1000)
    kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    try:
        assert drain.cordon(kube, name) is True
        assert drain.cordon(kube, name) is True  # the next run finds its own cordon (the first run stopped here)
        drain.uncordon(kube, name)
        node = kube.get("v1", "Node", name)
        assert not node["spec"].get("unschedulable")
        node["spec"]["unschedulable"] = True  # kubectl cordon: an update by another manager
        kube.replace(node)
        assert drain.cordon(kube, name) is False  # the operator's: kept after the drain
    finally:
        kube.delete("v1", "Node", name)
