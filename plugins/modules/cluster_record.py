#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: cluster_record
short_description: Read or update the cluster record (ConfigMap ichor-cluster in ichor-system)
version_added: 0.1.0
description:
  - The cluster record holds what the collection keeps about a cluster between runs (stored versions, adoption,
    CNI mode, pending machines). Every update is conditional on the resourceVersion it read, so two runs never
    overwrite each other; the losing run fails and is rerun.
  - Stored versions (C(talos), C(kubernetes), C(contract)) can only move to the release set's values and never
    down.
notes:
  - The flow of this module is C(plugins/module_utils/rollout/record.py), run in the controller by its action plugin
    C(plugins/action/cluster_record.py).
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.kubernetes
attributes:
  check_mode:
    support: full
    description: Says what would change; the server is asked with a dry run.
  diff_mode:
    support: full
    description: The record before and after.
options:
  update:
    description: Keys to set in the record (a value of null removes the key). Empty reads the record.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Record that the Talos step is done
  maesh.ichor.cluster_record:
    kubeconfig: "{{ ichor_kubeconfig }}"
    update:
      talos: "{{ lookup('maesh.ichor.release_set', 'talos') }}"
      contract: "{{ lookup('maesh.ichor.release_set', 'contract') }}"
"""

RETURN = r"""
record:
  description: The record after the update (or as read); the keys other modules keep in it, and any set here.
  returned: success
  type: dict
  contains:
    schema:
      description: The record's schema number.
      type: int
      returned: always
    talos:
      description: The Talos version stored by the rollout.
      type: str
      returned: when stored
    kubernetes:
      description: The Kubernetes version stored by the rollout.
      type: str
      returned: when stored
    contract:
      description: The version contract stored by the rollout.
      type: str
      returned: when stored
    machines:
      description: Machines registered by reclaim.
      type: list
      elements: dict
      returned: when a machine was reclaimed
      contains:
        uuid:
          description: The machine's UUID.
          type: str
        address:
          description: Its Talos API address.
          type: str
        state:
          description: V(pending) until it joins.
          type: str
        source:
          description: What registered it (V(reclaim)).
          type: str
        at:
          description: When, in UTC.
          type: str
plan:
  description: What changed (or would).
  returned: always
  type: list
  elements: str
"""
