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
    Kubernetes images the machine runs now) and applies it, control planes first, one machine at a time.
  - Before anything is written, every machine's live config must be what the engine renders at some contract
    (nothing a spec field cannot cover would be lost), and every machine must run the set's Talos.
  - Talos decides whether a config change needs a reboot; a dry run asks it, and the plan names the machines the step
    reboots. A control plane is not started while etcd is unhealthy; after a reboot the step waits for the machine,
    its etcd member with a quorum, and its Node Ready before the next machine starts.
  - The config is read back and must equal the render. A machine already in the set's form is skipped, so a failed
    run resumes where it stopped.
notes:
  - The flow of this module is C(plugins/module_utils/rollout/config_step.py), run in the controller by its action
    plugin C(plugins/action/config_upgrade.py).
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.talos
  - maesh.ichor.kubernetes
  - maesh.ichor.rollout
  - maesh.ichor.machines
  - maesh.ichor.cluster_spec
attributes:
  check_mode:
    support: full
    description: The plan, with Talos's dry-run answer on reboots; nothing is applied.
  diff_mode:
    support: full
    description: The live and the rendered config of each machine, every secret value replaced by C(<redacted>).
options:
  wait_timeout:
    description:
      - Seconds to wait for a machine to come back after a reboot (its Talos, its etcd member, its Node Ready).
      - There is no C(wait) option - the wait between machines is the step's safety gate (the next machine starts
        only once the one before is back and healthy), so it cannot be skipped.
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
  description: Per machine moved (or to move), in the step's order (control planes first).
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The machine's name.
      type: str
    from:
      description: The contract form its config was in.
      type: str
    reboot:
      description: Whether Talos said the change needs a reboot (its dry-run answer).
      type: bool
    drop:
      description:
        - The Cilium inline manifest entries its config still carries that the cluster record names as handed over
          (M(maesh.ichor.cilium_takeover)); the render leaves them out, so the apply removes them.
      type: list
      elements: str
  sample: [{"name": "cp-1", "from": "v1.13", "reboot": false, "drop": ["cilium"]}]
"""
