# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reclaim a machine that another cluster configured (seed 0103, section 2).

One implementation for the playbook and the AWX job template:

- **inspection** over the authenticated Talos API of exactly one address, with the foreign
  cluster's talosconfig (its endpoints and nodes are ignored);
- the **refusals**, each before anything is sent: a machine of the managed cluster, an etcd
  quorum that would break, the last control plane of a reachable cluster (the last two only with
  ``force`` and the cluster name typed as ``confirm_cluster``), a graceful reset that cannot work
  (only with ``force_ungraceful``);
- **the one reset request** (:func:`reset_request`): STATE and EPHEMERAL, reboot, graceful when
  the foreign cluster is healthy and reachable;
- **typed consent**: ``confirm_uuid`` equal to the inspected UUID, exactly;
- the **wait** for maintenance mode with the same UUID, and the pending machine in the managed
  cluster's record;
- the **audit** lines of the seed's Events, with the requesting user and times.

The flow (:func:`run`) talks to the world only through an ``io`` object (:class:`LiveIO` here,
a fake in the unit tests). Nothing here holds or prints credential content: the foreign
talosconfig is parsed into the redacting types of ``talos.talosconfig`` and every error text
passes through ``errors.redact_text``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import asyncio
import getpass
import os
import socket
import time

try:
    import yaml
    HAS_YAML = True
except ImportError:  # pragma: no cover - reported by the module
    HAS_YAML = False

from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res
from ansible_collections.maesh.ichor.plugins.module_utils.talos import talosconfig as tc

DEFAULT_WAIT = 600
WIPED_LABELS = ("STATE", "EPHEMERAL")
REQUEST_TEXT = "STATE and EPHEMERAL, reboot"
ETCD_PEER_PORT = 2380
PROBE_TIMEOUT = 2.0
RECORD_SOURCE = "reclaim"

# Volumes Talos owns: never "user volumes", whatever their state after the reset.
SYSTEM_VOLUMES = frozenset(["META", "STATE", "EPHEMERAL", "EFI", "BIOS", "BOOT", "IMAGECACHE"])
USER_VOLUME_TYPES = frozenset(["partition", "disk", ""])

# The seed's texts (ADR 0103 test results C2, C3, C4, C7; ADR 0128 amendment).
MISMATCH = "the typed UUID does not match the node's UUID; nothing was sent"
CLUSTER_MISMATCH = "the typed cluster name does not match the node's cluster; nothing was sent"


class ReclaimError(Exception):
    """A one-line reason the reclaim stopped; ``sent`` says whether the reset went out."""

    def __init__(self, message, sent=False, hint=None):
        self.sent = sent
        self.hint = hint
        super(ReclaimError, self).__init__(errors.redact_text(message))

    @property
    def message(self):
        return self.args[0]


# --- small helpers ------------------------------------------------------------------------

def utc(at=None):
    """A time as ``2026-11-04T10:00:00Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if at is None else at))


def local_user(environ=None):
    """Who runs this when no AWX user is given: the local login name."""
    environ = os.environ if environ is None else environ
    for key in ("USER", "LOGNAME"):
        if environ.get(key):
            return environ[key]
    try:
        return getpass.getuser()
    except Exception:  # pylint: disable=broad-except
        return "unknown"


def requesting_user(variables, environ=None):
    """The AWX user (``awx_user_name`` / ``tower_user_name``) when run from AWX, else the local user."""
    for key in ("awx_user_name", "tower_user_name"):
        value = (variables or {}).get(key)
        if value:
            return str(value)
    return local_user(environ)


def check_address(address):
    """Exactly one address (``host`` or ``host:port``); returns it as given, stripped."""
    text = str(address or "").strip()
    if not text:
        raise ReclaimError("address is required: the one machine to reclaim; nothing was sent")
    if any(ch in text for ch in ", \t\n;") or "/" in text:
        raise ReclaimError("address %r is not one address: reclaim dials exactly one machine "
                           "(host or host:port, no list or range); nothing was sent" % text)
    try:
        tc.split_endpoint(text)
    except errors.TalosConfigError as exc:
        raise ReclaimError("%s; nothing was sent" % exc.message)
    return text


def host_of(address):
    return tc.split_endpoint(address)[0]


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


# --- the audit ------------------------------------------------------------------------------

class Audit:
    """The seed's Events as lines: ``<time> <Event>: <what>`` (no credential, ever)."""

    def __init__(self, user, address, clock=time.time):
        self.user = user
        self.address = address
        self.clock = clock
        self.lines = []

    def add(self, event, text):
        self.lines.append("%s %s: %s" % (utc(self.clock()), event, errors.redact_text(text)))

    def requested(self):
        self.add("ReclaimRequested", "%s requested the reclaim of %s" % (self.user, self.address))

    def inspected(self, insp):
        self.add("ReclaimInspected", "%s is UUID %s (%s, %s) of cluster %s (ID %s)" % (
            self.address, insp["uuid"], insp.get("hostname") or "?", insp.get("role") or "unknown role",
            _quoted(insp["cluster"]["name"]), insp["cluster"]["id"] or "?"))

    def inspected_maintenance(self, uuid):
        self.add("ReclaimInspected", "%s is UUID %s in maintenance mode (no cluster)" % (self.address, uuid))

    def confirmed(self, uuid):
        self.add("ReclaimConfirmed", "%s confirmed UUID %s" % (self.user, uuid))

    def reset(self, graceful):
        self.add("ReclaimReset", "reset sent to %s (%s), graceful: %s" % (
            self.address, REQUEST_TEXT, "true" if graceful else "false"))

    def completed(self, text):
        self.add("ReclaimCompleted", text)

    def failed(self, text):
        self.add("ReclaimFailed", text)

    def expired(self, wait):
        self.add("ReclaimExpired", "the wait of %ss for %s to return to maintenance mode expired" % (
            _num(wait), self.address))


def _quoted(name):
    return '"%s"' % (name or "?")


def _num(value):
    value = float(value)
    return "%d" % value if value == int(value) else "%g" % value


# --- the reset request ------------------------------------------------------------------------

def reset_request(request_cls, graceful):
    """THE reset request of a reclaim (ADR 0042): STATE and EPHEMERAL wiped, reboot.

    ``request_cls`` is ``machine.ResetRequest`` (``client.request_type("Reset")``). User disks
    and other volumes are never named, so they are not touched.
    """
    request = request_cls(graceful=bool(graceful), reboot=True, mode=request_cls.SYSTEM_DISK)
    for label in WIPED_LABELS:
        request.system_partitions_to_wipe.add(label=label, wipe=True)
    return request


# --- inspection -------------------------------------------------------------------------------

def _spec(item):
    return (item or {}).get("spec") or {}


def _volumes(items):
    """VolumeStatus resources -> [{id, type, location, parent, size, encrypted, mount}]; user ones only."""
    out = []
    for item in items:
        spec = _spec(item)
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
        spec = _spec(item)
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


async def inspect_configured(client, address, probe=tcp_answers):
    """Read the machine at ``address`` over the authenticated API of a ``dial_only`` client.

    Identity, hostname, role, the foreign cluster's name and ID, disks, user volumes (encrypted
    marked) and, for a control plane, the etcd members and their health: the dialled member by
    its own etcd status, the others by whether their peer port answers. For a worker the
    cluster's health is whether its control planes' etcd peer ports answer.
    """
    from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine  # grpclib-dependent

    facts = await machine.machine_facts(client)
    disks, volumes, sysdisk = await asyncio.gather(
        _safe(machine.list_resources(client, res.DISKS), []),
        _safe(machine.list_resources(client, res.VOLUME_STATUSES), []),
        _safe(machine.get_resource(client, res.SYSTEM_DISK)))
    insp = {
        "address": address,
        "mode": "configured",
        "uuid": facts["uuid"],
        "hostname": facts["hostname"],
        "role": facts["role"],
        "version": facts["version"],
        "stage": facts["stage"],
        "cluster": dict(facts["cluster"]),
        "members": facts["members"],
        "disks": _disks(disks, _spec(sysdisk).get("devPath")),
        "volumes": _volumes(volumes),
        "etcd": None,
    }
    etcd = await _etcd(client, probe)
    if etcd is not None and not insp["role"]:
        insp["role"] = "controlplane"
    if insp["role"] == "controlplane":
        insp["etcd"] = etcd or {"running": False, "members": [], "error": "etcd is not answering on this node"}
    else:
        insp["role"] = insp["role"] or "worker"
        insp["control_planes"] = _probe_control_planes(facts["members"], probe)
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


def _probe_control_planes(members, probe):
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
    return _spec(sysinfo).get("uuid", ""), _spec(status).get("stage", "")


# --- the decision ---------------------------------------------------------------------------------

def etcd_health(insp):
    """(members, healthy, healthy others) of a control plane's etcd view."""
    etcd = insp.get("etcd") or {}
    members = etcd.get("members") or []
    healthy = [m for m in members if m["healthy"]]
    others = [m for m in healthy if not m["this_node"]]
    return len(members), len(healthy), len(others)


def cluster_healthy(insp):
    """Whether the foreign cluster is healthy and reachable from the node, so that a graceful
    reset (cordon, drain, leave etcd) can complete."""
    if insp["role"] == "controlplane":
        etcd = insp.get("etcd") or {}
        total, healthy, _others = etcd_health(insp)
        # the only member cannot leave etcd: a graceful reset of it fails
        return bool(etcd.get("running")) and total > 1 and healthy >= total // 2 + 1
    cps = insp.get("control_planes") or []
    return bool(cps) and sum(1 for c in cps if c["healthy"]) >= len(cps) // 2 + 1


def managed_refusal(insp, managed):
    """The refusal for a machine of the managed cluster, or None (never overridable)."""
    uuid = insp["uuid"]
    name = managed.get("name") or "?"
    known = set(managed.get("uuids") or [])
    for entry in managed.get("machines") or []:
        # ADR 0128: a stale pending entry is not an Ichor machine
        if entry.get("uuid") and entry.get("state", "pending") != "pending":
            known.add(entry["uuid"])
    ids = set(i for i in (managed.get("id"), managed.get("record_id")) if i)
    same_cluster = bool(insp["cluster"].get("id")) and insp["cluster"]["id"] in ids
    if uuid in known:
        return "node %s is already an Ichor machine (of cluster %s); nothing was sent" % (uuid, _quoted(name))
    if same_cluster:
        return ("node %s is already an Ichor machine: it carries the CAs of cluster %s (same cluster ID) but is not "
                "registered; add it with adopt's add-machine step (ichor adopt --add-machine) instead of "
                "reclaiming it; nothing was sent" % (uuid, _quoted(name)))
    return None


def refusals(insp, managed, force=False, confirm_cluster=None, force_ungraceful=False):
    """Every refusal that applies, as dicts {text, kind, overridden}; the caller stops on any not overridden.

    kind: ``managed`` (never overridable), ``quorum`` / ``last`` (``force`` with the cluster name typed
    as ``confirm_cluster``), ``graceful`` (``force_ungraceful``), ``busy`` (never).
    """
    out = []
    cluster = insp["cluster"].get("name") or "?"
    text = managed_refusal(insp, managed)
    if text:
        out.append({"kind": "managed", "text": text, "overridden": False})
    if insp.get("stage") in ("resetting", "rebooting", "shutting down", "upgrading", "installing"):
        out.append({"kind": "busy", "overridden": False,
                    "text": "%s is %s; nothing was sent (rerun when it has settled)" % (insp["address"], insp["stage"])})
    forced = bool(force) and confirm_cluster is not None and confirm_cluster == insp["cluster"].get("name")
    etcd = insp.get("etcd") or {}
    if insp["role"] == "controlplane" and etcd.get("running"):
        total, _healthy, others = etcd_health(insp)
        if total <= 1:
            out.append({"kind": "last", "overridden": forced,
                        "text": 'this is the last control plane of cluster "%s"; pass force to override '
                                '(with confirm_cluster set to the cluster name)' % cluster})
        elif others < total // 2 + 1:
            out.append({"kind": "quorum", "overridden": forced,
                        "text": 'cluster "%s" has %d etcd members; removing one loses quorum; pass force to '
                                'override (with confirm_cluster set to the cluster name)' % (cluster, total)})
    if not force_ungraceful and not cluster_healthy(insp):
        if insp["role"] == "controlplane" and etcd.get("running") and etcd_health(insp)[0] <= 1:
            why = "the only etcd member cannot leave etcd"
        elif insp["role"] == "controlplane":
            why = 'cluster "%s" is not healthy or not reachable from the node (etcd)' % cluster
        else:
            why = 'cluster "%s" is not healthy or not reachable from the node (no control plane answers)' % cluster
        out.append({"kind": "graceful", "overridden": False,
                    "text": "%s, so a graceful reset would fail; pass force_ungraceful to reset without "
                            "leaving etcd or draining" % why})
    return out


def blocking(found):
    return [r for r in found if not r["overridden"]]


def confirm_cluster_error(found, force, confirm_cluster, cluster):
    """The refusal text when ``force`` is given for an overridable refusal but the name is not typed right."""
    if not force or not any(r["kind"] in ("quorum", "last") and not r["overridden"] for r in found):
        return None
    if confirm_cluster is None or confirm_cluster == "":
        return ("force needs the name of the cluster that loses the node typed as confirm_cluster "
                "(%s); nothing was sent" % _quoted(cluster))
    return CLUSTER_MISMATCH


def consent(confirm_uuid, uuid):
    """Typed consent: the UUID exactly as inspected. No "yes" replaces it."""
    if confirm_uuid is None or confirm_uuid == "":
        raise ReclaimError("confirm_uuid is required: type the node's UUID (shown by a --check run); nothing was sent")
    if confirm_uuid != uuid:
        raise ReclaimError(MISMATCH)


def plan_lines(insp, found, graceful, managed, wait, check_mode):
    """The human-readable plan: the machine, who loses it, the volumes, the refusals, what is sent."""
    cluster = insp["cluster"]
    lines = ["reclaim %s: %s, UUID %s, %s, Talos %s, stage %s" % (
        insp["address"], insp.get("hostname") or "?", insp["uuid"], insp.get("role") or "unknown role",
        insp.get("version") or "?", insp.get("stage") or "?")]
    lines.append("cluster %s (ID %s) loses this machine" % (_quoted(cluster.get("name")), cluster.get("id") or "?"))
    if insp.get("disks"):
        lines.append("disks: " + ", ".join(
            "%s %s%s" % (d["dev_path"], d["size"], " (system)" if d["system_disk"] else "") for d in insp["disks"]))
    users = insp.get("volumes") or []
    if users:
        lines.append("user volumes left on disk, orphaned (not wiped): " + ", ".join(
            "%s (%s on %s)" % (v["id"], v["location"], v["parent"]) for v in users))
    else:
        lines.append("user volumes left on disk, orphaned (not wiped): none")
    enc = [v for v in users if v["encrypted"]]
    if enc:
        lines.append("encrypted user volumes whose data becomes unreadable (their keys derived from STATE or META are "
                     "gone): " + ", ".join("%s (%s)" % (v["id"], v["location"]) for v in enc))
    etcd = insp.get("etcd")
    if etcd is not None:
        if etcd.get("members"):
            lines.append("etcd: %d members: %s" % (len(etcd["members"]), ", ".join(
                "%s (%s%s, %s)" % (m["hostname"] or m["id"], "this node, " if m["this_node"] else "",
                                   "healthy" if m["healthy"] else "unhealthy", m["checked_by"])
                for m in etcd["members"])))
        else:
            lines.append("etcd: not answering (%s)" % (etcd.get("error") or "unknown"))
    if insp.get("control_planes") is not None:
        cps = insp["control_planes"]
        lines.append("control planes of the cluster: %s" % (", ".join(
            "%s %s (%s)" % (c["hostname"] or "?", c["address"], c["checked_by"]) for c in cps) or "none known"))
    for ref in found:
        lines.append(("refusal overridden: %s" if ref["overridden"] else "refused: %s") % ref["text"])
    stop = blocking(found)
    verb = "would send" if check_mode else "sends"
    if not stop:
        lines.append("%s the reset: %s, graceful: %s" % (verb, REQUEST_TEXT, "true" if graceful else "false"))
        lines.append("then waits up to %ss for %s to answer in maintenance mode with UUID %s and registers it as a "
                     "pending machine of cluster %s" % (_num(wait), insp["address"], insp["uuid"],
                                                        _quoted(managed.get("name"))))
    else:
        lines.append("nothing %s sent" % ("would be" if check_mode else "was"))
    return lines


# --- the managed cluster's record -----------------------------------------------------------------

def pending_entry(uuid, address, at):
    return {"uuid": uuid, "address": address, "state": "pending", "source": RECORD_SOURCE, "at": at}


def add_pending(data, uuid, address, at):
    """Mutate a record's data: the machine as pending (a stale pending entry of the UUID is replaced,
    an identical one kept as it is)."""
    machines = [m for m in (data.get("machines") or []) if isinstance(m, dict)]
    for entry in machines:
        if entry.get("uuid") == uuid and entry.get("state") == "pending" and entry.get("address") == address:
            data["machines"] = machines
            return
    data["machines"] = [m for m in machines if m.get("uuid") != uuid] + [pending_entry(uuid, address, at)]


# --- the wait -----------------------------------------------------------------------------------

def wait_for_maintenance(probe, address, uuid, wait, clock=time.monotonic, sleep=time.sleep, interval=0.5):
    """Poll ``probe()`` -> (uuid, stage) until the address answers in maintenance mode with ``uuid``.

    Returns None on success, else the last probe's text (a one-line reason).
    """
    deadline = clock() + float(wait)
    last = "no probe yet"
    while True:
        try:
            got, stage = probe()
            if got == uuid and stage in ("maintenance", ""):
                return None
            if got == uuid:
                last = "UUID %s answers but in stage %s" % (got, stage or "?")
            else:
                last = "a machine with UUID %s answers there" % (got or "?")
        except errors.TalosError as exc:
            last = exc.message
        if clock() >= deadline:
            return last
        sleep(max(0.0, min(interval, deadline - clock())))


def did_not_return(address, uuid, wait, last):
    """The seed's C7 texts: what happened, and the hint instead of a guess at the new address."""
    hint = ("The machine may have taken a new address from DHCP after the reboot. Find it (its UUID is %s) and add "
            "it to a cluster's discovery addresses (the inventory of the cluster that joins it)." % uuid)
    message = ("the reset was sent but the machine did not come back at %s: waiting for %s to return to maintenance "
               "mode: deadline of %ss exceeded (last probe: %s). %s did not return to maintenance mode with UUID %s. %s"
               % (address, address, _num(wait), last, address, uuid, hint))
    return message, hint


# --- the flow -----------------------------------------------------------------------------------------

class Options:
    """What the request says (the module's options)."""

    def __init__(self, address, confirm_uuid=None, force=False, confirm_cluster=None, force_ungraceful=False,
                 wait=DEFAULT_WAIT, cluster=None, user=None):
        self.address = address
        self.confirm_uuid = confirm_uuid
        self.force = bool(force)
        self.confirm_cluster = confirm_cluster
        self.force_ungraceful = bool(force_ungraceful)
        self.wait = DEFAULT_WAIT if wait is None else wait
        self.cluster = cluster
        self.user = user or local_user()


def run(opts, io, check_mode=False, clock=time.time):
    """The reclaim of one machine. Returns the result dict; raises ReclaimError with ``result`` set.

    ``io`` offers: ``managed()`` -> {name, id, record_id, uuids, machines}; ``inspect()`` -> the
    inspection of a configured machine, or raises errors.TalosError; ``maintenance()`` -> (uuid,
    stage) of the address in maintenance mode or raises; ``managed_identity()`` -> the UUID when the
    address takes the managed cluster's own credential, or raises; ``send_reset(graceful)``;
    ``probe()`` -> (uuid, stage) for the wait; ``register(uuid, address, at)`` -> changed (bool).
    Check mode calls only ``managed``, ``inspect``, ``maintenance`` and ``managed_identity``.
    """
    result = {"changed": False, "plan": [], "audit": [], "inspection": {}, "refusals": [], "reset_sent": False,
              "graceful": None, "registered": None, "hint": ""}
    audit = Audit(opts.user, opts.address, clock=clock)
    result["audit"] = audit.lines

    def stop(message, sent=False, hint=None):
        audit.failed(message)
        exc = ReclaimError(message, sent=sent, hint=hint)
        exc.result = result
        raise exc

    audit.requested()
    try:
        check_address(opts.address)
        if opts.wait is not None and float(opts.wait) < 0:
            raise ReclaimError("wait must be 0 or more seconds; nothing was sent")
        managed = io.managed()
    except ReclaimError as exc:
        stop(exc.message)
    except errors.TalosError as exc:
        stop("cannot read the managed cluster (the one that receives the machine): %s; nothing was sent" % exc.message)
    if opts.cluster and managed.get("name") != opts.cluster:
        stop("the managed cluster's talosconfig reaches cluster %s, not %s; check the inventory; nothing was sent"
             % (_quoted(managed.get("name")), _quoted(opts.cluster)))
    result["cluster"] = managed.get("name")

    insp, first = None, None
    try:
        insp = io.inspect()
    except ReclaimError as exc:
        stop(exc.message)
    except errors.TalosError as exc:
        first = exc
    if insp is None:
        return _maintenance_path(opts, io, audit, result, first, check_mode, stop, managed, clock)

    result["inspection"] = insp
    audit.inspected(insp)
    found = refusals(insp, managed, opts.force, opts.confirm_cluster, opts.force_ungraceful)
    result["refusals"] = [r["text"] for r in found]
    graceful = cluster_healthy(insp) and not opts.force_ungraceful
    result["graceful"] = graceful
    result["plan"] = plan_lines(insp, found, graceful, managed, opts.wait, check_mode)
    if opts.confirm_uuid not in (None, "") and opts.confirm_uuid != insp["uuid"]:
        result["plan"].append("consent: " + MISMATCH)
    elif check_mode and opts.confirm_uuid in (None, "") and not blocking(found):
        result["plan"].append("consent: type the node's UUID as confirm_uuid to send the reset")
    if check_mode:
        result["changed"] = not blocking(found)
        return result
    stops = blocking(found)
    if stops:
        for ref in stops:
            if ref["kind"] == "managed":
                stop(ref["text"])
        named = confirm_cluster_error(found, opts.force, opts.confirm_cluster, insp["cluster"].get("name"))
        if named:
            stop(named)
        stop("; ".join(ref["text"] for ref in stops) + ("" if stops[-1]["text"].endswith("nothing was sent")
                                                        else "; nothing was sent"))
    try:
        consent(opts.confirm_uuid, insp["uuid"])
    except ReclaimError as exc:
        stop(exc.message)
    audit.confirmed(insp["uuid"])

    try:
        io.send_reset(graceful)
    except errors.TalosError as exc:
        stop("the reset of %s was not accepted: %s" % (opts.address, exc.message))
    result["reset_sent"] = True
    result["changed"] = True
    audit.reset(graceful)
    return _wait_and_register(opts, io, audit, result, insp["uuid"], stop, managed, clock)


def _wait_and_register(opts, io, audit, result, uuid, stop, managed, clock):
    last = wait_for_maintenance(io.probe, opts.address, uuid, opts.wait)
    if last is not None:
        message, hint = did_not_return(opts.address, uuid, opts.wait, last)
        result["hint"] = hint
        audit.expired(opts.wait)
        stop(message, sent=True, hint=hint)
    return _register(opts, io, audit, result, uuid, stop, managed, clock, "")


def _register(opts, io, audit, result, uuid, stop, managed, clock, prefix):
    try:
        wrote = io.register(uuid, opts.address, utc(clock()))
    except Exception as exc:  # pylint: disable=broad-except
        stop("%s is in maintenance mode with UUID %s, but recording it in cluster %s's record failed: %s"
             % (opts.address, uuid, _quoted(managed.get("name")), errors.redact_text(str(exc))),
             sent=result["reset_sent"])
    result["changed"] = result["changed"] or bool(wrote)
    result["registered"] = {"cluster": managed.get("name"), "uuid": uuid, "address": opts.address,
                            "state": "pending"}
    audit.completed("%s%s is in maintenance mode with UUID %s; registered as a pending machine of cluster %s"
                    % (prefix, opts.address, uuid, _quoted(managed.get("name"))))
    return result


def _managed_machine(opts, io, result, check_mode, stop, managed):
    """A machine that takes neither the foreign credential nor an insecure call: does it take the managed
    cluster's own? Then it carries that cluster's CAs and is refused (state iii of the seed)."""
    try:
        uuid = io.managed_identity()
    except errors.TalosError:
        return
    if not uuid:
        return
    text = managed_refusal({"uuid": uuid, "cluster": {"id": managed.get("id")}}, managed)
    result["inspection"] = {"address": opts.address, "mode": "configured", "uuid": uuid,
                            "cluster": {"name": managed.get("name"), "id": managed.get("id")}}
    result["refusals"] = [text]
    result["plan"] = ["reclaim %s: UUID %s answers to the managed cluster's own talosconfig" % (opts.address, uuid),
                      "refused: " + text]
    stop(text)


def _maintenance_path(opts, io, audit, result, first, check_mode, stop, managed, clock):
    """The address did not take the foreign credential: is it already in maintenance mode?"""
    try:
        uuid, stage = io.maintenance()
    except errors.TalosError:
        _managed_machine(opts, io, result, check_mode, stop, managed)
        stop("cannot inspect %s with the foreign talosconfig: %s; nothing was sent" % (opts.address, first.message))
    if stage not in ("maintenance", ""):
        stop("cannot inspect %s with the foreign talosconfig: %s; nothing was sent" % (opts.address, first.message))
    result["inspection"] = {"address": opts.address, "mode": "maintenance", "uuid": uuid, "stage": stage}
    audit.inspected_maintenance(uuid)
    # a machine of the managed cluster is never reclaimed, in whatever mode it answers
    text = managed_refusal({"uuid": uuid, "cluster": {}}, managed)
    if text:
        result["refusals"] = [text]
        if check_mode:
            result["plan"] = ["reclaim %s: UUID %s in maintenance mode" % (opts.address, uuid), "refused: " + text]
            return result
        stop(text)
    verb = "would register" if check_mode else "registers"
    result["plan"] = ["reclaim %s: UUID %s is already in maintenance mode; no reset is needed" % (opts.address, uuid),
                      "%s it as a pending machine of cluster %s" % (verb, _quoted(managed.get("name")))]
    if check_mode:
        after = {"machines": list(managed.get("machines") or [])}
        add_pending(after, uuid, opts.address, "")
        result["changed"] = after["machines"] != list(managed.get("machines") or [])
        result["registered"] = {"cluster": managed.get("name"), "uuid": uuid, "address": opts.address,
                                "state": "pending"}
        return result
    try:
        consent(opts.confirm_uuid, uuid)
    except ReclaimError as exc:
        stop(exc.message)
    audit.confirmed(uuid)
    return _register(opts, io, audit, result, uuid, stop, managed, clock, "no reset sent: ")


# --- the live world ---------------------------------------------------------------------------------

class LiveIO:
    """The real adapters: a dial-only foreign client, the managed cluster's Talos and Kubernetes APIs.

    ``foreign`` and ``managed_clients`` are callables, so that a bad credential is a failure of the
    run (with its audit lines), not of the module's setup: ``foreign()`` -> the foreign Context,
    ``managed_clients()`` -> (managed Context, TalosClient, KubeClient).
    """

    def __init__(self, address, foreign, managed_clients, timeout=30.0, probe_timeout=5.0):
        # managed_clients() -> (the managed cluster's Context, its TalosClient, its KubeClient)
        self.address = address
        self.foreign = foreign
        self.managed_clients = managed_clients
        self.timeout = timeout
        self.probe_timeout = probe_timeout
        self._client = None
        self._managed = None

    def _foreign(self):
        from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as talos_client
        if self._client is None:
            self._client = talos_client.TalosClient(context=self.foreign(), dial_only=self.address,
                                                    timeout=self.timeout)
        return self._client

    def close(self):
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._managed is not None:
            _context, talos, kube = self._managed
            talos.close()
            kube.close()
            self._managed = None

    def _clients(self):
        if self._managed is None:
            self._managed = self.managed_clients()
        return self._managed

    def managed(self):
        from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine
        from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
        from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeError
        try:
            _context, client, kube = self._clients()
        except KubeError as exc:
            raise ReclaimError("cannot use the managed cluster's kubeconfig: %s; nothing was sent" % exc)
        facts = client.run(machine.machine_facts(client))
        addresses = [m["addresses"][0] for m in facts["members"] if m.get("addresses")]
        uuids = set([facts["uuid"]]) if facts["uuid"] else set()
        found = client.fan_out(lambda n: machine.get_resource(client, res.SYSTEM_INFORMATION, n), addresses)
        for item in found.values():
            if item.error is None and item.message:
                uuid = _spec(item.message).get("uuid")
                if uuid:
                    uuids.add(uuid)
        try:
            record = cluster_record.read(kube)
        except (KubeError, cluster_record.RecordError) as exc:
            raise ReclaimError("cannot read the managed cluster's record: %s; nothing was sent" % exc)
        record_cluster = record.get("cluster") or {}
        return {"name": facts["cluster"]["name"], "id": facts["cluster"]["id"],
                "record_id": record_cluster.get("id") if isinstance(record_cluster, dict) else None,
                "uuids": sorted(uuids), "machines": list(record.get("machines") or [])}

    def inspect(self):
        client = self._foreign()
        return client.run(inspect_configured(client, self.address))

    def maintenance(self):
        from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as talos_client
        with talos_client.TalosClient(dial_only=self.address, maintenance=True, timeout=self.probe_timeout) as client:
            return client.run(maintenance_identity(client))

    def managed_identity(self):
        """The UUID of the machine at the address when it takes the managed cluster's own credential."""
        from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as talos_client
        from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine
        context = self._clients()[0]
        with talos_client.TalosClient(context=context, dial_only=self.address, timeout=self.probe_timeout) as client:
            return _spec(client.run(machine.get_resource(client, res.SYSTEM_INFORMATION))).get("uuid", "")

    def send_reset(self, graceful):
        from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as talos_client
        client = self._foreign()
        request = reset_request(talos_client.request_type("Reset"), graceful)
        try:
            client.call("Reset", request)
        finally:
            # the foreign credential is not needed any more, whatever the answer
            client.close()
            self._client = None

    def probe(self):
        return self.maintenance()

    def register(self, uuid, address, at):
        from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
        from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import Conflict
        kube = self._clients()[2]
        for attempt in range(3):
            try:
                return cluster_record.update(kube, lambda data: add_pending(data, uuid, address, at))[2]
            except Conflict:
                if attempt == 2:
                    raise
        return False
