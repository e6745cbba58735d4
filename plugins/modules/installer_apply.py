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
  - maesh.ichor.installer
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

from ansible_collections.maesh.ichor.plugins.module_utils import installer_module as common


def main():
    common.run_module(common.apply_run)


if __name__ == "__main__":
    main()
