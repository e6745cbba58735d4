"""The maesh.ichor.talos inventory plugin through real ``ansible-inventory`` runs against the lab (simulated Talos
machines, the real API server): the machines from discovery, and with discovery off from the Kubernetes Nodes or
the talosconfig's nodes, the source it used, the pending group from the cluster record."""

import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim import flow
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as talos_client
from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine, talosconfig

from tests.integration.ansible_env import REPO, ansible_env, ansible_playbook

pytestmark = pytest.mark.lab


def _inventory(path, *args):
    exe = os.path.join(os.path.dirname(sys.executable), "ansible-inventory")
    return subprocess.run([exe, "-i", str(path)] + list(args), env=ansible_env(), cwd=REPO, capture_output=True,
                          text=True, timeout=300, check=False)


def _source(tmp_path, name="lab.talos.yml", **options):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(dict({"plugin": "maesh.ichor.talos"}, **options)))
    return path


def _plain(value):
    """ansible-core 2.19 lists what an inventory plugin set as {"__ansible_unsafe": value}."""
    if isinstance(value, dict):
        return value["__ansible_unsafe"] if set(value) == {"__ansible_unsafe"} else dict(
            (k, _plain(v)) for k, v in value.items())
    return value


def _listed(path):
    """({group: hosts}, hostvars, the group all's vars, the process) of ``ansible-inventory --list --export``."""
    proc = _inventory(path, "--list", "--export")
    assert proc.returncode == 0 and "WARNING" not in proc.stderr, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = _plain(json.loads(proc.stdout))
    groups = dict((group, sorted(data.get(group, {}).get("hosts", []))) for group in ("controlplane", "worker", "pending"))
    return groups, data["_meta"]["hostvars"], data["all"].get("vars", {}), proc


def _expected(lab):
    machines = [m for m in lab.machines if m.get("mode", "configured") == "configured"]
    return dict((role, sorted(m["hostname"] for m in machines if m["role"] == role)) for role in ("controlplane", "worker")), \
        dict((m["hostname"], m) for m in machines)


def _discovery_off(lab):
    """Every machine's config without discovery (the typed registry document removed), applied over the Talos API."""
    context = talosconfig.load(path=lab.talosconfig)
    with talos_client.TalosClient(context=context) as client:
        for m in lab.state(full=True)["machines"]:
            docs = [d for d in yaml.safe_load_all(m["machine_config"]) if d]
            kept = [d for d in docs if d.get("kind") not in ("DiscoveryServiceConfig", "KubernetesDiscoveryConfig")]
            for d in kept:
                if "kind" not in d and isinstance((d.get("cluster") or {}).get("discovery"), dict):
                    d["cluster"]["discovery"]["enabled"] = False
            machine.apply_config(client, m["address"], yaml.safe_dump_all(kept))
        members = client.run(machine.list_resources(client, machine.res.MEMBERS))
    assert members == []


@pytest.mark.floor
def test_discovery(talos_kube_lab, tmp_path):
    lab = talos_kube_lab(controlplanes=3, workers=2)
    groups, hostvars, shared, _proc = _listed(_source(tmp_path, talosconfig=lab.talosconfig))
    roles, machines = _expected(lab)
    assert (groups["controlplane"], groups["worker"], groups["pending"]) == (roles["controlplane"], roles["worker"], [])
    for host, found in machines.items():
        assert hostvars[host]["ansible_host"] == found["address"]
        assert (hostvars[host]["ichor_role"], hostvars[host]["ichor_talos_version"]) == (found["role"], found["version"])
        assert hostvars[host]["ichor_inventory_source"] == "discovery"
    assert shared["ichor_inventory_source"] == "discovery" and shared["ichor_talosconfig"] == lab.talosconfig
    assert "ansible_connection" not in shared and "ansible_python_interpreter" not in shared

    graph = _inventory(_source(tmp_path, talosconfig=lab.talosconfig), "--graph")
    assert graph.returncode == 0, graph.stderr
    assert "@controlplane:" in graph.stdout and "@worker:" in graph.stdout
    assert "|--%s" % roles["controlplane"][0] in graph.stdout

    # a play of the collection's modules runs on it as it is: no connection variable, nothing reaches the machines but
    # the Talos API (nothing listens on their port 22)
    play = tmp_path / "play.yml"
    play.write_text(yaml.safe_dump([{"hosts": "controlplane", "gather_facts": False, "tasks": [
        {"maesh.ichor.talos_facts": {"talosconfig": "{{ ichor_talosconfig }}", "node": "{{ ansible_host }}"}},
        {"ansible.builtin.debug": {"msg": "{{ inventory_hostname }} {{ ichor_role }} {{ ichor_talos_version }}"}}]}]))
    proc = ansible_playbook("-i", str(_source(tmp_path, talosconfig=lab.talosconfig)), str(play))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "ok=2" in proc.stdout and "cp-1 controlplane %s" % machines["cp-1"]["version"] in proc.stdout, proc.stdout


def test_discovery_off_from_the_nodes(talos_kube_lab, tmp_path):
    lab = talos_kube_lab(controlplanes=1, workers=2)
    _discovery_off(lab)
    groups, hostvars, shared, _proc = _listed(_source(tmp_path, talosconfig=lab.talosconfig,
                                                      kubeconfig=lab.kube.kubeconfig))
    roles, machines = _expected(lab)
    assert (groups["controlplane"], groups["worker"]) == (roles["controlplane"], roles["worker"])
    assert shared["ichor_inventory_source"] == "kubernetes"
    for host, found in machines.items():
        assert (hostvars[host]["ansible_host"], hostvars[host]["ichor_talos_version"]) == (found["address"], found["version"])


def test_discovery_off_from_the_talosconfig_nodes(talos_kube_lab, tmp_path):
    lab = talos_kube_lab(controlplanes=1, workers=2)
    _discovery_off(lab)
    data = yaml.safe_load(open(lab.talosconfig).read())
    context = data["context"]
    data["contexts"][context]["nodes"] = [m["address"] for m in lab.machines]
    path = tmp_path / "talosconfig"
    path.write_text(yaml.safe_dump(data))
    groups, hostvars, shared, _proc = _listed(_source(tmp_path, talosconfig=str(path), context=context))
    roles, machines = _expected(lab)
    assert (groups["controlplane"], groups["worker"]) == (roles["controlplane"], roles["worker"])
    assert shared["ichor_inventory_source"] == "talosconfig" and shared["ichor_talos_context"] == context
    for host, found in machines.items():
        assert (hostvars[host]["ansible_host"], hostvars[host]["ichor_role"], hostvars[host]["ichor_talos_version"]) == (
            found["address"], found["role"], found["version"])


def test_discovery_asked_for_but_off(talos_kube_lab, tmp_path):
    lab = talos_kube_lab(controlplanes=1, workers=1)
    _discovery_off(lab)
    proc = _inventory(_source(tmp_path, talosconfig=lab.talosconfig, source="discovery"), "--list")
    said = " ".join((proc.stdout + proc.stderr).split())  # ansible-core 2.16 wraps its warnings
    assert "the machine at the endpoint has no discovery members: discovery is off" in said, said


def test_pending_machines_of_the_cluster_record(talos_kube_lab, tmp_path):
    lab = talos_kube_lab(controlplanes=1, workers=1)
    kube = KubeClient(kubeconfig=lab.kube.kubeconfig)
    cluster_record.update(kube, lambda data: flow.add_pending(data, "4c4c4544-0000-0000-0000-000000000042", "10.5.0.99",
                                                              "2026-12-01T12:00:00Z"))
    try:
        groups, hostvars, _shared, _proc = _listed(_source(tmp_path, talosconfig=lab.talosconfig,
                                                           kubeconfig=lab.kube.kubeconfig))
        assert groups["pending"] == ["10.5.0.99"]
        assert hostvars["10.5.0.99"]["ichor_uuid"] == "4c4c4544-0000-0000-0000-000000000042"
        assert hostvars["10.5.0.99"]["ichor_inventory_source"] == "cluster-record"
        assert len(groups["controlplane"]) == 1 and len(groups["worker"]) == 1
    finally:
        kube.delete("v1", "ConfigMap", cluster_record.NAME, cluster_record.NAMESPACE)


@pytest.mark.floor
def test_constructed_keyed_groups(talos_kube_lab, tmp_path):
    lab = talos_kube_lab(controlplanes=1, workers=1)
    groups, _hostvars, _shared, proc = _listed(_source(tmp_path, talosconfig=lab.talosconfig, keyed_groups=[
        {"key": "ichor_talos_version", "prefix": "talos"}]))
    data = _plain(json.loads(proc.stdout))
    version = lab.machines[0]["version"]
    assert sorted(data["talos_" + version.replace(".", "_")]["hosts"]) == sorted(groups["controlplane"] + groups["worker"])
