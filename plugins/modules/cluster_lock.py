#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: cluster_lock
short_description: Take or give back the cluster lock (Lease ichor-cluster-lock in ichor-system)
version_added: 0.1.0
description:
  - The cluster lock is a C(coordination.k8s.io/v1) Lease C(ichor-cluster-lock) in C(ichor-system) that every playbook
    writing to a cluster's machines holds while it writes, so that two runs never write to one cluster at once.
  - O(state=held) takes the lock under O(holder) (a new id when omitted; register it and give it to the later tasks),
    or renews it when O(holder) has it already. A lock another run holds is refused with its holder and the time it
    expires; a lock whose holder stopped without giving it back expires O(duration) seconds after it was last taken
    or renewed, and is taken over then.
  - O(state=released) gives the lock back when O(holder) has it (deleted with a UID precondition), and leaves
    another run's lock alone.
  - Every write is conditional on what was read, so two runs racing for a free lock cannot both take it.
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.kubernetes
attributes:
  check_mode:
    support: full
    description: Reads only; a lock another run holds is refused as in a real run.
  diff_mode:
    support: none
    description: The lock is the run's own bookkeeping.
options:
  state:
    description: C(held) takes or renews the lock, C(released) gives it back.
    type: str
    choices: [held, released]
    default: held
  holder:
    description: This run's id; required with O(state=released). Omitted with O(state=held), a new one is made.
    type: str
  duration:
    description: Seconds the lock stays this run's after it was taken or renewed, if the run stops without giving it back.
    type: int
    default: 1800
notes:
  - Taking and giving back the lock report C(changed=false) (it is the run's bookkeeping, gone when the run ends), so
    a run that changes nothing else reports C(changed=0).
"""

EXAMPLES = r"""
- name: Take the cluster lock
  maesh.ichor.cluster_lock:
    kubeconfig: "{{ ichor_kubeconfig }}"
  register: ichor_lock

- name: Give it back
  maesh.ichor.cluster_lock:
    kubeconfig: "{{ ichor_kubeconfig }}"
    state: released
    holder: "{{ ichor_lock.holder }}"
"""

RETURN = r"""
holder:
  description: The run's holder id.
  returned: always
  type: str
  sample: maesh-ichor-20261201T174000Z-3f2a9c1d0b7e
plan:
  description: What was done with the lock (or would be).
  returned: always
  type: list
  elements: str
"""
