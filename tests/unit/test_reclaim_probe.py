"""Reclaim's probes of the control planes a foreign machine lists (issue 12): all at once, at most
PROBE_LIMIT of them, a longer list refused unless force; a fake probe records the calls and their timing."""

import asyncio
import threading
import time
from types import SimpleNamespace

import pytest

from tests import collection_path

collection_path.ensure()

from ansible_collections.maesh.ichor.plugins.module_utils.reclaim import flow, policy  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim import inspection as reading  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim.errors import ReclaimError  # noqa: E402
from tests.unit.test_reclaim import FakeIO  # noqa: E402

LIMIT = reading.PROBE_LIMIT
TIMEOUT = 0.4  # what each fake probe takes: a peer port that does not answer before its timeout


class Probe:
    """A probe that takes TIMEOUT seconds and records who was asked and how many were in flight at once."""

    def __init__(self, answering=()):
        self.answering = set(answering)
        self.asked = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.lock = threading.Lock()

    def __call__(self, host, port):
        with self.lock:
            self.asked.append((host, port))
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        time.sleep(TIMEOUT)
        with self.lock:
            self.in_flight -= 1
        return host in self.answering


def cp_members(count):
    return [{"hostname": "cp-%d" % i, "addresses": ["10.1.0.%d" % i], "machine_type": "controlplane"}
            for i in range(1, count + 1)]


def test_the_limit_is_a_handful_of_control_planes():
    # etcd advises at most 7 members; the limit must admit every real cluster and little more
    assert 7 <= LIMIT <= 11


def test_control_planes_are_probed_all_at_once():
    probe = Probe(answering=["10.1.0.1", "10.1.0.2"])
    start = time.monotonic()
    cps = reading.probe_control_planes(cp_members(LIMIT), probe)
    took = time.monotonic() - start
    assert sorted(probe.asked) == sorted(("10.1.0.%d" % i, 2380) for i in range(1, LIMIT + 1))
    assert probe.most_in_flight == LIMIT
    assert took < 2.5 * TIMEOUT, "%d probes took %.2fs: one after another, not at once" % (LIMIT, took)
    # the answers stay with their control plane, in the order listed
    assert [c["hostname"] for c in cps] == ["cp-%d" % i for i in range(1, LIMIT + 1)]
    assert [c["healthy"] for c in cps] == [True, True] + [False] * (LIMIT - 2)
    assert cps[0]["checked_by"] == "etcd peer port answers"
    assert cps[2]["checked_by"] == "etcd peer port does not answer"


def test_more_control_planes_than_the_limit_are_refused_before_any_probe():
    probe = Probe()
    with pytest.raises(ReclaimError) as exc:
        reading.probe_control_planes(cp_members(LIMIT + 3), probe, node="10.0.0.7")
    assert probe.asked == []
    assert exc.value.message == (
        "10.0.0.7 lists %d control planes (discovery members), more than the %d a reclaim probes (a real cluster has "
        "a handful); pass force to probe the first %d and count the others as not answering; nothing was probed or "
        "sent" % (LIMIT + 3, LIMIT, LIMIT))


def test_force_probes_the_first_ones_only_and_reports_the_rest_unprobed():
    probe = Probe(answering=["10.1.0.%d" % i for i in range(1, 20)])
    cps = reading.probe_control_planes(cp_members(LIMIT + 3), probe, force=True)
    assert sorted(probe.asked) == sorted(("10.1.0.%d" % i, 2380) for i in range(1, LIMIT + 1))
    assert [c["healthy"] for c in cps] == [True] * LIMIT + [False] * 3
    assert [c["checked_by"] for c in cps[LIMIT:]] == ["not probed (beyond the first %d)" % LIMIT] * 3
    # unprobed ones count as not answering: 9 of 12 answering is still a majority
    assert policy.cluster_healthy({"role": "worker", "control_planes": cps}) is True


def test_workers_and_addressless_members_are_not_probed_nor_counted():
    members = cp_members(LIMIT) + [{"hostname": "w-%d" % i, "addresses": ["10.2.0.%d" % i], "machine_type": "worker"}
                                   for i in range(5)]
    members.append({"hostname": "cp-x", "addresses": [], "machine_type": "init"})
    with pytest.raises(ReclaimError):
        reading.probe_control_planes(members, Probe())  # LIMIT + 1 control planes
    probe = Probe()
    cps = reading.probe_control_planes(members[:-1], probe)
    assert len(cps) == LIMIT and all(host.startswith("10.1.") for host, _port in probe.asked)


# --- a control plane's etcd members ---------------------------------------------------------------------

class EtcdClient:
    """Answers EtcdMemberList with ``count`` members (member 1 is the dialled one) and EtcdStatus."""

    def __init__(self, count):
        self.members = [SimpleNamespace(id=i, hostname="cp-%d" % i, peer_urls=["https://10.1.0.%d:2380" % i])
                        for i in range(1, count + 1)]
        self.calls = []

    async def ainvoke(self, name, request):
        self.calls.append(name)
        if name == "EtcdMemberList":
            return SimpleNamespace(members=self.members)
        return SimpleNamespace(member_status=SimpleNamespace(member_id=1, errors=[]))

    def first(self, reply):
        return reply


def etcd(client, probe, force=False):
    return asyncio.run(reading._etcd(client, "10.0.0.7", probe, force))


def test_etcd_members_are_probed_all_at_once():
    probe = Probe(answering=["10.1.0.2"])
    start = time.monotonic()
    view = etcd(EtcdClient(LIMIT), probe)
    took = time.monotonic() - start
    assert sorted(probe.asked) == sorted(("10.1.0.%d" % i, 2380) for i in range(2, LIMIT + 1))  # not itself
    assert took < 2.5 * TIMEOUT, "%d probes took %.2fs" % (LIMIT - 1, took)
    assert [(m["hostname"], m["healthy"], m["checked_by"]) for m in view["members"][:3]] == [
        ("cp-1", True, "its own etcd status"), ("cp-2", True, "peer port answers"),
        ("cp-3", False, "peer port does not answer")]


def test_more_etcd_members_than_the_limit_are_refused_before_any_probe():
    probe = Probe()
    client = EtcdClient(LIMIT + 1)
    with pytest.raises(ReclaimError) as exc:
        etcd(client, probe)
    assert probe.asked == [] and client.calls == ["EtcdMemberList"]
    assert exc.value.message.startswith("10.0.0.7 lists %d control planes (etcd members), more than the %d a "
                                        "reclaim probes" % (LIMIT + 1, LIMIT))


def test_force_probes_at_most_the_limit_of_etcd_members():
    probe = Probe(answering=["10.1.0.%d" % i for i in range(1, 30)])
    view = etcd(EtcdClient(LIMIT + 5), probe, force=True)
    assert len(probe.asked) == LIMIT and ("10.1.0.1", 2380) not in probe.asked
    unprobed = [m["hostname"] for m in view["members"] if m["checked_by"].startswith("not probed")]
    assert unprobed == ["cp-%d" % i for i in range(LIMIT + 2, LIMIT + 6)]
    assert not any(m["healthy"] for m in view["members"] if m["hostname"] in unprobed)


# --- the refusal in a run ------------------------------------------------------------------------------

def test_the_refusal_fails_a_check_run_with_its_line_and_sends_nothing():
    text = "10.0.0.7 lists 40 control planes (discovery members), more than ...; nothing was probed or sent"
    io = FakeIO(inspect_error=ReclaimError(text))
    with pytest.raises(ReclaimError) as exc:
        flow.run(flow.Options("10.0.0.7", user="alice"), io, check_mode=True)
    assert exc.value.message == text
    assert io.resets == [] and io.registered == []
    assert exc.value.result["audit"][-1].endswith("ReclaimFailed: " + text)


def test_the_module_documents_the_limit():
    import os
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "plugins", "modules", "talos_reset.py")
    with open(path) as handle:
        text = handle.read()
    assert "at most %d of\n    them" % LIMIT in text and "more than %d control planes (the first %d" % (LIMIT, LIMIT) in text
