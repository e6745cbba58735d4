# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What ``cluster_status`` found, as findings with a severity, and the rules that make one need a person.

Pure: no reads. A finding is a dict: ``severity`` (``critical``: the run fails, a person is needed; ``warning``;
``info``), ``area`` (release, machines, cilium, installer, etcd, credentials), ``subject`` (the machine, object or credential),
``what`` (one line) and ``fingerprint`` (stable across runs: what an acknowledgement names).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import hmac
import json

CRITICAL, WARNING, INFO = "critical", "warning", "info"
SEVERITIES = (CRITICAL, WARNING, INFO)
AREAS = ("release", "machines", "cilium", "installer", "etcd", "credentials")
DAY = 86400
MIB = 1048576.0
NO_LEADER = "etcdserver: no leader"  # what etcd's Status adds to a member's errors while it knows no leader


def finding(severity, area, subject, what, key=None):
    """One finding; ``key`` (default: ``what``) is what its fingerprint is made of: the parts that stay the same
    while the condition does (not a count of days)."""
    fingerprint = hashlib.sha256(("%s\0%s\0%s" % (area, subject, key if key is not None else what)).encode(
        "utf-8")).hexdigest()[:16]
    return {"severity": severity, "area": area, "subject": subject, "what": what, "fingerprint": fingerprint}


def value_digest(key, value):
    """The live value at a drifted path as a fingerprint may hold it: a keyed digest (HMAC-SHA256 under ``key``, which
    only the cluster's secrets give), never the value (it may be a secret, and the key keeps a short one from being
    guessed back from its digest)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()[:16]


def drift(name, cls, path, change, acknowledged=(), value=""):
    """A machine's config differs from its spec at ``path``: class C always needs a person (nothing can be applied
    to the machine); class A or B does unless the last acknowledgement recorded this path with this live value
    (``value``: its ``value_digest``; a new value at an acknowledged path is a new finding)."""
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


def held(name, reason, since, now, hold_days, counted_from=None):
    """A machine adopt holds: needs a person once held longer than ``hold_days``, counted from ``since`` (the hold's
    start; when the record keeps none, ``counted_from`` says what ``since`` is instead, e.g. the adoption)."""
    days = None if since is None else (now - since) / DAY
    long_held = days is not None and days > hold_days
    what = "held (%s)%s" % (reason, "; since an unknown time (the cluster record keeps no start for this hold)"
                            if days is None else "; for %.1f days" % days)
    if long_held:
        what += ", longer than ichor_status_hold_days (%d)" % hold_days
    if days is not None and counted_from:
        what += " (counted from %s)" % counted_from
    return finding(CRITICAL if long_held else WARNING, "machines", name, what, key="held")


def acknowledgement_token(fingerprints):
    """What an operator acknowledges: a digest of the set of acknowledgeable fingerprints a run found (as the run
    prints it), so that an acknowledging run records exactly what was seen, or refuses."""
    return hashlib.sha256("\n".join(sorted(set(fingerprints))).encode("ascii")).hexdigest()[:16]


def extra_member(name, address):
    """An etcd member at an address that is no machine read here (not in the inventory nor the record)."""
    return finding(WARNING, "etcd", name, "an etcd member at %s that is no machine read here (not in the inventory "
                   "nor the cluster record)" % address, key="extra member")


def member_unanswered(name, error):
    """An etcd member whose status cannot be read."""
    return finding(CRITICAL, "etcd", name, "etcd member does not answer: %s" % error, key="unhealthy")


def member_errors(name, errors):
    """An etcd member that reports errors (alarms: NOSPACE, CORRUPT); etcd's own no-leader error is ``no_leader``'s,
    not each member's. None when there are none."""
    errors = [e for e in errors if e != NO_LEADER]
    if not errors:
        return None
    return finding(CRITICAL, "etcd", name, "etcd member reports errors: %s" % "; ".join(errors), key="unhealthy")


def no_leader(answered):
    """No member that answered knows a leader: etcd cannot write (nothing in Kubernetes changes)."""
    return finding(CRITICAL, "etcd", "etcd", "no leader: none of the %d member(s) that answered (%s) knows one, so etcd "
                   "takes no write; check the control planes' etcd (talosctl etcd status, talosctl logs etcd)" % (
                       len(answered), ", ".join(sorted(answered))), key="no leader")


def database(name, size, quota, source):
    """A member's database against its quota (``source``: where the quota comes from): needs a person over 80 %; None
    below, and without a quota (a negative quota-backend-bytes turns etcd's off)."""
    if quota is None or quota <= 0 or size * 10 < quota * 8:
        return None
    return finding(CRITICAL, "etcd", name, "database %.1f MiB of its %.0f MiB quota (%s): over 80 %%; defragment it "
                   "(talosctl etcd defrag) or raise the quota" % (size / MIB, quota / MIB, source), key="db")


def expiring(subject, end, now, expiry_days, renew):
    """A certificate: needs a person when it ends within ``expiry_days`` (or has ended)."""
    days = (end - now) / DAY
    if days <= 0:
        return finding(CRITICAL, "credentials", subject, "expired %.1f days ago; %s" % (-days, renew), key="expired")
    if days <= expiry_days:
        return finding(CRITICAL, "credentials", subject, "expires in %.1f days (ichor_status_expiry_days %d); %s" % (
            days, expiry_days, renew), key="expiring")
    return None


def unread(subject, why):
    """A certificate the run uses that cannot be read, so its end is not judged."""
    return finding(WARNING, "credentials", subject, "not judged: %s" % why, key="unread")


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
