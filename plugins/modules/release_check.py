#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: release_check
short_description: Judge a running cluster against the release set and plan the rollout's next step
version_added: 0.1.0
description:
  - Reads the cluster the way it runs on Talos (each machine's Talos version, the control-plane component images in
    the control planes' machine configs, each Node's kubelet, the CNI) and judges each component C(up_to_date) or
    C(behind) against the release set (ADR 0113). A component newer than the set is refused.
  - Validates an optional desired change against the versions stored in the cluster record (ConfigMap
    C(ichor-cluster) in C(ichor-system)); a changed value is accepted only when it is the pinned one and not lower
    than the stored one. There is no override.
  - Reads every machine's config with the config engine to find the contract form it is in (the render at that
    contract, with the images it runs, equals the live config). A machine not yet in the set's contract form has a
    config change pending (the C(config) step); the Versions table's contract is the oldest form. A machine whose
    config the engine cannot render (a path no spec field covers, another cluster's bundle) is refused before any
    step starts, because the config and Kubernetes steps render whole configs.
  - Plans the rollout, in order C(talos), C(config), C(kubernetes), C(cilium), and returns the first step still
    needed with the Versions table. Refuses a cluster whose Kubernetes is more than one minor behind or not supported
    by the set's Talos. Read-only.
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.connection
  - maesh.ichor.rollout
attributes:
  check_mode:
    support: full
    description: Reads only.
  diff_mode:
    support: none
    description: Nothing is changed.
options:
  desired:
    description:
      - A desired change to validate against the stored versions, with any of C(talos), C(kubernetes), C(contract).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Where does the cluster stand against the release set
  maesh.ichor.release_check:
    talosconfig: "{{ ichor_talosconfig }}"
    kubeconfig: "{{ ichor_kubeconfig }}"
    machines:
      - {name: cp-1, address: 10.0.0.11, role: controlplane}
      - {name: worker-1, address: 10.0.0.21, role: worker}
  register: release
"""

RETURN = r"""
release_set:
  description: The release set.
  returned: always
  type: dict
  sample: {"talos": "v1.14.5", "contract": "v1.14", "kubernetes": "v1.36.6", "cilium": "1.20.4"}
versions:
  description: The Versions table, one row per component (component, running, target, state).
  returned: success
  type: list
  elements: dict
components:
  description: Per component, C(up_to_date) or C(behind).
  returned: success
  type: dict
  sample: {"talos": "behind", "contract": "behind", "kubernetes": "behind", "cilium": "up_to_date"}
steps:
  description: Every step still needed, in order, each with C(step), C(machines) and C(lines).
  returned: success
  type: list
  elements: dict
step:
  description: The first step still needed (C(talos), C(config), C(kubernetes), C(cilium)), or an empty string.
  returned: success
  type: str
config_pending:
  description: The machines whose config is not yet in the set's contract form (C(name), C(form)), control planes first.
  returned: success
  type: list
  elements: dict
cni:
  description: The detected CNI (name, version, image).
  returned: success
  type: dict
plan:
  description: The Versions table and the next step, as lines.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.maesh.ichor.plugins.module_utils import cluster_state, release
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import model as rollout
from ansible_collections.maesh.ichor.plugins.module_utils.connection import (
    fail, kube_client_for, talos_client_for)
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import plan

STATE_KEYS = {"Talos": "talos", "Version contract": "contract", "Kubernetes": "kubernetes", "Cilium": "cilium"}


def main():
    module = AnsibleModule(argument_spec=cluster_state.rollout_argument_spec(desired=dict(type="dict", default={})),
                           supports_check_mode=True)
    result = dict(changed=False, release_set=release.release_set(), plan=[])
    machines = module.params["machines"]
    talos = talos_client_for(module)
    kube = kube_client_for(module)
    try:
        state = cluster_state.read(talos, kube, machines)
        stored = cluster_state.stored_versions(state["record"])
        for field, desired in sorted((module.params["desired"] or {}).items()):
            if field not in stored:
                module.fail_json(msg="desired: unknown field %r (talos, kubernetes, contract)" % field, **result)
            refusal = release.validate_change(field, stored[field], desired)
            if refusal:
                module.fail_json(msg=refusal, **result)
        plan.check_not_newer(state["machines"], state["kubernetes"], None, state["cni"])
        model = cluster_state.config_model(cluster_state.live_from(state), module.params["cluster"],
                                           module.params["secrets"])
        pending = [{"name": m.name, "form": m.form} for m in rollout.config_pending(model)]
        contract = rollout.lowest_form(model)
        result["config_pending"] = pending
        kubernetes = plan.lowest(state["kubernetes"].values())
        rows = plan.versions_table(state["machines"], kubernetes, contract, state["cni"])
        result.update(versions=rows, cni=state["cni"],
                      components=dict((STATE_KEYS[r["component"]], r["state"].lower().replace(" ", "_"))
                                      for r in rows))
        result["plan"] = plan.format_table(rows)
        steps = plan.plan_rollout(state["machines"], state["kubernetes"], contract, state["cni"], pending)
    except plan.Refused as exc:
        fail(module, exc, **result)
    except Exception as exc:  # pylint: disable=broad-except
        fail(module, exc, **result)
    finally:
        talos.close()
    result.update(steps=steps, step=steps[0]["step"] if steps else "")
    if steps:
        result["plan"] += ["next step: %s" % steps[0]["step"]] + steps[0]["lines"]
        result["plan"] += ["then: %s" % ", ".join(s["step"] for s in steps[1:])] if steps[1:] else []
    else:
        result["plan"].append("the cluster is at the release set; nothing to do")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
