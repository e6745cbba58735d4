#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: talos_facts
short_description: Read what a Talos machine is over the Talos API
version_added: 0.1.0
description:
  - Reads one Talos machine's version, UUID, hostname, role, stage, cluster and the cluster's discovery
    members over the Talos API, and returns them as the C(talos) fact.
  - The machine is addressed with O(node) through the talosconfig's endpoints (the C(node) gRPC metadata),
    as C(talosctl -n) does. Read-only.
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.talos
attributes:
  check_mode:
    support: full
    description: Reads only; check mode returns the same facts.
  diff_mode:
    support: none
    description: Nothing is changed, so there is nothing to diff.
options:
  node:
    description:
      - Address of the machine to read (without port). Defaults to the endpoint itself.
      - In an inventory of Talos machines this is usually the host's C(ansible_host).
    type: str
"""

EXAMPLES = r"""
- name: Read the Talos facts of every machine
  hosts: controlplane:worker
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  tasks:
    - name: Read facts
      maesh.ichor.talos_facts:
        talosconfig: "{{ ichor_talosconfig }}"
        node: "{{ ansible_host | default(inventory_hostname) }}"

    - name: Show the version
      ansible.builtin.debug:
        msg: "{{ inventory_hostname }} runs Talos {{ ansible_facts.talos.version }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts about the machine.
  returned: success
  type: dict
  contains:
    talos:
      description: The machine as its Talos API reports it.
      returned: success
      type: dict
      contains:
        node:
          description: The address the facts were read from.
          type: str
          sample: 10.0.0.11
        version:
          description: The Talos version (tag) the machine runs.
          type: str
          sample: v1.14.1
        uuid:
          description: The machine's SMBIOS UUID (SystemInformation resource).
          type: str
          sample: 4c4c4544-0042-3010-8050-b4c04f4e3332
        hostname:
          description: The machine's hostname.
          type: str
          sample: cp-1
        role:
          description: C(controlplane) or C(worker), from the machine's own discovery member.
          type: str
          sample: controlplane
        stage:
          description: The machine stage (booting, installing, maintenance, running, rebooting, ...).
          type: str
          sample: running
        ready:
          description: Whether the machine reports itself ready.
          type: bool
          sample: true
        node_id:
          description: The machine's discovery node identity.
          type: str
        cluster:
          description: The cluster the machine belongs to.
          type: dict
          contains:
            name:
              description: The cluster name.
              type: str
            id:
              description: The cluster ID.
              type: str
        members:
          description: The cluster's discovery members as this machine sees them.
          type: list
          elements: dict
          contains:
            id:
              description: Node identity.
              type: str
            hostname:
              description: Member hostname.
              type: str
            addresses:
              description: Member addresses.
              type: list
              elements: str
            machine_type:
              description: C(controlplane), C(init) or C(worker).
              type: str
plan:
  description: Human-readable lines about the machine, gathered by the C(maesh.ichor.plan) callback.
  returned: always
  type: list
  elements: str
  sample: ["cp-1 (10.0.0.11): Talos v1.14.1, controlplane, running, cluster prod (5 members)"]
"""


from ansible_collections.maesh.ichor.plugins.module_utils.ansible_module import runner, specs
from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine


def main():
    module = specs.module(specs.spec(dict(node=dict(type="str")), talos=True), supports_check_mode=True)
    runner.run(module, lambda conn: machine.facts_result(conn.talos(), module.params["node"]))


if __name__ == "__main__":
    main()
