# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What adopt may do with a cluster, decided from what was read (pure functions, no I/O).

* The CNI table: the Kubernetes side's verdict
  (``cluster.facts``), the Talos side's CNI selection and the CNI configs under /etc/cni/net.d give the
  mode: ``ours`` (the collection's release exists: adopt only checks it), ``takeover`` (a foreign Cilium,
  case B or C), ``install`` (no CNI at all: our Cilium is installed first), or ``unmanaged`` (the CNI is left
  exactly as it is). Never a migration.
* kube-proxy (1.5): unmanaged records the Talos side only; a managed Cilium needs Talos and Cilium to agree.
* KubePrism ("As built", overriding 1.6): every managed mode needs it on 7445 on every machine, up front.
* The version contract: an operator override may only name the release set's.
* Kubernetes: one minor across the cluster's components; a Kubernetes upgrade stopped halfway is refused.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.cluster import facts as kfacts
from ansible_collections.maesh.ichor.plugins.module_utils.talos import KUBEPRISM_PORT

OURS, TAKEOVER, INSTALL, UNMANAGED = "ours", "takeover", "install", "unmanaged"
MANAGED = (OURS, TAKEOVER, INSTALL)
FLAG = "ichor_cni_unmanaged=true"

# The refusal of a CNI adopt may only leave alone, with our variable for its flag.
UNMANAGED_ONLY = ("Ichor will not install or operate it; to adopt the cluster with the CNI left exactly as it is, "
                  "run again with %s." % FLAG)
CA_ADVICE = ("CA rotation advised: the Talos and Kubernetes client certificates of the previous administrators, and "
             "the CA keys held by whoever created this cluster, remain valid after adoption; consider rotating the "
             "CAs (talosctl rotate-ca). Adopt never starts a rotation.")


class Refusal(Exception):
    """A rule refuses the adoption: nothing is written. ``str()`` is the one line for the user."""


def _names(sources, most=6):
    return ", ".join(sources) if len(sources) <= most else "%s and %d more" % (", ".join(sources[:most]), len(sources) - most)


def kubernetes_split(running):
    """Refusal when the cluster's Kubernetes components run more than one minor. ``running``: {(machine, component):
    version} (kubelets from the Nodes, the control-plane components from their images). What a Kubernetes upgrade
    stopped halfway leaves (the control plane a minor ahead of the kubelets) no single Kubernetes version describes,
    and adopting it at the lower one would take components back a minor, which Kubernetes does not support."""
    by_minor = {}
    for (machine, component), version in running.items():
        by_minor.setdefault(release.parse(version)[:2], {}).setdefault((component, version), []).append(machine)
    if len(by_minor) < 2:
        return
    parts = []
    for minor in sorted(by_minor, reverse=True):
        parts.append("; ".join("%s %s on %s" % (component, version, _names(sorted(machines)))
                               for (component, version), machines in sorted(by_minor[minor].items())))
    highest = max((version for version in running.values()), key=release.parse)
    raise Refusal("the cluster runs Kubernetes at %d minors (%s): a Kubernetes upgrade stopped halfway, which no single "
                  "version describes, and adopting it would take components back a minor; finish the upgrade "
                  "(talosctl upgrade-k8s --to %s), then adopt" % (len(by_minor), " | ".join(parts), highest.lstrip("v")))


def two_configs(cni_configs):
    """{machine: [files]} -> the machines that carry two or more CNI configs (name -> files), sorted."""
    return dict((name, sorted(files)) for name, files in sorted(cni_configs.items()) if len(files) > 1)


def _talos_cni(talos_cnis):
    """The control planes' one CNI selection (cluster.network.cni.name: "" default, flannel, custom, none), or the
    ones they state when they disagree."""
    names = sorted(set(talos_cnis.values()))
    return names[0] if len(names) == 1 else names


def unfinished_takeover(k8s, recorded_release):
    """Why the collection's Cilium release is not yet a finished takeover (None when it is): its newest record not
    deployed (helm stopped mid-way), a foreign release's records still there (the hand-over stopped before retiring
    them), or a cluster record that does not name it (stopped before recording it). A run stopped in any of these
    leaves the release in place: phase 3 finishes what it began, or adopt would skip it for good."""
    ours = [r for r in k8s.get("cilium_releases") or [] if (r["namespace"], r["release"]) == kfacts.OUR_RELEASE]
    foreign = [r for r in k8s.get("cilium_releases") or [] if (r["namespace"], r["release"]) != kfacts.OUR_RELEASE]
    name = "%s/%s" % kfacts.OUR_RELEASE
    if ours and ours[0]["status"] != "deployed":
        return "the collection's release %s is %s" % (name, ours[0]["status"])
    if foreign:
        return "the records of %s are still there" % ", ".join(
            "%s/%s (%s)" % (r["namespace"], r["release"], r["status"]) for r in foreign)
    if recorded_release != name:
        return "the cluster record does not name %s" % name
    return None


def cni_outcome(k8s, talos_cnis, cni_configs, unmanaged, recorded_release=None):
    """The CNI row and the mode: {row, mode, preset, talos_cni, lines}; Refusal when adopt must not go on.

    k8s: the ``cluster_facts`` facts; talos_cnis: {control plane: its cni.name ("" when the config states none)};
    cni_configs: {machine: [files under /etc/cni/net.d]}; unmanaged: the operator gave ichor_cni_unmanaged;
    recorded_release: the Cilium release the cluster record names (its ``cilium.release``), if any.
    """
    row = k8s["cni"]["verdict"]
    evidence = k8s["cni"]["evidence"]
    talos = _talos_cni(talos_cnis)
    if isinstance(talos, list):
        raise Refusal("the control planes select different CNIs in their machine configs (%s): one cluster has one "
                      "CNI; make them agree first" % ", ".join("%s on %s" % (name or "the default", ", ".join(
                          sorted(m for m, n in talos_cnis.items() if n == name))) for name in talos))
    doubled = two_configs(cni_configs)
    if row == kfacts.TWO or doubled:
        found = [evidence[0]] if row == kfacts.TWO else []
        found += ["%s carries two CNI configs under /etc/cni/net.d: %s" % (name, " and ".join(files))
                  for name, files in doubled.items()]
        raise Refusal("two CNIs: %s. Ichor cannot say what it would leave alone: refused, also with %s; remove one of "
                      "them first" % ("; ".join(found), FLAG))
    talos_cni = "none" if talos == "none" else "default"
    lines = ["CNI: %s (%s)" % (row, "; ".join([found_by(k8s["cni"].get("daemonsets"))] + evidence[1:])
                               if k8s["cni"].get("daemonsets") else "; ".join(evidence))]
    if unmanaged:
        lines.append("mode: unmanaged (%s): the CNI is left exactly as it is; talosCNI %s" % (FLAG, talos_cni))
        return dict(row=row, mode=UNMANAGED, preset="unmanaged", talos_cni=talos_cni, lines=lines)
    if row == kfacts.OURS:
        unfinished = unfinished_takeover(k8s, recorded_release)
        if unfinished:
            lines.append("mode: managed, the takeover an earlier run began is not finished (%s): phase 3 finishes "
                         "it" % unfinished)
            return dict(row=row, mode=TAKEOVER, preset="cilium", talos_cni=talos_cni, lines=lines)
        lines.append("mode: managed, the collection's Cilium release exists: adopt only checks it")
        return dict(row=row, mode=OURS, preset="cilium", talos_cni=talos_cni, lines=lines)
    if row in (kfacts.HELM, kfacts.CLI, kfacts.MANIFEST):
        case = "B" if row in (kfacts.HELM, kfacts.CLI) else "C"
        lines.append("mode: managed, Cilium taken over as the collection's Helm release (case %s, phase 3); or "
                     "adopt it unmanaged with %s" % (case, FLAG))
        return dict(row=row, mode=TAKEOVER, preset="cilium", talos_cni=talos_cni, lines=lines)
    if row == kfacts.NONE:
        ready = k8s["nodes_ready"]
        if talos != "none":
            raise Refusal("no CNI DaemonSet runs in any namespace, but the machine configs select %s "
                          "(cluster.network.cni.name): the cluster's network is not what its configs say; repair it "
                          "first" % ("Talos's default flannel" if not talos else "the CNI %r" % talos))
        if ready:
            raise Refusal("no CNI DaemonSet runs and cni.name is none, yet %d of %d Nodes are Ready: a CNI Ichor "
                          "cannot see serves them. %s" % (ready, len(k8s["nodes"]), UNMANAGED_ONLY))
        lines.append("mode: managed, no CNI: the collection's Cilium is installed first, then the "
                     "cluster is adopted; or adopt it unmanaged with %s" % FLAG)
        return dict(row=row, mode=INSTALL, preset="cilium", talos_cni=talos_cni, lines=lines)
    # flannel, calico, another CNI: unmanaged only
    names = ", ".join(k8s["cni"]["names"]) or row
    where = found_by(k8s["cni"].get("daemonsets")) or "; ".join(evidence)
    raise Refusal("the CNI is %s (%s). %s" % (names, where, UNMANAGED_ONLY))


def found_by(daemonsets):
    """Where the CNI DaemonSets are and how each was recognised, for a message."""
    return "; ".join("DaemonSet %s/%s, found by its %s" % (d["namespace"], d["name"], d["why"]) for d in daemonsets or [])


def kube_proxy_mode(mode, talos_enabled, daemonset, replacement):
    """The cluster spec's cni.kubeProxy (``enabled`` or ``replaced``) and its plan line; Refusal when a managed
    Cilium's two sides disagree.

    talos_enabled: the control planes' machine configs run kube-proxy; daemonset: the kube-proxy DaemonSet
    exists; replacement: Cilium's kubeProxyReplacement (None without a Cilium)."""
    recorded = "enabled" if talos_enabled else "replaced"
    talos_says = "Talos %s kube-proxy (machine configs)" % ("runs" if talos_enabled else "has disabled")
    if mode == UNMANAGED:
        return recorded, "kube-proxy: %s (%s; recorded as it is, no consistency check in unmanaged mode)" % (
            recorded, talos_says)
    if talos_enabled != daemonset:
        raise Refusal("kube-proxy: the machine configs %s it but %s; make them agree first" % (
            "enable" if talos_enabled else "disable",
            "no kube-proxy DaemonSet runs" if talos_enabled else "its DaemonSet still runs in kube-system"))
    if mode == INSTALL:
        return recorded, "kube-proxy: %s (%s; the Cilium installed matches it)" % (recorded, talos_says)
    if talos_enabled and replacement:
        raise Refusal("kube-proxy runs (Talos) and Cilium's kubeProxyReplacement is true: two owners of Service "
                      "routing; disable one of them deliberately first")
    if not talos_enabled and not replacement:
        raise Refusal("kube-proxy is disabled in Talos and Cilium's kubeProxyReplacement is false: nothing routes "
                      "Services; switch one of them deliberately first")
    return recorded, "kube-proxy: %s (%s, Cilium kubeProxyReplacement %s)" % (
        recorded, talos_says, str(bool(replacement)).lower())


def kubeprism(mode, prisms):
    """The KubePrism plan line; Refusal in a managed mode unless every machine has it on 7445 ("As built").

    prisms: {machine: {enabled, port}}."""
    if mode == UNMANAGED:
        return "KubePrism: left as each machine has it (unmanaged mode)"
    off = sorted(name for name, p in prisms.items() if not p["enabled"])
    elsewhere = sorted("%s (port %d)" % (name, p["port"]) for name, p in prisms.items()
                       if p["enabled"] and p["port"] != KUBEPRISM_PORT)
    if off or elsewhere:
        found = []
        if off:
            found.append("off on %s" % ", ".join(off))
        if elsewhere:
            found.append("on another port on %s" % ", ".join(elsewhere))
        raise Refusal("KubePrism is %s: a managed Cilium reaches the API server through KubePrism on port %d on every "
                      "machine, and enabling it needs a reboot adopt never orders. Enable it on port %d on every "
                      "machine first (machine.features.kubePrism or a KubePrismConfig document), then run adopt again; "
                      "nothing was written" % ("; ".join(found), KUBEPRISM_PORT, KUBEPRISM_PORT))
    return "KubePrism: on port %d on every machine" % KUBEPRISM_PORT


def contract_override(given):
    """The operator's contract override: only the release set's contract (no free choice)."""
    if given and given != release.CONTRACT:
        raise Refusal("version_contract %s: an override may only name the release set's contract %s" % (
            given, release.CONTRACT))
    return given or None
