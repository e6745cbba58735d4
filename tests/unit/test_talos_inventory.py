"""The inventory plugin's rows (module_utils/talos/inventory.py): discovery members, Nodes and the cluster record's
pending machines turned into machines; the plugin's runs are tests/integration/test_inventory_plugin.py's."""

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.talos import inventory
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res


@pytest.mark.parametrize("text, version", [
    ("Talos (v1.14.1)", "v1.14.1"),
    ("Talos (v1.12.0-beta.1)", "v1.12.0-beta.1"),
    ("Ubuntu 24.04", None),
    ("", None),
    (None, None),
])
def test_os_version(text, version):
    assert inventory.os_version(text) == version


@pytest.mark.parametrize("machine_type, role", [
    ("controlplane", "controlplane"), ("init", "controlplane"), ("CONTROL_PLANE", "controlplane"),
    ("worker", "worker"), ("unknown", None), (None, None),
])
def test_role_of(machine_type, role):
    assert res.role_of(machine_type) == role


@pytest.mark.parametrize("item, role", [
    ({"spec": "controlplane"}, "controlplane"), ({"spec": "init"}, "controlplane"),
    ({"spec": {"machineType": "worker"}}, "worker"), ({"spec": None}, None), (None, None), ({"spec": 3}, None),
])
def test_machine_role_of_a_machine_type_resource(item, role):
    assert res.machine_role(item) == role


def test_from_members():
    members = [
        {"id": "b", "spec": {"hostname": "worker-1", "addresses": ["fd00::4", "10.5.0.4"], "machineType": "worker",
                             "operatingSystem": "Talos (v1.14.1)"}},
        {"id": "a", "spec": {"hostname": "cp-1", "addresses": ["10.5.0.2"], "machineType": "init",
                             "operatingSystem": "Talos (v1.13.9)"}},
        {"id": "c", "spec": {"hostname": "", "addresses": ["fd00::9"], "machineType": "worker"}},
        {"id": "d", "spec": None},
    ]
    assert inventory.from_members(members) == [
        {"name": "cp-1", "address": "10.5.0.2", "role": "controlplane", "version": "v1.13.9", "node_id": "a"},
        {"name": "d", "address": None, "role": None, "version": None, "node_id": "d"},
        {"name": "fd00::9", "address": "fd00::9", "role": "worker", "version": None, "node_id": "c"},
        {"name": "worker-1", "address": "10.5.0.4", "role": "worker", "version": "v1.14.1", "node_id": "b"},
    ]


def test_from_nodes():
    nodes = [{"metadata": {"name": "cp-1", "labels": {"node-role.kubernetes.io/control-plane": ""}},
              "status": {"addresses": [{"type": "Hostname", "address": "cp-1"}, {"type": "InternalIP", "address": "10.5.0.2"}],
                         "nodeInfo": {"osImage": "Talos (v1.14.1)"}}},
             {"metadata": {"name": "w-1"}, "status": {}}]
    assert inventory.from_nodes(nodes) == [
        {"name": "cp-1", "address": "10.5.0.2", "role": "controlplane", "version": "v1.14.1"},
        {"name": "w-1", "address": None, "role": "worker", "version": None}]


def test_pending_takes_the_reclaim_flows_pending_entries():
    data = {"machines": [
        {"uuid": "u1", "address": "10.5.0.9", "state": "pending", "source": "reclaim", "at": ""},
        {"uuid": "u2", "address": "10.5.0.10", "state": "joined"},
        {"uuid": "u3", "address": "10.5.0.11"},  # no state: the reclaim flow's default
        {"uuid": "u4"},
        "not an entry",
    ]}
    assert inventory.pending(data) == [{"name": "10.5.0.9", "address": "10.5.0.9", "uuid": "u1"},
                                       {"name": "10.5.0.11", "address": "10.5.0.11", "uuid": "u3"}]
    assert inventory.pending({}) == [] and inventory.pending(None) == []
