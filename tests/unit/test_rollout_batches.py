"""The rollout's order (rollout/batches.py), as properties over generated clusters (seeded, bounded): control planes
one at a time with the etcd leader last, every machine exactly once, workers in batches of the size asked (a count or
a percentage), the first worker batch the canary, and the failure budget."""

import random

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.rollout import batches

SEEDS = range(1, 201)


def _cluster(rng):
    cps = [{"name": "cp-%d" % i, "role": "controlplane"} for i in range(1, rng.randint(0, 5) + 1)]
    workers = [{"name": "w-%d" % i, "role": "worker"} for i in range(1, rng.randint(0, 60) + 1)]
    machines = cps + workers
    rng.shuffle(machines)
    return machines, cps, workers


@pytest.mark.parametrize("seed", SEEDS)
def test_the_order_takes_every_machine_once_leader_last_and_batches_as_asked(seed):
    rng = random.Random(seed)
    machines, cps, workers = _cluster(rng)
    leader = rng.choice(cps)["name"] if cps and rng.random() < 0.8 else None
    asked = rng.choice([rng.randint(1, 15), "%d%%" % rng.randint(1, 100)])
    size = batches.batch_size(asked, len(workers))
    order = batches.schedule(machines, leader, size, canary=True)
    flat = [m["name"] for b in order for m in b.machines]
    assert sorted(flat) == sorted(m["name"] for m in machines)  # every machine, once
    cp_batches = [b for b in order if b.kind == "controlplane"]
    assert all(len(b.machines) == 1 for b in cp_batches)  # never two control planes down at once
    assert order[:len(cp_batches)] == cp_batches  # control planes first
    if leader:
        assert cp_batches[-1].names() == [leader]
    worker_batches = order[len(cp_batches):]
    assert all(1 <= len(b.machines) <= size for b in worker_batches)
    assert all(len(b.machines) == size for b in worker_batches[:-1])
    assert [b.canary for b in worker_batches] == ([True] + [False] * (len(worker_batches) - 1) if workers else [])
    # the workers keep the inventory's order
    assert [m["name"] for b in worker_batches for m in b.machines] == [m["name"] for m in machines
                                                                       if m["role"] == "worker"]
    assert len(batches.describe(order)) == len(order)


@pytest.mark.parametrize("asked, workers, size", [
    (1, 20, 1), ("5", 20, 5), (30, 20, 20), ("10%", 20, 2), ("20 %", 23, 5), ("100%", 7, 7), ("1%", 3, 1),
    ("0.5%", 1000, 5), (" 4 ", 0, 4)])
def test_a_batch_is_a_count_or_a_percentage_rounded_up(asked, workers, size):
    assert batches.batch_size(asked, workers) == size


@pytest.mark.parametrize("asked", [0, "0", "0%", "150%", "-1", "ten", "", None, True, 2.5, "5%%", [1]])
def test_a_batch_that_is_not_one_is_refused_in_one_line(asked):
    with pytest.raises(batches.BatchError) as refused:
        batches.batch_size(asked, 10)
    assert "ichor_upgrade_worker_batch" in str(refused.value) and "\n" not in str(refused.value)


def test_the_failure_budget():
    assert batches.failure_budget(0) == 0 and batches.failure_budget("3") == 3
    for wrong in (-1, "x", None, True, 1.5):
        with pytest.raises(batches.BatchError):
            batches.failure_budget(wrong)
    assert not batches.over_budget([], 0)
    assert batches.over_budget(["w-1"], 0)
    assert not batches.over_budget(["w-1", "w-2"], 2)
    assert batches.over_budget(["w-1", "w-2", "w-3"], 2)


def test_no_canary_when_asked_for_none():
    machines = [{"name": "w-%d" % i, "role": "worker"} for i in range(5)]
    assert not any(b.canary for b in batches.schedule(machines, None, 2, canary=False))
