"""A lab of a thousand machines (issue 46's benchmarks: 3 control planes + 1000 workers on loopback): its addresses
beyond the first /24, one simulator process serving all of them, our own client reaching the far end of it.

``WORKERS`` sets the size of the big lab; the numbering and the configs' YAML are checked without one."""

import os
import time

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as tc
from ansible_collections.maesh.ichor.plugins.module_utils.talos import talosconfig

from tests.lab import pki
from tests.lab.process import LabProcess
from tests.lab.talos_sim import config as cfg
from tests.lab.talos_sim import lab as simlab

pytestmark = pytest.mark.lab

CONTROLPLANES = 3
# 1000: the simulator ready in 5-6 s (4.5 s of CPU) on 2 cores, up to 15-20 s when the other xdist worker runs lab
# tests beside it; the file takes 8 s alone. Lower it for a quicker run, above 254 to cover the extra /24s
WORKERS = 1000
START_TIMEOUT = 240


def _old_address(index, n):
    """The numbering before labs grew beyond one /24 (tests and guides quote it)."""
    return "127.%d.%d.%d" % (10 + index // 256, index % 256, n)


def test_the_first_24_of_every_index_is_as_it_was():
    for index in (0, 1, 99, 100, 255, 256, 735, 736, 1000, 30999, 50099, simlab.INDEXES - 1):
        for n in (1, 2, 101, 200, 254):
            assert simlab.address_for_index(index, n) == _old_address(index, n)
        assert simlab.subnet_for_index(index) == _old_address(index, 0)[:-2]


def test_no_two_indexes_share_a_24():
    owner = {}
    for index in range(simlab.INDEXES):
        blocks = simlab.EXTRA_BLOCKS + 1 if index < simlab.EXTENDED_INDEXES else 1
        for block in range(blocks):
            subnet = simlab.subnet_for_index(index, block)
            assert subnet not in owner, (subnet, index, owner.get(subnet))
            owner[subnet] = index
    octets = [tuple(int(x) for x in s.split(".")) for s in owner]
    assert all(o[0] == 127 and 10 <= o[1] <= 255 and 0 <= o[2] <= 255 for o in octets)
    # the whole of 127.10.0.0 - 127.255.255.255, each /24 once: nothing of 127.0-9 (127.0.0.1: the API server)
    assert len(owner) == (256 - 10) * 256


def test_a_big_lab_continues_in_its_own_24s_and_a_small_index_refuses_to_grow():
    index = simlab.EXTENDED_INDEXES - 1
    capacity = simlab.capacity(index)
    assert capacity == 254 * (1 + simlab.EXTRA_BLOCKS) >= 4000
    addresses = [simlab.address_for_index(index, n) for n in range(1, capacity + 1)]
    assert len(set(addresses)) == capacity and all(not a.endswith((".0", ".255")) for a in addresses)
    assert addresses[254] == "%s.1" % simlab.subnet_for_index(index, 1)
    assert addresses[-1] == "127.255.255.254"
    with pytest.raises(ValueError, match="holds at most %d machines" % capacity):
        simlab.address_for_index(index, capacity + 1)
    with pytest.raises(ValueError, match="holds at most 254 machines .an index below 736"):
        simlab.address_for_index(simlab.EXTENDED_INDEXES, 255)
    assert simlab.subnets_for_index(5, 255) == [simlab.subnet_for_index(5), simlab.subnet_for_index(5, 1)]
    assert simlab.subnets_for_index(5, 254) == [simlab.subnet_for_index(5)]


def test_a_moved_machine_gets_a_free_address_of_its_lab_beyond_the_first_24(tmp_path):
    lab = simlab.Lab(str(tmp_path), index=3)
    for n in range(1, 256):
        lab.add_machine("m-%d" % n, "worker", "v1.14.1", mode="maintenance")
    assert lab.machine("m-255").address == "%s.1" % simlab.subnet_for_index(3, 1)
    assert lab.allocate_address() == "%s.2" % simlab.subnet_for_index(3, 1)
    lab.move(lab.machine("m-101"), lab.allocate_address())
    assert lab.allocate_address() == _old_address(3, 101)
    assert lab.node_at(lab.machine("m-101").address).m.name == "m-101" and lab.node_at(_old_address(3, 101)) is None
    small = simlab.Lab(str(tmp_path / "small"), index=simlab.EXTENDED_INDEXES)
    for n in range(1, 255):
        small.add_machine("m-%d" % n, "worker", "v1.14.1", mode="maintenance")
    with pytest.raises(RuntimeError, match="no free address"):
        small.allocate_address()


def test_libyaml_writes_and_reads_the_lab_configs_as_pure_pyyaml_does():
    """The lab generates and reads its configs with libyaml (config._FAST_*): byte for byte the same text, the same
    documents."""
    secrets = cfg.new_cluster_secrets("lab", pki.new_ca())
    for role in ("controlplane", "worker"):
        for version, kubernetes in (("v1.14.1", "1.36.3"), ("v1.12.11", "1.34.1")):
            data = cfg.generate_machine_config(secrets, role, "worker-1000", "127.10.0.1", version=version,
                                               kubernetes_version=kubernetes)
            docs = list(yaml.safe_load_all(data))
            assert cfg.dump_documents(docs) == data
            assert cfg.parse_documents(data, fast=True) == cfg.parse_documents(data) == docs
    case = cfg.Case("v1.14/v1.14.1/k8s-older")
    for role in ("controlplane", "worker"):
        assert cfg.ConfigFacts(case.config(role), fast=True).docs == cfg.ConfigFacts(case.config(role)).docs


def _status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as handle:
        for line in handle:
            key, _sep, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) // 1024
    out["fds"] = len(os.listdir("/proc/%d/fd" % pid))
    return out


@pytest.fixture(scope="module")
def big_lab(tmp_path_factory):
    lab = LabProcess(str(tmp_path_factory.mktemp("big-lab")), controlplanes=CONTROLPLANES, workers=WORKERS)
    started = time.monotonic()
    lab.start(timeout=START_TIMEOUT)
    lab.ready_seconds = time.monotonic() - started
    try:
        yield lab
    finally:
        lab.stop()


def test_a_thousand_machines_in_one_simulator(big_lab):
    lab = big_lab
    figures = _status(lab.proc.pid)
    print("\nlab of %d machines (index %d): ready in %.1f s, simulator RSS %d MiB (peak %d MiB), %d fds"
          % (CONTROLPLANES + WORKERS, lab.index, lab.ready_seconds, figures["VmRSS"], figures["VmHWM"],
             figures["fds"]))
    machines = lab.state(brief=True)["machines"]
    assert len(machines) == CONTROLPLANES + WORKERS
    addresses = [m["address"] for m in machines]
    assert len(set(addresses)) == len(addresses)
    assert addresses == [simlab.address_for_index(lab.index, n) for n in range(1, len(machines) + 1)]
    assert all(m["up"] and m["stage"] == "running" for m in machines)
    with open(lab.talosconfig) as handle:
        context = yaml.safe_load(handle)["contexts"][lab.context]
    assert context["nodes"] == addresses and context["endpoints"] == [addresses[0]]


def test_the_far_end_answers_version_through_our_client(big_lab):
    lab = big_lab
    machines = lab.state(brief=True)["machines"]
    far = machines[-3:]
    context = talosconfig.load(lab.talosconfig)
    lab.control.connections(reset=True)
    with tc.TalosClient(context, timeout=20) as client:  # through the endpoint, cp-1
        for m in far:
            reply = client.call("Version", node=m["address"])
            assert tc.version_info(client.first(reply, m["address"]))["tag"] == m["version"]
    for m in far:  # dialled directly, each with its own certificate for its address
        with tc.TalosClient(context, endpoint=m["address"], timeout=20) as client:
            assert client.call("Hostname").messages[0].hostname == m["hostname"]
    started = time.monotonic()
    with tc.TalosClient(context, timeout=30) as client:  # every machine, through the endpoint, 16 at once
        results = client.fan_out(lambda node: client.ainvoke("Version", node=node), [m["address"] for m in machines])
    seconds = time.monotonic() - started
    assert sorted(results) == sorted(m["address"] for m in machines)
    assert all(r.error is None for r in results.values()), [r for r in results.values() if r.error][:3]
    connections = lab.control.connections()
    print("\nVersion of all %d machines through one endpoint: %.1f s; connections to the lab: peak %d, made %d"
          % (len(machines), seconds, connections["peak"], connections["total"]))
    assert connections["peak"] <= 2 and connections["open"] == 0
