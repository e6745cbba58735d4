"""The one fan-out limit (common/fanout.py): machines read through one client and on threads are bounded alike."""

import asyncio
import random
import threading
import time

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.common import fanout
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as talos_client
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors


class InFlight:
    """Counts calls running at once; the most seen is ``peak``."""

    def __init__(self):
        self.now = self.peak = 0
        self.lock = threading.Lock()

    def enter(self):
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)

    def leave(self):
        with self.lock:
            self.now -= 1


@pytest.mark.parametrize("seed", range(6))
def test_a_clients_fan_out_never_runs_more_than_its_limit_and_answers_every_node(seed):
    rng = random.Random(seed)
    limit, count = rng.randint(1, 5), rng.randint(0, 24)
    nodes = ["10.0.%d.%d" % (seed, i) for i in range(count)]
    failing = set(rng.sample(nodes, k=min(len(nodes), rng.randint(0, 3))))
    seen = InFlight()

    async def read(node):
        seen.enter()
        try:
            await asyncio.sleep(rng.random() / 500)
            if node in failing:
                raise errors.TalosError("%s: unavailable" % node)
            return node.upper()
        finally:
            seen.leave()

    with talos_client.TalosClient(endpoint="127.0.0.1:1", maintenance=True) as client:
        results = client.fan_out(read, nodes, concurrency=limit)
    assert sorted(results) == sorted(nodes)
    assert seen.peak <= limit and (count == 0 or seen.peak == min(limit, count))
    for node, result in results.items():
        assert (result.error is not None) == (node in failing)
        assert result.error is not None or result.message == node.upper()


def test_a_clients_fan_out_is_bounded_by_default():
    seen = InFlight()

    async def read(_node):
        seen.enter()
        await asyncio.sleep(0.002)
        seen.leave()

    with talos_client.TalosClient(endpoint="127.0.0.1:1", maintenance=True) as client:
        client.fan_out(read, ["n%d" % i for i in range(3 * fanout.CONCURRENCY)])
    assert seen.peak == fanout.CONCURRENCY


@pytest.mark.parametrize("limit", [1, 3, fanout.CONCURRENCY])
def test_threads_run_at_most_the_limit_and_keep_the_items_order(limit):
    seen = InFlight()

    def read(item):
        seen.enter()
        time.sleep(0.02)
        seen.leave()
        if item % 7 == 3:
            raise ValueError("item %d" % item)
        return item * 2

    futures = fanout.each(read, range(40), limit=limit)
    assert seen.peak <= limit and (limit == 1 or seen.peak > 1) and all(f.done() for f in futures)
    for item, future in enumerate(futures):
        if item % 7 == 3:
            with pytest.raises(ValueError, match="item %d" % item):
                future.result()
        else:
            assert future.result() == item * 2
    assert fanout.each(read, []) == []
