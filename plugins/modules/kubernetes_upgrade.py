#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: kubernetes_upgrade
short_description: The rollout's Kubernetes step - control planes, then kube-proxy, then the kubelets, no reboot
version_added: 0.1.0
description:
  - Moves Kubernetes as it runs on Talos to the release set's version. Each machine's config is rendered with the
    config engine at the set's contract and Kubernetes version and applied without a reboot, in phases - the control
    planes one at a time (API server, controller manager, scheduler), then kube-proxy (its image in the control
    planes' configs, and the C(kube-proxy) DaemonSet in C(kube-system) when Talos runs kube-proxy), then the kubelet
    of every machine, one at a time, waiting for its Node to report the new version and Ready. Each phase's render
    keeps the later phases' components at the version they run, and every apply is read back and must equal it.
  - Every machine's config must already be in the set's contract form (the C(config) step comes first) and be what
    the engine renders (nothing a spec field cannot cover would be lost); otherwise nothing is written.
  - Before anything is written, asks the API server which deprecated APIs are still requested
    (C(apiserver_requested_deprecated_apis) in C(/metrics)); an API whose C(removed_release) is at or below the
    target refuses the step with the API names.
  - A machine already at the target is skipped, so a failed run resumes where it stopped.
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.connection
  - maesh.ichor.rollout
attributes:
  check_mode:
    support: full
    description: The plan; nothing is sent.
  diff_mode:
    support: full
    description: The live and the final rendered config of each machine, every secret value replaced by C(<redacted>).
options:
  wait:
    description: Seconds to wait for each kubelet to report the new version.
    type: float
    default: 600
"""

EXAMPLES = r"""
- name: Kubernetes step
  maesh.ichor.kubernetes_upgrade:
    talosconfig: "{{ ichor_talosconfig }}"
    kubeconfig: "{{ ichor_kubeconfig }}"
    machines: "{{ groups | maesh.ichor.machines(hostvars) }}"
"""

RETURN = r"""
plan:
  description: What was (or would be) done, in order.
  returned: always
  type: list
  elements: str
removed_apis:
  description: Deprecated APIs still in use that the target removes (the step is refused when any).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.maesh.ichor.plugins.module_utils import release
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import state as cluster_state
from ansible_collections.maesh.ichor.plugins.module_utils.config import documents
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import model as rollout
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.connection import (
    fail, kube_client_for, talos_client_for)
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeError
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, machine
from ansible_collections.maesh.ichor.plugins.module_utils.rollout.errors import UpgradeFailed
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import kubernetes_step


def _proxy_daemonset(kube, model):
    """kube-system/kube-proxy when Talos runs kube-proxy (not replaced by the CNI) and it exists."""
    if model.cluster["cni"]["kubeProxy"] == "replaced":
        return None
    return kube.get("apps/v1", "DaemonSet", "kube-proxy", "kube-system")


def _retagged(image, target):
    name = image.rsplit("@", 1)[0].rsplit(":", 1)[0]
    return "%s:%s" % (name, target) if name.endswith("/kube-proxy") else image


def main():
    module = AnsibleModule(argument_spec=cluster_state.rollout_argument_spec(wait=dict(type="float", default=600.0)),
                           supports_check_mode=True)
    params = module.params
    target = release.KUBERNETES
    client = talos_client_for(module)
    kube = kube_client_for(module)
    result = dict(changed=False, plan=[], removed_apis=[])
    try:
        model = cluster_state.config_model(cluster_state.live_machines(client, params["machines"]),
                                           params["cluster"], params["secrets"])
        phases = rollout.kubernetes_phases(model, target)
        try:
            metrics = kube.raw_get("/metrics")
        except KubeError as exc:
            fail(module, "cannot read the API server's /metrics to check for removed APIs (%s); the kubeconfig's user "
                 "needs get on the non-resource URL /metrics" % exc, **result)
        result["removed_apis"] = kubernetes_step.removed_apis_in_use(metrics, target)
        kubernetes_step.check_removed_apis(metrics, target)
        diffs = []
        for phase, work in phases:
            for m, images, rendered in work:
                moved = [c for c in dict(rollout.PHASES)[phase] if images.get(c) != m.images.get(c)]
                what = phase if moved == [phase] else "%s (%s)" % (phase, ", ".join(moved))
                result["plan"].append("%s: %s to %s (no reboot)" % (m.name, what, target))
        final = dict((m.name, rendered) for _phase, work in phases for m, _images, rendered in work)
        for m in rollout.ordered(model.machines):
            if m.name in final:
                diffs.append({"before_header": m.name, "before": rollout.masked_text(m.docs),
                              "after_header": "%s (Kubernetes %s)" % (m.name, target),
                              "after": rollout.masked_text(final[m.name])})
        proxy_ds = _proxy_daemonset(kube, model)
        proxy_containers = (proxy_ds or {}).get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
        proxy_behind = any(_retagged(c.get("image", ""), target) != c.get("image") for c in proxy_containers)
        if proxy_behind:
            result["plan"].append("kube-system/kube-proxy DaemonSet to %s" % target)
        if not result["plan"]:
            result["plan"] = ["Kubernetes is at %s on every machine; nothing to do" % target]
            module.exit_json(**result)
        result["changed"] = True
        if module._diff:
            result["diff"] = diffs
        if module.check_mode:
            module.exit_json(**result)
        for phase, work in phases:
            for m, images, rendered in work:
                machine.apply_config(client, m.address, documents.emit(rendered))
                if not cluster_state.reads_back(client, m, model, rendered):
                    fail(module, "%s: the config read back after the %s phase differs from the render; the remaining "
                         "machines were not touched" % (m.name, phase), **result)
                if phase == "kubelet":
                    kubernetes_step.wait_kubelet(kube, m.name, target, params["wait"])
            if phase == "kube-proxy" and proxy_behind:
                kube.apply({"apiVersion": "apps/v1", "kind": "DaemonSet",
                            "metadata": {"name": "kube-proxy", "namespace": "kube-system"},
                            "spec": {"template": {"spec": {"containers": [
                                {"name": c["name"], "image": _retagged(c["image"], target)}
                                for c in proxy_containers]}}}},
                           "ichor-upgrade", force=True)
    except (ConfigError, errors.TalosError, UpgradeFailed, KubeError) as exc:
        fail(module, exc, **result)
    finally:
        client.close()
    module.exit_json(**result)


if __name__ == "__main__":
    main()
