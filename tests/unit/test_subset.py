"""A run that holds part of the cluster (module_utils/cluster/subset.py, filter maesh.ichor.missing_machines): properties
over generated cluster records and runs, with a seeded generator (the same cases on every run).

- A run holding every recorded machine, in any order, each matched by its name, its node address or its UUID (and any
  number of machines the record does not list), is never refused.
- A run without any one recorded machine is refused, in one line that names it and the way on.
- ``deliberate`` never refuses; a record without ``nodes`` refuses nothing."""

import random
import re

import pytest

from ansible_collections.maesh.ichor.plugins.filter.subset import missing_machines
from ansible_collections.maesh.ichor.plugins.module_utils.cluster import subset

SEED = 46
CASES = 300


def _record(rng):
    """A cluster record's data with 1 to 40 machines, each of a distinct name, address and UUID."""
    count = rng.randint(1, 40)
    nodes = {}
    for index in range(count):
        role = "controlplane" if index < rng.choice((1, 3, 5)) else "worker"
        name = "%s-%d-%s" % ("cp" if role == "controlplane" else "w", index, rng.choice(("a", "b", "lab", "x1")))
        nodes[name] = {"uuid": "%08x-0000-4000-8000-%012x" % (rng.getrandbits(32), index),
                       "node": "10.%d.%d.%d" % (rng.randint(0, 255), index // 250, index % 250 + 1),
                       "role": role, "spec": {}}
    return {"schema": 1, "talos": "v1.12.0", "nodes": nodes}


def _held(rng, name, entry):
    """The run's machine for a recorded one, matched one of the three ways (the others differ)."""
    way = rng.choice(("name", "node", "uuid"))
    machine = {"name": name if way == "name" else "renamed-" + name,
               "node": entry["node"] if way == "node" else "192.0.2.%d" % rng.randint(1, 254),
               "role": entry["role"]}
    if way == "uuid":
        machine["uuid"] = entry["uuid"]
    elif rng.random() < 0.5:
        machine["uuid"] = "another-" + entry["uuid"]
    if rng.random() < 0.3:
        machine["hostname"] = name
    return machine


def _run(rng, record):
    machines = [_held(rng, name, entry) for name, entry in record["nodes"].items()]
    machines += [{"name": "new-%d" % i, "node": "198.51.100.%d" % i, "role": "worker"} for i in range(rng.randint(0, 3))]
    rng.shuffle(machines)
    return machines


def _cases():
    rng = random.Random(SEED)
    for unused in range(CASES):
        record = _record(rng)
        yield rng, record, _run(rng, record)


def test_a_run_holding_every_recorded_machine_is_never_refused():
    for rng, record, machines in _cases():
        assert subset.refusal(record, machines) is None, (record, machines)
        assert missing_machines(record, machines) == []


def test_a_run_without_any_one_recorded_machine_is_refused_naming_it():
    for rng, record, machines in _cases():
        names = list(record["nodes"])
        gone = rng.choice(names)
        entry = record["nodes"][gone]
        # the run's machine that holds the one removed: of its name, address or UUID
        kept = [m for m in machines if not (m["name"] == gone or m["node"] == entry["node"]
                                            or m.get("uuid") == entry["uuid"])]
        assert len(kept) == len(machines) - 1
        line = subset.refusal(record, kept)
        assert line is not None and "\n" not in line
        assert subset.missing(record, kept) == [gone]
        assert "(%s)" % gone in line, line
        assert line.startswith("this run holds %d of the %d machines" % (len(names) - 1, len(names))), line
        assert "1 is missing" in line
        assert "-e ichor_subset=true" in line and "add it to the inventory" in line
        assert "from part of it" in line
        assert missing_machines(record, kept) == [line]


def test_deliberate_never_refuses():
    for rng, record, machines in _cases():
        part = rng.sample(machines, rng.randint(0, len(machines)))
        assert subset.refusal(record, part, deliberate=True) is None
        # as a survey or -e gives it: a string
        assert missing_machines(record, part, deliberate="true") == []
        assert missing_machines(record, part, deliberate=True) == []


def test_every_missing_machine_is_counted_and_at_most_ten_are_named():
    rng = random.Random(SEED + 1)
    for unused in range(CASES):
        record = _record(rng)
        names = sorted(record["nodes"])
        machines = _run(rng, record)
        gone = set(rng.sample(names, rng.randint(1, len(names))))
        kept = [m for m in machines if not any(
            m["name"] == g or m["node"] == record["nodes"][g]["node"] or m.get("uuid") == record["nodes"][g]["uuid"]
            for g in gone)]
        line = subset.refusal(record, kept)
        assert subset.missing(record, kept) == sorted(gone)
        shown = re.search(r"missing \((.*?)\): ", line).group(1)
        if len(gone) <= subset.NAMED:
            assert shown == ", ".join(sorted(gone))
        else:
            assert shown == "%s and %d more" % (", ".join(sorted(gone)[:subset.NAMED]), len(gone) - subset.NAMED)
        assert "holds %d of the %d machines" % (len(names) - len(gone), len(names)) in line
        assert ("%d %s missing" % (len(gone), "is" if len(gone) == 1 else "are")) in line


@pytest.mark.parametrize("record", [{}, {"schema": 1}, {"schema": 1, "nodes": {}}, {"schema": 1, "nodes": None},
                                    {"schema": 1, "talos": "v1.12.0", "machines": [{"uuid": "u"}]}])
def test_a_record_without_nodes_refuses_nothing(record):
    assert subset.refusal(record, []) is None
    assert missing_machines(record, []) == []


def test_the_run_of_the_machines_filter_is_matched_as_it_comes():
    # what maesh.ichor.machines gives: name, node (ansible_host or the name), role, and uuid with details
    record = {"nodes": {"cp-1": {"uuid": "u1", "node": "10.0.0.1", "role": "controlplane", "spec": {}},
                        "w-1": {"uuid": "u2", "node": "10.0.0.2", "role": "worker", "spec": {}}}}
    assert missing_machines(record, [{"name": "cp-1", "node": "10.0.0.1", "role": "controlplane"}]) == [
        subset.refusal(record, [{"name": "cp-1", "node": "10.0.0.1", "role": "controlplane"}])]
    assert missing_machines(record, [{"name": "cp-1", "node": "10.0.0.1", "role": "controlplane"},
                                     {"name": "worker-one", "node": "10.0.0.2", "role": "worker"}]) == []
    assert missing_machines(record, [{"name": "cp-1", "node": "10.0.0.1", "role": "controlplane"},
                                     {"name": "worker-one", "node": "10.9.9.9", "role": "worker", "uuid": "u2"}]) == []
    # an empty UUID or address holds nothing
    assert subset.missing({"nodes": {"a": {"uuid": "", "node": ""}}}, [{"name": "b", "node": "", "uuid": ""}]) == ["a"]
