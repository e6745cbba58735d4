# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a reclaim refuses, what consent is, and the seed's messages (ADR 0103 section 2, test
results C2, C3, C4, C7; ADR 0128).

Refused, each before anything is sent: a machine of the managed cluster (never overridable), a
machine that is busy (resetting, rebooting, ...), an etcd quorum that would break and the last control
plane of a reachable cluster (these two only with ``force`` and the cluster name typed as
``confirm_cluster``), a graceful reset that cannot work (only with ``force_ungraceful``). Consent is
the node's UUID typed exactly as inspected; nothing replaces it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.reclaim.errors import ReclaimError
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim.request import REQUEST_TEXT

MISMATCH = "the typed UUID does not match the node's UUID; nothing was sent"
CLUSTER_MISMATCH = "the typed cluster name does not match the node's cluster; nothing was sent"
MANAGED_REQUIRED = ("the managed cluster is required: give the talosconfig and kubeconfig of the cluster that "
                    "receives the machine (talosconfig or talosconfig_content, kubeconfig or kubeconfig_content); "
                    "a run without it is refused; nothing was sent")
# A machine in one of these stages is left alone until it has settled.
BUSY_STAGES = ("resetting", "rebooting", "shutting down", "upgrading", "installing")


# A value the machine states (its UUID, its cluster's name) is shown in a message only when it looks like one: the
# machine decides what it holds, and a message is one short line.
SHOWN_LIMIT = 128


def shown(value):
    """A machine's value as a message shows it: itself when it is short printable text, else its length."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= SHOWN_LIMIT and text.isprintable():
        return text
    return "(%d characters, not shown)" % len(text)


def quoted(name):
    return '"%s"' % shown(name or "?")


def seconds(value):
    """600.0 -> "600", 2.5 -> "2.5"."""
    value = float(value)
    return "%d" % value if value == int(value) else "%g" % value


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
        return "node %s is already an Ichor machine (of cluster %s); nothing was sent" % (shown(uuid), quoted(name))
    if same_cluster:
        return ("node %s is already an Ichor machine: it carries the CAs of cluster %s (same cluster ID) but is not "
                "registered; add it with adopt's add-machine step (list it in the inventory and run maesh.ichor.adopt) "
                "instead of reclaiming it; nothing was sent" % (shown(uuid), quoted(name)))
    return None


def refusals(insp, managed, force=False, confirm_cluster=None, force_ungraceful=False):
    """Every refusal that applies, as dicts {text, kind, overridden}; the caller stops on any not overridden.

    kind: ``managed`` (never overridable), ``quorum`` / ``last`` (``force`` with the cluster name typed
    as ``confirm_cluster``), ``graceful`` (``force_ungraceful``), ``busy`` (never).
    """
    out = []
    cluster = shown(insp["cluster"].get("name") or "?")
    text = managed_refusal(insp, managed)
    if text:
        out.append({"kind": "managed", "text": text, "overridden": False})
    if insp.get("stage") in BUSY_STAGES:
        out.append({"kind": "busy", "overridden": False,
                    "text": "%s is %s; nothing was sent (rerun when it has settled)" % (
                        insp["address"], insp["stage"])})
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
                "(%s); nothing was sent" % quoted(cluster))
    return CLUSTER_MISMATCH


def consent(confirm_uuid, uuid):
    """Typed consent: the UUID exactly as inspected. No "yes" replaces it."""
    if confirm_uuid is None or confirm_uuid == "":
        raise ReclaimError("confirm_uuid is required: type the node's UUID (shown by a --check run); nothing was sent")
    if confirm_uuid != uuid:
        raise ReclaimError(MISMATCH)


def plan_lines(insp, found, graceful, managed, wait, wait_timeout, check_mode):
    """The human-readable plan: the machine, who loses it, the volumes, the refusals, what is sent."""
    cluster = insp["cluster"]
    lines = ["reclaim %s: %s, UUID %s, %s, Talos %s, stage %s" % (
        insp["address"], insp.get("hostname") or "?", insp["uuid"], insp.get("role") or "unknown role",
        insp.get("version") or "?", insp.get("stage") or "?")]
    lines.append("cluster %s (ID %s) loses this machine" % (quoted(cluster.get("name")), cluster.get("id") or "?"))
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
    verb = "would send" if check_mode else "sends"
    if blocking(found):
        lines.append("nothing %s sent" % ("would be" if check_mode else "was"))
        return lines
    lines.append("%s the reset: %s, graceful: %s" % (verb, REQUEST_TEXT, "true" if graceful else "false"))
    if wait:
        lines.append("then waits up to %ss for %s to answer in maintenance mode with UUID %s and registers it as a "
                     "pending machine of cluster %s" % (seconds(wait_timeout), insp["address"], insp["uuid"],
                                                        quoted(managed.get("name"))))
    else:
        lines.append(not_waiting(insp["address"], insp["uuid"], managed.get("name")))
    return lines


def not_waiting(node, uuid, cluster):
    """What ``wait: false`` leaves to do: a machine not seen in maintenance mode is not registered."""
    return ("then returns without waiting (wait: false) and registers nothing; once %s answers in maintenance mode "
            "with UUID %s, a rerun with the same confirm_uuid registers it as a pending machine of cluster %s "
            "without a second reset" % (node, uuid, quoted(cluster)))


def did_not_return(node, uuid, wait_timeout, last):
    """The seed's C7 texts: what happened, and the hint instead of a guess at the new address."""
    hint = ("The machine may have taken a new address from DHCP after the reboot. Find it (its UUID is %s) and add "
            "it to a cluster's discovery addresses (the inventory of the cluster that joins it)." % shown(uuid))
    message = ("the reset was sent but the machine did not come back at %s: waiting for %s to return to maintenance "
               "mode: deadline of %ss exceeded (last probe: %s). %s did not return to maintenance mode with UUID %s. %s"
               % (node, node, seconds(wait_timeout), last, node, shown(uuid), hint))
    return message, hint
