# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading the machine to reclaim and probing its cluster's control planes.

Exactly one address is dialled (``check_address``), with the foreign cluster's talosconfig
(``load_foreign``: only its credentials are used, its endpoints and nodes are ignored). The
inspection of a configured machine reads its identity, hostname, role, the foreign cluster's name
and ID, disks, user volumes (encrypted ones marked) and, for a control plane, the etcd members and
their health: the dialled member by its own etcd status, the others by whether their peer port
answers. For a worker the cluster's health is whether its control planes' etcd peer ports answer.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import asyncio
import os
import socket

try:
    import yaml
    HAS_YAML = True
except ImportError:  # pragma: no cover - reported by the module
    HAS_YAML = False

from ansible_collections.maesh.ichor.plugins.module_utils.reclaim.errors import ReclaimError
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res
from ansible_collections.maesh.ichor.plugins.module_utils.talos import talosconfig as tc

ETCD_PEER_PORT = 2380
PROBE_TIMEOUT = 2.0

# Volumes Talos owns: never "user volumes", whatever their state after the reset.
SYSTEM_VOLUMES = frozenset(["META", "STATE", "EPHEMERAL", "EFI", "BIOS", "BOOT", "IMAGECACHE"])
USER_VOLUME_TYPES = frozenset(["partition", "disk", ""])


def check_address(node):
    """Exactly one address (``host`` or ``host:port``); returns it as given, stripped."""
    text = str(node or "").strip()
    if not text:
        raise ReclaimError("node is required: the one machine to reclaim; nothing was sent")
    if any(ch in text for ch in ", \t\n;") or "/" in text:
        raise ReclaimError("node %r is not one address: reclaim dials exactly one machine "
                           "(host or host:port, no list or range); nothing was sent" % text)
    try:
        tc.split_endpoint(text)
    except errors.TalosConfigError as exc:
        raise ReclaimError("%s; nothing was sent" % exc.message)
    return text


def load_foreign(path=None, content=None, context=None):
    """The foreign cluster's context. A file with several contexts needs the one to use named.

    Only the credentials are used: the endpoints and nodes of the file are ignored by the
    caller, which dials the one address of the request.
    """
    if content is None:
        if not path:
            raise ReclaimError("no talosconfig for the machine's own cluster: give foreign_talosconfig (a path), "
                               "foreign_talosconfig_content, or set TALOSCONFIG; nothing was sent")
        try:
            with open(os.path.expanduser(path), "r") as handle:
                content = handle.read()
        except (IOError, OSError) as exc:
            raise ReclaimError("cannot read the foreign talosconfig %s: %s; nothing was sent"
                               % (path, exc.strerror or type(exc).__name__))
        source = "the foreign talosconfig %s" % path
    else:
        source = "the foreign talosconfig content"
    if not context and HAS_YAML:
        try:
            data = yaml.safe_load(content)
        except yaml.YAMLError:
            data = None
        contexts = data.get("contexts") if isinstance(data, dict) else None
        if isinstance(contexts, dict) and len(contexts) > 1:
            raise ReclaimError("%s holds several contexts (%s); name the one to use with foreign_context; "
                               "nothing was sent" % (source, ", ".join(sorted(str(k) for k in contexts))))
    try:
        return tc.parse(content, context=context, source=source)
    except errors.TalosError as exc:
        raise ReclaimError("%s; nothing was sent" % exc.message)


def tcp_answers(host, port, timeout=PROBE_TIMEOUT):
    """Whether something accepts a TCP connection (an etcd member's peer port)."""
    try:
        sock = socket.create_connection((host, int(port)), timeout=timeout)
    except (OSError, ValueError):
        return False
    sock.close()
    return True


def _peer(url):
    """``https://10.0.0.1:2380`` -> ("10.0.0.1", 2380); None when it cannot be read."""
    rest = str(url).split("://", 1)[-1].split("/", 1)[0]
    try:
        host, port = tc.split_endpoint(rest)
    except errors.TalosConfigError:
        return None
    if ":" not in rest.rsplit("]", 1)[-1]:
        port = ETCD_PEER_PORT
    return host, port


def spec_of(item):
    """A COSI resource's spec (an empty dict for a missing resource)."""
    return (item or {}).get("spec") or {}


def user_volumes(items):
    """VolumeStatus resources -> [{id, type, location, parent, size, encrypted, mount}]; user ones only."""
    out = []
    for item in items:
        spec = spec_of(item)
        vid = item["id"]
        vtype = str(spec.get("type") or "")
        if vid in SYSTEM_VOLUMES or vtype not in USER_VOLUME_TYPES:
            continue
        provider = spec.get("encryptionProvider")  # absent on real Talos for unencrypted volumes
        encrypted = bool(provider) and str(provider).lower() not in ("none", "encryption_provider_none", "0")
        out.append({
            "id": vid,
            "type": vtype or "partition",
            "location": spec.get("location", ""),
            "parent": spec.get("parentLocation", ""),
            "size": spec.get("prettySize") or spec.get("size", ""),
            "mount": (spec.get("mountSpec") or {}).get("targetPath", ""),
            "encrypted": encrypted,
            "encryption_provider": str(provider) if encrypted else "",
        })
    return out


def _disks(items, system_disk):
    out = []
    for item in items:
        spec = spec_of(item)
        dev = spec.get("dev_path") or "/dev/" + item["id"]
        out.append({"id": item["id"], "dev_path": dev, "size": spec.get("pretty_size") or spec.get("size", ""),
                    "model": spec.get("model", ""), "serial": spec.get("serial", ""),
                    "system_disk": dev == system_disk})
    return out


async def _safe(coro, default=None):
    try:
        return await coro
    except errors.TalosError:
        return default


async def inspect_configured(client, node, probe=tcp_answers):
    """Read the machine at ``node`` over the authenticated API of a ``dial_only`` client (what is read: above)."""
    from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine  # grpclib-dependent

    facts = await machine.machine_facts(client)
    disks, volumes, sysdisk = await asyncio.gather(
        _safe(machine.list_resources(client, res.DISKS), []),
        _safe(machine.list_resources(client, res.VOLUME_STATUSES), []),
        _safe(machine.get_resource(client, res.SYSTEM_DISK)))
    insp = {
        "address": node,
        "mode": "configured",
        "uuid": facts["uuid"],
        "hostname": facts["hostname"],
        "role": facts["role"],
        "version": facts["version"],
        "stage": facts["stage"],
        "cluster": dict(facts["cluster"]),
        "members": facts["members"],
        "disks": _disks(disks, spec_of(sysdisk).get("devPath")),
        "volumes": user_volumes(volumes),
        "etcd": None,
    }
    etcd = await _etcd(client, probe)
    if etcd is not None and not insp["role"]:
        insp["role"] = "controlplane"
    if insp["role"] == "controlplane":
        insp["etcd"] = etcd or {"running": False, "members": [], "error": "etcd is not answering on this node"}
    else:
        insp["role"] = insp["role"] or "worker"
        insp["control_planes"] = probe_control_planes(facts["members"], probe)
    return insp


async def _etcd(client, probe):
    """The etcd view of a control plane, or None when the machine is not one."""
    from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as talos_client
    members_req = talos_client.request_type("EtcdMemberList")(query_local=False)
    try:
        reply = await client.ainvoke("EtcdMemberList", members_req)
        members = client.first(reply).members
    except errors.TalosCallError as exc:
        if exc.code == "UNIMPLEMENTED":
            return None
        return {"running": False, "members": [], "error": exc.message}
    except errors.TalosError as exc:
        return {"running": False, "members": [], "error": exc.message}
    own_id = None
    try:
        status = client.first(await client.ainvoke("EtcdStatus", None)).member_status
        own_id = status.member_id
        own_error = "; ".join(status.errors) if list(status.errors) else ""
    except errors.TalosError as exc:
        own_error = exc.message
    out = []
    for member in members:
        peer = _peer(member.peer_urls[0]) if member.peer_urls else None
        if own_id is not None and member.id == own_id:
            healthy, how = not own_error, "its own etcd status" + (": " + own_error if own_error else "")
            this = True
        else:
            healthy = bool(peer) and probe(peer[0], peer[1])
            how = "peer port %s" % ("answers" if healthy else "does not answer")
            this = False
        out.append({"id": "%x" % member.id, "hostname": member.hostname, "peer": "%s:%s" % peer if peer else "",
                    "this_node": this, "healthy": healthy, "checked_by": how})
    return {"running": own_id is not None, "members": out, "error": own_error if own_id is None else ""}


def probe_control_planes(members, probe=tcp_answers):
    """A worker's view of its cluster: each control plane member and whether its etcd peer port answers."""
    out = []
    for member in members:
        if member.get("machine_type") not in ("controlplane", "init"):
            continue
        addresses = member.get("addresses") or []
        healthy = any(probe(a, ETCD_PEER_PORT) for a in addresses[:1])
        out.append({"hostname": member.get("hostname", ""), "address": addresses[0] if addresses else "",
                    "healthy": healthy, "checked_by": "etcd peer port %s" % ("answers" if healthy
                                                                             else "does not answer")})
    return out


async def maintenance_identity(client):
    """(UUID, stage) of a machine answering in maintenance mode (an insecure client)."""
    from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine

    sysinfo, status = await asyncio.gather(machine.get_resource(client, res.SYSTEM_INFORMATION),
                                           _safe(machine.get_resource(client, res.MACHINE_STATUS)))
    return spec_of(sysinfo).get("uuid", ""), spec_of(status).get("stage", "")
