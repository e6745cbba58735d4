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
  - Without a snapshot there is nothing to restore and nothing is written.
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
"""

EXAMPLES = r"""
- name: Restore after a failed step
  maesh.ichor.installer_restore:
    kubeconfig: "{{ ichor_kubeconfig }}"
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

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.maesh.ichor.plugins.module_utils.ansible_module import runner, specs
from ansible_collections.maesh.ichor.plugins.module_utils.installer import stages


def main():
    module = AnsibleModule(argument_spec=specs.spec(stages.options(), kube=True), supports_check_mode=True)
    runner.run(module, lambda conn: stages.run_stage(stages.restore, module.params, conn, module.check_mode))


if __name__ == "__main__":
    main()
