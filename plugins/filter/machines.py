# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: machines
short_description: The cluster's machines from the inventory groups controlplane and worker
version_added: 0.1.0
description:
  - Turns the inventory's C(controlplane) and C(worker) groups into the list of machines the cluster-wide modules
    take, each with C(name), C(node) (C(ansible_host), else the host name) and C(role); control planes first.
author:
  - maesh.ichor developers (@maesh-ichor)
options:
  _input:
    description: The C(groups) variable.
    type: dict
    required: true
  hostvars:
    description: The C(hostvars) variable.
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Judge the cluster
  maesh.ichor.release_check:
    machines: "{{ groups | maesh.ichor.machines(hostvars) }}"
"""

RETURN = r"""
_value:
  description: The machines, control planes first (the suboptions of the rollout modules' O(maesh.ichor.release_check#module:machines)).
  type: list
  elements: dict
  contains:
    name:
      description: The inventory host name (the machine's Kubernetes Node name).
      type: str
    node:
      description: The machine's Talos API address (C(ansible_host), else the host name).
      type: str
    role:
      description: C(controlplane) or C(worker), from its inventory group.
      type: str
"""


def machines(groups, hostvars):
    out = []
    for role in ("controlplane", "worker"):
        for host in groups.get(role, []):
            node = hostvars[host].get("ansible_host") or host
            out.append({"name": host, "node": str(node), "role": role})
    return out


class FilterModule:
    def filters(self):
        return {"machines": machines}
