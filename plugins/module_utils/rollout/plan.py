# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout's plan: the Versions table, the refusals a cluster the set cannot
reach gets before anything is written, and the steps still needed, in order (talos, config,
kubernetes, cilium)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError

STEPS = ("talos", "config", "kubernetes", "cilium")


class Refused(IchorError):
    """The cluster cannot be rolled to the set; nothing is written. One line with the reason."""


def judges_cilium(cni):
    """Whether the rollout judges the Cilium the detector found: only a managed one (a cluster adopted with its CNI
    unmanaged keeps whatever Cilium it runs; state.read marks it)."""
    return bool(cni and cni.get("name") == "cilium" and cni.get("version") and not cni.get("unmanaged"))


def lowest(versions):
    versions = [v for v in versions if v]
    return min(versions, key=release.parse) if versions else None


def versions_table(machines, kubernetes, contract, cni):
    """Rows: component, running, target, state ('Up to date' / 'Behind' / 'Newer')."""
    label = {"up_to_date": "Up to date", "behind": "Behind", "newer": "Newer"}
    rows = []
    talos = lowest(m["talos"] for m in machines)
    rows.append({"component": "Talos", "running": talos, "target": release.TALOS, "state": label[release.judge(talos, release.TALOS)]})
    rows.append({"component": "Version contract", "running": contract, "target": release.CONTRACT,
                 "state": label[release.judge(contract, release.CONTRACT)]})
    rows.append({"component": "Kubernetes", "running": kubernetes, "target": release.KUBERNETES,
                 "state": label[release.judge(kubernetes, release.KUBERNETES)]})
    if judges_cilium(cni):
        rows.append({"component": "Cilium", "running": cni["version"], "target": release.CILIUM,
                     "state": label[release.judge(cni["version"], release.CILIUM)]})
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
        if release.judge(m["talos"], release.TALOS) == "newer":
            raise Refused("Talos on %s is %s, newer than the release set's %s; this collection cannot manage it"
                          % (m["name"], m["talos"], release.TALOS))
    for source, version in sorted(kubernetes_by_source.items()):
        if version and release.judge(version, release.KUBERNETES) == "newer":
            raise Refused("Kubernetes (%s) is %s, newer than the release set's %s; this collection cannot manage it"
                          % (source, version, release.KUBERNETES))
    if contract and release.judge(contract, release.CONTRACT) == "newer":
        raise Refused("the version contract is %s, newer than the release set's %s" % (contract, release.CONTRACT))
    if judges_cilium(cni) and release.judge(cni["version"], release.CILIUM) == "newer":
        raise Refused("Cilium is %s, newer than the release set's chart %s; this collection cannot manage it"
                      % (cni["version"], release.CILIUM))


def _config_line(m):
    line = "move the config of %s from the %s form to %s" % (m["name"], m["form"], release.CONTRACT)
    if m["form"] == release.CONTRACT:
        line = "render the config of %s again" % m["name"]
    if m.get("drop"):
        line += ", without the inline manifest %s (Cilium, handed over to the Helm release)" % ", ".join(m["drop"])
    return line + " (Talos says in the step's plan whether it reboots)"


def machine_label(name, node, node_name=None):
    """How a plan names a machine: its name and address, and the Node Talos reports for it when that is another name
    (an inventory's label is not a Node's name: ``cp-1 (10.0.0.2, Node talos-6a2-6c4)``)."""
    if node_name and node_name != name:
        return "%s (%s, Node %s)" % (name, node, node_name)
    return "%s (%s)" % (name, node)


def talos_line(hostname, node, before, target, image, controlplane, wait=True, node_name=None, extensions=None):
    """The Talos step's line for one machine: the same words in release_check's plan (the whole step, read once)
    and in talos_upgrade's (the machine it runs on). ``extensions``: its system extensions before and after
    (installer.describe)."""
    if wait:
        then = "wait for it%s" % (", its etcd member and its Node" if controlplane else " and its Node")
    else:
        then = "not waiting for it (wait: false)"
    return "%s: upgrade Talos from %s to %s with %s, reboot, %s%s" % (
        machine_label(hostname, node, node_name), before, target, image, then, "; " + extensions if extensions else "")


def record_behind(stored, machines, kubernetes):
    """What the cluster record states below what every machine runs: a run stopped (killed, cancelled) after a step's
    writes and before its record, and a rerun finds that step done on the machines and never records it. Returns
    {field: value} bringing the record to what the step would have recorded: the lowest Talos every machine runs
    (with the set's version contract once that is the set's Talos, as the Talos step records it) and the lowest
    Kubernetes; never above what runs."""
    out = {}
    talos = lowest(m["talos"] for m in machines)
    if stored.get("talos") and talos and release.judge(stored["talos"], talos) == "behind":
        out["talos"] = talos
        if talos == release.TALOS and stored.get("contract") != release.CONTRACT:
            out["contract"] = release.CONTRACT
    if stored.get("kubernetes") and kubernetes and release.judge(stored["kubernetes"], kubernetes) == "behind":
        out["kubernetes"] = kubernetes
    return out


def plan_rollout(machines, kubernetes_by_source, contract, cni=None, config_pending=(), image=None, target=None,
                 installer_for=None):
    """The steps still needed, in order, and the first of them.

    machines: [{name, role, talos, node}] (control planes first is the order the talos step takes);
    kubernetes_by_source: {"<machine> kube-apiserver": "v1.35.4", "<node> kubelet": ...};
    contract: the cluster's version contract; cni: {name, version} from the detector;
    config_pending: [{name, form}] of the machines whose config is not yet in the set's contract form
    (config engine, control planes first).
    image, target: the Talos step's installer image and the version it installs (default: the set's).
    installer_for: machine -> (its installer image, its extensions before and after), called for each machine the
    Talos step upgrades (rollout.installer's choice; it may refuse); ``image`` for every machine when not given.
    Raises Refused with the reason when the cluster cannot be rolled.
    """
    check_not_newer(machines, kubernetes_by_source, contract, cni)
    kubernetes = lowest(kubernetes_by_source.values())
    for m in machines:
        if release.minor(m["talos"]) < release.MINIMUM_TALOS:
            raise Refused("Talos on %s is %s; this collection manages Talos v%d.%d or later: upgrade Talos first"
                          % (m["name"], m["talos"], release.MINIMUM_TALOS[0], release.MINIMUM_TALOS[1]))
    if kubernetes:
        if not release.talos_supports(release.TALOS, kubernetes):
            low, high = release.TALOS_KUBERNETES[release.minor(release.TALOS)]
            raise Refused("Kubernetes %s is not supported by Talos %s (it supports %s to %s); upgrade Kubernetes to "
                          "%s first with the tool that manages it"
                          % (kubernetes, release.TALOS, release.fmt_minor(low), release.fmt_minor(high), release.fmt_minor(low)))
        if release.judge(kubernetes, release.KUBERNETES) == "behind" and not release.one_minor_step(kubernetes, release.KUBERNETES):
            raise Refused("Kubernetes %s is more than one minor behind the release set's %s; Kubernetes moves one "
                          "minor at a time: bring it to %d.%d first" % (
                              kubernetes, release.KUBERNETES, release.minor(release.KUBERNETES)[0], release.minor(release.KUBERNETES)[1] - 1))
    if judges_cilium(cni):
        if release.judge(cni["version"], release.CILIUM) == "behind" and not release.one_minor_step(cni["version"], release.CILIUM):
            raise Refused("Cilium %s is more than one minor behind the chart %s; Cilium moves one minor at a time: "
                          "upgrade it to %d.%d first with the tool that installed it" % (
                              cni["version"], release.CILIUM, release.minor(release.CILIUM)[0], release.minor(release.CILIUM)[1] - 1))
    ordered = sorted(machines, key=lambda m: (m["role"] != "controlplane", m["name"]))
    steps = []
    behind = [m for m in ordered if release.judge(m["talos"], release.TALOS) == "behind"]
    if behind:
        image = image or release.installer_image()
        lines = []
        for m in behind:
            chosen, extensions = installer_for(m) if installer_for is not None else (image, None)
            lines.append(talos_line(m["name"], m["node"], m["talos"], target or release.TALOS, chosen,
                                    m["role"] == "controlplane", node_name=m.get("node_name"), extensions=extensions))
        if contract and release.judge(contract, release.CONTRACT) == "behind":
            lines.append("then record the version contract %s (it moves with Talos)" % release.CONTRACT)
        steps.append({"step": "talos", "machines": [m["name"] for m in behind], "lines": lines})
    kube_behind = bool(kubernetes) and release.judge(kubernetes, release.KUBERNETES) == "behind"
    # The config step runs once Talos is done, whether Kubernetes is behind or up to date: nothing here applies a
    # pending config on its own. The plan shows it behind a Talos step too: the rollout never hides a config step.
    if config_pending:
        steps.append({"step": "config", "machines": [m["name"] for m in config_pending],
                      "lines": [_config_line(m) for m in config_pending]})
    if kube_behind:
        cps = [m["name"] for m in ordered if m["role"] == "controlplane"]
        steps.append({"step": "kubernetes", "machines": cps + [m["name"] for m in ordered if m["role"] != "controlplane"],
                      "lines": ["upgrade the Kubernetes control plane on %s from %s to %s (no reboot)" % (
                          n, kubernetes, release.KUBERNETES) for n in cps]
                      + ["upgrade kube-proxy to %s" % release.KUBERNETES,
                         "upgrade the kubelets of every machine to %s (no reboot)" % release.KUBERNETES]})
    if judges_cilium(cni) and release.judge(cni["version"], release.CILIUM) == "behind":
        steps.append({"step": "cilium", "machines": [],
                      "lines": ["upgrade the Cilium release from %s to chart %s" % (cni["version"], release.CILIUM)]})
    return steps
