# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One Talos machine over its API: COSI resources, files, the CNI configs, its version, its identity in
maintenance mode, an etcd snapshot's chunks, and applying a machine config to it."""

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


async def node_name(client, node=None):
    """The name of the machine's Kubernetes Node as Talos reports it (its Nodename resource: the hostname, or its
    FQDN); "" when the machine reports none (not configured, or it registers no Node). Never the inventory's label."""
    return res.spec_text(await get_resource(client, res.NODENAME, node), "nodename")


async def running(client, node=None):
    """{version, hostname, node_name} of the machine: what the rollout's Talos step needs of it, in three calls."""
    ver, host, name = await gather(version(client, node), get_resource(client, res.HOSTNAME_STATUS, node),
                                   node_name(client, node))
    return {"version": ver["tag"], "hostname": res.spec_text(host, "hostname"), "node_name": name}


async def installer_reads(client, node=None):
    """(its machine config's text, its ExtensionStatuses in load order): what the Talos step chooses the machine's
    installer from (rollout.installer)."""
    config, items = await gather(get_resource(client, res.MACHINE_CONFIG, node),
                                 list_resources(client, res.EXTENSION_STATUSES, node))
    return (config["spec"] if config else ""), in_load_order(items)


def in_load_order(items):
    """ExtensionStatuses by their numeric ids ("2" before "10"), as Talos loaded them."""
    return sorted(items, key=lambda item: (len(item["id"]), item["id"]))


async def safe(read, default=None):
    """A read whose failure is not the caller's concern: its result, or ``default`` when the machine refuses it."""
    try:
        return await read
    except errors.TalosError:
        return default


async def maintenance_identity(client):
    """(UUID, stage) of a machine answering in maintenance mode (an insecure client)."""
    sysinfo, status = await gather(get_resource(client, res.SYSTEM_INFORMATION),
                                   safe(get_resource(client, res.MACHINE_STATUS)))
    return res.spec_text(sysinfo, "uuid"), res.spec_text(status, "stage")


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
