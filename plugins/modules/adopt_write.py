#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: adopt_write
short_description: Write what an adoption keeps into the cluster (adopt's second phase), every machine held
version_added: 0.1.0
description:
  - The second phase of adopting a cluster (plan, write, Cilium takeover, release). It makes the plan again with
    M(maesh.ichor.adopt_plan) (every refusal holds here too), then, under the cluster lock (M(maesh.ichor.cluster_lock),
    O(holder)), writes into the cluster what later runs need, so that an AWX job that keeps no files can run the next
    step. Nothing is applied to a node.
  - "The secrets bundle as Secret C(ichor-secrets-bundle) in C(ichor-system) (created when missing; an existing one
    must hold this cluster's bundle, else nothing is written)."
  - "The cluster record (ConfigMap C(ichor-cluster) in C(ichor-system)): the versions running (where none are stored
    yet), the cluster spec read from the configs (inline manifests by name; their contents stay in the machine
    configs), the adoption (its marker, the mode, the CNI detected, the Cilium inline manifest entry, the CA-rotation
    advice), each machine's UUID, address, role and spec, and a hold on every machine the record did not know yet
    (the release phase lifts the holds machine by machine)."
  - The cluster spec and the adoption are written once, by the first adoption (later steps own them, and a rerun after
    the Cilium hand-over must not read the cluster as a new adoption); a later run adds a machine new to the record,
    held. A second run with the same inputs changes nothing; a machine already released is not held again.
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.talos
  - maesh.ichor.kubernetes
  - maesh.ichor.adopt
  - maesh.ichor.machines
attributes:
  check_mode:
    support: full
    description: The plan and server-side dry runs of the writes; nothing is written.
  diff_mode:
    support: full
    description: The cluster record before and after (it holds no secret; the bundle Secret is named, never shown).
options:
  holder:
    description: The holder id this run took the cluster lock under (M(maesh.ichor.cluster_lock)'s RV(maesh.ichor.cluster_lock#module:holder)).
    type: str
    required: true
notes:
  - The flow of this module is C(plugins/module_utils/adopt/write.py), run in the controller by its action plugin
    C(plugins/action/adopt_write.py).
  - The machine configs are read with the talosconfig's identity, which needs the C(os:admin) role.
"""

EXAMPLES = r"""
- name: Take the cluster lock
  maesh.ichor.cluster_lock:
    kubeconfig: "{{ ichor_kubeconfig }}"
  register: ichor_lock

- name: Write the adoption into the cluster, every machine held
  maesh.ichor.adopt_write:
    talosconfig: "{{ ichor_talosconfig }}"
    kubeconfig: "{{ ichor_kubeconfig }}"
    machines: "{{ groups | maesh.ichor.machines(hostvars) }}"
    recover_from: cp-1
    holder: "{{ ichor_lock.holder }}"
"""

RETURN = r"""
held:
  description: The machines the record holds after this run.
  returned: success
  type: list
  elements: str
cni:
  description: The CNI row and the mode, as M(maesh.ichor.adopt_plan) returns them.
  returned: success
  type: dict
  contains:
    row:
      description: The row of the CNI table.
      type: str
    mode:
      description: C(ours), C(takeover), C(install) or C(unmanaged).
      type: str
    preset:
      description: The cluster spec's C(cni.preset).
      type: str
    talos_cni:
      description: C(default) or C(none).
      type: str
    names:
      description: The CNIs whose DaemonSets run.
      type: list
      elements: str
    evidence:
      description: What the verdict rests on.
      type: list
      elements: str
    version:
      description: The running Cilium's version, or null.
      type: str
kube_proxy:
  description: The cluster spec's C(cni.kubeProxy).
  returned: success
  type: str
contract:
  description: The cluster's version contract.
  returned: success
  type: str
plan:
  description: The plan, then what was written (or would be); a refusal ends it with its C(refused:) line.
  returned: always
  type: list
  elements: str
"""
