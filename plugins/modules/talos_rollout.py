#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: talos_rollout
short_description: Roll the release set's Talos over a cluster's machines, in batches, behind a preflight and health gates
version_added: 0.4.0
description:
  - "The rollout's C(talos) step for every machine of O(machines), in one task (run it once, on localhost)."
  - "Preflight, before any write: every machine answers and runs no older Talos than the cluster record states (none
    newer than the target); etcd has every member healthy and one leader; every Node is Ready; each machine's installer
    is known (as M(maesh.ichor.talos_upgrade) chooses it); and, not in check mode, the installer is pulled
    (ImageService Pull) on every machine still to upgrade, at most the fan-out limit at once, so an image a machine
    cannot pull fails the task with those machines named and nothing rebooted. Check mode lists each check and its
    result, and what the run would pull."
  - "Order: control planes one at a time, the one whose etcd member leads last; then the workers O(worker_batch) at a
    time. With O(canary_soak) above 0 the first worker batch is a canary: its gates must keep holding for that many
    seconds before the next batch starts."
  - "Each batch: its installers pulled again and installed (LifecycleService Upgrade; a v1.12 machine takes the legacy
    Upgrade, which does all of it and drains its Node itself); a control plane's etcd judged again at the last moment,
    and when its member leads, leadership moved away (EtcdForfeitLeadership) and the move read back; v1.13+ Nodes
    cordoned and drained through the Eviction API (PodDisruptionBudgets honoured; DaemonSet and mirror Pods left, as
    talosctl 1.14 does before its reboot); rebooted; then each machine held to its gates in order, each with its own
    timeout: C(version) (back with the new Talos, within O(wait_timeout)), C(node_ready) (its Node Ready on the new Talos;
    uncordoned then), C(etcd) (control planes: healthy, in quorum, with a leader), C(cilium) (a Cilium the collection
    manages: the agent Pod on its Node Ready); and the batch to C(pods) (no more Pods stuck Pending or CrashLooping in
    kube-system than before it)."
  - "A control plane that fails anything stops the rollout; workers may fail up to O(max_failed) before it stops, and a
    rollout that finished with failed workers fails the task naming them. A stop names the machine, the gate and what it
    waited for; nothing beyond it is touched. The cluster record's C(rollout) field keeps which machines are done; a
    rerun skips every machine already at the target and resumes with the rest."
notes:
  - The flow of this module is C(plugins/module_utils/rollout/talos_rollout.py), C(plugins/module_utils/rollout/batches.py)
    and C(plugins/module_utils/rollout/gates.py), run in the controller by its action plugin
    C(plugins/action/talos_rollout.py).
  - Talos v1.14.1's own Reboot sequence stops the pods and services but neither cordons, drains, leaves etcd nor moves
    its leadership; its legacy Upgrade sequence cordons and drains itself. This module adds only what the sequence
    leaves out.
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.talos
  - maesh.ichor.kubernetes
  - maesh.ichor.machines
attributes:
  check_mode:
    support: full
    description: The preflight as far as reading goes, the order and each machine's line; nothing is pulled or sent.
  diff_mode:
    support: full
    description: Each machine's Talos version before and after.
options:
  image:
    description:
      - The installer image for every machine, used as named (see M(maesh.ichor.talos_upgrade)). Without it each
        machine's own is chosen, at the release set's Talos.
    type: str
  wait_timeout:
    description: Seconds a machine may take to come back with the new Talos after its reboot (the C(version) gate); also
      the bound of a pull and an install.
    type: float
    default: 900
  worker_batch:
    description:
      - The workers upgraded at once, a count (C(10)) or a percentage of the workers still to upgrade (C("20%"), rounded
        up). Control planes always go one at a time.
    type: raw
    default: 1
  max_failed:
    description: Workers allowed to fail before the rollout stops (control planes never).
    type: int
    default: 0
  canary_soak:
    description: Seconds the first worker batch's gates must keep holding before the next batch starts; 0 for no canary.
    type: float
    default: 0
  drain_timeout:
    description: Seconds a Node's drain may take (talosctl's default, 5 minutes); a machine whose Pods do not leave in
      time is not rebooted, and fails.
    type: float
    default: 300
  gate_timeouts:
    description: Seconds each gate may take once the one before it passed.
    type: dict
    default: {}
    suboptions:
      node_ready:
        description: Its Node Ready on the new Talos.
        type: float
        default: 300
      etcd:
        description: A control plane's etcd member healthy, the cluster in quorum with a leader.
        type: float
        default: 300
      cilium:
        description: The Cilium agent on its Node Ready.
        type: float
        default: 300
      pods:
        description: No more Pods stuck in kube-system than before the batch.
        type: float
        default: 300
  lock_holder:
    description: The holder id of the cluster lock this run took (M(maesh.ichor.cluster_lock)); kept before each batch,
      and the task fails when another run took it.
    type: str
"""

EXAMPLES = r"""
- name: Roll Talos over the cluster, workers ten at a time after a five-minute canary
  maesh.ichor.talos_rollout:
    talosconfig: "{{ ichor_talosconfig }}"
    kubeconfig: "{{ ichor_kubeconfig }}"
    machines: "{{ groups | maesh.ichor.machines(hostvars) }}"
    worker_batch: 10
    max_failed: 1
    canary_soak: 300
"""

RETURN = r"""
plan:
  description: The preflight's checks, the order of the batches and each machine's line.
  returned: always
  type: list
  elements: str
target:
  description: The Talos version the rollout installs.
  returned: always
  type: str
preflight:
  description: Each preflight check, whether it passed, and what it found.
  returned: always
  type: list
  elements: dict
  contains:
    check:
      description: The check's name.
      type: str
    passed:
      description: Whether it passed.
      type: bool
    detail:
      description: What it found.
      type: str
done:
  description: The machines at the target after the run.
  returned: always
  type: list
  elements: str
failed:
  description: Each machine that failed, in name order.
  returned: always
  type: list
  elements: dict
  contains:
    machine:
      description: The machine's name.
      type: str
    why:
      description:
        - The stage (C(pull), C(install), C(etcd), C(drain), C(reboot)) or the gate (C(gate version), C(gate
          node_ready), C(gate etcd), C(gate cilium)) and what it waited for.
      type: str
audit:
  description:
    - "What each batch did and each gate found, in order (C(worker-3: gate node_ready passed), C(cp-1: etcd leadership
      moved to cp-2), C(worker batch 1 of 4: gate pods passed))."
  returned: always
  type: list
  elements: str
leadership:
  description: Each move of etcd leadership away from a control plane before its reboot.
  returned: always
  type: list
  elements: dict
  contains:
    from:
      description: The control plane whose member led.
      type: str
    to:
      description: The member that leads after the move, as Talos names it.
      type: str
"""
