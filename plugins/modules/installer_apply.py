#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: installer_apply
short_description: Apply the installer's bundle with server-side apply, after snapshotting what it changes
version_added: 0.1.0
description:
  - Applies every object of a bundle (directories or files of manifests) with server-side apply under the field
    manager C(ichor-installer), each object stamped C(ichor.maesh.dev/installed-by=ichor-installer).
  - Before anything is written, snapshots every object the run will change or delete (including what
    M(maesh.ichor.installer_prune) will prune), persists the snapshot (Secret C(ichor-installer-snapshot) next to the
    inventory, or O(snapshot_file)) and reads it back. If the apply fails, the cluster is restored from it.
  - Each run has an id, made here and returned as RV(run_id); the snapshot carries it. Give it to
    M(maesh.ichor.installer_prune) and M(maesh.ichor.installer_restore) of the same run (the installer role does);
    only the run that wrote a snapshot restores it by itself.
  - A snapshot left by another run that did not finish (killed between apply and prune) is never restored by this
    run. A warning names it and its run id; this run's snapshot replaces it, or M(maesh.ichor.installer_prune) removes
    it when this run has nothing to snapshot.
  - Entries of the previous inventory that are malformed, or name a kind the API server no longer serves (a custom
    resource whose CRD is gone), are skipped with a warning; nothing is pruned for them and the run goes on.
  - Asks the API server with dry runs what would change, so a run with nothing to change writes nothing.
  - In check mode returns the full plan, prune set included, and with C(--diff) the before and after of each object.
  - C(changed) says whether this module writes (the snapshot and the objects), in check mode as in a real run. The
    inventory is written by M(maesh.ichor.installer_prune), so a change of the inventory alone does not make it
    C(changed).
notes:
  - The flow of this module is C(plugins/module_utils/installer/stages.py), run in the controller by its action plugin
    C(plugins/action/installer_apply.py).
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.kubernetes
  - maesh.ichor.installer
attributes:
  check_mode:
    support: full
    description: Dry runs against the API server; nothing is written.
  diff_mode:
    support: full
    description: Before and after of every object created, updated or pruned; Secret values masked.
options:
  bundle:
    description: Directories or files of Kubernetes manifests (YAML, multi-document). Directories are read recursively.
    type: list
    elements: path
    required: true
  network_policies:
    description:
      - Directories or files of the collection's CiliumNetworkPolicies, applied with the bundle only when a Cilium
        agent DaemonSet runs in the cluster (any namespace) and the CRD C(ciliumnetworkpolicies.cilium.io) exists
        (the network-policy gate, read live on every run). Otherwise they are left out and the plan says
        why; C(ichor-system) is then not isolated by the collection.
      - Give M(maesh.ichor.installer_apply) and M(maesh.ichor.installer_prune) of a run the same list.
    type: list
    elements: path
    default: []
"""

EXAMPLES = r"""
- name: Apply the bundle
  maesh.ichor.installer_apply:
    kubeconfig: "{{ ichor_kubeconfig }}"
    bundle:
      - "{{ role_path }}/files/bundle"
  register: ichor_applied

- name: Prune, as the same run
  maesh.ichor.installer_prune:
    kubeconfig: "{{ ichor_kubeconfig }}"
    run_id: "{{ ichor_applied.run_id }}"
    bundle:
      - "{{ role_path }}/files/bundle"

- name: The same, the connection set once for every module of the group maesh.ichor.k8s
  module_defaults:
    group/maesh.ichor.k8s:
      kubeconfig: "{{ ichor_kubeconfig }}"
  block:
    - name: Apply the bundle and an extra one
      maesh.ichor.installer_apply:
        bundle:
          - "{{ role_path }}/files/bundle"
          - /srv/ichor/extra-bundle
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
      sample: false
    reason:
      description: Why (the CNI found, or the missing CRD).
      returned: always
      type: str
      sample: >-
        maesh.ichor's network policies are not applied: the CNI is flannel, and they are CiliumNetworkPolicies;
        the ichor-system namespace is not isolated by the collection
run_id:
  description:
    - This run's id (when it started, UTC, and a random part), carried by the snapshot it writes. Give it to
      M(maesh.ichor.installer_prune) and M(maesh.ichor.installer_restore) as O(maesh.ichor.installer_prune#module:run_id).
  returned: always, also on failure once the arguments are valid
  type: str
  sample: 20261201T081500Z-1a2b3c4d5e6f
plan:
  description: One line per object to create or update, per object to prune or keep (with why), notices and warnings.
  returned: always
  type: list
  elements: str
  sample: ["create ServiceAccount ichor-system/ichor-installer", "prune ClusterRole old-role: dropped from the bundle"]
changes:
  description: The objects created or updated.
  returned: always
  type: list
  elements: dict
  contains:
    action:
      description: C(create) or C(update).
      returned: always
      type: str
      sample: create
    object:
      description: The object.
      returned: always
      type: dict
      contains:
        apiVersion:
          description: Its apiVersion.
          returned: always
          type: str
          sample: v1
        kind:
          description: Its kind.
          returned: always
          type: str
          sample: ServiceAccount
        namespace:
          description: Its namespace; null when it is cluster-scoped.
          returned: always
          type: str
          sample: ichor-system
        name:
          description: Its name.
          returned: always
          type: str
          sample: ichor-controller
    reason:
      description: Always null for a create or an update.
      returned: always
      type: str
prune:
  description: The prune plan (what M(maesh.ichor.installer_prune) will delete or keep, and why).
  returned: always
  type: list
  elements: dict
  contains:
    action:
      description: C(prune) (the bundle dropped it and it carries the mark) or C(keep) (it is not deleted; the reason says why).
      returned: always
      type: str
      sample: prune
    object:
      description: The object.
      returned: always
      type: dict
      contains:
        apiVersion:
          description: Its apiVersion.
          returned: always
          type: str
          sample: v1
        kind:
          description: Its kind.
          returned: always
          type: str
          sample: ServiceAccount
        namespace:
          description: Its namespace; null when it is cluster-scoped.
          returned: always
          type: str
          sample: ichor-system
        name:
          description: Its name.
          returned: always
          type: str
          sample: ichor-controller
    reason:
      description: Why it is pruned or kept.
      returned: always
      type: str
      sample: dropped from the bundle and carries ichor.maesh.dev/installed-by=ichor-installer
restored:
  description: On failure, the objects that had to be re-created while restoring.
  returned: failure
  type: list
  elements: str
"""
