# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bootstrap etcd on the first control plane, exactly once (the ``talos_bootstrap`` module).

etcd membership is read first, on every control plane given: a member anywhere means the cluster is bootstrapped
(a rerun, a second control plane, a bootstrap accepted before its reply was lost), and nothing is sent. Only when
no control plane lists a member is MachineService/Bootstrap sent, to the one named; Talos's own refusal (etcd's
data directory is not empty) is read as bootstrapped too. Then the run waits for the member to answer with a
quorum (the one etcd health check).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.common import poll
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, etcd


def options():
    return dict(node=dict(type="str", required=True), control_plane_nodes=dict(type="list", elements="str", default=[]),
                wait=dict(type="bool", default=True), wait_timeout=dict(type="float", default=600.0))


def run(params, conn, check_mode, clock=None):
    node = params["node"]
    controlplanes = [node] + [cp for cp in params["control_plane_nodes"] if cp != node]
    result = dict(changed=False, bootstrapped=False, plan=[])
    client = conn.talos()
    found = dict((cp, etcd.members(client, cp)) for cp in controlplanes)
    listed = dict((cp, names) for cp, names in found.items() if names)
    if listed:
        cp, names = sorted(listed.items())[0]
        result["plan"].append("etcd is bootstrapped (%s lists the members %s): not bootstrapped again" % (
            cp, ", ".join(names)))
        result["members"] = names
        return _wait(params, client, node, result, check_mode, clock)
    result["plan"].append("no control plane lists an etcd member (%s): bootstrap etcd on %s" % (
        ", ".join(controlplanes), node))
    result["changed"] = True
    if check_mode:
        return result
    try:
        client.call("Bootstrap", node=node)
    except errors.TalosCallError as exc:
        if exc.code != "ALREADY_EXISTS":
            raise
        # accepted earlier (its reply lost): etcd's data directory is there
        result["changed"] = False
        result["plan"].append("%s: etcd was bootstrapped already (the machine said so); not again" % node)
    else:
        result["bootstrapped"] = True
        result["plan"].append("%s: etcd bootstrapped" % node)
    return _wait(params, client, node, result, check_mode, clock)


def _wait(params, client, node, result, check_mode, clock):
    if check_mode or not params["wait"]:
        return result

    def check():
        healthy, detail = etcd.health(client, node)
        return (True, detail) if healthy else (False, detail)

    healthy, detail = poll.until(check, params["wait_timeout"], clock=clock or poll.Clock)
    if not healthy:
        raise IchorError("etcd on %s did not reach a quorum within %ds (%s); run again to go on waiting: it is not "
                         "bootstrapped twice" % (node, params["wait_timeout"], detail), result=result)
    result["members"] = etcd.members(client, node) or []
    result["plan"].append("etcd on %s: %s" % (node, detail))
    return result
