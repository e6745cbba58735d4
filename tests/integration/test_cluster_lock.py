"""The cluster lock (Lease ichor-system/ichor-cluster-lock) on the lab's real API server: taken, renewed, refused to
another run with its holder and expiry, taken over once expired, given back only by its holder (UID precondition), two
runs racing for a free lock (one wins), check mode writing nothing (audit log), and the module through ansible-playbook
(changed=false both ways)."""

import json
import threading
import time

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.k8s import lock
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient

from tests.integration.ansible_env import ansible_playbook

pytestmark = pytest.mark.lab


@pytest.fixture
def kube(kube_lab):
    client = KubeClient(kubeconfig=kube_lab.kubeconfig)
    yield client
    if client.get(lock.API_VERSION, "Lease", lock.NAME, lock.NAMESPACE) is not None:
        client.delete(lock.API_VERSION, "Lease", lock.NAME, lock.NAMESPACE)


def _lease(kube):
    return kube.get(lock.API_VERSION, "Lease", lock.NAME, lock.NAMESPACE)


def test_taken_renewed_refused_to_another_run_and_given_back_by_its_holder(kube):
    assert lock.acquire(kube, "run-a", 600) == [
        "cluster lock ichor-system/ichor-cluster-lock: taken by run-a for 600s"]
    first = _lease(kube)
    assert (first["spec"]["holderIdentity"], first["spec"]["leaseDurationSeconds"]) == ("run-a", 600)
    with pytest.raises(lock.LockError) as info:
        lock.acquire(kube, "run-b", 600)
    expires = lock.state(first, time.time())[1]
    assert str(info.value) == ("the cluster lock ichor-system/ichor-cluster-lock is held by run-a until %s: another run "
                               "is writing to this cluster; wait for it to end (or, if it was stopped, for the lock to "
                               "expire) and run again" % lock._stamp(expires))
    time.sleep(0.01)
    assert lock.acquire(kube, "run-a", 600)[0].endswith("renewed by run-a for 600s")
    renewed = _lease(kube)
    assert renewed["spec"]["acquireTime"] == first["spec"]["acquireTime"]
    assert renewed["spec"]["renewTime"] > first["spec"]["renewTime"]
    lock.keep(kube, "run-a")  # checked and renewed for the duration it was taken for
    kept = _lease(kube)
    assert kept["spec"]["renewTime"] > renewed["spec"]["renewTime"] and kept["spec"]["leaseDurationSeconds"] == 600
    with pytest.raises(lock.LockError, match="does not hold the cluster lock"):
        lock.keep(kube, "run-b")
    assert lock.release(kube, "run-b")[0].endswith("held by run-a, not by this run (run-b); left as it is")
    assert _lease(kube) is not None
    assert lock.release(kube, "run-a")[0].endswith("given back by run-a")
    assert _lease(kube) is None and lock.release(kube, "run-a")[0].endswith("not held")


def test_a_run_that_outlived_its_lock_keeps_it_unless_another_run_took_it(kube):
    # found by the fault campaign: init joined machines past its lock's duration and its installer stage refused,
    # naming the run itself as the holder
    lock.acquire(kube, "long-run", 1)
    time.sleep(1.2)
    lock.keep(kube, "long-run")  # expired, nobody took it: nobody wrote meanwhile, it is still this run's
    assert lock.state(_lease(kube), time.time())[2] is False
    time.sleep(1.2)
    lock.acquire(kube, "next", 600)
    with pytest.raises(lock.LockError, match=r"this run \(long-run\) does not hold the cluster lock .* \(held by next\)"):
        lock.keep(kube, "long-run")


def test_a_killed_runs_lock_is_taken_over_once_it_expired(kube):
    lock.acquire(kube, "killed", 1)
    with pytest.raises(lock.LockError):
        lock.acquire(kube, "next", 600)
    time.sleep(1.2)
    assert lock.acquire(kube, "next", 600)[0].startswith(
        "cluster lock ichor-system/ichor-cluster-lock: taken over by next for 600s (left by killed, expired ")
    assert _lease(kube)["spec"]["holderIdentity"] == "next"


def test_two_runs_racing_for_a_free_lock_one_wins(kube, kube_lab):
    outcomes = []

    def take(holder):
        try:
            lock.acquire(KubeClient(kubeconfig=kube_lab.kubeconfig), holder, 600)  # a client each, as runs have
            outcomes.append(holder)
        except lock.LockError as exc:
            outcomes.append(str(exc))
    threads = [threading.Thread(target=take, args=("racer-%d" % i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [o for o in outcomes if o.startswith("racer-")]
    assert len(winners) == 1 and _lease(kube)["spec"]["holderIdentity"] == winners[0], outcomes


def test_check_mode_writes_nothing(kube, kube_lab):
    mark = kube_lab.audit_mark()
    assert lock.acquire(kube, "run-a", 600, check=True)[0].endswith("would be taken by run-a for 600s")
    assert _lease(kube) is None
    lock.acquire(kube, "run-a", 600)
    mark = kube_lab.audit_mark()
    with pytest.raises(lock.LockError):
        lock.acquire(kube, "run-b", 600, check=True)
    assert lock.release(kube, "run-a", check=True)[0].endswith("would be given back by run-a")
    assert kube_lab.mutating_requests(since=mark, user="lab-admin") == []
    assert _lease(kube)["spec"]["holderIdentity"] == "run-a"


@pytest.mark.floor
def test_the_module_takes_and_gives_back_the_lock_with_changed_false(kube, kube_lab, tmp_path):
    play = [{"hosts": "localhost", "gather_facts": False, "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"},
             "module_defaults": {"group/maesh.ichor.k8s": {"kubeconfig": kube_lab.kubeconfig}},
             "tasks": [{"name": "Take", "maesh.ichor.cluster_lock": {}, "register": "taken"},
                       {"name": "Held", "ansible.builtin.copy": {"content": "{{ taken | to_json }}",
                                                                 "dest": str(tmp_path / "taken.json")}, "check_mode": False},
                       {"name": "Give back", "maesh.ichor.cluster_lock": {"state": "released",
                                                                          "holder": "{{ taken.holder }}"}}]}]
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump(play))
    proc = ansible_playbook(str(path), "-i", "localhost,", "-c", "local")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    taken = json.loads((tmp_path / "taken.json").read_text())
    assert taken["changed"] is False and taken["holder"].startswith("maesh-ichor-")
    assert "changed=1" in proc.stdout  # only the copy task
    assert _lease(kube) is None
