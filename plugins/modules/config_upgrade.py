#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: config_upgrade
short_description: The rollout's config step - move each machine's config to the release set's contract form
version_added: 0.1.0
description:
  - After the Talos step, a machine's config is still in the form of the contract it was made for. This step renders
    each such config with the config engine at the release set's contract (the same spec, secrets bundle and
    Kubernetes images the machine runs now) and applies it, control planes first, one machine at a time (ADR 0113).
  - Before anything is written, every machine's live config must be what the engine renders at some contract
    (nothing a spec field cannot cover would be lost), and every machine must run the set's Talos.
  - Talos decides whether a config change needs a reboot; a dry run asks it, and the plan names the machines the step
    reboots. A control plane is not started while etcd is unhealthy; after a reboot the step waits for the machine,
    its etcd member with a quorum, and its Node Ready before the next machine starts.
  - The config is read back and must equal the render. A machine already in the set's form is skipped, so a failed
    run resumes where it stopped.
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.connection
  - maesh.ichor.rollout
attributes:
  check_mode:
    support: full
    description: The plan, with Talos's dry-run answer on reboots; nothing is applied.
  diff_mode:
    support: full
    description: The live and the rendered config of each machine, every secret value replaced by C(<redacted>).
options:
  wait:
    description: Seconds to wait for a machine to come back after a reboot.
    type: float
    default: 900
"""

EXAMPLES = r"""
- name: Config step
  maesh.ichor.config_upgrade:
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
machines:
  description: Per machine moved (or to move), C(name), C(from) (the contract form it was in) and C(reboot).
  returned: success
  type: list
  elements: dict
"""

import time

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
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import talos_step
from ansible_collections.maesh.ichor.plugins.module_utils.talos import etcd


def main():
    module = AnsibleModule(argument_spec=cluster_state.rollout_argument_spec(wait=dict(type="float", default=900.0)),
                           supports_check_mode=True)
    params = module.params
    result = dict(changed=False, plan=[], machines=[])
    client = talos_client_for(module)
    kube = kube_client_for(module)
    try:
        live = cluster_state.live_machines(client, params["machines"])
        early = [m for m in live if release.judge(m.talos, release.TALOS) != "up_to_date"]
        if early:
            fail(module, "the talos step is not done: %s; the config step runs after it" % ", ".join(
                "%s runs Talos %s" % (m.name, m.talos) for m in early), **result)
        model = cluster_state.config_model(live, params["cluster"], params["secrets"])
        pending = rollout.config_pending(model)
        if not pending:
            result["plan"].append("every machine's config is in the %s form; nothing to do" % release.CONTRACT)
            module.exit_json(**result)
        work = []
        diffs = []
        for m in pending:
            rendered = model.render(m, release.CONTRACT, m.images)
            reboot = machine.apply_needs_reboot(client, m.address, documents.emit(rendered))
            work.append((m, rendered, reboot))
            result["machines"].append({"name": m.name, "from": m.form, "reboot": reboot})
            result["plan"].append("%s: config from the %s form to %s (%s)" % (
                m.name, m.form, release.CONTRACT, "reboots" if reboot else "no reboot"))
            diffs.append({"before_header": "%s (%s form)" % (m.name, m.form), "before": rollout.masked_text(m.docs),
                          "after_header": "%s (%s form)" % (m.name, release.CONTRACT),
                          "after": rollout.masked_text(rendered)})
        rebooted = [m.name for m, _rendered, reboot in work if reboot]
        result["plan"].append("reboots: %s" % (", ".join(rebooted) if rebooted else "none"))
        result["changed"] = True
        if module._diff:
            result["diff"] = diffs
        if module.check_mode:
            module.exit_json(**result)
        for m, rendered, reboot in work:
            if m.controlplane:
                healthy, detail = etcd.health(client, m.address)
                if not healthy:
                    fail(module, "%s: etcd is not healthy (%s); a control plane is not started while etcd is "
                         "unhealthy: fix etcd and rerun" % (m.name, detail), **result)
            machine.apply_config(client, m.address, documents.emit(rendered), reboot)
            if reboot:
                client.close()
                time.sleep(1.0)
                client = talos_client_for(module)
                talos_step.wait_back(client, kube, m.address, m.name, m.role, m.talos, params["wait"])
            if not cluster_state.reads_back(client, m, model, rendered):
                fail(module, "%s: the config read back differs from the %s render; the remaining machines were not "
                     "touched" % (m.name, release.CONTRACT), **result)
            result["plan"].append("%s: now in the %s form, read back" % (m.name, release.CONTRACT))
    except (ConfigError, errors.TalosError, UpgradeFailed, KubeError) as exc:
        fail(module, exc, **result)
    finally:
        client.close()
    module.exit_json(**result)


if __name__ == "__main__":
    main()
