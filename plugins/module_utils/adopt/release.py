# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Adopt's fourth phase: release one held machine.

Only after the write phase (the record says adopted) and, for a managed Cilium, a completed takeover (the record's
``cilium`` names the release). The machine's render (the record's cluster spec and the machine's spec, the bundle
from Secret ichor-system/ichor-secrets-bundle, the record's contract; a handed-over Cilium inline entry left out) is
compared with its live config (``machine.machine_config``): class C keeps it held, class B keeps it held unless the
operator consented (``accept_changes``); zero drift lifts the hold at once; otherwise the render is applied, the
machine waited for until it is back with its config read back at zero drift and its Node Ready, and then the hold
is lifted. The playbook releases one machine at a time, control planes first, under the cluster lock.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.adopt import rules
from ansible_collections.maesh.ichor.plugins.module_utils.common import poll
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.machine import machine_config
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record, lock, nodes
from ansible_collections.maesh.ichor.plugins.module_utils.config.bundle_secret import BUNDLE_SECRET, stored_bundle
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import state
from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine

STAYS = "stays held"


def options():
    return dict(name=dict(type="str", required=True), holder=dict(type="str", required=True),
                accept_changes=dict(type="bool", default=False), wait_timeout=dict(type="float", default=900.0))


def run(params, conn, check_mode, clock=None):
    result = dict(changed=False, plan=[], released=False)
    try:
        return _run(params, conn, check_mode, result, clock or poll.Clock)
    except IchorError as exc:
        exc.result = result
        raise


def _bundle(kube):
    secret = kube.get("v1", "Secret", BUNDLE_SECRET, cluster_record.NAMESPACE)
    if secret is None:
        raise IchorError("Secret %s/%s is missing: run adopt's write phase first" % (cluster_record.NAMESPACE, BUNDLE_SECRET))
    bundle = stored_bundle(secret)
    if bundle is None:
        raise IchorError("Secret %s/%s holds no readable secrets bundle: run adopt's write phase again after removing "
                         "it" % (cluster_record.NAMESPACE, BUNDLE_SECRET))
    return bundle


def _render_spec(record):
    """The cluster spec the release renders: the record's, without inline manifests (unmanaged carries none; a
    managed Cilium's entry was handed over to the Helm release, so the apply takes it out of the config)."""
    cluster = dict(record.get("cluster") or {})
    names = [item.get("name") for item in cluster.get("inlineManifests") or []]
    waiting = sorted(set(names) - set(state.handed_over(record.data)))
    if waiting:
        raise IchorError("the Cilium takeover has not completed (the inline manifest %s is not handed over to the "
                         "Helm release yet): the machines stay held; run the takeover (adopt's third phase) first" %
                         ", ".join(waiting))
    cluster["inlineManifests"] = []
    return cluster


def _run(params, conn, check_mode, result, clock):
    kube = conn.kube()
    plan = result["plan"]
    name = params["name"]
    record = cluster_record.read(kube)
    if not (record.get("adoption") or {}).get("adopted"):
        raise IchorError("the cluster record holds no adoption: run adopt's write phase first")
    entry = (record.get("nodes") or {}).get(name)
    if entry is None:
        raise IchorError("%s is not a machine of the adoption recorded (it has %s)" % (
            name, ", ".join(sorted(record.get("nodes") or {})) or "none"))
    held = record.get("held") or {}
    if name not in held:
        plan.append("%s: not held (released earlier); nothing to do" % name)
        return result
    mode = (record.get("adoption") or {}).get("mode")
    if mode in rules.MANAGED and not (record.get("cilium") or {}).get("release"):
        raise IchorError("the Cilium takeover has not completed (the record names no Cilium release): the machines "
                         "stay held; run the takeover (adopt's third phase) first")
    if not check_mode:
        lock.keep(kube, params["holder"])
    cluster = _render_spec(record)
    # its Node is the one Talos names for it (the record knows the machine by the play's name for it)
    talos = conn.talos()
    node_name = talos.run(machine.node_name(talos, entry["node"])) or name
    if nodes.get(kube, node_name) is None:
        raise IchorError("%s; it %s" % (nodes.unregistered((name, entry["node"], node_name)), STAYS))
    mc_params = dict(node=entry["node"], bundle=_bundle(kube), secrets=None, cluster=cluster, machine=entry["spec"],
                     maintenance=False, accept_class_b=params["accept_changes"], allow_reboot=True, wait=True,
                     wait_timeout=params["wait_timeout"],
                     # the consent as the adopt playbook's user sets it, and as this module's user does
                     consent="ichor_accept_changes=true, module option accept_changes")
    try:  # one pass: the gates refuse before anything is applied, in check mode as in the real run
        judged = machine_config.run(mc_params, conn, check_mode, clock)
    except ConfigError as exc:
        found = (getattr(exc, "result", None) or {}).get("drift")
        if found is None or exc.result.get("changed"):  # not a gate (an apply that did not read back): fail
            raise
        result.update(drift=found, reason=str(exc))
        plan.extend(exc.result.get("plan") or [])
        plan.append("%s: %s (%s)" % (name, STAYS, exc))
        result["warnings"] = ["%s %s: %s" % (name, STAYS, exc)]
        return result
    result["drift"] = judged.get("drift")
    plan.extend(judged["plan"])
    if judged["changed"]:
        if check_mode:
            plan.append("%s: would be applied, waited for (config read back, Node Ready), then released" % name)
            result.update(changed=True, released=True)
            return result
        _node_ready(kube, name, node_name, params["wait_timeout"], clock)
        plan.append("%s: Node %s Ready" % (name, node_name))
    before, after, changed = cluster_record.update(
        kube, lambda data: ((data.get("held") or {}).pop(name, None), (data.get("heldSince") or {}).pop(name, None)),
        dry_run=check_mode)
    plan.append("%s: %s" % (name, "would be released (hold lifted)" if check_mode else "released (hold lifted)"))
    result.update(changed=True, released=True, held=sorted((after.get("held") or {})))
    return result


def _node_ready(kube, name, node_name, timeout, clock):
    def check():
        node = nodes.get(kube, node_name)
        return (True, node) if node is not None and nodes.ready(node) else (False, "Node %s not Ready" % node_name)

    ready, detail = poll.until(check, timeout, clock=clock)
    if not ready:
        raise IchorError("%s: its Node is not Ready within %ds after the apply (%s); it stays held" % (name, timeout, detail))
