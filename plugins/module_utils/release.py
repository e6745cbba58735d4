# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The release set (ADR 0113, amendment 2026-11-03): the one place a version is written.

Talos, its version contract, Kubernetes and the Cilium chart this collection is tested with.
Every module, role, lookup and check reads it from here; moving the set is a change to this
file and a new release of the collection. There is no override.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

TALOS = "v1.14.5"
CONTRACT = "v1.14"
KUBERNETES = "v1.36.6"
CILIUM = "1.20.4"

# Kubernetes minors each Talos minor supports (Talos support matrix; the set uses the documented range).
TALOS_KUBERNETES = {
    (1, 12): ((1, 30), (1, 35)),
    (1, 13): ((1, 31), (1, 36)),
    (1, 14): ((1, 33), (1, 37)),
}

# Kubernetes minors each Cilium minor is e2e tested with (Cilium compatibility pages; ADR 0103 amendment 3).
CILIUM_KUBERNETES = {
    (1, 18): ((1, 30), (1, 33)),
    (1, 19): ((1, 32), (1, 35)),
    (1, 20): ((1, 33), (1, 36)),
}

# Adopt needs Talos v1.12 or later (ADR 0103 decision 4); contracts below it are not rendered.
MINIMUM_TALOS = (1, 12)

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+].*)?$")


class VersionError(ValueError):
    """A version string that is not vMAJOR.MINOR[.PATCH]."""


def parse(version):
    """'v1.14.5' / '1.14' -> (1, 14, 5) / (1, 14, 0)."""
    match = _VERSION.match(str(version).strip())
    if not match:
        raise VersionError("%r is not a version (vMAJOR.MINOR.PATCH)" % (version,))
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def minor(version):
    return parse(version)[:2]


def fmt_minor(pair):
    return "%d.%d" % pair


def release_set():
    """The set as a dict, for the lookup, the README and results."""
    return {"talos": TALOS, "contract": CONTRACT, "kubernetes": KUBERNETES, "cilium": CILIUM}


def kubernetes_range_for_talos(talos):
    """(min, max) Kubernetes minors the Talos minor supports, or None when unknown."""
    return TALOS_KUBERNETES.get(minor(talos))


def kubernetes_range_for_cilium(cilium):
    return CILIUM_KUBERNETES.get(minor(cilium))


def talos_supports(talos, kubernetes):
    rng = kubernetes_range_for_talos(talos)
    return rng is not None and rng[0] <= minor(kubernetes) <= rng[1]


def cilium_supports(cilium, kubernetes):
    rng = kubernetes_range_for_cilium(cilium)
    return rng is not None and rng[0] <= minor(kubernetes) <= rng[1]


def one_minor_step(current, target):
    """Kubernetes and Cilium move one minor at a time: target minor is current's or the next."""
    cur, tgt = minor(current), minor(target)
    return cur[0] == tgt[0] and 0 <= tgt[1] - cur[1] <= 1


def judge(running, target):
    """'up_to_date', 'behind' or 'newer' for a running version against the set's."""
    run, tgt = parse(running), parse(target)
    if run == tgt:
        return "up_to_date"
    return "behind" if run < tgt else "newer"


def validate_change(field, stored, desired):
    """ADR 0113 decision 4: a changed Talos, Kubernetes or contract value is accepted only when it is the
    pinned one and not lower than the stored one; an unchanged value always is. Returns None or the refusal."""
    pinned = {"talos": TALOS, "kubernetes": KUBERNETES, "contract": CONTRACT}[field]
    if stored is not None and parse(desired) == parse(stored):
        return None
    if parse(desired) != parse(pinned):
        return "%s %s is not the release set's %s; this collection manages only its release set (no override)" % (
            field, desired, pinned)
    if stored is not None and parse(desired) < parse(stored):
        return "%s %s is lower than the cluster's %s" % (field, desired, stored)
    return None


# -- the rollout (ADR 0113 decision 6) ------------------------------------------------------

STEPS = ("talos", "config", "kubernetes", "cilium")


class Refused(Exception):
    """The cluster cannot be rolled to the set; nothing is written. One line with the reason."""


def lowest(versions):
    versions = [v for v in versions if v]
    return min(versions, key=parse) if versions else None


def versions_table(machines, kubernetes, contract, cni):
    """Rows: component, running, target, state ('Up to date' / 'Behind' / 'Newer')."""
    label = {"up_to_date": "Up to date", "behind": "Behind", "newer": "Newer"}
    rows = []
    talos = lowest(m["talos"] for m in machines)
    rows.append({"component": "Talos", "running": talos, "target": TALOS, "state": label[judge(talos, TALOS)]})
    rows.append({"component": "Version contract", "running": contract, "target": CONTRACT,
                 "state": label[judge(contract, CONTRACT)]})
    rows.append({"component": "Kubernetes", "running": kubernetes, "target": KUBERNETES,
                 "state": label[judge(kubernetes, KUBERNETES)]})
    if cni and cni.get("name") == "cilium" and cni.get("version"):
        rows.append({"component": "Cilium", "running": cni["version"], "target": CILIUM,
                     "state": label[judge(cni["version"], CILIUM)]})
    return rows


def format_table(rows):
    header = {"component": "Component", "running": "Running", "target": "Target", "state": "State"}
    widths = [max(len(str(r[k])) for r in rows + [header]) for k in ("component", "running", "target", "state")]
    line = "%-*s  %-*s  %-*s  %s"
    out = [line % (widths[0], "Component", widths[1], "Running", widths[2], "Target", "State")]
    for r in rows:
        out.append(line % (widths[0], r["component"], widths[1], r["running"], widths[2], r["target"], r["state"]))
    return out


def check_not_newer(machines, kubernetes_by_source, contract, cni):
    """A component newer than the set is refused before anything is written."""
    for m in machines:
        if judge(m["talos"], TALOS) == "newer":
            raise Refused("Talos on %s is %s, newer than the release set's %s; this collection cannot manage it"
                          % (m["name"], m["talos"], TALOS))
    for source, version in sorted(kubernetes_by_source.items()):
        if version and judge(version, KUBERNETES) == "newer":
            raise Refused("Kubernetes (%s) is %s, newer than the release set's %s; this collection cannot manage it"
                          % (source, version, KUBERNETES))
    if contract and judge(contract, CONTRACT) == "newer":
        raise Refused("the version contract is %s, newer than the release set's %s" % (contract, CONTRACT))
    if cni and cni.get("name") == "cilium" and cni.get("version") and judge(cni["version"], CILIUM) == "newer":
        raise Refused("Cilium is %s, newer than the release set's chart %s; this collection cannot manage it"
                      % (cni["version"], CILIUM))


def plan_rollout(machines, kubernetes_by_source, contract, cni=None, config_pending=()):
    """The steps still needed, in order, and the first of them.

    machines: [{name, role, talos}] (control planes first is the order the talos step takes);
    kubernetes_by_source: {"<machine> kube-apiserver": "v1.35.4", "<node> kubelet": ...};
    contract: the cluster's version contract; cni: {name, version} from the detector;
    config_pending: [{name, form}] of the machines whose config is not yet in the set's contract form
    (config engine, control planes first).
    Raises Refused with the reason when the cluster cannot be rolled.
    """
    check_not_newer(machines, kubernetes_by_source, contract, cni)
    kubernetes = lowest(kubernetes_by_source.values())
    for m in machines:
        if minor(m["talos"]) < MINIMUM_TALOS:
            raise Refused("Talos on %s is %s; this collection manages Talos v%d.%d or later: upgrade Talos first"
                          % (m["name"], m["talos"], MINIMUM_TALOS[0], MINIMUM_TALOS[1]))
    if kubernetes:
        if not talos_supports(TALOS, kubernetes):
            low, high = TALOS_KUBERNETES[minor(TALOS)]
            raise Refused("Kubernetes %s is not supported by Talos %s (it supports %s to %s); upgrade Kubernetes to "
                          "%s first with the tool that manages it"
                          % (kubernetes, TALOS, fmt_minor(low), fmt_minor(high), fmt_minor(low)))
        if judge(kubernetes, KUBERNETES) == "behind" and not one_minor_step(kubernetes, KUBERNETES):
            raise Refused("Kubernetes %s is more than one minor behind the release set's %s; Kubernetes moves one "
                          "minor at a time: bring it to %d.%d first" % (
                              kubernetes, KUBERNETES, minor(KUBERNETES)[0], minor(KUBERNETES)[1] - 1))
    if cni and cni.get("name") == "cilium" and cni.get("version"):
        if judge(cni["version"], CILIUM) == "behind" and not one_minor_step(cni["version"], CILIUM):
            raise Refused("Cilium %s is more than one minor behind the chart %s; Cilium moves one minor at a time: "
                          "upgrade it to %d.%d first with the tool that installed it" % (
                              cni["version"], CILIUM, minor(CILIUM)[0], minor(CILIUM)[1] - 1))
    ordered = sorted(machines, key=lambda m: (m["role"] != "controlplane", m["name"]))
    steps = []
    behind = [m for m in ordered if judge(m["talos"], TALOS) == "behind"]
    if behind:
        lines = ["upgrade Talos on %s (%s) from %s to %s%s" % (
            m["name"], m["role"], m["talos"], TALOS,
            ", version contract to %s" % CONTRACT if contract and judge(contract, CONTRACT) == "behind" else "")
            for m in behind]
        steps.append({"step": "talos", "machines": [m["name"] for m in behind], "lines": lines})
    kube_behind = bool(kubernetes) and judge(kubernetes, KUBERNETES) == "behind"
    # ADR 0113 runs the config step when Kubernetes is behind (Ichor's controller applies any other pending
    # config on its own); with no controller here, it also runs when Kubernetes is up to date.
    if config_pending and not behind:
        steps.append({"step": "config", "machines": [m["name"] for m in config_pending],
                      "lines": ["move the config of %s from the %s form to %s (Talos says in the step's plan whether "
                                "it reboots)" % (m["name"], m["form"], CONTRACT) for m in config_pending]})
    if kube_behind:
        cps = [m["name"] for m in ordered if m["role"] == "controlplane"]
        steps.append({"step": "kubernetes", "machines": cps + [m["name"] for m in ordered if m["role"] != "controlplane"],
                      "lines": ["upgrade the Kubernetes control plane on %s from %s to %s (no reboot)" % (
                          n, kubernetes, KUBERNETES) for n in cps]
                      + ["upgrade kube-proxy to %s" % KUBERNETES,
                         "upgrade the kubelets of every machine to %s (no reboot)" % KUBERNETES]})
    if cni and cni.get("name") == "cilium" and cni.get("version") and judge(cni["version"], CILIUM) == "behind":
        steps.append({"step": "cilium", "machines": [],
                      "lines": ["upgrade the Cilium release from %s to chart %s" % (cni["version"], CILIUM)]})
    return steps
