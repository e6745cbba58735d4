# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``cluster_lock`` module: the cluster lock (``k8s.lock``) taken or given back by a playbook."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.common import processes, who
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import heartbeat, lock


def options():
    return dict(state=dict(type="str", choices=["held", "released"], default="held"), holder=dict(type="str"),
                duration=dict(type="int", default=lock.DURATION), break_holder=dict(type="str"),
                operator=dict(type="str"))


def run(params, conn, check_mode):
    """The ``cluster_lock`` module's result: the lock taken (and kept by a heartbeat for as long as the playbook
    lives), or given back; ``changed`` stays false: bookkeeping. A broken lock is in the result's ``audit``."""
    holder = params["holder"] or lock.new_holder()
    result = dict(changed=False, holder=holder)
    if params["state"] == "released":
        result["plan"] = lock.release(conn.kube(), holder, check=check_mode)
        return result
    if params["duration"] < 2:  # the heartbeat renews at most once a second: a lock lapses after two missed renewals
        raise lock.LockError("duration %d is too short: the heartbeat renews the lock once a second at most; give at "
                             "least 2 seconds (default %d)" % (params["duration"], lock.DURATION))
    by = params["operator"] or who.local_user()
    playbook = processes.playbook()
    result["plan"] = lock.acquire(conn.kube(), holder, params["duration"], check=check_mode, process=playbook,
                                  break_holder=params["break_holder"], by=by)
    if params["break_holder"] and any(" broken" in line for line in result["plan"]):
        result["audit"] = {"event": "cluster lock broken", "broken_holder": params["break_holder"], "holder": holder,
                           "by": by, "check_mode": check_mode}
    if not check_mode:
        heartbeat.start({key: params.get(key) for key in ("kubeconfig", "kubeconfig_content", "kube_context",
                                                          "timeout")}, holder, params["duration"], playbook)
    return result
