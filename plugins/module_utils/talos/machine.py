# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a Talos machine is, read over its API: version, identity, role, stage, cluster; and applying a
machine config to it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as talos_client
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res


# every read to its end, then the first failure raised (client.gather); the name the readers of this module use
gather = talos_client.gather


async def get_resource(client, ref, node=None, resource_id=None):
    """One COSI resource as a dict, or None when the machine has no such resource."""
    request = talos_client.resource_request(ref.type, ref.namespace, resource_id or ref.singleton)
    try:
        reply = await client.ainvoke("Get", request, node=node)
    except errors.TalosCallError as exc:
        if exc.code == "NOT_FOUND":
            return None
        raise
    return talos_client.resource_dict(reply.resource, ref.type)


async def list_resources(client, ref, node=None):
    """Every resource of a type, as dicts sorted by id."""
    replies = await client.ainvoke("List", talos_client.resource_request(ref.type, ref.namespace), node=node)
    items = [talos_client.resource_dict(r.resource, ref.type) for r in replies if r.HasField("resource")]
    return sorted(items, key=lambda item: item["id"])


def _file_entry(info):
    return {"name": info.name, "relative_name": info.relative_name, "is_dir": info.is_dir, "size": info.size,
            "mode": info.mode, "link": info.link, "error": info.error}


async def list_files(client, root, node=None):
    """A directory listing as ``talosctl ls`` asks for it (MachineService/List, not recursing): the root first
    (relative name "."), then its entries; an entry the machine could not read carries ``error``."""
    replies = await client.ainvoke("FileList", talos_client.request_type("FileList")(root=root), node=node)
    entries = []
    for info in replies:
        if info.HasField("metadata") and info.metadata.error:
            raise errors.call_error(node or "node", talos_client.status_name(info.metadata.status.code),
                                    info.metadata.status.message or info.metadata.error, call="List")
        entries.append(_file_entry(info))
    return entries


async def etcd_snapshot(client, node):
    """The chunks of a snapshot of ``node``'s local etcd member (MachineService/EtcdSnapshot, as ``talosctl etcd
    snapshot`` takes it); a control plane's call."""
    replies = await client.ainvoke("EtcdSnapshot", talos_client.request_type("EtcdSnapshot")(), node=node)
    return [reply.bytes for reply in replies]


CNI_DIR = "/etc/cni/net.d"
# the files the container runtime's CNI loader (libcni) reads as network configs
_CNI_EXTENSIONS = (".conf", ".conflist", ".json")


async def cni_configs(client, node=None):
    """The CNI configs present under /etc/cni/net.d (file names, sorted); [] when the directory does not exist."""
    try:
        entries = await list_files(client, CNI_DIR, node)
    except errors.TalosCallError as exc:
        if exc.code == "UNKNOWN" and "no such file or directory" in (getattr(exc, "said", "") or str(exc)):
            return []
        raise
    return sorted(e["relative_name"] for e in entries
                  if e["relative_name"] not in ("", ".") and not e["is_dir"] and not e["error"]
                  and "/" not in e["relative_name"] and e["relative_name"].endswith(_CNI_EXTENSIONS))


async def version(client, node=None):
    reply = await client.ainvoke("Version", None, node=node)
    return talos_client.version_info(talos_client.TalosClient.first(reply, node))


def _spec(item, key, default=None):
    if not item or not isinstance(item.get("spec"), dict):
        return default
    return item["spec"].get(key, default)


def _text(item, key):
    """A text field of a resource's spec ("" when it is missing or not text: the machine's YAML decides the type)."""
    value = _spec(item, key)
    return value if isinstance(value, str) else ""


async def _config(client, node):
    """(the live machine config's Talos-side facts or None, why they are missing or "", its text or None)."""
    try:
        item = await get_resource(client, res.MACHINE_CONFIG, node)
    except errors.TalosCallError as exc:
        if exc.code != "PERMISSION_DENIED":
            raise
        return None, "the machine config is readable with the os:admin role only; this talosconfig's role cannot", None
    if item is None or not isinstance(item.get("spec"), str):
        return None, "the machine has no config", None
    # the config engine is imported only where a config is read: the rollout's per-machine step never reads one
    from ansible_collections.maesh.ichor.plugins.module_utils.config import talos_side
    from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
    try:
        return talos_side.facts(item["spec"]), "", item["spec"]
    except ConfigError as exc:
        return None, "its config cannot be read: %s" % exc, None


async def running(client, node=None):
    """{version, hostname} of the machine: what the rollout's Talos step needs of it, in two calls."""
    ver, host = await gather(version(client, node), get_resource(client, res.HOSTNAME_STATUS, node))
    return {"version": ver["tag"], "hostname": _text(host, "hostname")}


async def machine_facts(client, node=None):
    """The facts ``talos_facts`` reports for one machine, read concurrently."""
    facts, unused_text = await machine_read(client, node)
    return facts


async def machine_read(client, node=None):
    """(machine_facts, the live config's text or None): the text holds the cluster's secrets, so it is never part
    of the facts; adopt's inspection hands it to the config engine."""
    ver, sysinfo, host, status, identity, info, members, config, cni_files = await gather(
        version(client, node),
        get_resource(client, res.SYSTEM_INFORMATION, node),
        get_resource(client, res.HOSTNAME_STATUS, node),
        get_resource(client, res.MACHINE_STATUS, node),
        get_resource(client, res.IDENTITY, node),
        get_resource(client, res.CLUSTER_INFO, node),
        list_resources(client, res.MEMBERS, node),
        _config(client, node),
        cni_configs(client, node),
    )
    node_id = _text(identity, "nodeId")
    member_list = []
    role = None
    for item in members:
        addresses = _spec(item, "addresses")
        member = {
            "id": item["id"],
            "hostname": _text(item, "hostname"),
            "addresses": [a for a in addresses if isinstance(a, str)] if isinstance(addresses, list) else [],
            "machine_type": _text(item, "machineType"),
        }
        member_list.append(member)
        if node_id and item["id"] == node_id:
            role = member["machine_type"]
    if role == "init":  # the legacy first control plane is a control plane like the others
        role = "controlplane"
    machine_status = _spec(status, "status")
    return {
        "node": node,
        "version": ver["tag"],
        "uuid": _text(sysinfo, "uuid"),
        "hostname": _text(host, "hostname"),
        "role": role or "",
        "stage": _text(status, "stage"),
        "ready": isinstance(machine_status, dict) and machine_status.get("ready") is True,
        "node_id": node_id,
        "cluster": {"name": _text(info, "clusterName"), "id": _text(info, "clusterId")},
        "members": member_list,
        "config": config[0],
        "config_unread": config[1],
        "cni_configs": cni_files,
    }, config[2]


def plan_line(facts, where):
    """A machine's plan line, from its facts."""
    return "%s (%s): Talos %s, %s, %s, cluster %s (%d members)" % (
        facts["hostname"] or "?", where, facts["version"], facts["role"] or "unknown role",
        facts["stage"] or "unknown stage", facts["cluster"]["name"] or "?", len(facts["members"]))


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


def facts_for(client, nodes):
    """machine_facts for several nodes at once: {node: NodeResult}."""
    return client.fan_out(lambda n: machine_facts(client, n), nodes)


# -- applying a machine config ---------------------------------------------------------------


def _apply_request(text, mode_name, dry_run=False):
    cls = talos_client.request_type("ApplyConfiguration")
    return cls(data=text.encode("utf-8"), mode=getattr(cls, mode_name), dry_run=dry_run)


def apply_needs_reboot(client, node, text):
    """Talos's answer to a dry run in AUTO mode: does this config need a reboot? (Nothing is applied.)"""
    reply = client.call("ApplyConfiguration", _apply_request(text, "AUTO", dry_run=True), node=node)
    return client.first(reply, node).mode == talos_client.request_type("ApplyConfiguration").REBOOT


def apply_config(client, node, text, reboot=False):
    """Apply a whole config: without a reboot (Talos refuses if the change needs one), or in AUTO mode, which
    reboots when the change needs it (and is what a machine in maintenance mode takes)."""
    client.call("ApplyConfiguration", _apply_request(text, "AUTO" if reboot else "NO_REBOOT"), node=node)
