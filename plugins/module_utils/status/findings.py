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

CRITICAL, WARNING, INFO = "critical", "warning", "info"
SEVERITIES = (CRITICAL, WARNING, INFO)
AREAS = ("release", "machines", "cilium", "installer", "etcd", "credentials")
DAY = 86400


def finding(severity, area, subject, what, key=None):
    """One finding; ``key`` (default: ``what``) is what its fingerprint is made of: the parts that stay the same
    while the condition does (not a count of days)."""
    fingerprint = hashlib.sha256(("%s\0%s\0%s" % (area, subject, key if key is not None else what)).encode(
        "utf-8")).hexdigest()[:16]
    return {"severity": severity, "area": area, "subject": subject, "what": what, "fingerprint": fingerprint}


def drift(name, cls, path, change, acknowledged=()):
    """A machine's config differs from its spec at ``path``: class C always needs a person (nothing can be applied
    to the machine); class A or B does when its path was not seen at the last acknowledged status."""
    what = "class %s drift: %s %s" % (cls, change, path)
    found = finding(CRITICAL, "machines", name, what, key="drift %s %s" % (cls, path))
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


def held(name, reason, since, now, hold_days):
    """A machine adopt holds: needs a person once held longer than ``hold_days``."""
    days = None if since is None else (now - since) / DAY
    long_held = days is not None and days > hold_days
    what = "held (%s)%s" % (reason, "" if days is None else "; for %.1f days" % days)
    if long_held:
        what += ", longer than ichor_status_hold_days (%d)" % hold_days
    return finding(CRITICAL if long_held else WARNING, "machines", name, what, key="held")


def expiring(subject, end, now, expiry_days, renew):
    """A certificate: needs a person when it ends within ``expiry_days`` (or has ended)."""
    days = (end - now) / DAY
    if days <= 0:
        return finding(CRITICAL, "credentials", subject, "expired %.1f days ago; %s" % (-days, renew), key="expired")
    if days <= expiry_days:
        return finding(CRITICAL, "credentials", subject, "expires in %.1f days (ichor_status_expiry_days %d); %s" % (
            days, expiry_days, renew), key="expiring")
    return None


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
