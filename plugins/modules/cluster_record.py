#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: cluster_record
short_description: Read or update the cluster record (ConfigMap ichor-cluster in ichor-system)
version_added: 0.1.0
description:
  - The cluster record holds what the collection keeps about a cluster between runs (stored versions, adoption,
    CNI mode, pending machines). Every update is conditional on the resourceVersion it read, so two runs never
    overwrite each other; the losing run fails and is rerun.
  - Stored versions (C(talos), C(kubernetes), C(contract)) can only move to the release set's values and never
    down (ADR 0113).
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.connection
attributes:
  check_mode:
    support: full
    description: Says what would change; the server is asked with a dry run.
  diff_mode:
    support: full
    description: The record before and after.
options:
  update:
    description: Keys to set in the record (a value of null removes the key). Empty reads the record.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Record that the Talos step is done
  maesh.ichor.cluster_record:
    kubeconfig: "{{ ichor_kubeconfig }}"
    update:
      talos: "{{ lookup('maesh.ichor.release_set', 'talos') }}"
      contract: "{{ lookup('maesh.ichor.release_set', 'contract') }}"
"""

RETURN = r"""
record:
  description: The record after the update (or as read).
  returned: success
  type: dict
plan:
  description: What changed (or would).
  returned: always
  type: list
  elements: str
"""

import json

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.maesh.ichor.plugins.module_utils import release
from ansible_collections.maesh.ichor.plugins.module_utils.connection import fail, kube_client_for, with_connection
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record


def main():
    module = AnsibleModule(argument_spec=with_connection(dict(update=dict(type="dict", default={}))),
                           supports_check_mode=True)
    kube = kube_client_for(module)
    wanted = module.params["update"] or {}
    try:
        current = cluster_record.read(kube)
        for field in ("talos", "kubernetes", "contract"):
            if field in wanted and wanted[field] is not None:
                refusal = release.validate_change(field, current.get(field), wanted[field])
                if refusal:
                    module.fail_json(msg=refusal, plan=[])

        def mutate(data):
            for key, value in wanted.items():
                if value is None:
                    data.pop(key, None)
                else:
                    data[key] = value

        before, after, changed = cluster_record.update(kube, mutate, dry_run=module.check_mode) if wanted else (
            current.data, current.data, False)
    except Exception as exc:  # pylint: disable=broad-except
        fail(module, exc, plan=[])
    plan = ["cluster record %s/%s: set %s" % (cluster_record.NAMESPACE, cluster_record.NAME, ", ".join(
        "%s=%s" % (k, after.get(k)) for k in sorted(wanted) if before.get(k) != after.get(k)))] if changed else []
    result = dict(changed=changed, record=after, plan=plan)
    if module._diff:  # pylint: disable=protected-access
        result["diff"] = {"before": json.dumps(before, indent=2, sort_keys=True) + "\n",
                          "after": json.dumps(after, indent=2, sort_keys=True) + "\n"}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
