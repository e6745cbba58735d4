#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: etcd_snapshot
short_description: Take a snapshot of a control plane's etcd into a private file
version_added: 0.1.0
description:
  - Takes a snapshot (backup) of the etcd member of the control plane O(node) with the Talos API's etcd snapshot call
    (C(MachineService/EtcdSnapshot), as C(talosctl etcd snapshot) does) and writes it to O(path).
  - Etcd must answer healthy first (this member and a quorum of the voting members), else nothing is taken.
  - The snapshot is written as it arrives (it is never held in memory whole), into a new file with mode 0600 that is
    renamed over O(path) once complete; O(timeout) bounds the wait for each part of it, not the whole. A directory
    that others can write, or that belongs to another user, is refused before the machine is asked. The snapshot holds every Secret of the
    cluster; keep the file as you keep the secrets bundle.
  - Adopt takes one before it releases its first held machine (its fourth phase).
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.talos
attributes:
  check_mode:
    support: full
    description: Asks etcd for its health and checks the directory; writes nothing.
  diff_mode:
    support: none
    description: A snapshot has no before and after.
options:
  node:
    description: The control plane whose etcd member is snapshotted (its Talos API address).
    type: str
    required: true
  path:
    description: The file to write (its directory is made 0700 when missing).
    type: path
    required: true
notes:
  - The flow of this module is C(plugins/module_utils/machine/etcd_snapshot.py), run in the controller by its action
    plugin C(plugins/action/etcd_snapshot.py).
  - The talosconfig's role must allow the call (C(os:admin), C(os:operator) or C(os:etcd:backup)).
"""

EXAMPLES = r"""
- name: Back etcd up before changing the control planes
  maesh.ichor.etcd_snapshot:
    talosconfig: "{{ ichor_talosconfig }}"
    node: 10.5.0.2
    path: "/secure/backups/prod-{{ '%Y%m%dT%H%M%SZ' | strftime(utc=true) }}.db"
"""

RETURN = r"""
path:
  description: The file written (or that would be).
  returned: always
  type: str
size:
  description: The snapshot's size in bytes.
  returned: when written
  type: int
sha256:
  description: The snapshot's SHA-256.
  returned: when written
  type: str
plan:
  description: What was done (or would be), as lines.
  returned: always
  type: list
  elements: str
"""
