"""talos_facts as adopt reads Talos (issue 14, "Facts, gathered fast" and "Versions first"), against the lab:
the Talos side of real configs (made by machinery, with their CNI, KubePrism, kube-proxy, inline manifests,
install, mirrors and SANs) and the CNI configs under /etc/cni/net.d; the cluster-wide read in one task that
fans out inside the module, bounded; the version gate (v1.11 refused with the seed's message, a mixed cluster
naming its machines), nothing written on any machine."""

import json
import os
import time

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as tc
from ansible_collections.maesh.ichor.plugins.module_utils.machine import cluster_read, facts as machine
from ansible_collections.maesh.ichor.plugins.module_utils.talos import talosconfig
from tests import versions
from tests.integration.ansible_env import ansible_playbook

pytestmark = pytest.mark.lab

BELOW = versions.BELOW_OLDEST_TALOS  # a Talos below the oldest adopt takes (the set's MINIMUM_TALOS)
SEED = ("Talos %s is older than the oldest version Ichor adopts (%s). Upgrade Talos first, with talosctl or "
        "your usual tool, and run adopt again." % (versions.bare(BELOW), versions.OLDEST_TALOS))
# what a read-only read may call: anything else would be a write
READS = {"Version", "Get", "List"}


def _client(lab, context=None):
    return tc.TalosClient(talosconfig.load(lab.talosconfig, context=context))


def _machines(lab):
    return [{"name": m["name"], "node": m["address"], "role": m["role"]} for m in lab.machines]


def _only_reads(lab):
    for m in lab.machines:
        calls = set(lab.control.calls(m["name"])) - {"etcd-peer-port"}
        assert calls <= READS, "%s got %s" % (m["name"], sorted(calls - READS))


def test_cluster_read_of_real_configs_kitchen_sink(talos_lab):
    """Configs machinery v1.14.1 made (Cilium inline with cni none, KubePrism on 7446, kube-proxy off, mirrors, SANs)."""
    lab = talos_lab(controlplanes=1, workers=1, case="v1.14/v1.14.1/kitchen-sink")
    with _client(lab) as client:
        result = cluster_read.cluster_facts_result(client, _machines(lab))
    assert result["changed"] is False and result["versions"]["refused"] is False
    by_name = dict((m["name"], m) for m in result["machines"])
    assert [m["name"] for m in result["machines"]] == [m["name"] for m in lab.machines]
    for m in lab.machines:
        facts = by_name[m["name"]]
        assert facts["uuid"] == m["uuid"] and facts["role"] == m["role"] and facts["version"] == m["version"]
        config = facts["config"]
        assert config["form"] == "typed" and config["kubeprism"] == {"enabled": True, "port": 7446}
        assert config["install"]["image"] == "ghcr.io/siderolabs/installer:v1.14.1" and config["install"]["wipe"] is True
        assert [h["host"] for h in config["registries"]["mirrors"]] == ["docker.io", "ghcr.io"]
        assert {"api.kitchen-sink.example.com", "192.168.10.10"} <= set(config["cert_sans"]["machine"])
        # the Cilium inline manifest with cni none: Cilium's CNI config on every machine, the worker's included
        assert facts["cni_configs"] == ["05-cilium.conflist"]
    cp = [by_name[m["name"]] for m in lab.machines if m["role"] == "controlplane"][0]
    assert cp["config"]["cni"] == {"name": "none", "urls": [], "flannel_document": False}
    assert cp["config"]["kube_proxy"]["enabled"] is False
    assert [(i["name"], i["cilium"]) for i in cp["config"]["inline_manifests"]] == [("cilium", True), ("platform-extras", False)]
    assert "contents" not in json.dumps(cp["config"]["inline_manifests"])
    worker = [by_name[m["name"]] for m in lab.machines if m["role"] == "worker"][0]
    assert worker["config"]["cni"]["name"] == ""  # a contract v1.14 worker's config states no CNI
    assert result["plan"][-1].startswith("versions: every machine read runs Talos v1.12 or later")
    assert any("KubePrism on port 7446, kube-proxy off, Talos CNI none, 2 inline manifest(s); CNI configs: 05-cilium.conflist"
               in line for line in result["plan"])
    _only_reads(lab)


def test_a_cluster_read_lists_the_membership_once(talos_lab):
    """Every machine sees the whole discovery membership, so listing it on each of N machines parses N x N
    members (adopt --check at 1003 machines took 100 s of it): the cluster read lists it on one machine, and
    each machine's role is its own machine type, discovery or not."""
    lab = talos_lab(controlplanes=2, workers=3)
    for m in lab.machines:
        lab.control.reset_requests(m["name"])
    with _client(lab) as client:
        result = cluster_read.cluster_facts_result(client, _machines(lab))
    listed = [m["name"] for m in lab.machines if "/cosi.resource.State/List" in lab.control.requests(m["name"])]
    assert listed == [lab.machines[0]["name"]]
    assert sorted(x["hostname"] for x in result["members"]) == sorted(m["name"] for m in lab.machines)
    assert all("members" not in facts for facts in result["machines"])
    assert [f["role"] for f in result["machines"]] == [m["role"] for m in lab.machines]
    assert "discovery membership (read on %s): 5 members" % lab.machines[0]["name"] in result["plan"]
    _only_reads(lab)


def test_legacy_flannel_cluster_and_two_cnis_on_one_machine(talos_lab):
    lab = talos_lab(controlplanes=1, workers=2, case="v1.12/v1.12.7/basic", version="v1.12.11")
    w1 = [m for m in lab.machines if m["role"] == "worker"][0]
    lab.control.set_cni_files(w1["name"], {"05-cilium.conflist": "{}\n", "10-calico.conflist": "{}\n"})
    with _client(lab) as client:
        result = cluster_read.cluster_facts_result(client, _machines(lab))
    for facts in result["machines"]:
        assert facts["config"]["form"] == "legacy" and facts["config"]["cni"]["name"] == "flannel"
        assert facts["config"]["kubeprism"] == {"enabled": True, "port": 7445} and facts["config"]["kube_proxy"]["enabled"]
        want = ["05-cilium.conflist", "10-calico.conflist"] if facts["name"] == w1["name"] else ["10-flannel.conflist"]
        assert facts["cni_configs"] == want
        assert facts["version"] == "v1.12.11"


def test_a_reader_gets_everything_but_the_config(talos_cluster):
    worker = [m for m in talos_cluster.machines if m["role"] == "worker"][0]
    with _client(talos_cluster, context=talos_cluster.context + "-reader") as client:
        facts = machine.facts_result(client, worker["address"])["ansible_facts"]["talos"]
    assert facts["config"] is None and "os:admin" in facts["config_unread"]
    assert facts["uuid"] == worker["uuid"] and facts["cni_configs"] == ["10-flannel.conflist"]


def test_the_fan_out_is_concurrent(talos_lab):
    latency = 1.0  # large against the simulator's own work per call (it rebuilds every resource for each read)
    lab = talos_lab(controlplanes=1, workers=2, latency_ms=int(latency * 1000))
    with _client(lab) as client:
        start = time.monotonic()
        cluster_read.cluster_facts_result(client, _machines(lab))
        together = time.monotonic() - start
        start = time.monotonic()
        cluster_read.cluster_facts_result(client, _machines(lab), concurrency=1)
        one_at_a_time = time.monotonic() - start
    # A call through the endpoint waits there and at the machine; one machine's nine calls run at once. Read one
    # at a time, the three machines wait about 5 s in all; read together, about 2 s.
    assert one_at_a_time >= 2 * 2 * latency + latency
    assert one_at_a_time - together >= 2.0, (together, one_at_a_time)


def test_below_the_floor_is_refused_with_the_seeds_message_and_nothing_written(talos_lab):
    lab = talos_lab(controlplanes=1, workers=0, version=BELOW)
    with _client(lab) as client:
        with pytest.raises(IchorError) as exc:
            cluster_read.cluster_facts_result(client, _machines(lab))
    assert exc.value.message == SEED
    assert exc.value.result["versions"]["older"] == [lab.machines[0]["name"]]
    assert exc.value.result["plan"][-1] == "refused: " + SEED
    _only_reads(lab)


def test_a_mixed_cluster_is_refused_naming_its_machines_through_ansible(talos_lab, tmp_path):
    lab = talos_lab(controlplanes=1, workers=2, overrides=["worker-1:version=" + BELOW])
    playbook = tmp_path / "adopt_read.yml"
    playbook.write_text("""
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Read the cluster
      maesh.ichor.talos_facts:
        talosconfig: %s
        machines: %s
""" % (lab.talosconfig, json.dumps(_machines(lab))))
    proc = ansible_playbook("-i", "localhost,", "-c", "local", str(playbook), "-e",
                            "ansible_python_interpreter={{ ansible_playbook_python }}")
    assert proc.returncode != 0
    assert SEED + " Below %s: worker-1 (%s)." % (versions.OLDEST_TALOS, BELOW) in proc.stdout, proc.stdout[-3000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    _only_reads(lab)


@pytest.mark.floor
def test_one_task_reads_the_cluster_through_ansible(talos_cluster, tmp_path):
    playbook = tmp_path / "adopt_read.yml"
    out = tmp_path / "result.json"
    playbook.write_text("""
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Read the cluster
      maesh.ichor.talos_facts:
        talosconfig: %s
        machines: %s
      register: cluster
    - name: Keep the result
      ansible.builtin.copy:
        content: "{{ cluster | to_json }}"
        dest: %s
        mode: "0600"
""" % (talos_cluster.talosconfig, json.dumps(_machines(talos_cluster)), out))
    proc = ansible_playbook("-i", "localhost,", "-c", "local", str(playbook), "-e",
                            "ansible_python_interpreter={{ ansible_playbook_python }}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["changed"] is False and result["versions"]["refused"] is False
    assert [m["name"] for m in result["machines"]] == [m["name"] for m in talos_cluster.machines]
    assert all(m["cni_configs"] == ["10-flannel.conflist"] for m in result["machines"])
    assert os.stat(str(out)).st_size > 0
