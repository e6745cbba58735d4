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
The control planes to probe are the foreign machine's to list: they are probed concurrently and at
most ``PROBE_LIMIT`` of them (``probe_all``); a longer list is refused unless ``force``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import socket

from ansible_collections.maesh.ichor.plugins.module_utils.common import fanout, untrusted
from ansible_collections.maesh.ichor.plugins.module_utils.machine import facts as machine_facts
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim.errors import ReclaimError
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as talos_client
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, machine
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res
from ansible_collections.maesh.ichor.plugins.module_utils.talos import talosconfig as tc

ETCD_PEER_PORT = 2380
PROBE_TIMEOUT = 2.0
# The most control planes one inspection probes. The list comes from the foreign machine, so without a
# bound it chooses how many addresses we connect to. etcd advises at most 7 members; 9 leaves room for
# a member being replaced and a stale discovery entry. A longer list is refused unless force, which
# probes the first PROBE_LIMIT only: no input makes a reclaim probe more.
PROBE_LIMIT = 9
NOT_PROBED = "not probed (beyond the first %d)" % PROBE_LIMIT

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
    caller, which dials the one address of the request. The file or content is read once, through the
    talosconfig's guard (at most its MAX_SIZE bytes read, UTF-8, YAML of bounded depth), before any look at it.
    """
    if content is None:
        if not path:
            raise ReclaimError("no talosconfig for the machine's own cluster: give foreign_talosconfig (a path), "
                               "foreign_talosconfig_content, or set TALOSCONFIG; nothing was sent")
        try:
            content = untrusted.read_file(path, tc.MAX_SIZE)
        except (IOError, OSError) as exc:
            raise ReclaimError("cannot read the foreign talosconfig %s: %s; nothing was sent"
                               % (path, exc.strerror or type(exc).__name__))
        source = "the foreign talosconfig %s" % path
    else:
        source = "the foreign talosconfig content"
    try:
        data = tc.read(content, source=source)
        contexts = data.get("contexts") if isinstance(data, dict) else None
        if not context and isinstance(contexts, dict) and len(contexts) > 1:
            raise ReclaimError("%s holds several contexts (%s); name the one to use with foreign_context; "
                               "nothing was sent" % (source, tc.context_names(contexts)))
        return tc.select(data, context=context, source=source)
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


def probe_all(targets, probe=tcp_answers):
    """Probe (host, port) targets all at once: the answers in order, in about one probe timeout in all."""
    targets = list(targets)
    if not targets:
        return []
    # all at once: check_count keeps them to PROBE_LIMIT
    return [answer.result() for answer in fanout.each(lambda target: bool(probe(target[0], target[1])), targets,
                                                      limit=len(targets))]


def check_count(node, count, what, force):
    """Refuse, unless ``force``, a machine that lists more control planes than a reclaim probes."""
    if count > PROBE_LIMIT and not force:
        raise ReclaimError("%s lists %d control planes (%s), more than the %d a reclaim probes (a real cluster has a "
                           "handful); pass force to probe the first %d and count the others as not answering; "
                           "nothing was probed or sent" % (node, count, what, PROBE_LIMIT, PROBE_LIMIT))


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


def _size(spec, pretty, raw):
    """A size as the machine states it: its pretty form, else the number of bytes (text or a number), else ""."""
    if spec.get(pretty) and isinstance(spec[pretty], str):
        return spec[pretty]
    value = spec.get(raw)
    return value if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)) else ""


def _provider(value):
    """(encrypted, the provider's name) of a volume's encryptionProvider (absent on real Talos when unencrypted);
    a value of another shape counts as encrypted, so that the plan warns rather than stays silent."""
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        name = str(value)
        encrypted = bool(value) and name.lower() not in ("none", "encryption_provider_none", "0")
        return encrypted, name if encrypted else ""
    return bool(value), "(unreadable)" if value else ""


def user_volumes(items):
    """VolumeStatus resources -> [{id, type, location, parent, size, encrypted, mount}]; user ones only."""
    out = []
    for item in items:
        spec = res.spec_of(item)
        vid = item["id"]
        vtype = spec.get("type") or ""
        if vid in SYSTEM_VOLUMES or not isinstance(vtype, str) or vtype not in USER_VOLUME_TYPES:
            continue
        encrypted, provider = _provider(spec.get("encryptionProvider"))
        out.append({
            "id": vid,
            "type": vtype or "partition",
            "location": res.spec_text(item, "location"),
            "parent": res.spec_text(item, "parentLocation"),
            "size": _size(spec, "prettySize", "size"),
            "mount": res.spec_text({"spec": spec.get("mountSpec")}, "targetPath"),
            "encrypted": encrypted,
            "encryption_provider": provider,
        })
    return out


def _disks(items, system_disk):
    out = []
    for item in items:
        spec = res.spec_of(item)
        dev = res.spec_text(item, "dev_path") or "/dev/" + item["id"]
        out.append({"id": item["id"], "dev_path": dev, "size": _size(spec, "pretty_size", "size"),
                    "model": res.spec_text(item, "model"), "serial": res.spec_text(item, "serial"),
                    "system_disk": dev == system_disk})
    return out


async def inspect_configured(client, node, probe=tcp_answers, force=False):
    """Read the machine at ``node`` over the authenticated API of a ``dial_only`` client (what is read: above).

    ``force`` lets a machine that lists more than ``PROBE_LIMIT`` control planes be inspected (the first
    ``PROBE_LIMIT`` probed); without it that is a ReclaimError, raised before any probe.
    """
    facts = await machine_facts.machine_facts(client)
    disks, volumes, sysdisk = await machine.gather(
        machine.safe(machine.list_resources(client, res.DISKS), []),
        machine.safe(machine.list_resources(client, res.VOLUME_STATUSES), []),
        machine.safe(machine.get_resource(client, res.SYSTEM_DISK)))
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
        "disks": _disks(disks, res.spec_text(sysdisk, "devPath")),
        "volumes": user_volumes(volumes),
        "etcd": None,
    }
    etcd = await _etcd(client, node, probe, force)
    if etcd is not None and not insp["role"]:
        insp["role"] = "controlplane"
    if insp["role"] == "controlplane":
        insp["etcd"] = etcd or {"running": False, "members": [], "error": "etcd is not answering on this node"}
    else:
        insp["role"] = insp["role"] or "worker"
        insp["control_planes"] = probe_control_planes(facts["members"], probe, force, node)
    return insp


async def _etcd(client, node, probe, force):
    """The etcd view of a control plane, or None when the machine is not one."""
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
    check_count(node, len(members), "etcd members", force)
    own_id = None
    try:
        status = client.first(await client.ainvoke("EtcdStatus", None)).member_status
        own_id = status.member_id
        own_error = "; ".join(status.errors) if list(status.errors) else ""
    except errors.TalosError as exc:
        own_error = exc.message
    peers = [_peer(member.peer_urls[0]) if member.peer_urls else None for member in members]
    others = [i for i, member in enumerate(members) if peers[i] and not (own_id is not None and member.id == own_id)]
    probed = others[:PROBE_LIMIT]
    answers = dict(zip(probed, probe_all([peers[i] for i in probed], probe)))
    out = []
    for i, member in enumerate(members):
        peer = peers[i]
        if own_id is not None and member.id == own_id:
            healthy, how = not own_error, "its own etcd status" + (": " + own_error if own_error else "")
            this = True
        elif peer and i not in answers:
            healthy, how, this = False, NOT_PROBED, False
        else:
            healthy = answers.get(i, False)
            how = "peer port %s" % ("answers" if healthy else "does not answer")
            this = False
        out.append({"id": "%x" % member.id, "hostname": member.hostname, "peer": "%s:%s" % peer if peer else "",
                    "this_node": this, "healthy": healthy, "checked_by": how})
    return {"running": own_id is not None, "members": out, "error": own_error if own_id is None else ""}


def probe_control_planes(members, probe=tcp_answers, force=False, node="the machine"):
    """A worker's view of its cluster: each control plane member and whether its etcd peer port answers
    (its first address; the first ``PROBE_LIMIT`` with one are probed, all at once)."""
    cps = [m for m in members if m.get("machine_type") in ("controlplane", "init")]
    check_count(node, len(cps), "discovery members", force)
    firsts = [(m.get("addresses") or [""])[0] for m in cps]
    probed = [i for i, address in enumerate(firsts) if address][:PROBE_LIMIT]
    answers = dict(zip(probed, probe_all([(firsts[i], ETCD_PEER_PORT) for i in probed], probe)))
    out = []
    for i, member in enumerate(cps):
        healthy = answers.get(i, False)
        if firsts[i] and i not in answers:
            how = NOT_PROBED
        else:
            how = "etcd peer port %s" % ("answers" if healthy else "does not answer")
        out.append({"hostname": member.get("hostname", ""), "address": firsts[i], "healthy": healthy,
                    "checked_by": how})
    return out
