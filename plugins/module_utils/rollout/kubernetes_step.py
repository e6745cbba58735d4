# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout's Kubernetes step: removed APIs still in use refuse it; each
machine's config is rendered by the config engine and applied without a reboot, in phases (the
control planes, then kube-proxy with its DaemonSet, then the kubelets, each waited for one at a
time), every apply read back. ``run`` is the ``kubernetes_upgrade`` module's flow.

Before anything is applied, every component image the step's renders name is pulled on each machine the step changes
(``ImageService.Pull``, the machines in parallel through the Talos client's ``fan_out``, bounded by its one limit), as
talosctl 1.14's ``upgrade-k8s`` pre-pulls them (``pkg/cluster/kubernetes/talos_managed.go``, ``prePullImages``): the
control planes' static pod images into containerd's CRI namespace (``k8s.io``), where the kubelet runs them, and the
kubelet's image on every machine into the system namespace, where Talos runs the kubelet; kube-proxy is not pulled
(its DaemonSet's Pods pull it). A machine that cannot pull one fails the step, named, with nothing applied anywhere;
a machine without ImageService (Talos v1.12: Unimplemented) is skipped, as talosctl skips it.
"""

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
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import state, talos_step
from ansible_collections.maesh.ichor.plugins.module_utils.rollout.errors import UpgradeFailed
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, machine

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


# common.ContainerdNamespace NS_CRI: the namespace talosctl 1.14's upgrade-k8s pulls the static pod images into (the
# driver stays CRI, as talos_step.pull_request sends it: the CRI containerd, as the legacy MachineService.ImagePull)
CONTAINERD_NS_CRI = 2
NAMESPACE_NAMES = {talos_step.CONTAINERD_NS_SYSTEM: "system", CONTAINERD_NS_CRI: "k8s.io"}  # as containerd names them
# what upgrade-k8s pre-pulls, in its order: (component, containerd namespace, control planes only)
PREPULL = (("kube-apiserver", CONTAINERD_NS_CRI, True), ("kube-controller-manager", CONTAINERD_NS_CRI, True),
           ("kube-scheduler", CONTAINERD_NS_CRI, True), ("kubelet", talos_step.CONTAINERD_NS_SYSTEM, False))
_NAMED = 10  # machines a failure or a skip names before "and N more"


def _rendered_images(docs):
    """{component: image reference} of every Kubernetes component image the documents name."""
    out = {}

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "image" and isinstance(value, str):
                    try:
                        component = images.parse(value).path.rsplit("/", 1)[-1]
                    except images.ImageRefError:
                        continue
                    out.setdefault(component, value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    for doc in docs:
        walk(getattr(doc, "body", doc))
    return out


def prepull_images(controlplane, docs):
    """[(image, containerd namespace)] to pull on a machine before the step applies ``docs`` (its final render), as
    upgrade-k8s pulls them: a control plane's API server, controller manager and scheduler (CRI namespace), every
    machine's kubelet (system namespace)."""
    named = _rendered_images(docs)
    return [(named[component], namespace) for component, namespace, controlplanes_only in PREPULL
            if component in named and (controlplane or not controlplanes_only)]


def pull_request(image, namespace):
    """ImageService.Pull of ``image`` into ``namespace`` of the CRI containerd (talos_step's request, its namespace
    set)."""
    req = talos_step.pull_request(image)
    req.containerd.namespace = namespace
    return req


def _names(names):
    names = list(names)
    return ", ".join(names[:_NAMED]) + (" and %d more" % (len(names) - _NAMED) if len(names) > _NAMED else "")


def _machines(count):
    return "%d machine%s" % (count, "" if count == 1 else "s")


def plan_pulls(machines, final):
    """(pulled, wanted): ``pulled`` the result's entries, one per image and namespace, with the machines that pull it
    and those that are skipped (Talos v1.12 has no ImageService); ``wanted`` {node: (machine, [(image, namespace)])} of
    the machines that pull."""
    entries, wanted = {}, {}
    for m in machines:
        if m.name not in final:
            continue
        skip = release.minor(m.talos) < (1, 13)
        pulls = prepull_images(m.controlplane, final[m.name])
        for image, namespace in pulls:
            entry = entries.setdefault((image, namespace), dict(image=image, namespace=NAMESPACE_NAMES[namespace],
                                                                machines=[], skipped=[]))
            entry["skipped" if skip else "machines"].append(m.name)
        if pulls and not skip:
            wanted[m.node] = (m, pulls)
    return list(entries.values()), wanted


def pull_lines(pulled):
    """The plan's line of what is pulled before anything is applied, and one naming the machines skipped."""
    groups = {}
    for entry in pulled:
        if entry["machines"]:
            groups.setdefault(tuple(entry["machines"]), []).append("%s (%s namespace)" % (
                entry["image"], entry["namespace"]))
    lines = []
    if groups:
        lines.append("pull before anything is applied (ImageService.Pull): %s" % "; ".join(
            "%s on %s" % (", ".join(shown), _machines(len(ms))) for ms, shown in groups.items()))
    skipped = []
    for entry in pulled:
        skipped.extend(name for name in entry["skipped"] if name not in skipped)
    if skipped:
        lines.append("no pull before the step on %s: Talos v1.12 has no ImageService (each image is pulled when its "
                     "component starts)" % _names(skipped))
    return lines


def pull_all(client, pulled, wanted, timeout):
    """Pull each machine's images (its pulls one after another, the machines in parallel through ``fan_out``), each
    within ``timeout`` seconds; the entries of ``pulled`` keep the machines that pulled each image, and a machine that
    answers Unimplemented (no ImageService) is moved to their ``skipped``, as talosctl skips it. UpgradeFailed naming
    every machine that could not pull, with the image and what it said; nothing has been applied."""
    async def one(node):
        done = []
        for image, namespace in wanted[node][1]:
            try:
                await client.ainvoke("ImagePull", pull_request(image, namespace), node=node, timeout=timeout)
            except errors.TalosError as exc:
                if exc.code == "UNIMPLEMENTED":
                    return done, None, True
                return done, (image, exc), False  # a machine's first failure ends its pulls (talosctl stops there)
            done.append((image, namespace))
        return done, None, False

    outcomes = client.fan_out(one, list(wanted))
    done, failed, unimplemented = set(), [], set()
    for node, answer in outcomes.items():
        name = wanted[node][0].name
        if answer.error is not None:  # not raised by a pull (one() catches those): the machine's failure as a whole
            failed.append((name, "", answer.error))
            continue
        images_done, failure, skipped = answer.message
        done.update((name, image, NAMESPACE_NAMES[namespace]) for image, namespace in images_done)
        if skipped:
            unimplemented.add(name)
        elif failure is not None:
            failed.append((name,) + failure)
    for entry in pulled:
        entry["skipped"].extend(name for name in entry["machines"] if name in unimplemented)
        entry["machines"] = [name for name in entry["machines"] if (name, entry["image"], entry["namespace"]) in done]
    if failed:
        failed.sort(key=lambda item: item[0])
        raise UpgradeFailed("the Kubernetes images could not be pulled on %s (%s); nothing was applied: %s; make the "
                            "images reachable from these machines (the registry, its mirrors, its credentials) and "
                            "rerun" % (_machines(len(failed)), _names(item[0] for item in failed), "; ".join(
                                "%s: %s%s" % (name, "%s: " % image if image else "", why)
                                for name, image, why in failed[:_NAMED])))


def run(params, conn, check_mode, clock=None):
    """The step over ``params["machines"]``; the result dict (plan, removed_apis, pulled, diff).

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
    pulled, wanted = plan_pulls(rollout.ordered(model.machines), final)
    result["pulled"] = pulled
    result["plan"][:0] = pull_lines(pulled)
    if check_mode:
        result.update(changed=True, diff=diffs)
        return result
    pull_all(client, pulled, wanted, params["wait_timeout"])
    result.update(changed=True, diff=diffs)
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
