# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: missing_machines
short_description: The line that refuses a run holding part of the cluster the cluster record lists
version_added: 0.1.0
description:
  - Compares the machines of this run with those the cluster record lists (its C(nodes), written by
    M(maesh.ichor.init_record) and M(maesh.ichor.adopt_write)) and returns one line when the run holds fewer of them -
    naming how many and which are missing (ten, then C(and N more)) and the way on - and none when it holds every one.
  - A record entry is held by a machine of the run of its name, else of its node address, else of its UUID. A record
    without C(nodes) (none yet, or an earlier one) refuses nothing.
  - A role whose work is cluster-wide (one module over every machine, the cluster lock, the cluster record) reads the
    record with M(maesh.ichor.cluster_record) and asserts that the list is empty before anything is written, so that
    an AWX job slice or a C(--limit) run is not taken for the whole cluster. A filter cannot read the cluster, so the
    record is its input.
  - The rule is C(plugins/module_utils/cluster/subset.py).
author:
  - maesh.ichor developers (@maesh-ichor)
options:
  _input:
    description: The cluster record's data (the RV(maesh.ichor.cluster_record#module:record) it returns).
    type: dict
    required: true
  machines:
    description:
      - The machines of this run, as the P(maesh.ichor.machines#filter) filter returns them (C(name), C(node), C(role),
        and C(uuid) with O(maesh.ichor.machines#filter:details)).
      - With C(--limit), only the machines it leaves in - those of the names the C(inventory_hostnames) lookup gives
        for C(ansible_limit) (see the examples).
    type: list
    elements: dict
    required: true
  deliberate:
    description: The operator says the subset is deliberate (C(ichor_subset)); nothing is refused.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Read the cluster record (nothing written)
  maesh.ichor.cluster_record:
  check_mode: true
  register: ichor_example_record

- name: Refuse a run that holds part of the cluster (nothing written yet)
  ansible.builtin.assert:
    that: ichor_example_missing | length == 0
    fail_msg: "{{ ichor_example_missing | join('; ') }}"
    quiet: true
  vars:
    ichor_example_missing: "{{ ichor_example_record.record | maesh.ichor.missing_machines(groups
      | maesh.ichor.machines(hostvars) | selectattr('name', 'in', query('inventory_hostnames',
      ansible_limit | default('all'))), deliberate=ichor_subset | bool) }}"
"""

RETURN = r"""
_value:
  description:
    - >-
      Empty when the run holds every machine the record lists (or it lists none, or O(deliberate)); else one line
      that says how many of the record's machines the run holds, names those missing (ten, then C(and N more)), says
      that a playbook acting on the whole cluster would judge or change it from part of it, and names the way on -
      add them to the inventory, or C(-e ichor_subset=true) when the subset is deliberate.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.maesh.ichor.plugins.module_utils.cluster import subset


def missing_machines(record, machines, deliberate=False):
    if not isinstance(record, dict):
        raise AnsibleFilterError("missing_machines takes the cluster record's data (a mapping), not %s"
                                 % type(record).__name__)
    line = subset.refusal(record, list(machines or []), boolean(deliberate, strict=False))
    return [line] if line else []


class FilterModule:
    def filters(self):
        return {"missing_machines": missing_machines}
