#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: release_check
short_description: Judge a running cluster against the release set and plan the rollout's next step
version_added: 0.1.0
description:
  - Reads the cluster the way it runs on Talos (each machine's Talos version, the control-plane component images in
    the control planes' machine configs, each Node's kubelet, the CNI) and judges each component C(up_to_date) or
    C(behind) against the release set, the one pinned set of versions the collection installs. A component newer
    than the set is refused.
  - Validates an optional desired change against the versions stored in the cluster record (ConfigMap
    C(ichor-cluster) in C(ichor-system)); a changed value is accepted only when it is the pinned one and not lower
    than the stored one. There is no override.
  - Reads every machine's config with the config engine to find the contract form it is in (the render at that
    contract, with the images it runs, equals the live config). A machine not yet in the set's contract form has a
    config change pending (the C(config) step); the Versions table's contract is the oldest form. A machine whose
    config the engine cannot render (a path no spec field covers, another cluster's bundle) is refused before any
    step starts, because the config and Kubernetes steps render whole configs.
  - Plans the rollout, in order C(talos), C(config), C(kubernetes), C(cilium), and returns the first step still
    needed with the Versions table. Refuses a cluster whose Kubernetes is more than one minor behind or not supported
    by the set's Talos. Read-only.
  - The C(talos) step's plan names each machine it would upgrade, in order, with the installer image and what the
    step waits for, so that a plan in check mode reads every machine once, here, rather than once per machine.
notes:
  - The flow of this module is C(plugins/module_utils/rollout/check.py), run in the controller by its action plugin
    C(plugins/action/release_check.py).
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
    description: Reads only.
  diff_mode:
    support: none
    description: Nothing is changed.
options:
  desired:
    description:
      - A desired change to validate against the stored versions, with any of C(talos), C(kubernetes), C(contract).
    type: dict
    default: {}
    suboptions:
      talos:
        description: The Talos version to move to.
        type: str
      kubernetes:
        description: The Kubernetes version to move to.
        type: str
      contract:
        description: The version contract to move to.
        type: str
  image:
    description:
      - The installer image the Talos step would run on every machine (as M(maesh.ichor.talos_upgrade)'s
        O(maesh.ichor.talos_upgrade#module:image)); its tag is the version the step's plan names.
      - Without it each machine's own is chosen at the release set's Talos (the installer that keeps its system
        extensions), and a machine whose installer cannot be known refuses the plan.
      - A reference whose tag is no Talos version (or that has none) is refused before anything is read.
    type: str
  require_record:
    description:
      - Refuse a cluster that has no cluster record (ConfigMap C(ichor-cluster) in C(ichor-system)), one that the
        playbook C(maesh.ichor.adopt) never adopted and C(maesh.ichor.init) never made, before anything else is read;
        the message names both ways forward.
      - The role C(maesh.ichor.upgrade) sets it, so the rollout never plans or writes for a cluster without a record.
        Without it the module judges any cluster, read-only.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Where does the cluster stand against the release set
  maesh.ichor.release_check:
    talosconfig: "{{ ichor_talosconfig }}"
    kubeconfig: "{{ ichor_kubeconfig }}"
    machines:
      - {name: cp-1, node: 10.0.0.11, role: controlplane}
      - {name: worker-1, node: 10.0.0.21, role: worker}
  register: release

- name: The same from the inventory, connection options set once for the play's tasks
  module_defaults:
    group/maesh.ichor.talos:
      talosconfig: "{{ ichor_talosconfig }}"
    group/maesh.ichor.k8s:
      kubeconfig: "{{ ichor_kubeconfig }}"
  block:
    - name: Judge the cluster and validate a desired Kubernetes version
      maesh.ichor.release_check:
        machines: "{{ groups | maesh.ichor.machines(hostvars) }}"
        desired:
          kubernetes: "{{ lookup('maesh.ichor.release_set', 'kubernetes') }}"
      register: release
"""

RETURN = r"""
release_set:
  description: The release set.
  returned: always
  type: dict
  sample: {"talos": "v1.14.5", "contract": "v1.14", "kubernetes": "v1.36.6", "cilium": "1.20.4"}
  contains:
    talos:
      description: The Talos release.
      type: str
    contract:
      description: The version contract.
      type: str
    kubernetes:
      description: The Kubernetes release.
      type: str
    cilium:
      description: The Cilium chart version.
      type: str
versions:
  description: The Versions table, one row per component (Cilium only when the CNI is Cilium).
  returned: success
  type: list
  elements: dict
  contains:
    component:
      description: C(Talos), C(Version contract), C(Kubernetes) or C(Cilium).
      type: str
    running:
      description: What runs (the lowest over the machines, Nodes and control-plane components).
      type: str
    target:
      description: The release set's version.
      type: str
    state:
      description: C(Up to date), C(Behind) or C(Newer).
      type: str
  sample: [{"component": "Talos", "running": "v1.13.9", "target": "v1.14.5", "state": "Behind"}]
components:
  description: Per component, C(up_to_date) or C(behind).
  returned: success
  type: dict
  sample: {"talos": "behind", "contract": "behind", "kubernetes": "behind", "cilium": "up_to_date"}
  contains:
    talos:
      description: The Talos state.
      type: str
    contract:
      description: The version contract's state.
      type: str
    kubernetes:
      description: The Kubernetes state.
      type: str
    cilium:
      description: The Cilium state, only when the CNI is Cilium.
      type: str
steps:
  description: Every step still needed, in order.
  returned: success
  type: list
  elements: dict
  contains:
    step:
      description: C(talos), C(config), C(kubernetes) or C(cilium).
      type: str
    machines:
      description: The machines the step touches, in its order (control planes first); empty for C(cilium).
      type: list
      elements: str
    lines:
      description: What the step does, as plan lines.
      type: list
      elements: str
step:
  description: The first step still needed (C(talos), C(config), C(kubernetes), C(cilium)), or an empty string.
  returned: success
  type: str
record_behind:
  description:
    - What the cluster record states below what every machine runs, as the field and the value the interrupted step
      would have recorded (C(talos), C(contract), C(kubernetes)); empty when the record is current. A run stopped
      after a step's writes and before its record leaves it so; the upgrade playbook records it first.
  returned: success
  type: dict
  contains:
    talos:
      description: The lowest Talos version every machine runs.
      returned: when the record states a lower one
      type: str
      sample: v1.14.5
    contract:
      description: The release set's version contract, recorded with the set's Talos as the Talos step does.
      returned: when C(talos) is the set's and the record states another contract
      type: str
      sample: v1.14
    kubernetes:
      description: The lowest Kubernetes version the cluster runs.
      returned: when the record states a lower one
      type: str
      sample: v1.36.6
config_pending:
  description:
    - The machines whose config is not yet in the set's contract form, or still carries a Cilium inline manifest entry
      the cluster record names as handed over, control planes first.
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The machine's name.
      type: str
    form:
      description: The contract form its config is in.
      type: str
    drop:
      description: The handed-over Cilium inline manifest entries its config still carries (the config step removes them).
      type: list
      elements: str
cni:
  description: The detected CNI.
  returned: success
  type: dict
  contains:
    name:
      description: C(cilium), C(flannel), C(calico), C(unknown) or C(none).
      type: str
    version:
      description: Its version, from its image tag (null when the tag is not a version).
      type: str
    image:
      description: The image it runs.
      type: str
    unmanaged:
      description: The cluster was adopted with its CNI left alone (the record's preset is C(unmanaged)); its Cilium, if any, is not judged and has no step.
      type: bool
      returned: when the preset is unmanaged
plan:
  description: The Versions table and the next step, as lines.
  returned: always
  type: list
  elements: str
installers:
  description:
    - The installer each machine the Talos step upgrades gets (M(maesh.ichor.talos_upgrade)'s choice), and the system
      extensions it runs; empty when the Talos step is not needed.
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The machine's name.
      type: str
    image:
      description: The installer image it is (or would be) upgraded with.
      type: str
    source:
      description:
        - How the image was chosen. C(schematic) is the Image Factory installer of the schematic it runs (its config's
          repository, whose last path component is the schematic ID). C(repository) is its config's own repository,
          not an Image Factory one. C(plain) is C(ghcr.io/siderolabs/installer), for a machine that runs no extension.
          C(operator) is the image the O(image) option names, used as named.
      type: str
      choices: [schematic, repository, plain, operator]
    extensions:
      description: What it runs and what the image carries.
      type: dict
      contains:
        before:
          description: The names of the system extensions it runs (its C(ExtensionStatuses)), the C(schematic) one left out.
          type: list
          elements: str
        schematic:
          description:
            - The schematic ID of the Image Factory image it booted (its C(schematic) extension's version); empty when
              none.
          type: str
        declared:
          description:
            - The install image its machine config names (C(UnattendedInstallConfig) C(installer.image) or
              C(machine.install.image)); empty when none.
          type: str
        after:
          description:
            - C(kept) (the same schematic), C(none) (it runs no extension), C(unverified) (its config's repository, not an
              Image Factory installer, so not verified) or C(named) (the operator's image, not verified).
          type: str
          choices: [kept, none, unverified, named]
"""
