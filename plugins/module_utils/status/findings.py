# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What ``cluster_status`` finds in what it read, and the report a person reads. Pure: no reads.

A finding is a dict: ``severity`` (``critical``: the run fails, a person is needed; ``warning``; ``info``), ``area``
(release, machines, cilium, installer, etcd, credentials), ``subject`` (the machine, object or credential), ``what``
(one line) and ``fingerprint`` (stable across runs: what an acknowledgement names).

A judgement is a function ``(seen, params)`` that returns its findings (a list): ``seen`` is what the run read
(``now``, ``acknowledged`` and the readings ``machines``, ``release``, ``pending``, ``nodes``, ``etcd``, ``cilium``,
``installer``, ``credentials``, each as ``readings`` returns it, and the cluster ``record``), ``params`` the
module's options. ``JUDGEMENTS`` lists them in the order they run: a new finding is one judgement added there.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib

CRITICAL, WARNING, INFO = "critical", "warning", "info"
SEVERITIES = (CRITICAL, WARNING, INFO)
AREAS = ("release", "machines", "cilium", "installer", "etcd", "credentials")
DAY = 86400
MIB = 1048576.0
NO_LEADER = "etcdserver: no leader"  # what etcd's Status adds to a member's errors while it knows no leader
RENEW = {"talosconfig": "mint a new one from the secrets bundle: talosctl config new --roles os:admin (or "
                        "maesh.ichor.talos_secrets with a talosconfig path)",
         "kubeconfig": "fetch a new one: maesh.ichor.talos_kubeconfig (or talosctl kubeconfig)",
         "ca": "rotate it: talosctl rotate-ca (plan it first; every machine and client gets new certificates)"}


def finding(severity, area, subject, what, key=None):
    """One finding; ``key`` (default: ``what``) is what its fingerprint is made of: the parts that stay the same
    while the condition does (not a count of days)."""
    fingerprint = hashlib.sha256(("%s\0%s\0%s" % (area, subject, key if key is not None else what)).encode(
        "utf-8")).hexdigest()[:16]
    return {"severity": severity, "area": area, "subject": subject, "what": what, "fingerprint": fingerprint}


def days(since, until):
    """The days from ``since`` to ``until`` (seconds since the epoch); None when ``since`` is not known."""
    return None if since is None else (until - since) / DAY


def _some(items, shown=5):
    return ", ".join(items[:shown]) + (" (+%d more)" % (len(items) - shown) if items[shown:] else "")


# -- drift and its acknowledgement ----------------------------------------------------------------------------------

def drift(name, cls, path, change, acknowledged=(), value=""):
    """A machine's config differs from its spec at ``path``: class C always needs a person (nothing can be applied
    to the machine); class A or B does unless the last acknowledgement recorded this path with this live value
    (``value``: its keyed digest, ``readings.value_digest``; a new value at an acknowledged path is a new finding)."""
    what = "class %s drift: %s %s" % (cls, change, path)
    found = finding(CRITICAL, "machines", name, what, key="drift %s %s %s" % (cls, path, value))
    if acknowledgeable(found) and found["fingerprint"] in acknowledged:
        acknowledge(found)
    return found


def acknowledgeable(found):
    """Whether an operator can acknowledge a finding: class A or B drift (class C cannot be applied, ever)."""
    return found["area"] == "machines" and found["what"].startswith(("class A drift: ", "class B drift: "))


def acknowledge(found):
    """A finding an acknowledgement names: known, so a warning."""
    if found["severity"] == CRITICAL:
        found["severity"] = WARNING
        found["what"] += " (acknowledged)"


def acknowledgement_token(fingerprints):
    """What an operator acknowledges: a digest of the set of acknowledgeable fingerprints a run found (as the run
    prints it), so that an acknowledging run records exactly what was seen, or refuses."""
    return hashlib.sha256("\n".join(sorted(set(fingerprints))).encode("ascii")).hexdigest()[:16]


# -- the judgements ------------------------------------------------------------------------------------------------

def unanswered(seen, params):
    """A machine that does not answer (or whose config cannot be read)."""
    return [finding(WARNING, "machines", r["name"], "%sdoes not answer: %s" % (
        "the cluster record names it, and it " if r["known"] else "", r["error"]), key="no answer")
        for r in seen["machines"] if r["error"] is not None]


def unknown_machines(seen, params):
    """A machine that answers and that the record does not know."""
    return [finding(WARNING, "machines", r["name"], "answers at %s and the cluster record does not know it (not made "
                    "by init nor adopted)" % r["node"], key="stranger")
            for r in seen["machines"] if r["error"] is None and not r["known"]]


def drifts(seen, params):
    """Each machine's drift from its spec, path by path (``drift``); a machine whose drift could not be judged."""
    out = []
    for r in seen["machines"]:
        if r["unjudged"] is not None:
            out.append(finding(WARNING, "machines", r["name"], "its drift could not be judged: %s" % r["unjudged"],
                               key="not compared"))
        for cls in ("A", "B", "C"):
            out += [drift(r["name"], cls, diff["path"], diff["change"], seen["acknowledged"],
                          r["values"][(cls, diff["path"])]) for diff in (r["drift"] or {}).get(cls) or []]
    return out


def _drifting(rows):
    return [r["name"] for r in rows if r["drift"] and not r["drift"].get("zero", True)]


def position(seen):
    """The release position in words, as the result shows it. A machine that drifts from its spec leaves it unjudged
    (the rollout would refuse it too; its drift is the finding, not this)."""
    read = seen["release"]
    if read["unread"]:
        return "not judged: %d machine(s) not read" % read["unread"]
    if read["error"] is not None:
        drifting = _drifting(seen["machines"])
        if drifting and not read["refused"]:
            return "not judged: %s drift from the spec in the cluster record" % ", ".join(drifting)
        return ("refused: %s" if read["refused"] else "not judged: %s") % read["error"]
    return "behind: next step %s" % read["steps"][0] if read["steps"] else "up to date"


def release_position(seen, params):
    """Behind the release set (info, with the next step); refused or not placed (a warning), unless drift is why."""
    read = seen["release"]
    if read["error"] is not None and (read["refused"] or not _drifting(seen["machines"])):
        return [finding(WARNING, "release", "release set", position(seen),
                        key="refused" if read["refused"] else "not judged")]
    if read["steps"]:
        return [finding(INFO, "release", "release set", "behind the release set: the next step is %s "
                        "(maesh.ichor.upgrade)" % read["steps"][0], key="behind %s" % read["steps"][0])]
    return []


def holds(seen, params):
    """A machine adopt holds: needs a person once held longer than ``hold_days``, counted from its own hold's start
    (when the record keeps none, from what ``counted_from`` says instead: the adoption)."""
    out = []
    for r in seen["machines"]:
        if r["hold"] is None:
            continue
        held = days(r["hold"]["since"], seen["now"])
        long_held = held is not None and held > params["hold_days"]
        what = "held (%s)%s" % (r["held"], "; since an unknown time (the cluster record keeps no start for this hold)"
                                if held is None else "; for %.1f days" % held)
        if long_held:
            what += ", longer than ichor_status_hold_days (%d)" % params["hold_days"]
        if held is not None and r["hold"]["counted_from"]:
            what += " (counted from %s)" % r["hold"]["counted_from"]
        out.append(finding(CRITICAL if long_held else WARNING, "machines", r["name"], what, key="held"))
    return out


def pending(seen, params):
    """A machine reclaim registered that has not joined (info)."""
    out = []
    for p in seen["pending"]:
        waited = days(p["at"], seen["now"])
        out.append(finding(INFO, "machines", p["address"] or p["uuid"] or "a machine", "pending (registered by "
                           "reclaim%s); join it with maesh.ichor.init" % (
                               "" if waited is None else ", %.1f days ago" % waited), key="pending %s" % p["uuid"]))
    return out


def unknown_nodes(seen, params):
    """A Node that neither the record nor the machines read here know: by name (a Node is named by its machine's
    hostname, which an inventory's name often is) or by an address of the Node's."""
    nodes = seen["record"].get("nodes") or {}
    names = set(nodes) | set(r["name"] for r in seen["machines"])
    addresses = set(r["node"] for r in seen["machines"]) | set(
        e.get("node") for e in nodes.values() if isinstance(e, dict))
    return [finding(WARNING, "machines", n["name"], "a Node the cluster runs that the cluster record does not know "
                    "(not made by init nor adopted)", key="stranger node")
            for n in seen["nodes"] if n["name"] not in names and not set(n["addresses"]) & addresses]


def etcd_unread(seen, params):
    """etcd not read: no control plane answered, or none listed its members."""
    read = seen["etcd"]
    if read["members"] is not None:
        return []
    return [finding(CRITICAL, "etcd", "etcd", "etcd does not answer on any control plane (%s)" % "; ".join(
        read["failed"]) if read["failed"] else "no control plane answered: etcd was not read", key="not read")]


def missing_members(seen, params):
    """A control plane that is no etcd member."""
    members = seen["etcd"]["members"]
    if members is None:
        return []
    names = set(m["name"] for m in members)
    return [finding(CRITICAL, "etcd", name, "a control plane that is no etcd member: etcd has %d member(s) for %d "
                    "control planes" % (len(members), len(seen["etcd"]["controlplanes"])), key="missing member")
            for name in seen["etcd"]["controlplanes"] if name not in names]


def extra_members(seen, params):
    """An etcd member at an address that is no machine read here (a warning: its health is judged all the same)."""
    return [finding(WARNING, "etcd", m["name"], "an etcd member at %s that is no machine read here (not in the "
                    "inventory nor the cluster record)" % (m["address"] or "no address"), key="extra member")
            for m in seen["etcd"]["members"] or [] if not m["known"]]


def _answered(seen):
    return [m for m in seen["etcd"]["members"] or [] if m["error"] is None]


def silent_members(seen, params):
    """An etcd member whose status cannot be read."""
    return [finding(CRITICAL, "etcd", m["name"], "etcd member does not answer: %s" % m["error"], key="unhealthy")
            for m in seen["etcd"]["members"] or [] if m["error"] is not None]


def member_errors(seen, params):
    """An etcd member that reports errors (alarms: NOSPACE, CORRUPT); etcd's own no-leader error is ``no_leader``'s,
    not each member's."""
    out = []
    for m in _answered(seen):
        errors = [e for e in m["errors"] if e != NO_LEADER]
        if errors:
            out.append(finding(CRITICAL, "etcd", m["name"], "etcd member reports errors: %s" % "; ".join(errors),
                               key="unhealthy"))
    return out


def no_leader(seen, params):
    """No member that answered knows a leader: etcd cannot write (nothing in Kubernetes changes)."""
    answered = _answered(seen)
    if not answered or any(m["leader"] for m in answered):
        return []
    return [finding(CRITICAL, "etcd", "etcd", "no leader: none of the %d member(s) that answered (%s) knows one, so "
                    "etcd takes no write; check the control planes' etcd (talosctl etcd status, talosctl logs etcd)" % (
                        len(answered), ", ".join(sorted(m["name"] for m in answered))), key="no leader")]


def databases(seen, params):
    """A member's database over 80 % of its quota; not judged without a quota (a negative quota-backend-bytes turns
    etcd's off)."""
    return [finding(CRITICAL, "etcd", m["name"], "database %.1f MiB of its %.0f MiB quota (%s): over 80 %%; "
                    "defragment it (talosctl etcd defrag) or raise the quota" % (
                        m["db_size"] / MIB, m["quota"] / MIB, m["source"]), key="db")
            for m in _answered(seen) if (m["quota"] or 0) > 0 and m["db_size"] * 10 >= m["quota"] * 8]


def cilium_release(seen, params):
    """The collection's Cilium release: Helm no longer knows it, its newest record cannot be read, or that revision is
    not deployed (each needs a person); a chart other than the release set's (info)."""
    read = seen["cilium"]
    named, newest = read["release"], read["newest"]
    if not named:
        return []
    if newest is None:
        return [finding(CRITICAL, "cilium", named, "the Helm release the cluster record names has no record: Helm no "
                        "longer knows it", key="missing")]
    if "error" in newest:
        return [finding(CRITICAL, "cilium", named, "its newest Helm record cannot be read: %s" % newest["error"],
                        key="unreadable")]
    if newest["state"] != "deployed":
        return [finding(CRITICAL, "cilium", named, "Helm release revision %d is %s, not deployed; maesh.ichor.upgrade "
                        "(the cilium step) or helm history tells why" % (newest["revision"], newest["state"]),
                        key="state %s" % newest["state"])]
    if newest["chart"] != read["set"]:
        return [finding(INFO, "cilium", named, "chart %s runs; the release set's is %s" % (
            newest["chart"], read["set"]), key="chart %s" % newest["chart"])]
    return []


def cilium_gate(seen, params):
    """The diff gate of the deployed revision: an object changed by hand is a warning naming its paths."""
    gate, newest = seen["cilium"]["gate"], seen["cilium"]["newest"]
    if gate is None:
        return []
    if "error" in gate:
        return [finding(WARNING, "cilium", newest["ref"], "its objects could not be compared: %s" % gate["error"],
                        key="gate")]
    return [finding(WARNING, "cilium", c["object"], "differs from what revision %d of the release renders: %s; undo "
                    "the edit, or make it a value of the release so that Helm applies it" % (
                        newest["revision"], _some(c["paths"])), key="gate %s" % " ".join(c["paths"]))
            for c in gate["changed"]]


def orphans(seen, params):
    """An object a foreign Cilium release made that the takeover kept: owned by no release."""
    return [finding(WARNING, "cilium", o["object"], "owned by no release: the Cilium release %s made it and the "
                    "takeover kept it; delete it once nothing needs it" % (o["release"] or "before the takeover"),
                    key="orphan") for o in seen["cilium"]["orphans"] or []]


def installer(seen, params):
    """The collection's bundle: not installed, an object deleted or changed out of band (warnings), an object new in
    this collection's bundle (info)."""
    read = seen["installer"]
    if not read["checked"]:
        return []
    if not read["installed"]:
        return [finding(WARNING, "installer", params["installer_namespace"], "the collection's bundle is not installed "
                        "(no installer inventory); maesh.ichor.install installs it", key="not installed")]
    out = [finding(WARNING, "installer", m["object"], "missing: deleted out of band; maesh.ichor.install puts it back",
                   key="missing") if m["installed"] else
           finding(INFO, "installer", m["object"], "new in this collection's bundle, not installed yet; "
                   "maesh.ichor.install installs it", key="new") for m in read["missing"]]
    return out + [finding(WARNING, "installer", c["object"], "changed out of band at %s; maesh.ichor.install puts back "
                          "what the bundle ships" % _some(c["paths"]), key="changed %s" % " ".join(c["paths"]))
                  for c in read["changed"]]


def credentials(seen, params):
    """A certificate that ends within ``expiry_days`` or has ended (each with the way to renew it); one the run uses
    that cannot be read (a warning: its end is not judged)."""
    out = []
    for c in seen["credentials"]:
        if c["unread"]:
            out.append(finding(WARNING, "credentials", c["subject"], "not judged: %s" % c["unread"], key="unread"))
            continue
        if c["end"] is None:
            continue
        left = days(seen["now"], c["end"])
        if left <= 0:
            out.append(finding(CRITICAL, "credentials", c["subject"], "expired %.1f days ago; %s" % (
                -left, RENEW[c["kind"]]), key="expired"))
        elif left <= params["expiry_days"]:
            out.append(finding(CRITICAL, "credentials", c["subject"], "expires in %.1f days (ichor_status_expiry_days "
                               "%d); %s" % (left, params["expiry_days"], RENEW[c["kind"]]), key="expiring"))
    return out


JUDGEMENTS = (unanswered, unknown_machines, drifts, release_position, holds, pending, unknown_nodes, etcd_unread,
              missing_members, extra_members, silent_members, member_errors, no_leader, databases, cilium_release,
              cilium_gate, orphans, installer, credentials)


def judge(seen, params):
    """Every finding, judgement by judgement."""
    return [found for judgement in JUDGEMENTS for found in judgement(seen, params)]


# -- the report ----------------------------------------------------------------------------------------------------

def needs_person(findings):
    return any(f["severity"] == CRITICAL for f in findings)


def ordered(findings):
    """Most severe first, then by area and subject: the order a person reads them in."""
    return sorted(findings, key=lambda f: (SEVERITIES.index(f["severity"]), AREAS.index(f["area"]), f["subject"],
                                           f["what"]))


def summary(findings):
    """The plan lines: one count line, then one line per finding."""
    counts = dict((s, sum(1 for f in findings if f["severity"] == s)) for s in SEVERITIES)
    head = "status: %s (%d critical, %d warning, %d info)" % (
        "a person is needed" if counts[CRITICAL] else ("nothing to report" if not findings else "nothing needs a person"),
        counts[CRITICAL], counts[WARNING], counts[INFO])
    return [head] + ["%s: %s %s: %s" % (f["severity"], f["area"], f["subject"], f["what"]) for f in ordered(findings)]


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(status):
    """The report a person reads at a glance: the same facts as the result, as Markdown tables."""
    findings = ordered(status["findings"])
    lines = ["# Cluster status: %s" % _cell(status.get("cluster") or "cluster"), "",
             "Read at %s. %s" % (status["at"], summary(findings)[0][len("status: "):]), "",
             "## Release position", "", "Position: %s" % _cell(status["release"]["position"])]
    versions = status["release"].get("versions") or []
    if versions:
        lines += ["", "| Component | Running | Release set | State |", "|---|---|---|---|"]
        lines += ["| %s | %s | %s | %s |" % tuple(_cell(row.get(k, "")) for k in ("component", "running", "target",
                                                                                  "state")) for row in versions]
    lines += ["", "## Findings", ""]
    if findings:
        lines += ["| Severity | Area | Subject | Finding |", "|---|---|---|---|"]
        lines += ["| %s | %s | %s | %s |" % (f["severity"], f["area"], _cell(f["subject"]), _cell(f["what"]))
                  for f in findings]
    else:
        lines.append("Nothing to report.")
    lines += ["", "## Machines", "", "| Machine | Address | Role | Talos | Drift | Held |", "|---|---|---|---|---|---|"]
    for m in status["machines"]:
        lines.append("| %s | %s | %s | %s | %s | %s |" % tuple(_cell(v) for v in (
            m["name"], m.get("node") or "", m.get("role") or "", m.get("talos") or "not read",
            m.get("drift_summary") or "", m.get("held") or "")))
    if status.get("pending"):
        lines += ["", "Pending (registered by reclaim, not joined): %s." % ", ".join(
            "%s since %s" % (_cell(p.get("address") or p.get("uuid") or "?"), p.get("since") or "an unknown time")
            for p in status["pending"])]
    cilium = status.get("cilium") or {}
    lines += ["", "## Cilium", "", "Release %s: %s, chart %s (the release set's: %s)." % (
        _cell(cilium["release"]), cilium.get("state") or "no record", cilium.get("chart") or "unknown", cilium["set"])
        if cilium.get("managed") else "Not managed by the collection (no release in the cluster record)."]
    if cilium.get("gate"):
        gate = cilium["gate"]
        lines[-1] += " Diff gate: %d objects compared, %d differ." % (gate["objects"], len(gate["changed"]))
    if cilium.get("orphans"):
        lines[-1] += " Owned by no release: %s." % _cell(", ".join(cilium["orphans"]))
    installer = status.get("installer") or {}
    if installer.get("checked"):
        lines += ["", "## The collection's bundle", "", "%s objects shipped; %s." % (installer["objects"], (
            "%d missing, %d changed out of band" % (len(installer["missing"]), len(installer["changed"])))
            if installer["installed"] else "not installed")]
    etcd = status.get("etcd") or {}
    lines += ["", "## etcd", "", "Members: %s. Control planes: %s. Leader: %s. Database: %s." % (
        ", ".join(etcd.get("members") or []) or "none read", ", ".join(etcd.get("controlplanes") or []) or "none",
        etcd.get("leader") or "unknown", etcd.get("db") or "unknown")]
    lines += ["", "## Credentials", "", "| Credential | Ends |", "|---|---|"]
    lines += ["| %s | %s |" % (_cell(c["subject"]), c["ends"]) for c in status.get("credentials") or []]
    return "\n".join(lines) + "\n"
