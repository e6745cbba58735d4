#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: talos_kubeconfig
short_description: Fetch a cluster's admin kubeconfig from a control plane into a 0600 file
version_added: 0.1.0
description:
  - Asks the control plane O(node) for the cluster's admin kubeconfig over the Talos API
    (C(MachineService/Kubeconfig), as C(talosctl kubeconfig) does) and writes it to O(path), mode 0600, as a new
    file renamed over the old one. Its directory must be writable by its owner only.
  - Talos mints a new client certificate on every call, so a file that already holds this cluster's kubeconfig (the
    same API server and cluster CA) is kept and the task reports no change.
  - A file that holds another cluster's kubeconfig, or no kubeconfig, is never overwritten; the module fails.
  - The kubeconfig is a root credential of the cluster; it is never returned or printed.
notes:
  - The flow of this module is C(plugins/module_utils/machine/kubeconfig.py), run in the controller by its action
    plugin C(plugins/action/talos_kubeconfig.py).
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.talos
attributes:
  check_mode:
    support: full
    description: Fetches the kubeconfig to compare it; writes nothing.
  diff_mode:
    support: none
    description: The file holds a credential; no diff is shown.
options:
  node:
    description: A control plane (its Talos API address).
    type: str
    required: true
  path:
    description: The kubeconfig file to write.
    type: path
    required: true
  wait:
    description: Then wait until the API server answers C(/readyz) with the kubeconfig.
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait for the API server.
    type: float
    default: 300
"""

EXAMPLES = r"""
- name: Keep the new cluster's kubeconfig next to its talosconfig
  maesh.ichor.talos_kubeconfig:
    talosconfig: "{{ ichor_talosconfig }}"
    node: 10.5.0.2
    path: "~/.ichor/clusters/prod/kubeconfig"
"""

RETURN = r"""
path:
  description: The kubeconfig file.
  returned: always
  type: str
server:
  description: The API server the kubeconfig names.
  returned: success
  type: str
  sample: https://10.5.0.2:6443
plan:
  description: What was found and done.
  returned: always
  type: list
  elements: str
"""
