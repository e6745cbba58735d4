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
    or renews it when O(holder) has it already. The lock is a lease, as Kubernetes' leader election is one. It lasts
    O(duration) seconds and a heartbeat (a small process started by the first such task of the run, outside check
    mode) renews it every third of that for as long as the C(ansible-playbook) process lives. The heartbeat stops the
    moment that process is gone, whatever ended it (SIGKILL, a cancelled AWX job, an OOM kill), so a killed run's lock
    is free within O(duration) seconds.
  - A lock another run holds is refused with its holder, the time it lapses, and how to break it. A lock whose
    holder's playbook ran on this controller and has ended (its process is gone) is taken over at once; one that
    lapsed is taken over too.
  - O(break_holder), the id of the run that holds the lock typed back (as C(terraform force-unlock LOCK_ID)), takes
    the lock from that run whatever its state. The plan says so (check mode too), the Lease records whose lock was
    broken, by whom and when (annotation C(maesh.ichor/broken)), and the result carries it as RV(audit). An id that
    is not the holder's breaks nothing and is refused.
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
    description:
      - Seconds the lock stays this run's after it was taken or last renewed; the heartbeat renews it every third of
        that while the playbook lives (once a second at most), so this is how long a killed run's lock holds others
        off. At least 2.
    type: int
    default: 45
  break_holder:
    description:
      - The holder id of the run whose lock to break (the playbooks' C(ichor_lock_break)), from the message that
        refused a run or from C(kubectl -n ichor-system get lease ichor-cluster-lock). Only with O(state=held).
    type: str
  operator:
    description: Who breaks a lock, for the record (the playbooks give AWX's C(awx_user_name)); the local user when omitted.
    type: str
notes:
  - The flow of this module is C(plugins/module_utils/cluster/lock.py), run in the controller by its action plugin
    C(plugins/action/cluster_lock.py).
  - Taking and giving back the lock report C(changed=false) (it is the run's bookkeeping, gone when the run ends), so
    a run that changes nothing else reports C(changed=0). Its writes (the Lease taken, renewed and given back) are
    the only ones such a run makes.
  - The heartbeat gets the kubeconfig options on its standard input, never in its arguments, environment or a file.
"""

EXAMPLES = r"""
- name: Take the cluster lock
  maesh.ichor.cluster_lock:
    kubeconfig: "{{ ichor_kubeconfig }}"
  register: ichor_lock

- name: Take the lock a stopped run left, by its holder id typed back
  maesh.ichor.cluster_lock:
    kubeconfig: "{{ ichor_kubeconfig }}"
    break_holder: maesh-ichor-20261201T174000Z-3f2a9c1d0b7e
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
audit:
  description: The break of another run's lock, for the job's record.
  returned: when O(break_holder) broke (or in check mode would break) a lock
  type: dict
  contains:
    event:
      description: C(cluster lock broken).
      type: str
    broken_holder:
      description: The holder whose lock was broken.
      type: str
    holder:
      description: This run's holder id, which took the lock.
      type: str
    by:
      description: Who broke it (O(operator), or the local user).
      type: str
    check_mode:
      description: Whether the run was in check mode (nothing was written).
      type: bool
  sample: {"event": "cluster lock broken", "broken_holder": "maesh-ichor-20261201T174000Z-3f2a9c1d0b7e",
           "holder": "maesh-ichor-20261201T180500Z-0c9d8e7f6a5b", "by": "alice", "check_mode": false}
"""
