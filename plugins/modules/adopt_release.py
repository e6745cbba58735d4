#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: adopt_release
short_description: Release one machine an adoption holds (adopt's fourth phase)
version_added: 0.1.0
description:
  - The fourth phase of adopting a cluster (plan, write, Cilium takeover, release), for one machine; the adopt role
    runs it machine by machine, control planes first, under the cluster lock (O(holder)).
  - It runs only after the write phase (the cluster record holds the adoption) and, for a managed Cilium, after the
    takeover completed (the record names the collection's Cilium release); otherwise it fails saying the machines
    stay held.
  - "The machine's render (the record's cluster spec and this machine's spec, the secrets bundle from Secret
    C(ichor-system/ichor-secrets-bundle), the record's contract; a Cilium inline manifest entry handed over to the
    Helm release is left out) is compared with its live config. Class C keeps it held, and so does class B without
    O(accept_changes): the task then warns and changes nothing. Zero drift lifts the hold at once. Otherwise the
    render is applied; once the machine is back with its config read back at zero drift and its Node is Ready, the
    hold is lifted."
  - A machine not held (released earlier) is left alone, so a rerun changes nothing.
notes:
  - The flow of this module is C(plugins/module_utils/adopt/release.py), run in the controller by its action plugin
    C(plugins/action/adopt_release.py).
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.talos
  - maesh.ichor.kubernetes
attributes:
  check_mode:
    support: full
    description: The drift and what would be applied; a dry run of the record's update; nothing is written.
  diff_mode:
    support: none
    description: The drift is in RV(drift); M(maesh.ichor.talos_machine_config) shows a config's before and after.
options:
  name:
    description: The machine's name, as the cluster record holds it (its Kubernetes Node name).
    type: str
    required: true
  holder:
    description: The holder id this run took the cluster lock under (M(maesh.ichor.cluster_lock)).
    type: str
    required: true
  accept_changes:
    description: Consent to the machine's class B (Ichor-owned) changes, as the plan listed them.
    type: bool
    default: false
  wait_timeout:
    description: Seconds to wait for the machine to come back after an apply, and then for its Node to be Ready.
    type: float
    default: 900
"""

EXAMPLES = r"""
- name: Release the held machines one at a time, control planes first
  maesh.ichor.adopt_release:
    talosconfig: "{{ ichor_talosconfig }}"
    kubeconfig: "{{ ichor_kubeconfig }}"
    name: "{{ item.name }}"
    holder: "{{ ichor_lock.holder }}"
    accept_changes: true
  loop: "{{ adopt_plan.machines | sort(attribute='role') }}"
"""

RETURN = r"""
released:
  description: Whether the hold was (or would be) lifted.
  returned: always
  type: bool
held:
  description: The machines the record still holds.
  returned: when the hold was lifted
  type: list
  elements: str
reason:
  description: Why the machine stays held.
  returned: when it stays held
  type: str
drift:
  description: The machine's drift from its render (as M(maesh.ichor.talos_machine_config) returns it; secret values never included).
  returned: when the live config was compared
  type: dict
  contains:
    counts:
      description: Paths per class, C(A), C(B), C(C).
      type: dict
      contains:
        A:
          description: Class A (representable) paths.
          type: int
        B:
          description: Class B (Ichor-owned) paths.
          type: int
        C:
          description: Class C (unrepresentable) paths.
          type: int
    zero:
      description: Whether the live config equals the render.
      type: bool
plan:
  description: What was done (or would be), as lines.
  returned: always
  type: list
  elements: str
"""
