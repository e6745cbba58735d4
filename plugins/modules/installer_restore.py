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
  - maesh.ichor.connection
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

from ansible_collections.maesh.ichor.plugins.module_utils import installer, installer_module as common
from ansible_collections.maesh.ichor.plugins.module_utils.connection import fail, kube_client_for


def main():
    module = AnsibleModule(argument_spec=common.store_argument_spec(), supports_check_mode=True)
    client = kube_client_for(module)
    run = installer.Installer(client, [], namespace=module.params["namespace"],
                              snapshot_file=module.params["snapshot_file"])
    try:
        snapshot = run.load_snapshot()
    except Exception as exc:  # pylint: disable=broad-except
        fail(module, exc, plan=[])
    if not snapshot:
        module.exit_json(changed=False, plan=["no installer snapshot: nothing to restore"], restored=[])
    plan = ["restore %s" % installer.Ref(**installer.ref_kwargs(e["ref"])) for e in snapshot]
    if module.check_mode:
        module.exit_json(changed=True, plan=plan, restored=[])
    try:
        recreated = run.restore(snapshot)
        run.delete_snapshot()
    except Exception as exc:  # pylint: disable=broad-except
        fail(module, "restore failed: %s; the snapshot is kept" % exc, plan=plan)
    module.exit_json(changed=True, plan=plan, restored=[str(r) for r in recreated])


if __name__ == "__main__":
    main()
