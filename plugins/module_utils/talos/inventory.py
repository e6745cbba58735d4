# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A cluster's machines for the ``maesh.ichor.talos`` inventory plugin, from one of three sources:

* ``discovery``: the discovery members as one machine sees them (``talosctl get members``: one List call to one
  endpoint): hostname, addresses, machine type and the ``Talos (vX.Y.Z)`` the member reports;
* ``kubernetes``: the Nodes, when discovery is off (Talos keeps no members then): InternalIP, the control-plane
  role label, the version from the OS image Talos reports (``Talos (vX.Y.Z)``);
* ``talosconfig``: the talosconfig context's ``nodes`` (else the endpoint), each asked for its version, machine
  type and hostname.

And the machines the cluster record holds as pending (the reclaim flow's ``machines`` entries in state
``pending``). No Ansible import here: the plugin turns these rows into hosts and groups.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.maesh.ichor.plugins.module_utils.common import versions
from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res

DISCOVERY, KUBERNETES, TALOSCONFIG = "discovery", "kubernetes", "talosconfig"
SOURCES = (DISCOVERY, KUBERNETES, TALOSCONFIG)
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
_OS_IMAGE = re.compile(r"\bTalos \(([^)]*)\)")


def os_version(text):
    """'Talos (v1.14.1)' -> 'v1.14.1' (None when the text names no Talos version)."""
    match = _OS_IMAGE.search(text or "")
    stated = versions.read(match.group(1)) if match else None
    return match.group(1).strip() if stated and stated.v and stated.patch_written else None


def _first_address(addresses):
    """The first IPv4 address, else the first: what ``ansible_host`` dials."""
    addresses = [a for a in addresses or [] if isinstance(a, str) and a]
    ipv4 = [a for a in addresses if ":" not in a]
    return (ipv4 or addresses or [None])[0]


def from_members(members):
    """Machines from ``Members.cluster.talos.dev`` resources (dicts as machine.list_resources returns them)."""
    out = []
    for item in members:
        spec = item.get("spec") if isinstance(item.get("spec"), dict) else {}
        address = _first_address(spec.get("addresses"))
        hostname = spec.get("hostname") if isinstance(spec.get("hostname"), str) else ""
        out.append({"name": hostname or address or item.get("id"), "address": address,
                    "role": res.role_of(spec.get("machineType")), "version": os_version(spec.get("operatingSystem")),
                    "node_id": item.get("id")})
    return sorted(out, key=lambda m: m["name"] or "")


def from_nodes(nodes):
    """Machines from Kubernetes Node objects (dicts)."""
    out = []
    for node in nodes:
        meta, status = node.get("metadata") or {}, node.get("status") or {}
        internal = [a.get("address") for a in status.get("addresses") or [] if a.get("type") == "InternalIP"]
        labels = meta.get("labels") or {}
        out.append({"name": meta.get("name"), "address": _first_address(internal),
                    "role": "controlplane" if CONTROL_PLANE_LABEL in labels else "worker",
                    "version": os_version((status.get("nodeInfo") or {}).get("osImage"))})
    return sorted(out, key=lambda m: m["name"] or "")


async def _one_machine(client, node):
    ver, kind, host = await machine.gather(machine.version(client, node),
                                           machine.get_resource(client, res.MACHINE_TYPE, node),
                                           machine.get_resource(client, res.HOSTNAME_STATUS, node))
    hostname = ((host or {}).get("spec") or {}).get("hostname") if isinstance((host or {}).get("spec"), dict) else ""
    return {"name": hostname or node, "address": node, "role": res.machine_role(kind), "version": ver["tag"]}


def members(client):
    """The discovery members the endpoint's machine sees ([] when discovery is off)."""
    return from_members(client.run(machine.list_resources(client, res.MEMBERS)))


def from_talos_nodes(client, nodes):
    """Machines from addresses, each asked over the Talos API; (machines, {address: error line})."""
    results = client.fan_out(lambda n: _one_machine(client, n), nodes)
    found, failed = [], {}
    for node in nodes:
        result = results[node]
        if result.error is not None:
            failed[node] = str(result.error)
        else:
            found.append(result.message)
    return sorted(found, key=lambda m: m["name"] or ""), failed


def pending(record_data):
    """The machines the cluster record holds as pending (the reclaim flow's entries): name, address, uuid."""
    out = []
    for entry in (record_data or {}).get("machines") or []:
        if not isinstance(entry, dict) or entry.get("state", "pending") != "pending" or not entry.get("address"):
            continue
        out.append({"name": entry["address"], "address": entry["address"], "uuid": entry.get("uuid")})
    return out
