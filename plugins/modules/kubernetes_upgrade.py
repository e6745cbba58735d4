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
  - Moves Kubernetes as it runs on Talos to the release set's version by changing the component images in the
    machines' configs and applying them without a reboot, control planes one at a time, then kube-proxy (its image
    in the control planes' configs, and the C(kube-proxy) DaemonSet in C(kube-system) when one exists), then the
    kubelet of every machine, one at a time, waiting for its Node to report the new version and Ready.
  - Before anything is written, asks the API server which deprecated APIs are still requested
    (C(apiserver_requested_deprecated_apis) in C(/metrics)); an API whose C(removed_release) is at or below the
    target refuses the step with the API names.
  - A machine already at the target is skipped, so a failed run resumes where it stopped.
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.connection
attributes:
  check_mode:
    support: full
    description: The plan; nothing is sent.
  diff_mode:
    support: none
    description: The plan lines name every image that changes.
options:
  machines:
    description: The cluster's machines (C(name), C(address), C(role)); see the C(maesh.ichor.machines) filter.
    type: list
    elements: dict
    required: true
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

from ansible_collections.maesh.ichor.plugins.module_utils import release, upgrade
from ansible_collections.maesh.ichor.plugins.module_utils.connection import (
    fail, kube_client_for, talos_client_for, with_connection)
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeError
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, machine
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res

PROXY = ("kube-proxy",)
KUBELET = ("kubelet",)


def _config(client, node):
    item = client.run(machine.get_resource(client, res.MACHINE_CONFIG, node))
    return item["spec"] if item else ""


def main():
    module = AnsibleModule(argument_spec=with_connection(dict(
        machines=dict(type="list", elements="dict", required=True),
        wait=dict(type="float", default=600.0),
    )), supports_check_mode=True)
    target = release.KUBERNETES
    machines = sorted(module.params["machines"], key=lambda m: (m.get("role") != "controlplane", m.get("name")))
    client = talos_client_for(module)
    kube = kube_client_for(module)
    result = dict(changed=False, plan=[], removed_apis=[])
    try:
        try:
            metrics = kube.raw_get("/metrics")
        except KubeError as exc:
            fail(module, "cannot read the API server's /metrics to check for removed APIs (%s); the kubeconfig's user "
                 "needs get on the non-resource URL /metrics" % exc, **result)
        result["removed_apis"] = upgrade.removed_apis_in_use(metrics, target)
        if result["removed_apis"]:
            fail(module, "removed APIs are still in use, Kubernetes %s no longer serves them: %s; move their clients "
                 "to the replacement APIs first" % (target, "; ".join(result["removed_apis"])), **result)
        work = []  # (machine, components, phase)
        cps = [m for m in machines if m["role"] == "controlplane"]
        phases = (("control plane", cps, upgrade.CONTROL_PLANE_COMPONENTS), ("kube-proxy", cps, PROXY),
                  ("kubelet", machines, KUBELET))
        for phase, group, components in phases:
            for m in group:
                changed = upgrade.retag(_config(client, m["address"]), components, target)[1]
                if changed:
                    work.append((m, components, phase))
                    result["plan"].append("%s: %s %s to %s (no reboot)" % (m["name"], phase, ", ".join(changed), target))
        proxy_ds = kube.get("apps/v1", "DaemonSet", "kube-proxy", "kube-system")
        if proxy_ds is not None:
            containers = proxy_ds["spec"]["template"]["spec"]["containers"]
            if any(not c.get("image", "").endswith(":" + target) for c in containers):
                result["plan"].append("kube-system/kube-proxy DaemonSet to %s" % target)
        if not result["plan"]:
            result["plan"] = ["Kubernetes is at %s on every machine; nothing to do" % target]
            module.exit_json(**result)
        if module.check_mode:
            result["changed"] = True
            module.exit_json(**result)
        for m, components, phase in work:
            text, changed = upgrade.retag(_config(client, m["address"]), components, target)
            if not changed:
                continue
            upgrade.apply_no_reboot(client, m["address"], text)
            if upgrade.retag(_config(client, m["address"]), components, target)[1]:
                fail(module, "%s: the %s images did not read back at %s after the apply" % (m["name"], phase, target),
                     **result)
            if phase == "kubelet":
                upgrade.wait_kubelet(kube, m["name"], target, module.params["wait"])
            result["changed"] = True
        if proxy_ds is not None:
            for c in proxy_ds["spec"]["template"]["spec"]["containers"]:
                c["image"] = upgrade.retag_image(c["image"], PROXY, target)[0]
            kube.apply({"apiVersion": "apps/v1", "kind": "DaemonSet",
                        "metadata": {"name": "kube-proxy", "namespace": "kube-system"},
                        "spec": {"template": {"spec": {"containers": [
                            {"name": c["name"], "image": c["image"]}
                            for c in proxy_ds["spec"]["template"]["spec"]["containers"]]}}}},
                       "ichor-upgrade", force=True)
            result["changed"] = True
    except (errors.TalosError, upgrade.UpgradeFailed, KubeError) as exc:
        fail(module, exc, **result)
    finally:
        client.close()
    module.exit_json(**result)


if __name__ == "__main__":
    main()
