# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment:
    # The cluster's machines as specs.machines() validates them. A module that says more of them (where they are read
    # from, whether they are required) gives its own machines.description or machines.required: ansible-doc merges a
    # module's keys over a fragment's.
    DOCUMENTATION = r"""
options:
  machines:
    description:
      - The cluster's machines; usually built from the inventory groups with the C(maesh.ichor.machines) filter (the
        C(maesh.ichor.talos) inventory plugin reads them from the cluster's discovery membership).
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The machine's name (its Kubernetes Node name).
        type: str
        required: true
      node:
        description: The machine's Talos API address (its C(ansible_host)).
        type: str
        required: true
      role:
        description: The machine's role as the inventory says it.
        type: str
        required: true
        choices: [controlplane, worker]
"""
