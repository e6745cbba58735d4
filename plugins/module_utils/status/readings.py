# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What ``cluster_status`` reads of a managed cluster, as plain data: what was observed, never how bad it is
(``findings`` judges it). Each reading is one function; ``flow`` calls them in order.

The machines the inventory or the cluster record names, read at once over the Talos API (its version and live
config, or why it did not answer); each one's drift from its spec in the record at the record's contract (rendered
with the component images it runs, so a version the rollout has still to move is the release position's, not
drift); the holds and pending machines the record keeps; the release position as ``release_check`` reads it; the
Nodes; etcd through any control plane (every member's status and each database's quota); the collection's Cilium
release (its newest record, the diff gate of the deployed revision, the objects the takeover kept); the installed
bundle (server-side apply dry runs); and when the certificates the run uses and the cluster's CAs end.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import calendar
import datetime
import hashlib
import hmac
import json
import os
import time

from ansible_collections.maesh.ichor.plugins.module_utils.cilium import gate as cilium_gate
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import helm as cilium_helm
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import live as cilium_live
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import record as helm_record
from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.common import untrusted
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.config import documents, drift, registry_auth, render, secrets, yamlio
from ansible_collections.maesh.ichor.plugins.module_utils.config import spec as specs
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.config.images import component_versions
from ansible_collections.maesh.ichor.plugins.module_utils.installer import stages as installer_stages
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import check, state
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors as talos_errors
from ansible_collections.maesh.ichor.plugins.module_utils.talos import etcd as talos_etcd
from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine as talos_machine
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res

ETCD_QUOTA = 2 * 1024 * 1024 * 1024  # etcd's default backend quota, which Talos keeps unless the config sets one
QUOTA_ARG = "quota-backend-bytes"  # etcd's flag, as cluster.etcd.extraArgs of a control plane's config sets it
CERT_FILE_MAX = 1024 * 1024  # a kubeconfig's client certificate file: a few PEM blocks
CA_NAMES = {"os": "Talos CA", "k8s": "Kubernetes CA", "etcd": "etcd CA", "k8saggregator": "aggregator CA"}
ACK_KEY = b"maesh.ichor status acknowledgement\0"  # what the value digests are keyed with, beside the cluster secret


def stamp(seconds):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _when(text):
    try:
        return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ"))
    except (TypeError, ValueError):
        return None


def value_digest(key, value):
    """The live value at a drifted path as a fingerprint may hold it: a keyed digest (HMAC-SHA256 under ``key``, which
    only the cluster's secrets give), never the value (it may be a secret, and the key keeps a short one from being
    guessed back from its digest)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()[:16]


# -- the machines ------------------------------------------------------------------------------------------------

def machines(given, record):
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


def read(talos, given):
    """Every machine at once, a row each: {name, node, role, source, talos, config, docs, error (why it did not answer
    or its config cannot be read)}."""
    by_node = dict((m["node"], m) for m in given)
    fan = talos.fan_out(lambda node: _one(talos, by_node[node]), list(by_node))
    rows = []
    for m in given:
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


def compare(rows, record, kube=None):
    """Each machine's drift from its spec in the record, on its row: ``known`` (the record names it), ``drift`` (by
    class, as adopt_plan returns it; None when not compared), ``drift_summary``, ``values`` (each drifted path's
    live value as ``value_digest`` keeps it) and ``unjudged`` (why the comparison failed, or None)."""
    inputs, why = _spec_inputs(record, rows, kube)
    nodes = record.get("nodes") or {}
    for r in rows:
        r.update(known=r["name"] in nodes, drift=None, values={}, unjudged=None)
        if r["error"] is not None:
            r["drift_summary"] = "not read"
            continue
        if not r["known"]:
            r["drift_summary"] = "not in the record"
            continue
        spec = (nodes.get(r["name"]) or {}).get("spec")
        if isinstance(spec, dict):  # the record keeps the role beside the spec
            spec = dict(spec, role=spec.get("role") or nodes[r["name"]].get("role") or r["role"])
        if inputs is None or not isinstance(spec, dict) or r["docs"] is None:
            r["drift_summary"] = "not compared: %s" % (why or "no machine spec in the record" if r["docs"]
                                                       is not None else "no machine config")
            continue
        cluster, bundle = inputs
        try:
            r["drift"], r["drift_summary"], r["values"] = _machine_drift(r, record, cluster, spec, bundle)
        except ConfigError as exc:
            r["unjudged"] = str(exc)
            r["drift_summary"] = "not compared: %s" % exc


def _spec_inputs(record, rows, kube=None):
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
        registry_auth.attach(bundle, kube, cluster)  # the credentials its authSecretRefs name
    except ConfigError as exc:
        return None, str(exc)
    return (cluster, bundle), None


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
    values = dict(((diff.cls, diff.path), value_digest(key, diff.live)) for diff in found.differences)
    return found.to_dict(), ("none at %s" % contract if found.zero else "A=%d B=%d C=%d at %s" % (
        counts["A"], counts["B"], counts["C"], contract)), values


def holds(rows, record):
    """The machines adopt holds, on their rows: ``held`` (why; empty when not held) and ``hold`` (None when not held,
    else {since: when its own hold began (``heldSince``, which adopt writes as it puts the hold), counted_from: None,
    or, for a record an earlier adopt wrote without starts, the adoption it counts from instead})."""
    held = record.get("held") or {}
    since = record.get("heldSince") or {}
    adoption = (record.get("adoption") or {}).get("at")
    for r in rows:
        r.update(held="", hold=None)
        if r["name"] in held:
            reason = held[r["name"]]
            r["held"] = reason if isinstance(reason, str) else "held"
            r["hold"] = {"since": _when(since.get(r["name"])), "counted_from": None}
            if r["hold"]["since"] is None and _when(adoption) is not None:
                r["hold"] = {"since": _when(adoption), "counted_from": "the adoption at %s: the cluster record keeps "
                                                                       "no start for this hold" % adoption}


def pending(record):
    """The machines reclaim registered that have not joined: {uuid, address, since (as the record keeps it), at
    (seconds since the epoch, or None)}."""
    return [{"uuid": e.get("uuid"), "address": e.get("address"), "since": e.get("at"), "at": _when(e.get("at"))}
            for e in record.get("machines") or [] if isinstance(e, dict) and e.get("state") == "pending"]


# -- the cluster ---------------------------------------------------------------------------------------------------

def position(rows, kube, record):
    """The release position as release_check reads it from the machines read here: {set, versions, steps (their
    names), unread (how many machines were not read: then it is not read), error (why release_check could not place
    the cluster, or None), refused (whether that is a refusal: something newer than the set)}."""
    answered = [r for r in rows if r["docs"] is not None]
    out = {"set": release.release_set(), "versions": [], "steps": [], "unread": len(rows) - len(answered),
           "error": None, "refused": False}
    if out["unread"]:
        return out
    try:
        out["versions"], steps = check.position(answered, kube, record)
    except IchorError as exc:
        out.update(error=str(exc), refused=isinstance(exc, check.Refused))
        return out
    out["steps"] = [s["step"] for s in steps]
    return out


def nodes(kube):
    """The Nodes the cluster runs: {name, addresses}."""
    return [{"name": node["metadata"]["name"], "addresses": [a.get("address") for a in (node.get(
        "status") or {}).get("addresses") or [] if isinstance(a, dict)]} for node in kube.list("v1", "Node")]


def etcd(talos, rows):
    """etcd, read through the first control plane that answers (matched to machines by the address in a member's
    URLs): {controlplanes (names), failed (each control plane's error before one listed the members), members (None
    when none listed them; else each member etcd lists, also one that is no machine read here, through a control
    plane as Talos routes a call: {id, name, address, known (a machine read here), error (why its status was not
    read, or None), leader (the leader's id it knows, 0 for none), errors, db_size, quota, source (where the quota
    comes from)})}."""
    cps = [r for r in rows if r["role"] == "controlplane"]
    out = {"controlplanes": sorted(r["name"] for r in cps), "failed": [], "members": None}
    via = [r for r in cps if r["error"] is None]
    listed = None
    for r in via:
        try:
            listed = talos.call("EtcdMemberList", node=r["node"]).messages[0].members
            break
        except talos_errors.TalosError as exc:
            out["failed"].append("%s: %s" % (r["name"], exc))
    if listed is None:
        return out
    by_address = dict((r["node"], r) for r in rows)
    cluster_quota = _quota(via[0])
    out["members"] = []
    for m in listed:
        address = talos_etcd.member_host(m)
        row = by_address.get(address)
        member = {"id": m.id, "name": (row or {}).get("name") or m.hostname or "%x" % m.id, "address": address,
                  "known": row is not None, "error": None}
        out["members"].append(member)
        if not address:
            member["error"] = "it lists no client or peer URL to reach it at"
            continue
        try:
            status = talos.call("EtcdStatus", node=address).messages[0].member_status
        except talos_errors.TalosError as exc:
            member["error"] = str(exc)
            continue
        quota, source = _quota(row) if row is not None and row["docs"] is not None else cluster_quota
        member.update(leader=status.leader, errors=list(status.errors), db_size=status.db_size, quota=quota,
                      source=source)
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


def cilium(kube, record):
    """The collection's Cilium release (managed modes only; ``release`` None otherwise): {release (as the record
    names it), set (the release set's chart), newest (its newest record: None when Helm has none; else {state,
    chart, revision, ref} or {error} when it cannot be read), gate (of a deployed newest revision: {objects, changed:
    [{object, paths}]} or {error}), orphans (of a readable newest record: the objects the takeover kept that are
    still live, {object, release})}."""
    named = (record.get("cilium") or {}).get("release")
    out = {"release": named, "set": release.CILIUM, "newest": None, "gate": None, "orphans": None}
    if not named:
        return out
    namespace, name = named.split("/", 1) if "/" in named else ("ichor-system", named)
    newest = helm_record.newest(cilium_live.records(kube, namespace, name))
    if newest is None:
        return out
    try:
        out["newest"] = {"state": newest.status, "chart": newest.chart_version, "revision": newest.revision,
                         "ref": newest.ref}
    except IchorError as exc:  # a record Helm itself could not read either
        out["newest"] = {"error": str(exc)}
        return out
    if newest.status == "deployed":
        out["gate"] = _gate(kube, newest, namespace)
    out["orphans"] = _orphans(kube, record)
    return out


def _gate(kube, deployed, namespace):
    """The diff gate, read only: each object the deployed release rendered (its manifest, as Helm keeps it) against
    the live one, by server-side apply dry runs; the paths of each object that differs."""
    try:
        gate = cilium_gate.run(kube, cilium_helm.documents(deployed.release.get("manifest") or ""), namespace,
                               "revision %d" % deployed.revision)
    except IchorError as exc:
        return {"error": str(exc)}
    by_object = {}
    for entry in gate.entries:
        by_object.setdefault(entry["object"], []).append(entry)
    return {"objects": gate.objects, "changed": [{"object": name, "paths": sorted(set(
        "%s (%s)" % (e["path"], e["change"]) if e["path"] else e["change"] for e in by_object[name]))}
        for name in sorted(by_object)]}


def _orphans(kube, record):
    """The objects a foreign Cilium release owned that the takeover kept (the record lists them) and that are still
    live: owned by no release."""
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
        out.append({"object": entry["object"], "release": entry.get("release")})
    return out


def installer(kube, params):
    """The collection's bundle as installed (``installer_stages.out_of_band``: objects deleted or changed out of band,
    by server-side apply dry runs against what the bundle ships), with ``checked``; not read without ``bundle``."""
    if not params["bundle"]:
        return {"checked": False}
    return dict(installer_stages.out_of_band(kube, params["bundle"], params["network_policies"],
                                             params["installer_namespace"]), checked=True)


# -- the credentials ---------------------------------------------------------------------------------------------

def credentials(conn, rows):
    """The client certificates the run uses and the cluster's CAs, in that order: {subject, kind (talosconfig,
    kubeconfig or ca: how it is renewed), end (seconds since the epoch; None when it cannot be read), unread (why its
    file cannot be read, or None)}. The CAs are a control plane's (none when no control plane's config was read)."""
    out = []
    context = conn.talos_context()
    if context.credentials.crt is not None:
        out.append(_certificate("talosconfig client certificate", "talosconfig", context.credentials.crt.reveal()))
    pem, unread = _kubeconfig_certificate(conn)
    if pem or unread:
        out.append(dict(_certificate("kubeconfig client certificate", "kubeconfig", pem), unread=unread))
    cps = [r for r in rows if r["role"] == "controlplane" and r["docs"] is not None]
    if cps:
        try:
            bundle = secrets.from_config(cps[0]["docs"])
        except ConfigError:
            return out
        for name in ("os", "k8s", "etcd", "k8saggregator"):
            crt = bundle.crt(name)
            if crt:
                out.append(_certificate(CA_NAMES[name], "ca", crt.encode("ascii")))
    return out


def _certificate(subject, kind, pem):
    return {"subject": subject, "kind": kind, "end": _ends(pem) if pem else None, "unread": None}


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
