#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: kubernetes_upgrade
short_description: The rollout's Kubernetes step - control planes, then kube-proxy, then the kubelets, no reboot
version_added: 0.1.0
description:
  - Moves Kubernetes as it runs on Talos to the release set's version. Each machine's config is rendered with the
    config engine at the set's contract and Kubernetes version and applied without a reboot, in phases - the control
    planes one at a time (API server, controller manager, scheduler), then kube-proxy (its image in the control
    planes' configs, and the C(kube-proxy) DaemonSet in C(kube-system) when Talos runs kube-proxy), then the kubelet
    of every machine, one at a time, waiting for its Node to report the new version and Ready. Each phase's render
    keeps the later phases' components at the version they run, and every apply is read back and must equal it.
  - Every machine's config must already be in the set's contract form (the C(config) step comes first) and be what
    the engine renders (nothing a spec field cannot cover would be lost); otherwise nothing is written.
  - Before anything is written, asks the API server which deprecated APIs are still requested
    (C(apiserver_requested_deprecated_apis) in C(/metrics)); an API whose C(removed_release) is at or below the
    target refuses the step with the API names.
  - Then, before anything is applied, every component image the step will run is pulled on each machine it changes
    (C(ImageService.Pull), the machines in parallel, at most the Talos client's fan-out limit at once, each pull within
    O(wait_timeout)), the images and namespaces C(talosctl upgrade-k8s) of Talos v1.14.1 pre-pulls - on a control
    plane its API server, controller manager and scheduler images into containerd's CRI namespace (C(k8s.io)), on
    every machine the kubelet image into the system namespace; kube-proxy is not pulled (its DaemonSet's Pods pull it).
    The references are the ones the step renders into the machine configs; the machine resolves them through its own
    registry mirrors. A machine that cannot pull one (an unreachable registry, a missing image) fails the step with the
    machines named and nothing applied anywhere. A Talos v1.12 machine has no C(ImageService) (it answers
    Unimplemented), so its images are not pulled first, and the plan says so.
  - A machine already at the target is skipped, so a failed run resumes where it stopped.
notes:
  - The flow of this module is C(plugins/module_utils/rollout/kubernetes_step.py), run in the controller by its action
    plugin C(plugins/action/kubernetes_upgrade.py).
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
    description: The plan, with a line naming the images that would be pulled and on how many machines; nothing is
      sent, nothing pulled.
  diff_mode:
    support: full
    description: The live and the final rendered config of each machine, every secret value replaced by C(<redacted>).
options:
  wait_timeout:
    description:
      - Seconds to wait for each kubelet to report the new version and its Node to be Ready, and for each image pull
        before the step.
      - There is no C(wait) option - the wait between kubelets is the step's safety gate (the next machine starts
        only once the one before is Ready at the new version), so it cannot be skipped.
    type: float
    default: 600
"""

EXAMPLES = r"""
- name: Kubernetes step
  maesh.ichor.kubernetes_upgrade:
    talosconfig: "{{ ichor_talosconfig }}"
    kubeconfig: "{{ ichor_kubeconfig }}"
    machines: "{{ groups | maesh.ichor.machines(hostvars) }}"
"""

RETURN = r"""
plan:
  description: What was (or would be) done, in order.
  returned: always
  type: list
  elements: str
removed_apis:
  description: Deprecated APIs still in use that the target removes (the step is refused when any).
  returned: always
  type: list
  elements: str
pulled:
  description:
    - The component images pulled before anything was applied (in check mode, that would be), one entry per image and
      containerd namespace. On a failed pull, the machines that did pull each image.
  returned: when the step has anything to do
  type: list
  elements: dict
  contains:
    image:
      description: The image reference, as the step renders it into the machine configs.
      type: str
    namespace:
      description: The containerd namespace it is pulled into - C(k8s.io) (CRI, the control planes' static pods) or
        C(system) (the kubelet).
      type: str
      choices: [k8s.io, system]
    machines:
      description: The machines that pulled it (or would).
      type: list
      elements: str
    skipped:
      description: The machines it is not pulled on first, having no C(ImageService) (Talos v1.12).
      type: list
      elements: str
"""
