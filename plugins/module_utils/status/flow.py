# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``cluster_status`` module's flow: read a managed cluster once (``readings``), judge what was read
(``findings``) and return it. Writes nothing, but for an acknowledgement (``acknowledge``, the token an earlier run
printed): the drift found now recorded as known, under the cluster lock, when it is what that run found (the same
fingerprints: paths and keyed digests of values).

Order: the cluster record (none: refused, as the rollout refuses it), every machine the inventory or the record names
(at once over the Talos API) and its drift and hold, the release position, the pending machines, the Nodes, etcd,
the collection's Cilium release, the installed bundle and the certificates; then the findings, and the result: what
was read as the result shows it, the findings most severe first, the plan lines and the report.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import time

from ansible_collections.maesh.ichor.plugins.module_utils.common import who
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record, lock
from ansible_collections.maesh.ichor.plugins.module_utils.status import findings as fmod
from ansible_collections.maesh.ichor.plugins.module_utils.status import readings

NO_RECORD = ("no cluster record %s/%s: maesh.ichor has not adopted or initialised this cluster, so there is no state "
             "of its to compare with; adopt it with maesh.ichor.adopt or make it with maesh.ichor.init; nothing was read "
             "beyond the record" % (cluster_record.NAMESPACE, cluster_record.NAME))
MACHINE_SHOWN = ("name", "node", "role", "talos", "source", "drift", "drift_summary", "held")  # of a machine's row


ACK_LOCK_SECONDS = 300  # an acknowledgement holds the cluster lock for one record write
ACK_TOKEN = re.compile(r"^[0-9a-f]{16}$")
ACK_NONE = ("", "false", "no", "off", "0", "none")
ACK_ALL = ("true", "yes", "on", "1")
ACK_BLIND = ("ichor_status_acknowledge=true would record whatever this run finds, which need not be what you saw: run "
             "maesh.ichor.status with --check, read the drift it lists, then run it with "
             "-e ichor_status_acknowledge=<the token that run printed>; nothing was recorded")
ACK_NOT_TOKEN = ("ichor_status_acknowledge is neither false nor a token of 16 hexadecimal digits (the token a status "
                 "run prints beside the drift it finds); nothing was read or recorded")
ACK_CHANGED = ("ichor_status_acknowledge=%s is not what this run finds (%d drift path(s)): the drift changed "
               "since the run that printed it (a path or a value), or it is another cluster's; nothing was recorded; run "
               "maesh.ichor.status --check again, read what it lists, and acknowledge with the token it prints")


def options():
    return dict(expiry_days=dict(type="int", default=30), hold_days=dict(type="int", default=14),
                acknowledge=dict(type="str", default=""), requested_by=dict(type="str"),
                bundle=dict(type="list", elements="path", default=[]),
                network_policies=dict(type="list", elements="path", default=[]),
                installer_namespace=dict(type="str", default="ichor-system"))


def run(params, conn, check_mode=True):
    """The result: ``status`` (release, machines, pending, etcd, cilium, installer, credentials, acknowledged,
    findings, needs_person), ``plan`` and ``report``. Reads only, in every mode, but for an acknowledgement outside
    check mode."""
    now = time.time()
    result = dict(changed=False, plan=[])
    asked = _acknowledge_asked(params.get("acknowledge"), check_mode)
    kube = conn.kube()
    record = cluster_record.read(kube)
    if not record.exists:
        raise IchorError(NO_RECORD, result=result)
    talos = conn.talos()
    rows = readings.read(talos, readings.machines(params["machines"], record))
    readings.compare(rows, record, kube)
    readings.holds(rows, record)
    seen = {"now": now, "record": record, "acknowledged": _acknowledged(record), "machines": rows}
    seen["release"] = readings.position(rows, kube, record)
    seen["pending"] = readings.pending(record)
    seen["nodes"] = readings.nodes(kube)
    seen["etcd"] = readings.etcd(talos, rows)
    seen["cilium"] = readings.cilium(kube, record)
    seen["installer"] = readings.installer(kube, params)
    seen["credentials"] = readings.credentials(conn, rows)
    found = fmod.judge(seen, params)
    known = seen["acknowledged"]
    drift_now = sorted(set(f["fingerprint"] for f in found if fmod.acknowledgeable(f)))
    token = fmod.acknowledgement_token(drift_now)
    lines, offer, acknowledged = [], [], known
    if asked is not None:
        lines, acknowledged = _acknowledge(kube, known, found, asked, params, check_mode, result, now)
    elif drift_now != sorted(known):
        offer = [_offer(drift_now, known, token)]
    result["status"] = _status(seen, found, token, acknowledged)
    result["plan"] = lines + fmod.summary(found) + offer
    result["report"] = fmod.markdown(result["status"])
    return result


def _status(seen, found, token, acknowledged):
    """What was read as the result shows it, with the findings (most severe first)."""
    now, release = seen["now"], seen["release"]
    return {"cluster": (seen["record"].get("cluster") or {}).get("name") or "", "at": readings.stamp(now),
            "findings": fmod.ordered(found),
            "machines": [dict((k, r[k]) for k in MACHINE_SHOWN) for r in seen["machines"]], "acknowledge_token": token,
            "release": {"set": release["set"], "versions": release["versions"], "steps": release["steps"],
                        "position": fmod.position(seen)},
            "pending": [{"uuid": p["uuid"], "address": p["address"], "since": p["since"],
                         "days": _round(fmod.days(p["at"], now))} for p in seen["pending"]],
            "etcd": _etcd_shown(seen["etcd"]), "cilium": _cilium_shown(seen["cilium"]), "installer": seen["installer"],
            "credentials": [{"subject": c["subject"], "ends": readings.stamp(c["end"]), "days": _round(fmod.days(
                now, c["end"]))} for c in seen["credentials"] if c["end"] is not None],
            "acknowledged": acknowledged, "needs_person": fmod.needs_person(found)}


def _round(days):
    return None if days is None else round(days, 1)


def _etcd_shown(read):
    """etcd as the result shows it: the members, those that answered without errors, the leader they know, and the
    fullest database against its quota."""
    members = read["members"] or []
    answered = [m for m in members if m["error"] is None]
    out = {"controlplanes": read["controlplanes"], "members": sorted(m["name"] for m in members),
           "healthy": sorted(m["name"] for m in answered if not m["errors"]), "leader": None, "db": None, "quota": None}
    names = dict((m["id"], m["name"]) for m in members)
    leaders = set(m["leader"] for m in answered if m["leader"])
    if leaders:
        out["leader"] = ", ".join(sorted(names.get(leader) or "%x (no member listed)" % leader for leader in leaders))
    if answered:
        fullest = max(answered, key=lambda m: m["db_size"] / float(m["quota"]) if (m["quota"] or 0) > 0 else 0.0)
        size, quota = fullest["db_size"], fullest["quota"]
        out["db"] = "%.1f MiB of %s (%s, %s)" % (size / fmod.MIB, "%.0f MiB" % (quota / fmod.MIB) if (quota or 0) > 0
                                                 else "no quota", fullest["name"], fullest["source"])
        out["db_size"], out["quota"] = size, quota
    return out


def _cilium_shown(read):
    """The collection's Cilium release as the result shows it."""
    if not read["release"]:
        return {"managed": False}
    out = {"managed": True, "release": read["release"], "state": None, "chart": None, "set": read["set"]}
    newest = read["newest"]
    if newest is not None and "error" not in newest:
        out.update(state=newest["state"], chart=newest["chart"], revision=newest["revision"])
    if read["gate"] is not None:
        out["gate"] = {"objects": 0, "changed": []} if "error" in read["gate"] else read["gate"]
    if read["orphans"] is not None:
        out["orphans"] = [o["object"] for o in read["orphans"]]
    return out


def _acknowledged(record):
    """The drift fingerprints the last acknowledgement recorded."""
    return list((record.get("status") or {}).get("acknowledged") or [])


def _acknowledge_asked(value, check_mode):
    """What ``acknowledge`` asks: None (nothing), ``True`` (the plan of an acknowledgement: check mode only) or the
    token of what the operator saw. Refused before anything is read: ``true`` outside check mode (it would record
    what the operator has not seen), and anything that is not a token."""
    text = ("%s" % ("" if value is None else value)).strip().lower()
    if text in ACK_NONE:
        return None
    if text in ACK_ALL:
        if not check_mode:
            raise IchorError(ACK_BLIND)
        return True
    if not ACK_TOKEN.match(text):
        raise IchorError(ACK_NOT_TOKEN)
    return text


def _offer(drift_now, known, token):
    """The plan line of a run that finds acknowledgeable drift the record does not know as it is now: the token that
    acknowledges exactly what this run found."""
    if not drift_now:
        return ("acknowledge: no class A or B drift is left of the %d path(s) the last acknowledgement recorded; to empty "
                "its list: -e ichor_status_acknowledge=%s" % (len(known), token))
    return ("acknowledge: to record the %d class A or B drift path(s) this run found as known (exactly these, with "
            "these values): -e ichor_status_acknowledge=%s" % (len(drift_now), token))


def _acknowledge(kube, known, found, asked, params, check_mode, result, now):
    """Record the drift found now as known (the acknowledgeable findings' fingerprints, replacing the last list),
    under the cluster lock, when it is what the operator saw (``asked``, the token a run printed; ``True``: the plan
    only, in check mode); the plan lines say what is recorded before anything is written. Returns (plan lines, the
    fingerprints known after the run)."""
    drift = [f for f in found if fmod.acknowledgeable(f)]
    after = sorted(set(f["fingerprint"] for f in drift))
    token = fmod.acknowledgement_token(after)
    result["diff"] = {"before": {"acknowledged": sorted(known)}, "after": {"acknowledged": after}}
    if asked is not True and asked != token:
        raise IchorError(ACK_CHANGED % (asked, len(after)), result=result)
    if after == sorted(known):
        return ["acknowledge: the cluster record knows this drift already (%d path(s)); nothing to write" %
                len(after)], known
    lines = ["acknowledge: %s %d drift path(s) as known in the cluster record %s/%s (the last acknowledgement had "
             "%d)%s" % ("would record" if check_mode else "records", len(after), cluster_record.NAMESPACE,
                        cluster_record.NAME, len(known), ":" if drift else "")]
    lines += ["acknowledge: %s %s" % (f["subject"], f["what"]) for f in fmod.ordered(drift)]
    if check_mode:
        lines.append("acknowledge: to record exactly these: -e ichor_status_acknowledge=%s (without --check)" % token)
    entry = {"acknowledged": after, "token": token, "at": readings.stamp(now),
             "by": params.get("requested_by") or who.local_user()}
    result["changed"] = True
    if check_mode:
        return lines, known
    holder = lock.new_holder()
    lines += lock.acquire(kube, holder, duration=ACK_LOCK_SECONDS)
    try:
        cluster_record.update(kube, lambda data: data.update(status=entry))
    finally:
        lines += lock.release(kube, holder)
    for f in drift:
        fmod.acknowledge(f)
    return lines, after
