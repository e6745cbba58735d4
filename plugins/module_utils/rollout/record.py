# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read or update the cluster record (``k8s.cluster_record``): the ``cluster_record`` module's flow.
The stored versions move only to the release set's values and never down."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.rollout.plan import Refused

VERSIONS = ("talos", "kubernetes", "contract")


def _setter(wanted):
    def mutate(data):
        for key, value in wanted.items():
            if value is None:
                data.pop(key, None)
            else:
                data[key] = value
    return mutate


def run(params, conn, check_mode):
    """Set ``params["update"]`` (a null value removes the key; empty reads); the result dict (record, plan, diff).

    Check mode asks the server with a dry run. A failure (IchorError) carries an empty plan.
    """
    kube = conn.kube()
    wanted = params["update"] or {}
    try:
        current = cluster_record.read(kube)
        for field in VERSIONS:
            if wanted.get(field) is not None:
                refusal = release.validate_change(field, current.get(field), wanted[field])
                if refusal:
                    raise Refused(refusal)
        if wanted:
            before, after, changed = cluster_record.update(kube, _setter(wanted), dry_run=check_mode)
        else:
            before, after, changed = current.data, current.data, False
    except IchorError as exc:
        exc.result = dict(plan=[])
        raise
    plan = ["cluster record %s/%s: set %s" % (cluster_record.NAMESPACE, cluster_record.NAME, ", ".join(
        "%s=%s" % (k, after.get(k)) for k in sorted(wanted) if before.get(k) != after.get(k)))] if changed else []
    return dict(changed=changed, record=after, plan=plan,
                diff={"before": json.dumps(before, indent=2, sort_keys=True) + "\n",
                      "after": json.dumps(after, indent=2, sort_keys=True) + "\n"})
