#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: installer_restore
short_description: Put the cluster back as it was before a failed installer run
version_added: 0.1.0
description:
  - Reads the snapshot that M(maesh.ichor.installer_apply) persisted and puts every object back as it was (same
    labels, annotations and spec or data), deletes the objects the run created, re-creates deleted ones, then removes
    the snapshot. The installer role calls it when a step between apply and prune fails.
  - Only the snapshot whose run id is O(run_id) is restored. The installer role passes the id
    M(maesh.ichor.installer_apply) returned, so that a failed run restores its own snapshot and never one that another
    run left (a run killed between apply and prune); restoring that one would roll back what that run applied.
  - Any other snapshot, and every snapshot when O(run_id) is not given, is left as it is; the module writes nothing,
    returns C(changed=false) and a warning that names the snapshot and its run id. To roll back a run that did not
    finish, restore its snapshot by hand with that id as O(run_id) (the plan of M(maesh.ichor.installer_apply) shows
    it, with its number of objects).
  - Without a snapshot there is nothing to restore and nothing is written.
notes:
  - The flow of this module is C(plugins/module_utils/installer/stages.py), run in the controller by its action plugin
    C(plugins/action/installer_restore.py).
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.kubernetes
  - maesh.ichor.installer
attributes:
  check_mode:
    support: full
    description: Says what would be restored; nothing is written.
  diff_mode:
    support: none
    description: Not supported.
options:
  run_id:
    description:
      - The id of the run whose snapshot to restore (RV(maesh.ichor.installer_apply#module:run_id) of that run).
      - Without it nothing is restored; the warning names the snapshot present and its id.
    type: str
"""

EXAMPLES = r"""
- name: Restore after a failed step of this run
  maesh.ichor.installer_restore:
    kubeconfig: "{{ ichor_kubeconfig }}"
    run_id: "{{ ichor_applied.run_id }}"

- name: By hand, after a crash - roll back the run whose id the warning named
  maesh.ichor.installer_restore:
    kubeconfig: "{{ ichor_kubeconfig }}"
    run_id: 20261201T081500Z-1a2b3c4d5e6f
"""

RETURN = r"""
plan:
  description: What is (or would be) restored.
  returned: always
  type: list
  elements: str
restored:
  description: The objects that had to be re-created.
  returned: always
  type: list
  elements: str
"""
