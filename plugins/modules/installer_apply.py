#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: installer_apply
short_description: Apply the installer's bundle with server-side apply, after snapshotting what it changes
version_added: 0.1.0
description:
  - Applies every object of a bundle (directories or files of manifests) with server-side apply under the field
    manager C(ichor-installer), each object stamped C(ichor.maesh.dev/installed-by=ichor-installer).
  - Before anything is written, snapshots every object the run will change or delete (including what
    M(maesh.ichor.installer_prune) will prune), persists the snapshot (Secret C(ichor-installer-snapshot) next to the
    inventory, or O(snapshot_file)) and reads it back. If the apply fails, the cluster is restored from it.
  - Asks the API server with dry runs what would change, so a run with nothing to change writes nothing.
  - In check mode returns the full plan, prune set included, and with C(--diff) the before and after of each object.
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.connection
attributes:
  check_mode:
    support: full
    description: Dry runs against the API server; nothing is written.
  diff_mode:
    support: full
    description: Before and after of every object created, updated or pruned; Secret values masked.
options:
  bundle:
    description: Directories or files of Kubernetes manifests (YAML, multi-document). Directories are read recursively.
    type: list
    elements: path
    required: true
  namespace:
    description: The installer's namespace (inventory, snapshot, and the default for namespaced objects).
    type: str
    default: ichor-system
  snapshot_file:
    description: Keep the snapshot in this file (mode 0600) instead of a Secret in O(namespace).
    type: path
"""

EXAMPLES = r"""
- name: Apply the bundle
  maesh.ichor.installer_apply:
    kubeconfig: "{{ ichor_kubeconfig }}"
    bundle:
      - "{{ role_path }}/files/bundle"
"""

RETURN = r"""
plan:
  description: One line per object to create or update, per object to prune or keep (with why), notices and warnings.
  returned: always
  type: list
  elements: str
  sample: ["create ServiceAccount ichor-system/ichor-installer", "prune ClusterRole old-role: dropped from the bundle"]
changes:
  description: The objects created or updated.
  returned: always
  type: list
  elements: dict
prune:
  description: The prune plan (what M(maesh.ichor.installer_prune) will delete or keep, and why).
  returned: always
  type: list
  elements: dict
restored:
  description: On failure, the objects that had to be re-created while restoring.
  returned: failure
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.maesh.ichor.plugins.module_utils import installer_module as common
from ansible_collections.maesh.ichor.plugins.module_utils.connection import fail


def main():
    module = AnsibleModule(argument_spec=common.argument_spec(), supports_check_mode=True)
    run = common.installer_for(module)
    try:
        apply_steps = run.plan_apply()
        prune_steps = run.plan_prune()
        inventory_changed = run.inventory_changed()
    except Exception as exc:  # pylint: disable=broad-except
        fail(module, exc, plan=[])
    steps = apply_steps + prune_steps
    writes = [s for s in apply_steps if s.action in ("create", "update")]
    result = dict(plan=common.lines(steps, run.warnings), changes=common.step_dicts(apply_steps, ("create", "update")),
                  prune=common.step_dicts(prune_steps, ("prune", "keep")))
    if module._diff:  # pylint: disable=protected-access
        result["diff"] = common.diffs(steps)
    changed = bool(writes or any(s.action == "prune" for s in prune_steps) or inventory_changed)
    if module.check_mode or not (writes or any(s.action == "prune" for s in prune_steps)):
        common.finish(module, run, changed=changed if module.check_mode else False, **result)
    snapshot = None
    try:
        snapshot = run.save_snapshot(run.snapshot_entries(apply_steps, prune_steps))
        run.apply(apply_steps)
    except Exception as exc:  # pylint: disable=broad-except
        message = "apply failed: %s" % exc
        if snapshot is not None:
            try:
                recreated = run.restore(snapshot)
                run.delete_snapshot()
                result["restored"] = [str(r) for r in recreated]
                message += "; the cluster was restored to what it was before the run"
                if recreated:
                    message += " (re-created: %s)" % ", ".join(str(r) for r in recreated)
            except Exception as again:  # pylint: disable=broad-except
                message += "; RESTORE FAILED (%s): the snapshot is kept for installer_restore" % again
        else:
            message += "; nothing was written"
        fail(module, message, **result)
    common.finish(module, run, changed=True, **result)


if __name__ == "__main__":
    main()
