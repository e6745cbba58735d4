# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What ``talos_facts`` reports of a machine: its version, identity, role, stage, cluster, members, CNI configs
and the Talos-side facts of its machine config (read by the config engine; the config's text, which holds the
cluster's secrets, never leaves as a fact)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.config import talos_side
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, machine
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res


async def _config(client, node):
    """(the live machine config's Talos-side facts or None, why they are missing or "", its text or None)."""
    try:
        item = await machine.get_resource(client, res.MACHINE_CONFIG, node)
    except errors.TalosCallError as exc:
        if exc.code != "PERMISSION_DENIED":
            raise
        return None, "the machine config is readable with the os:admin role only; this talosconfig's role cannot", None
    if item is None or not isinstance(item.get("spec"), str):
        return None, "the machine has no config", None
    try:
        return talos_side.facts(item["spec"]), "", item["spec"]
    except ConfigError as exc:
        return None, "its config cannot be read: %s" % exc, None


async def machine_facts(client, node=None, with_members=True):
    """The facts ``talos_facts`` reports for one machine, read concurrently."""
    facts, unused_text = await machine_read(client, node, with_members)
    return facts


def member_entries(items):
    """The discovery members (``Members.cluster.talos.dev`` resources) as the facts report them."""
    out = []
    for item in items:
        addresses = res.spec_of(item).get("addresses")
        out.append({
            "id": item["id"],
            "hostname": res.spec_text(item, "hostname"),
            "addresses": [a for a in addresses if isinstance(a, str)] if isinstance(addresses, list) else [],
            "machine_type": res.spec_text(item, "machineType"),
        })
    return out


async def _members(client, node, with_members):
    return await machine.list_resources(client, res.MEMBERS, node) if with_members else None


async def machine_read(client, node=None, with_members=True):
    """(machine_facts, the live config's text or None): the text holds the cluster's secrets, so it is never part
    of the facts; adopt's inspection hands it to the config engine.

    ``with_members``: list the discovery membership too (every machine sees the whole of it, so a read of every
    machine asks one of them: a read of N machines listing it on each would parse N x N members); else
    ``members`` is None.
    """
    ver, sysinfo, host, status, identity, info, kind, members, config, cni_files = await machine.gather(
        machine.version(client, node),
        machine.get_resource(client, res.SYSTEM_INFORMATION, node),
        machine.get_resource(client, res.HOSTNAME_STATUS, node),
        machine.get_resource(client, res.MACHINE_STATUS, node),
        machine.get_resource(client, res.IDENTITY, node),
        machine.get_resource(client, res.CLUSTER_INFO, node),
        machine.get_resource(client, res.MACHINE_TYPE, node),
        _members(client, node, with_members),
        _config(client, node),
        machine.cni_configs(client, node),
    )
    machine_status = res.spec_of(status).get("status")
    return {
        "node": node,
        "version": ver["tag"],
        "uuid": res.spec_text(sysinfo, "uuid"),
        "hostname": res.spec_text(host, "hostname"),
        "role": res.machine_role(kind) or "",
        "stage": res.spec_text(status, "stage"),
        "ready": isinstance(machine_status, dict) and machine_status.get("ready") is True,
        "node_id": res.spec_text(identity, "nodeId"),
        "cluster": {"name": res.spec_text(info, "clusterName"), "id": res.spec_text(info, "clusterId")},
        "members": None if members is None else member_entries(members),
        "config": config[0],
        "config_unread": config[1],
        "cni_configs": cni_files,
    }, config[2]


def plan_line(facts, where):
    """A machine's plan line, from its facts."""
    line = "%s (%s): Talos %s, %s, %s, cluster %s" % (
        facts["hostname"] or "?", where, facts["version"], facts["role"] or "unknown role",
        facts["stage"] or "unknown stage", facts["cluster"]["name"] or "?")
    members = facts.get("members")  # a read of every machine lists the membership once, not per machine
    return line if members is None else "%s (%d members)" % (line, len(members))


def facts_result(client, node=None):
    """The ``talos_facts`` module's result: the facts as ``ansible_facts.talos`` and one plan line.

    A TalosError carries the (empty) plan as its ``result``.
    """
    try:
        facts = client.run(machine_facts(client, node))
    except errors.TalosError as exc:
        exc.result = dict(plan=[])
        raise
    plan = [plan_line(facts, node or client.endpoints[0][0])]
    return dict(changed=False, ansible_facts={"talos": facts}, plan=plan)
