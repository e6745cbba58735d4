# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout's Kubernetes step: removed APIs still in use refuse it; each
machine's config is rendered by the config engine and applied without a reboot, in phases (the
control planes, then kube-proxy with its DaemonSet, then the kubelets, each waited for one at a
time), every apply read back. ``run`` is the ``kubernetes_upgrade`` module's flow."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.common import images, poll
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.config import documents
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record, nodes
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.errors import KubeError
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import model as rollout
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import state
from ansible_collections.maesh.ichor.plugins.module_utils.rollout.errors import UpgradeFailed
from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine

_DEPRECATED = re.compile(r'^apiserver_requested_deprecated_apis\{([^}]*)\}\s+(\S+)', re.M)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def removed_apis_in_use(metrics_text, target):
    """APIs still requested whose removed_release is at or below the target minor (apiserver /metrics)."""
    target_minor = release.minor(target)
    hits = set()
    for labels, value in _DEPRECATED.findall(metrics_text or ""):
        fields = dict(_LABEL.findall(labels))
        removed = fields.get("removed_release")
        if not removed or float(value) <= 0:
            continue
        if release.minor(removed) <= target_minor:
            group = fields.get("group") or "core"
            hits.add("%s/%s %s (removed in %s)" % (group, fields.get("version"), fields.get("resource"), removed))
    return sorted(hits)


def check_removed_apis(metrics_text, target):
    """Refuse the Kubernetes step (UpgradeFailed) while an API the target no longer serves is requested."""
    hits = removed_apis_in_use(metrics_text, target)
    if hits:
        raise UpgradeFailed("removed APIs are still in use, Kubernetes %s no longer serves them: %s; move their "
                            "clients to the replacement APIs first" % (target, "; ".join(hits)))


def wait_kubelet(kube, m, target, timeout, interval=0.5, clock=None):
    """Wait for machine m's Node (the one Talos names for it) to report the kubelet at target and Ready."""
    def at_target():
        node = nodes.get(kube, m.node_name)
        return nodes.info(node).get("kubeletVersion") == target and nodes.ready(node), None

    if not poll.until(at_target, timeout, interval, clock)[0]:
        raise UpgradeFailed("the kubelet of %s did not report %s and Ready on its Node %s within %ss; the remaining "
                            "machines were not touched; rerun to continue" % (m.name, target, m.node_name, int(timeout)))


def _proxy_daemonset(kube, model):
    """kube-system/kube-proxy when Talos runs kube-proxy (not replaced by the CNI) and it exists."""
    if model.cluster["cni"]["kubeProxy"] == "replaced":
        return None
    return kube.get("apps/v1", "DaemonSet", "kube-proxy", "kube-system")


def _retagged(image, target):
    """kube-proxy's image at target (tag replaced, digest dropped); any other image, or none we can read, as is."""
    try:
        ref = images.parse(image)
    except images.ImageRefError:
        return image
    return "%s:%s" % (ref.repository, target) if ref.repository.endswith("/kube-proxy") else image


def run(params, conn, check_mode, clock=None):
    """The step over ``params["machines"]``; the result dict (plan, removed_apis, diff).

    Every failure (IchorError) carries the result so far: the plan and the removed APIs found.
    """
    result = dict(changed=False, plan=[], removed_apis=[])
    try:
        return _run(params, conn, check_mode, result, clock)
    except IchorError as exc:
        exc.result = result
        raise


def _run(params, conn, check_mode, result, clock):
    target = release.KUBERNETES
    client = conn.talos()
    kube = conn.kube()
    # the record's handed-over Cilium inline entries stay out of every render: this step never puts one back
    model = state.config_model(state.live_machines(client, params["machines"]), params["cluster"], params["secrets"],
                               cluster_record.read(kube), kube)
    phases = rollout.kubernetes_phases(model, target)
    try:
        metrics = kube.raw_get("/metrics")
    except KubeError as exc:
        raise UpgradeFailed("cannot read the API server's /metrics to check for removed APIs (%s); the kubeconfig's user "
                            "needs get on the non-resource URL /metrics" % exc)
    result["removed_apis"] = removed_apis_in_use(metrics, target)
    check_removed_apis(metrics, target)
    for phase, work in phases:
        for m, phase_images, _rendered in work:
            moved = [c for c in dict(rollout.PHASES)[phase] if phase_images.get(c) != m.images.get(c)]
            what = phase if moved == [phase] else "%s (%s)" % (phase, ", ".join(moved))
            node = " (Node %s)" % m.node_name if phase == "kubelet" and m.node_name != m.name else ""
            result["plan"].append("%s%s: %s to %s (no reboot)" % (m.name, node, what, target))
    final = dict((m.name, rendered) for _phase, work in phases for m, _images, rendered in work)
    diffs = [{"before_header": m.name, "before": rollout.masked_text(m.docs),
              "after_header": "%s (Kubernetes %s)" % (m.name, target), "after": rollout.masked_text(final[m.name])}
             for m in rollout.ordered(model.machines) if m.name in final]
    proxy_ds = _proxy_daemonset(kube, model)
    proxy_containers = (proxy_ds or {}).get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
    proxy_behind = any(_retagged(c.get("image", ""), target) != c.get("image") for c in proxy_containers)
    if proxy_behind:
        result["plan"].append("kube-system/kube-proxy DaemonSet to %s" % target)
    if not result["plan"]:
        result["plan"] = ["Kubernetes is at %s on every machine; nothing to do" % target]
        return result
    registered = nodes.names(kube)  # every kubelet is waited for on its Node: a machine without one would fail mid-way
    missing = [(m.name, m.node, m.node_name) for m in rollout.ordered(model.machines)
               if m.name in final and m.node_name not in registered]
    if missing:
        raise UpgradeFailed(nodes.unregistered(*missing))
    result.update(changed=True, diff=diffs)
    if check_mode:
        return result
    for phase, work in phases:
        for m, _images, rendered in work:
            machine.apply_config(client, m.node, documents.emit(rendered))
            if not state.reads_back(client, m, model, rendered):
                raise UpgradeFailed("%s: the config read back after the %s phase differs from the render; the remaining "
                                    "machines were not touched" % (m.name, phase))
            if phase == "kubelet":
                wait_kubelet(kube, m, target, params["wait_timeout"], clock=clock)
        if phase == "kube-proxy" and proxy_behind:
            kube.apply({"apiVersion": "apps/v1", "kind": "DaemonSet",
                        "metadata": {"name": "kube-proxy", "namespace": "kube-system"},
                        "spec": {"template": {"spec": {"containers": [
                            {"name": c["name"], "image": _retagged(c["image"], target)} for c in proxy_containers]}}}},
                       "ichor-upgrade", force=True)
    return result
