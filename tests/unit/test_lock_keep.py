"""k8s.lock.keep, and acquire's renewal of the run's own lock: a renewal that meets this run's own heartbeat's renewal
(a resourceVersion conflict) reads the Lease again and renews, rather than calling the heartbeat another run; another
run's lock is still refused. (CI of 2026-12-07: init's join with a 2 s lock renewed by the cluster_lock module met its
heartbeat and stopped with "another run took the cluster lock at the same moment".)"""

import time

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.k8s import lock
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.errors import Conflict


class Client:
    def __init__(self, holders, conflicts):
        self.holders = list(holders)  # holder each read finds
        self.conflicts = conflicts  # replaces that meet a conflict first
        self.replaced = []

    def get(self, api_version, kind, name, namespace=None):
        holder = self.holders.pop(0) if len(self.holders) > 1 else self.holders[0]
        return lock._lease(holder, 45, time.time(), None, {"name": lock.NAME, "namespace": lock.NAMESPACE,
                                                           "resourceVersion": str(len(self.replaced) + 1)})

    def replace(self, body):
        if self.conflicts:
            self.conflicts -= 1
            raise Conflict("the object has been modified")
        self.replaced.append(body)


def test_a_renewal_that_meets_the_heartbeats_reads_again_and_renews():
    client = Client(["run-a"], conflicts=1)
    lock.keep(client, "run-a")
    assert len(client.replaced) == 1 and client.replaced[0]["spec"]["holderIdentity"] == "run-a"


def test_another_run_that_took_the_lock_meanwhile_is_refused():
    client = Client(["run-a", "run-b"], conflicts=1)
    with pytest.raises(lock.LockError, match="does not hold the cluster lock .*held by run-b"):
        lock.keep(client, "run-a")
    assert client.replaced == []


def test_a_lease_that_keeps_changing_is_one_line():
    client = Client(["run-a"], conflicts=lock.KEEP_ATTEMPTS)
    with pytest.raises(lock.LockError, match="kept changing while this run renewed it; run again"):
        lock.keep(client, "run-a")


def test_acquire_renewing_the_runs_own_lock_reads_again_past_its_heartbeat():
    client = Client(["run-a"], conflicts=1)
    lines = lock.acquire(client, "run-a", duration=2, process="pid 1")
    assert lines == ["cluster lock %s/%s: renewed by run-a for 2s" % (lock.NAMESPACE, lock.NAME)]
    assert len(client.replaced) == 1 and client.replaced[0]["spec"]["leaseDurationSeconds"] == 2
    assert client.replaced[0]["metadata"]["annotations"][lock.PROCESS] == "pid 1"


def test_acquire_renewing_finds_another_run_took_it_meanwhile():
    client = Client(["run-a", "run-b"], conflicts=1)
    with pytest.raises(lock.LockError, match="does not hold the cluster lock .*held by run-b"):
        lock.acquire(client, "run-a")
    assert client.replaced == []
