#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: installer_prune
short_description: Delete what the installer's last run installed and this bundle drops
version_added: 0.1.0
description:
  - The last stage of an installer run, after M(maesh.ichor.installer_apply) and the checks.
  - "Candidates: objects in the previous run's inventory (ConfigMap C(ichor-installer-inventory)) that the bundle no
    longer ships, of a prunable kind (ClusterRole, ClusterRoleBinding, Role, RoleBinding, ServiceAccount, Service,
    Deployment, MutatingWebhookConfiguration, ValidatingWebhookConfiguration, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding), cluster-scoped or in the installer's namespace, name not starting with
    C(ichor-installer); plus the ClusterRole C(ichor-ichor-break-glass-role), renamed C(ichor-ichor-override-role)
    in the bundle."
  - Each candidate is read again and deleted only if it still carries C(ichor.maesh.dev/installed-by=ichor-installer)
    (the renamed role C(app.kubernetes.io/name=ichor)), with a UID precondition. CRDs, Namespaces, Secrets,
    PriorityClasses, CiliumNetworkPolicies, PersistentVolumeClaims and unmarked objects are never deleted.
  - Only objects in the run's snapshot (the one whose id is O(run_id)) are deleted; if a delete fails, everything is
    restored from that snapshot.
  - Then writes the new inventory (delete and create, only when it changed) and removes the run's snapshot. A
    snapshot that another run left (it did not finish) is never restored; a warning names it, and since this run
    succeeded it is removed.
  - Entries of the previous inventory that are malformed, or name a kind the API server no longer serves (a custom
    resource whose CRD is gone), are skipped with a warning; the new inventory no longer lists them.
notes:
  - The flow of this module is C(plugins/module_utils/installer/stages.py), run in the controller by its action plugin
    C(plugins/action/installer_prune.py).
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.kubernetes
  - maesh.ichor.installer
attributes:
  check_mode:
    support: full
    description: Lists what would be pruned and what is kept, and why; nothing is written.
  diff_mode:
    support: full
    description: The objects that would be deleted, as they are.
options:
  bundle:
    description: The same bundle given to M(maesh.ichor.installer_apply).
    type: list
    elements: path
    required: true
  network_policies:
    description:
      - The same network policies given to M(maesh.ichor.installer_apply); the gate is read again, so the inventory
        holds them only when they are applied.
    type: list
    elements: path
    default: []
  run_id:
    description: The id M(maesh.ichor.installer_apply) of the same run returned (RV(maesh.ichor.installer_apply#module:run_id)).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Prune what the bundle no longer ships
  maesh.ichor.installer_prune:
    kubeconfig: "{{ ichor_kubeconfig }}"
    run_id: "{{ ichor_applied.run_id }}"
    bundle:
      - "{{ role_path }}/files/bundle"
"""

RETURN = r"""
network_policies:
  description: The network-policy gate's answer, when O(network_policies) was given.
  returned: when O(network_policies) is not empty
  type: dict
  contains:
    applied:
      description: Whether the policies are part of this run's bundle.
      returned: always
      type: bool
      sample: true
    reason:
      description: Why (the CNI found, or the missing CRD).
      returned: always
      type: str
      sample: "maesh.ichor's network policies are applied: Cilium runs and the CRD ciliumnetworkpolicies.cilium.io exists"
plan:
  description: One line per object pruned or kept (with why), and warnings.
  returned: always
  type: list
  elements: str
pruned:
  description: The objects deleted, as C(Kind namespace/name) or C(Kind name).
  returned: always
  type: list
  elements: str
  sample: ["ClusterRole ichor-ichor-break-glass-role"]
kept:
  description: The candidates kept, with why.
  returned: always
  type: list
  elements: dict
  contains:
    object:
      description: The object, as C(Kind namespace/name) or C(Kind name).
      returned: always
      type: str
      sample: ServiceAccount ichor-system/old-controller
    reason:
      description: Why it is kept.
      returned: always
      type: str
      sample: does not carry ichor.maesh.dev/installed-by=ichor-installer (not installed by the installer, or relabelled by a person)
restored:
  description: On failure, the objects that had to be re-created while restoring.
  returned: failure
  type: list
  elements: str
"""
