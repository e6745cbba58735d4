#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: talos_bootstrap
short_description: Bootstrap etcd on a new cluster's first control plane, exactly once
version_added: 0.1.0
description:
  - Reads etcd membership first, on O(node) and on every control plane of O(control_plane_nodes). When any of them lists
    a member, the cluster is bootstrapped (a rerun, a second control plane, a bootstrap accepted before its reply was
    lost) and nothing is sent.
  - Only when none lists a member is C(MachineService/Bootstrap) sent to O(node), as C(talosctl bootstrap) does. A
    machine that answers that etcd's data directory is not empty was bootstrapped already; that is not an error.
  - Then waits until etcd on O(node) answers healthy with a quorum of its members (the collection's one etcd
    health check).
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.talos
attributes:
  check_mode:
    support: full
    description: Reads etcd membership and says whether it would bootstrap; sends nothing.
  diff_mode:
    support: none
    description: Bootstrapping has no before and after to show.
options:
  node:
    description: The first control plane (its Talos API address); the one bootstrapped.
    type: str
    required: true
  control_plane_nodes:
    description: The cluster's other control planes, whose etcd membership is read too.
    type: list
    elements: str
    default: []
  wait:
    description: Wait for etcd to answer healthy with a quorum.
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait for etcd.
    type: float
    default: 600
notes:
  - The flow of this module is C(plugins/module_utils/machine/bootstrap.py), run in the controller by its action
    plugin C(plugins/action/talos_bootstrap.py).
  - Bootstrap needs the talosconfig role C(os:admin).
"""

EXAMPLES = r"""
- name: Bootstrap etcd on the first control plane (never twice)
  maesh.ichor.talos_bootstrap:
    talosconfig: "{{ ichor_talosconfig }}"
    node: 10.5.0.2
    control_plane_nodes: [10.5.0.3, 10.5.0.4]
"""

RETURN = r"""
bootstrapped:
  description: Whether this run sent the bootstrap (false on a rerun or in check mode).
  returned: always
  type: bool
members:
  description: The etcd member names (hostnames) listed afterwards.
  returned: when etcd answered
  type: list
  elements: str
  sample: [cp-1]
plan:
  description: What was found and done.
  returned: always
  type: list
  elements: str
"""
