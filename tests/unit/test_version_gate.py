"""talos.version_gate: the Talos versions judged before adopt writes anything (ADR 0103 1.9, ADR 0113); and the
bound of the cluster-wide read that uses it."""

import asyncio

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as tc
from ansible_collections.maesh.ichor.plugins.module_utils.machine import cluster_read, facts as machine
from ansible_collections.maesh.ichor.plugins.module_utils.talos import version_gate
from tests import versions

# the floor (the set's MINIMUM_TALOS), its first patch, and Talos one and two minors below it
FLOOR = versions.OLDEST_TALOS
AT_FLOOR = FLOOR + ".0"
BELOW = versions.BELOW_OLDEST_TALOS
FURTHER_BELOW = versions.minor_behind(AT_FLOOR, 2)
SEED = ("Talos %s is older than the oldest version Ichor adopts (%s). Upgrade Talos first, with talosctl or "
        "your usual tool, and run adopt again." % (versions.bare(BELOW), FLOOR))


def _newer():
    return versions.minor_ahead(release.TALOS)


def test_a_cluster_at_or_above_the_floor_and_not_newer_passes():
    verdict = version_gate.judge([("cp-1", AT_FLOOR), ("w-1", versions.TALOS_BEHIND), ("w-2", release.TALOS)])
    assert verdict == {"refused": False, "message": "", "older": [], "newer": [], "unreadable": []}


def test_one_machine_below_the_floor_is_the_seeds_message_exactly():
    verdict = version_gate.judge([("cp-1", BELOW)])
    assert verdict["refused"] and verdict["message"] == SEED and verdict["older"] == ["cp-1"]


def test_a_uniform_old_cluster_is_the_seeds_message_exactly():
    verdict = version_gate.judge([("cp-1", BELOW), ("w-1", BELOW)])
    assert verdict["message"] == SEED and verdict["older"] == ["cp-1", "w-1"]


def test_a_mixed_cluster_names_the_machines_below_whatever_their_order():
    machines = [("w-2", BELOW), ("cp-1", release.TALOS), ("w-1", FURTHER_BELOW), ("w-3", FLOOR + ".11")]
    verdict = version_gate.judge(machines)
    assert verdict["message"] == ("Talos %s is older than the oldest version Ichor adopts (%s). Upgrade Talos first, "
                                  "with talosctl or your usual tool, and run adopt again. Below %s: w-1 (%s), w-2 (%s)."
                                  % (versions.bare(FURTHER_BELOW), FLOOR, FLOOR, FURTHER_BELOW, BELOW))
    assert verdict["older"] == ["w-1", "w-2"]
    assert version_gate.judge(list(reversed(machines))) == verdict
    # a patch below the floor's .0 does not exist: the floor's .0 is in, a pre-release of the minor below is out
    assert not version_gate.judge([("a", AT_FLOOR)])["refused"]
    assert version_gate.judge([("a", versions.minor(BELOW) + ".99-alpha.1")])["older"] == ["a"]


def test_newer_than_the_release_set_is_refused_in_the_rollouts_words():
    newer = _newer()
    verdict = version_gate.judge([("cp-1", release.TALOS), ("w-2", newer), ("w-1", newer)])
    assert verdict["message"] == ("Talos on w-1, w-2 is %s, newer than the release set's %s; this collection cannot "
                                  "manage it." % (newer, release.TALOS))
    assert verdict["newer"] == ["w-1", "w-2"] and verdict["older"] == []


def test_older_and_newer_together_say_both_older_first():
    verdict = version_gate.judge([("cp-1", BELOW), ("w-1", _newer())])
    assert verdict["message"].startswith(SEED + " Below %s: cp-1 (%s). Talos on w-1 is " % (FLOOR, BELOW))
    assert verdict["older"] == ["cp-1"] and verdict["newer"] == ["w-1"]


def test_a_version_that_is_no_version_refuses_and_is_not_quoted_whole():
    verdict = version_gate.judge([("cp-1", release.TALOS), ("w-1", "x" * 500)])
    assert verdict["refused"] and verdict["unreadable"] == ["w-1"]
    assert "x" * 41 not in verdict["message"] and "w-1" in verdict["message"]
    assert "\n" not in verdict["message"]


# -- the cluster-wide read's bound (cluster_read.cluster_facts_result), with the client's own fan_out --------------------

class _Loop:
    """The part of TalosClient that fan_out uses: its loop (the real fan_out runs on it)."""

    def __init__(self):
        self._loop = asyncio.new_event_loop()

    def run(self, coro):
        return self._loop.run_until_complete(coro)

    def fan_out(self, fn, nodes, concurrency):
        return tc.TalosClient.fan_out(self, fn, nodes, concurrency)

    async def ainvoke(self, call, request, node=None):
        assert call == "List"  # the discovery membership, listed once: none here
        return []


def _fake_facts(seen):
    async def facts(_client, node, with_members=True):
        assert not with_members  # a cluster read lists the membership once, not per machine
        seen["now"] += 1
        seen["most"] = max(seen["most"], seen["now"])
        await asyncio.sleep(0.01)
        seen["now"] -= 1
        return {"node": node, "version": "v1.14.1", "uuid": "", "hostname": node, "role": "worker", "stage": "running",
                "ready": True, "node_id": "", "cluster": {"name": "c", "id": ""}, "members": None, "config": None,
                "config_unread": "", "cni_configs": []}
    return facts


@pytest.mark.parametrize("bound, machines, most", [(16, 40, 16), (3, 10, 3), (1, 5, 1), (16, 4, 4)])
def test_the_cluster_read_runs_at_most_its_bound_at_once(monkeypatch, bound, machines, most):
    seen = {"now": 0, "most": 0}
    monkeypatch.setattr(machine, "machine_facts", _fake_facts(seen))
    client = _Loop()
    try:
        result = cluster_read.cluster_facts_result(client, [{"name": "m%02d" % i, "node": "10.0.0.%d" % i} for i in range(machines)],
                                                   concurrency=bound)
    finally:
        client._loop.close()
    assert seen["most"] == most and result["members"] == []
    assert [m["name"] for m in result["machines"]] == ["m%02d" % i for i in range(machines)]


def test_a_machine_given_twice_is_refused_before_any_read(monkeypatch):
    seen = {"now": 0, "most": 0}
    monkeypatch.setattr(machine, "machine_facts", _fake_facts(seen))
    client = _Loop()
    try:
        with pytest.raises(IchorError) as exc:
            cluster_read.cluster_facts_result(client, [{"name": "a", "node": "10.0.0.1"}, {"name": "b", "node": "10.0.0.1"}])
    finally:
        client._loop.close()
    assert exc.value.message == "machines: each node once; given more than once: 10.0.0.1" and seen["most"] == 0
