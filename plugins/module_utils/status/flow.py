# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``cluster_status`` module's flow: read a managed cluster once and say what needs a person. Writes nothing,
but for an acknowledgement (``acknowledge``, the token an earlier run printed): the drift found now recorded as known,
under the cluster lock, when it is what that run found (the same fingerprints: paths and keyed digests of values).

Order: the cluster record (none: refused, as the rollout refuses it), every machine the inventory or the record names,
read at once over the Talos API (its version and live config; one that does not answer is a finding, not a
failure), the release position as ``release_check`` judges it, each machine's drift from its spec in the record at
the record's contract (rendered with the component images it runs, so a version the rollout has still to move is the
release position's, not drift), the holds (each from its own start) and pending machines, Nodes the record does not
know, etcd read through any control plane (every member's health, the leader, each database against its quota), the
collection's Cilium release, the installed bundle (server-side apply dry runs), and the
certificates: the talosconfig's and kubeconfig's client certificates and the cluster's CAs. Each finding has a severity (``findings``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import calendar
import datetime
import hashlib
import os
import re
import time

from ansible_collections.maesh.ichor.plugins.module_utils.cilium import gate as cilium_gate
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import helm as cilium_helm
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import live as cilium_live
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import record as helm_record
from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.common import untrusted, who
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.config import documents, drift, render, secrets, yamlio
from ansible_collections.maesh.ichor.plugins.module_utils.config import spec as specs
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.config.images import component_versions
from ansible_collections.maesh.ichor.plugins.module_utils.installer import stages as installer_stages
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record, lock
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import check, state
from ansible_collections.maesh.ichor.plugins.module_utils.status import findings as fmod
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors as talos_errors
from ansible_collections.maesh.ichor.plugins.module_utils.talos import etcd
from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine as talos_machine
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res

NO_RECORD = ("no cluster record %s/%s: maesh.ichor has not adopted or initialised this cluster, so there is no state "
             "of its to compare with; adopt it with maesh.ichor.adopt or make it with maesh.ichor.init; nothing was read "
             "beyond the record" % (cluster_record.NAMESPACE, cluster_record.NAME))
ETCD_QUOTA = 2 * 1024 * 1024 * 1024  # etcd's default backend quota, which Talos keeps unless the config sets one
QUOTA_ARG = "quota-backend-bytes"  # etcd's flag, as cluster.etcd.extraArgs of a control plane's config sets it
CERT_FILE_MAX = 1024 * 1024  # a kubeconfig's client certificate file: a few PEM blocks
CA_NAMES = {"os": "Talos CA", "k8s": "Kubernetes CA", "etcd": "etcd CA", "k8saggregator": "aggregator CA"}
RENEW_TALOSCONFIG = ("mint a new one from the secrets bundle: talosctl config new --roles os:admin (or "
                     "maesh.ichor.talos_secrets with a talosconfig path)")
RENEW_KUBECONFIG = "fetch a new one: maesh.ichor.talos_kubeconfig (or talosctl kubeconfig)"
RENEW_CA = "rotate it: talosctl rotate-ca (plan it first; every machine and client gets new certificates)"


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
ACK_KEY = b"maesh.ichor status acknowledgement\0"  # what the value digests are keyed with, beside the cluster secret


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
    found = []
    status = {"cluster": (record.get("cluster") or {}).get("name") or "", "at": _stamp(now), "findings": found}
    talos = conn.talos()
    machines = _machines(params["machines"], record)
    rows = _read(talos, machines)
    known = _acknowledged(record)
    status["machines"] = _drift(rows, record, found, known)
    drift_now = sorted(set(f["fingerprint"] for f in found if fmod.acknowledgeable(f)))
    status["acknowledge_token"] = fmod.acknowledgement_token(drift_now)
    status["release"] = _release(rows, kube, record, found, status["machines"])
    _holds(status["machines"], record, now, params["hold_days"], found)
    status["pending"] = _pending(record, now, found)
    _strangers(kube, record, rows, found)
    status["etcd"] = _etcd(talos, rows, found)
    status["cilium"] = _cilium(kube, record, found)
    status["installer"] = _installer(kube, params, found)
    status["credentials"] = _credentials(conn, rows, now, params["expiry_days"], found)
    lines, offer, status["acknowledged"] = [], [], known
    if asked is not None:
        lines, status["acknowledged"] = _acknowledge(kube, known, found, asked, params, check_mode, result, now)
    elif drift_now != sorted(known):
        offer = [_offer(drift_now, known, status["acknowledge_token"])]
    status["findings"] = fmod.ordered(found)
    status["needs_person"] = fmod.needs_person(found)
    result["status"] = status
    result["plan"] = lines + fmod.summary(found) + offer
    result["report"] = fmod.markdown(status)
    return result


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
    entry = {"acknowledged": after, "token": token, "at": _stamp(now),
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


def _stamp(seconds):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _when(text):
    try:
        return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ"))
    except (TypeError, ValueError):
        return None


def _machines(given, record):
    """The inventory's machines, then those the record names that the inventory does not (by name)."""
    out = [dict(m, source="inventory") for m in given]
    names = set(m["name"] for m in given)
    for name, entry in sorted((record.get("nodes") or {}).items()):
        if name not in names and isinstance(entry, dict) and entry.get("node"):
            out.append({"name": name, "node": entry["node"], "role": entry.get("role") or "worker", "source": "record"})
    return out


async def _one(talos, m):
    info = await talos_machine.version(talos, m["node"])
    config = await talos_machine.get_resource(talos, res.MACHINE_CONFIG, m["node"])
    return info["tag"], (config or {}).get("spec") or ""


def _read(talos, machines):
    """Every machine at once: {name, node, role, source, talos, config, docs, error}."""
    by_node = dict((m["node"], m) for m in machines)
    fan = talos.fan_out(lambda node: _one(talos, by_node[node]), list(by_node))
    rows = []
    for m in machines:
        reply = fan[m["node"]]
        row = dict(m, talos=None, config="", docs=None, error=None)
        if reply.error is not None:
            row["error"] = str(reply.error)
        else:
            row["talos"], row["config"] = reply.message
            try:
                row["docs"] = documents.from_objects(yamlio.load_all(row["config"])) if row["config"].strip() else None
            except ConfigError as exc:
                row["error"] = "its machine config cannot be read: %s" % exc
        rows.append(row)
    return rows


def _release(rows, kube, record, found, machines):
    """The release position as release_check judges it, from the machines read here. A machine that drifts from its
    spec leaves the position unjudged (the rollout would refuse it too); its drift is the finding, not this."""
    answered = [r for r in rows if r["docs"] is not None]
    out = {"set": release.release_set(), "versions": [], "steps": [], "position": ""}
    if len(answered) < len(rows):
        out["position"] = "not judged: %d machine(s) not read" % (len(rows) - len(answered))
        return out
    try:
        out["versions"], steps = check.position(answered, kube, record)
    except IchorError as exc:
        refused = isinstance(exc, check.Refused)
        out["position"] = ("refused: %s" if refused else "not judged: %s") % exc
        drifting = [m["name"] for m in machines if m["drift"] and not m["drift"].get("zero", True)]
        if drifting and not refused:
            out["position"] = "not judged: %s drift from the spec in the cluster record" % ", ".join(drifting)
            return out
        found.append(fmod.finding(fmod.WARNING, "release", "release set", out["position"],
                                  key="refused" if refused else "not judged"))
        return out
    out["steps"] = [s["step"] for s in steps]
    if steps:
        out["position"] = "behind: next step %s" % steps[0]["step"]
        found.append(fmod.finding(fmod.INFO, "release", "release set", "behind the release set: the next step is %s "
                                  "(maesh.ichor.upgrade)" % steps[0]["step"], key="behind %s" % steps[0]["step"]))
    else:
        out["position"] = "up to date"
    return out


def _spec_inputs(record, rows):
    """(cluster spec, bundle) from the record and a control plane's live config, or a reason."""
    stored = record.get("cluster")
    if not isinstance(stored, dict) or not stored:
        return None, "the cluster record holds no cluster spec"
    cps = [r for r in rows if r["docs"] is not None and r["role"] == "controlplane"]
    if not cps:
        return None, "no control plane answered (the secrets bundle is recovered from one)"
    handed = set(state.handed_over(record))
    inline = []
    for item in stored.get("inlineManifests") or []:
        name = item.get("name") if isinstance(item, dict) else None
        if name and name not in handed:  # the record keeps names; the contents are the control plane's
            inline.append({"name": name, "contents": drift._inline_contents(cps[0]["docs"], name)})
    raw = dict(stored, inlineManifests=inline, versionContract=record.get("contract") or release.CONTRACT)
    try:
        bundle = secrets.validate(secrets.from_config(cps[0]["docs"]))
        raw.setdefault("kubernetesVersion", (record.get("kubernetes") or release.KUBERNETES).lstrip("v"))
        cluster = specs.cluster(raw)
    except ConfigError as exc:
        return None, str(exc)
    return (cluster, bundle), None


def _drift(rows, record, found, acknowledged):
    """Each machine's row for the report, with its drift from the record's spec as findings."""
    inputs, why = _spec_inputs(record, rows)
    nodes = record.get("nodes") or {}
    out = []
    for r in rows:
        entry = {"name": r["name"], "node": r["node"], "role": r["role"], "talos": r["talos"], "source": r["source"],
                 "drift": None, "drift_summary": "", "held": ""}
        out.append(entry)
        if r["error"] is not None:
            what = "does not answer: %s" % r["error"]
            if r["name"] in nodes:
                found.append(fmod.finding(fmod.WARNING, "machines", r["name"], "the cluster record names it, and it "
                                          + what, key="no answer"))
            else:
                found.append(fmod.finding(fmod.WARNING, "machines", r["name"], what, key="no answer"))
            entry["drift_summary"] = "not read"
            continue
        spec = (nodes.get(r["name"]) or {}).get("spec")
        if isinstance(spec, dict):  # the record keeps the role beside the spec
            spec = dict(spec, role=spec.get("role") or nodes[r["name"]].get("role") or r["role"])
        if r["name"] not in nodes:
            found.append(fmod.finding(fmod.WARNING, "machines", r["name"], "answers at %s and the cluster record does "
                                      "not know it (not made by init nor adopted)" % r["node"], key="stranger"))
            entry["drift_summary"] = "not in the record"
            continue
        if inputs is None or not isinstance(spec, dict) or r["docs"] is None:
            entry["drift_summary"] = "not compared: %s" % (why or "no machine spec in the record" if r["docs"]
                                                           is not None else "no machine config")
            continue
        cluster, bundle = inputs
        try:
            entry["drift"], entry["drift_summary"], values = _machine_drift(r, record, cluster, spec, bundle)
        except ConfigError as exc:
            entry["drift_summary"] = "not compared: %s" % exc
            found.append(fmod.finding(fmod.WARNING, "machines", r["name"], "its drift could not be judged: %s" % exc,
                                      key="not compared"))
            continue
        for cls in ("A", "B", "C"):
            for diff in entry["drift"][cls]:
                found.append(fmod.drift(r["name"], cls, diff["path"], diff["change"], acknowledged,
                                        values[(cls, diff["path"])]))
    return out


def _machine_drift(row, record, cluster, spec, bundle):
    docs = state.compared_docs(row["docs"], record)
    other = secrets.same_cluster(bundle, docs)
    if other:
        raise ConfigError(other)
    images = dict((c, v.lstrip("v")) for c, v in component_versions(docs).items())
    contract = cluster["versionContract"]
    at = dict(cluster, kubernetesVersion=images.get("kubelet") or cluster["kubernetesVersion"])
    rendered = render.render(bundle, at, specs.machine(spec, at), contract, images)
    found = drift.drift(rendered, docs, at, contract)
    counts = found.counts()
    # the live value at each path, as a fingerprint holds it: keyed with the cluster's secret, never the value
    key = hashlib.sha256(ACK_KEY + bundle.cluster_secret.reveal().encode("utf-8")).digest()
    values = dict(((diff.cls, diff.path), fmod.value_digest(key, diff.live)) for diff in found.differences)
    return found.to_dict(), ("none at %s" % contract if found.zero else "A=%d B=%d C=%d at %s" % (
        counts["A"], counts["B"], counts["C"], contract)), values


def _holds(entries, record, now, hold_days, found):
    """The machines adopt holds, each for as long as its own hold (``heldSince``, which adopt writes as it puts the
    hold); a record an earlier adopt wrote keeps no start, and the adoption's time is said instead."""
    holds = record.get("held") or {}
    since = record.get("heldSince") or {}
    adoption = (record.get("adoption") or {}).get("at")
    for entry in entries:
        if entry["name"] in holds:
            reason = holds[entry["name"]]
            entry["held"] = reason if isinstance(reason, str) else "held"
            start, counted = _when(since.get(entry["name"])), None
            if start is None and _when(adoption) is not None:
                start, counted = _when(adoption), ("the adoption at %s: the cluster record keeps no start for this "
                                                   "hold" % adoption)
            found.append(fmod.held(entry["name"], entry["held"], start, now, hold_days, counted))


def _pending(record, now, found):
    out = []
    for entry in record.get("machines") or []:
        if not isinstance(entry, dict) or entry.get("state") != "pending":
            continue
        at = _when(entry.get("at"))
        days = None if at is None else (now - at) / fmod.DAY
        subject = entry.get("address") or entry.get("uuid") or "a machine"
        out.append({"uuid": entry.get("uuid"), "address": entry.get("address"), "since": entry.get("at"),
                    "days": None if days is None else round(days, 1)})
        found.append(fmod.finding(fmod.INFO, "machines", subject, "pending (registered by reclaim%s); join it with "
                                  "maesh.ichor.init" % ("" if days is None else ", %.1f days ago" % days),
                                  key="pending %s" % entry.get("uuid")))
    return out


def _strangers(kube, record, rows, found):
    """Nodes the cluster runs that neither the record nor the machines read here know: by name (a Node is named by
    its machine's hostname, which an inventory's name often is) or by an address of the Node's."""
    nodes = record.get("nodes") or {}
    names = set(nodes) | set(r["name"] for r in rows)
    addresses = set(r["node"] for r in rows) | set(e.get("node") for e in nodes.values() if isinstance(e, dict))
    for node in kube.list("v1", "Node"):
        name = node["metadata"]["name"]
        own = set(a.get("address") for a in (node.get("status") or {}).get("addresses") or [] if isinstance(a, dict))
        if name not in names and not own & addresses:
            found.append(fmod.finding(fmod.WARNING, "machines", name, "a Node the cluster runs that the cluster record "
                                      "does not know (not made by init nor adopted)", key="stranger node"))


def _etcd(talos, rows, found):
    """Members against control planes (matched by the address in a member's URLs), read through any control plane
    that answers; each member's health (every member etcd lists, also one that is no machine read here: through a
    control plane, as Talos routes a call), the leader (none known is critical), and each member's database against
    its quota (its config's ``cluster.etcd.extraArgs.quota-backend-bytes``, else etcd's default 2 GiB)."""
    cps = [r for r in rows if r["role"] == "controlplane"]
    out = {"controlplanes": sorted(r["name"] for r in cps), "members": [], "healthy": [], "leader": None, "db": None,
           "quota": None}
    via = [r for r in cps if r["error"] is None]
    if not via:
        found.append(fmod.finding(fmod.CRITICAL, "etcd", "etcd", "no control plane answered: etcd was not read",
                                  key="not read"))
        return out
    listed, failed = None, []
    for r in via:
        try:
            listed = talos.call("EtcdMemberList", node=r["node"]).messages[0].members
            break
        except talos_errors.TalosError as exc:
            failed.append("%s: %s" % (r["name"], exc))
    if listed is None:
        found.append(fmod.finding(fmod.CRITICAL, "etcd", "etcd", "etcd does not answer on any control plane (%s)" %
                                  "; ".join(failed), key="not read"))
        return out
    by_address = dict((r["node"], r) for r in rows)
    names = dict((m.id, (by_address.get(etcd.member_host(m)) or {}).get("name") or m.hostname or "%x" % m.id)
                 for m in listed)
    out["members"] = sorted(names.values())
    for r in cps:
        if r["name"] not in out["members"]:
            found.append(fmod.finding(fmod.CRITICAL, "etcd", r["name"], "a control plane that is no etcd member: etcd "
                                      "has %d member(s) for %d control planes" % (len(listed), len(cps)),
                                      key="missing member"))
    cluster_quota = _quota(via[0])
    answered, leaders, fullest = [], set(), None
    for member in listed:
        name, address = names[member.id], etcd.member_host(member)
        if address not in by_address:
            found.append(fmod.extra_member(name, address or "no address"))
        if not address:
            found.append(fmod.member_unanswered(name, "it lists no client or peer URL to reach it at"))
            continue
        try:
            status = talos.call("EtcdStatus", node=address).messages[0].member_status
        except talos_errors.TalosError as exc:
            found.append(fmod.member_unanswered(name, exc))
            continue
        answered.append(name)
        if status.leader:
            leaders.add(status.leader)
        unhealthy = fmod.member_errors(name, list(status.errors))
        if unhealthy:
            found.append(unhealthy)
        elif not status.errors:
            out["healthy"].append(name)
        row = by_address.get(address)
        quota, source = _quota(row) if row is not None and row["docs"] is not None else cluster_quota
        full = fmod.database(name, status.db_size, quota, source)
        if full:
            found.append(full)
        share = status.db_size / float(quota) if quota and quota > 0 else 0.0
        if fullest is None or share > fullest[0]:
            fullest = (share, name, status.db_size, quota, source)
    if answered and not leaders:
        found.append(fmod.no_leader(answered))
    elif leaders:
        out["leader"] = ", ".join(sorted(names.get(leader) or "%x (no member listed)" % leader for leader in leaders))
    if fullest is not None:
        unused_share, name, size, quota, source = fullest
        out["db"] = "%.1f MiB of %s (%s, %s)" % (size / fmod.MIB, "%.0f MiB" % (quota / fmod.MIB) if quota and quota > 0
                                                 else "no quota", name, source)
        out["db_size"], out["quota"] = size, quota
    out["healthy"].sort()
    return out


def _quota(row):
    """(the etcd quota in bytes, where it comes from) of a control plane's config: ``cluster.etcd.extraArgs``'s
    quota-backend-bytes, else etcd's default (Talos sets none); None (no quota) when it is negative, as etcd reads it."""
    legacy = documents.find(row["docs"] or [], documents.LEGACY)
    args = documents.get_path(legacy.body, "cluster.etcd.extraArgs") if legacy is not None else None
    value = args.get(QUOTA_ARG) if isinstance(args, dict) else None
    if isinstance(value, list):  # an argument given more than once: the last one counts, as for a flag
        value = value[-1] if value else None
    default = (ETCD_QUOTA, "etcd's default")
    if value is None or isinstance(value, (dict, list, bool)):
        return default
    try:
        quota = int(str(value).strip())
    except ValueError:
        return ETCD_QUOTA, "etcd's default; %s's %s is not a number" % (row["name"], QUOTA_ARG)
    if quota == 0:
        return default
    return (quota if quota > 0 else None), "%s of %s's config" % (QUOTA_ARG, row["name"])


def _cilium(kube, record, found):
    """The collection's Cilium release (managed modes only): its newest record's state and chart, the diff gate of
    the deployed revision, and the objects the takeover kept that no release owns."""
    named = (record.get("cilium") or {}).get("release")
    if not named:
        return {"managed": False}
    namespace, name = named.split("/", 1) if "/" in named else ("ichor-system", named)
    newest = helm_record.newest(cilium_live.records(kube, namespace, name))
    out = {"managed": True, "release": named, "state": None, "chart": None, "set": release.CILIUM}
    if newest is None:
        found.append(fmod.finding(fmod.CRITICAL, "cilium", named, "the Helm release the cluster record names has no "
                                  "record: Helm no longer knows it", key="missing"))
        return out
    try:
        out.update(state=newest.status, chart=newest.chart_version, revision=newest.revision)
    except IchorError as exc:  # a record Helm itself could not read either: say so, judge the rest
        found.append(fmod.finding(fmod.CRITICAL, "cilium", named, "its newest Helm record cannot be read: %s" % exc,
                                  key="unreadable"))
        return out
    if newest.status != "deployed":
        found.append(fmod.finding(fmod.CRITICAL, "cilium", named, "Helm release revision %d is %s, not deployed; "
                                  "maesh.ichor.upgrade (the cilium step) or helm history tells why" % (
                                      newest.revision, newest.status), key="state %s" % newest.status))
    else:
        if newest.chart_version != release.CILIUM:
            found.append(fmod.finding(fmod.INFO, "cilium", named, "chart %s runs; the release set's is %s" % (
                newest.chart_version, release.CILIUM), key="chart %s" % newest.chart_version))
        out["gate"] = _cilium_gate(kube, newest, namespace, found)
    out["orphans"] = _orphans(kube, record, found)
    return out


def _cilium_gate(kube, deployed, namespace, found):
    """The diff gate, read only: each object the deployed release rendered (its manifest, as Helm keeps it) against
    the live one, by server-side apply dry runs; an object changed by hand is a warning naming its paths."""
    try:
        gate = cilium_gate.run(kube, cilium_helm.documents(deployed.release.get("manifest") or ""), namespace,
                               "revision %d" % deployed.revision)
    except IchorError as exc:
        found.append(fmod.finding(fmod.WARNING, "cilium", deployed.ref, "its objects could not be compared: %s" % exc,
                                  key="gate"))
        return {"objects": 0, "changed": []}
    by_object = {}
    for entry in gate.entries:
        by_object.setdefault(entry["object"], []).append(entry)
    changed = []
    for name in sorted(by_object):
        entries = by_object[name]
        paths = sorted(set("%s (%s)" % (e["path"], e["change"]) if e["path"] else e["change"] for e in entries))
        changed.append({"object": name, "paths": paths})
        found.append(fmod.finding(fmod.WARNING, "cilium", name, "differs from what revision %d of the release "
                                  "renders: %s; undo the edit, or make it a value of the release so that Helm applies it" % (
                                      deployed.revision, _some(paths)), key="gate %s" % " ".join(paths)))
    return {"objects": gate.objects, "changed": changed}


def _orphans(kube, record, found):
    """The objects a foreign Cilium release owned that the takeover kept (the record lists them): still live, they
    are owned by no release."""
    out = []
    for entry in (record.get("cilium") or {}).get("orphans") or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("object"), str) or " " not in entry["object"]:
            continue
        kind, where = entry["object"].split(" ", 1)
        namespace, name = where.split("/", 1) if "/" in where else (None, where)
        try:
            live = kube.get(entry.get("apiVersion") or "v1", kind, name, namespace)
        except IchorError:
            live = None  # a kind no longer served: nothing of it is left to own
        if live is None or (entry.get("uid") and live["metadata"].get("uid") != entry["uid"]):
            continue
        out.append(entry["object"])
        found.append(fmod.finding(fmod.WARNING, "cilium", entry["object"], "owned by no release: the Cilium release "
                                  "%s made it and the takeover kept it; delete it once nothing needs it" %
                                  (entry.get("release") or "before the takeover"), key="orphan"))
    return out


def _some(items, shown=5):
    return ", ".join(items[:shown]) + (" (+%d more)" % (len(items) - shown) if items[shown:] else "")


def _installer(kube, params, found):
    """The collection's bundle as installed: objects deleted or changed out of band (server-side apply dry runs
    against what the bundle ships). Not judged without ``bundle``."""
    if not params["bundle"]:
        return {"checked": False}
    read = installer_stages.out_of_band(kube, params["bundle"], params["network_policies"],
                                        params["installer_namespace"])
    out = dict(read, checked=True)
    if not read["installed"]:
        found.append(fmod.finding(fmod.WARNING, "installer", params["installer_namespace"], "the collection's bundle "
                                  "is not installed (no installer inventory); maesh.ichor.install installs it",
                                  key="not installed"))
        return out
    for item in read["missing"]:
        if item["installed"]:
            found.append(fmod.finding(fmod.WARNING, "installer", item["object"], "missing: deleted out of band; "
                                      "maesh.ichor.install puts it back", key="missing"))
        else:
            found.append(fmod.finding(fmod.INFO, "installer", item["object"], "new in this collection's bundle, not "
                                      "installed yet; maesh.ichor.install installs it", key="new"))
    for item in read["changed"]:
        found.append(fmod.finding(fmod.WARNING, "installer", item["object"], "changed out of band at %s; "
                                  "maesh.ichor.install puts back what the bundle ships" % _some(item["paths"]),
                                  key="changed %s" % " ".join(item["paths"])))
    return out


def _ends(pem):
    """The end of a PEM certificate, in seconds since the epoch, or None when it cannot be read."""
    try:
        from cryptography import x509
        cert = x509.load_pem_x509_certificate(pem)
    except Exception:  # pylint: disable=broad-except
        return None  # not a certificate this collection can read: nothing to judge
    end = cert.not_valid_after_utc if hasattr(cert, "not_valid_after_utc") else cert.not_valid_after.replace(
        tzinfo=datetime.timezone.utc)
    return end.timestamp()


def _kubeconfig_certificate(conn):
    """(the PEM of the kubeconfig user's client certificate, or None; why it could not be read, or None): inline
    (``client-certificate-data``) or a file (``client-certificate``, relative to the kubeconfig's directory, as
    kubectl reads it)."""
    user = conn.kubeconfig_user()
    data = user.get("client-certificate-data")
    if data:
        try:
            return base64.b64decode(data), None
        except (TypeError, ValueError):
            return None, None  # not base64: the client would have refused it before this
    path = user.get("client-certificate")
    if not path or not isinstance(path, str):
        return None, None
    kubeconfig = conn.kubeconfig_path()
    path = os.path.join(os.path.dirname(kubeconfig) if kubeconfig else os.getcwd(), os.path.expanduser(path))
    try:
        data = untrusted.read_file(path, CERT_FILE_MAX)
    except (IOError, OSError) as exc:
        return None, "its certificate file %s cannot be read (%s)" % (path, exc.strerror or type(exc).__name__)
    if len(data) > CERT_FILE_MAX:
        return None, "its certificate file %s is larger than %d bytes" % (path, CERT_FILE_MAX)
    return data, None


def _credentials(conn, rows, now, expiry_days, found):
    """The client certificates the run uses and the cluster's CAs: when each ends, a finding when soon."""
    out = []

    def judge(subject, pem, renew):
        end = _ends(pem) if pem else None
        if end is None:
            return
        out.append({"subject": subject, "ends": _stamp(end), "days": round((end - now) / fmod.DAY, 1)})
        hit = fmod.expiring(subject, end, now, expiry_days, renew)
        if hit:
            found.append(hit)
    context = conn.talos_context()
    if context.credentials.crt is not None:
        judge("talosconfig client certificate", context.credentials.crt.reveal(), RENEW_TALOSCONFIG)
    pem, unread = _kubeconfig_certificate(conn)
    if pem:
        judge("kubeconfig client certificate", pem, RENEW_KUBECONFIG)
    elif unread:
        found.append(fmod.unread("kubeconfig client certificate", unread))
    cps = [r for r in rows if r["role"] == "controlplane" and r["docs"] is not None]
    if cps:
        try:
            bundle = secrets.from_config(cps[0]["docs"])
        except ConfigError:
            return out
        for name in ("os", "k8s", "etcd", "k8saggregator"):
            crt = bundle.crt(name)
            if crt:
                judge(CA_NAMES[name], crt.encode("ascii"), RENEW_CA)
    return out
