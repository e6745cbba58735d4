# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``cluster_lock`` module: the cluster lock (``k8s.lock``) taken or given back by a playbook."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.k8s import lock


def options():
    return dict(state=dict(type="str", choices=["held", "released"], default="held"), holder=dict(type="str"),
                duration=dict(type="int", default=lock.DURATION))


def run(params, conn, check_mode):
    """The ``cluster_lock`` module's result: the lock taken or given back (``changed`` stays false: bookkeeping)."""
    holder = params["holder"] or lock.new_holder()
    if params["state"] == "held":
        plan = lock.acquire(conn.kube(), holder, params["duration"], check=check_mode)
    else:
        plan = lock.release(conn.kube(), holder, check=check_mode)
    return dict(changed=False, holder=holder, plan=plan)
