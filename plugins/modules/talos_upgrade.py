#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: talos_upgrade
short_description: Upgrade one Talos machine to the release set's Talos and wait until it is back and healthy
version_added: 0.1.0
description:
  - "The rollout's C(talos) step for one machine (run it with C(serial: 1), control planes first)."
  - A machine already at the target is skipped (C(changed=false)), so a failed run resumes where it stopped.
  - A control plane is not started while etcd is unhealthy.
  - Talos v1.13+ machines are upgraded with ImageService Pull, LifecycleService Upgrade and a reboot (as
    C(talosctl) 1.14 does); v1.12 machines with the legacy Upgrade call.
  - Waits for the machine to answer with the new version, a control plane's etcd member to be healthy with the
    cluster in quorum, and its Kubernetes Node to be Ready (when a kubeconfig is given).
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.connection
attributes:
  check_mode:
    support: full
    description: Says what it would do; nothing is sent.
  diff_mode:
    support: full
    description: The Talos version before and after.
options:
  node:
    description: The machine's address.
    type: str
    required: true
  hostname:
    description: The machine's name (its Kubernetes Node's name). Defaults to the hostname Talos reports.
    type: str
  role:
    description: C(controlplane) or C(worker).
    type: str
    choices: [controlplane, worker]
    required: true
  image:
    description: The installer image; defaults to C(ghcr.io/siderolabs/installer) at the release set's Talos.
    type: str
  wait:
    description: Seconds to wait for the machine to be back and healthy.
    type: float
    default: 900
"""

EXAMPLES = r"""
- name: Upgrade Talos, one machine at a time
  hosts: controlplane:worker
  serial: 1
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  tasks:
    - name: Upgrade this machine
      maesh.ichor.talos_upgrade:
        talosconfig: "{{ ichor_talosconfig }}"
        kubeconfig: "{{ ichor_kubeconfig | default(omit) }}"
        node: "{{ ansible_host }}"
        hostname: "{{ inventory_hostname }}"
        role: "{{ 'controlplane' if 'controlplane' in group_names else 'worker' }}"
"""

RETURN = r"""
before:
  description: The Talos version before.
  returned: always
  type: str
after:
  description: The Talos version after (or that would be, in check mode).
  returned: always
  type: str
plan:
  description: What was (or would be) done.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.maesh.ichor.plugins.module_utils.connection import (
    fail, kube_client_for, talos_client_for, with_connection)
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, machine
from ansible_collections.maesh.ichor.plugins.module_utils.rollout.errors import UpgradeFailed
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import talos_step
from ansible_collections.maesh.ichor.plugins.module_utils.talos import etcd


def main():
    module = AnsibleModule(argument_spec=with_connection(dict(
        node=dict(type="str", required=True),
        hostname=dict(type="str"),
        role=dict(type="str", required=True, choices=["controlplane", "worker"]),
        image=dict(type="str"),
        wait=dict(type="float", default=900.0),
    )), supports_check_mode=True)
    p = module.params
    image = p["image"] or talos_step.installer_image()
    target = talos_step.image_version(image)
    client = talos_client_for(module)
    kube = kube_client_for(module) if (p["kubeconfig"] or p["kubeconfig_content"]) else None
    node = p["node"]
    before = ""
    try:
        facts = client.run(machine.machine_facts(client, node))
        hostname = p["hostname"] or facts["hostname"]
        before = facts["version"]
        result = dict(before=before, after=target, diff={"before": "talos: %s\n" % before, "after": "talos: %s\n" % target})
        if before == target:
            result["plan"] = ["%s (%s): already at Talos %s, skipped" % (hostname, node, target)]
            result["diff"] = {"before": "", "after": ""}
            module.exit_json(changed=False, **result)
        if p["role"] == "controlplane":
            healthy, detail = etcd.health(client, node)
            if not healthy:
                fail(module, "%s is a control plane and etcd is not healthy (%s); no upgrade was started" % (
                    hostname, detail), plan=[], before=before, after=before)
        result["plan"] = ["%s (%s): upgrade Talos from %s to %s with %s, reboot, wait for it%s" % (
            hostname, node, before, target, image,
            ", its etcd member and its Node" if p["role"] == "controlplane" else " and its Node")]
        if module.check_mode:
            module.exit_json(changed=True, **result)
        talos_step.start_upgrade(client, node, before, image)
        talos_step.wait_back(client, kube, node, hostname, p["role"], target, p["wait"])
    except (errors.TalosError, UpgradeFailed) as exc:
        fail(module, exc, plan=[], before=before, after="")
    finally:
        client.close()
    module.exit_json(changed=True, **result)


if __name__ == "__main__":
    main()
