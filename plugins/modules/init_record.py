#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: init_record
short_description: Keep a new cluster's secrets bundle and cluster record in the cluster, as adopt does
version_added: 0.1.0
description:
  - The last write of P(maesh.ichor.init#role) - the secrets bundle as Secret C(ichor-secrets-bundle) in
    C(ichor-system) (an existing one must hold this cluster's bundle), and the cluster record C(ichor-cluster) - the
    release set's versions and contract, the cluster spec (preset C(cilium), its kube-proxy mode), each machine's
    identity (UUID, address, role) and spec. So an AWX job that keeps no files can run the next playbook.
  - Written once - a rerun changes nothing. A machine that joins later is added, and its pending entry (from
    the playbook C(maesh.ichor.reclaim)) leaves the record. No machine is held.
notes:
  - The flow of this module is C(plugins/module_utils/init/write.py), run in the controller by its action plugin
    C(plugins/action/init_record.py).
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.kubernetes
  - maesh.ichor.cluster_spec
attributes:
  check_mode:
    support: full
    description: Dry runs against the API server; nothing is written.
  diff_mode:
    support: full
    description: The record before and after (the bundle Secret's data never).
options:
  secrets:
    description: The secrets bundle file.
    type: path
    required: true
  cluster:
    description: The cluster spec (RV(maesh.ichor.init_plan#module:cluster_spec)).
    type: dict
    required: true
  machines:
    description: The machines (RV(maesh.ichor.init_plan#module:machines)).
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The inventory name.
        type: str
        required: true
      node:
        description: Its address.
        type: str
        required: true
      role:
        description: Its role.
        type: str
        required: true
        choices: [controlplane, worker]
      uuid:
        description: Its UUID.
        type: str
        required: true
      spec:
        description:
          - Its machine spec as M(maesh.ichor.init_plan) judged it (the fields of its O(maesh.ichor.init_plan#module:machines)
            but C(name), C(node), C(role) and C(uuid)); the record keeps it.
        type: dict
        default: {}
      state:
        description: The plan's reading of it (not recorded).
        type: str
      etcd_members:
        description: The plan's reading of its etcd (not recorded).
        type: list
        elements: str
"""

EXAMPLES = r"""
- name: Keep the bundle and the record in the cluster
  maesh.ichor.init_record:
    kubeconfig: "{{ ichor_kubeconfig }}"
    secrets: "~/.ichor/clusters/prod/secrets.yaml"
    cluster: "{{ ichor_init_plan.cluster_spec }}"
    machines: "{{ ichor_init_plan.machines }}"
"""

RETURN = r"""
plan:
  description: What was written or found.
  returned: always
  type: list
  elements: str
"""
