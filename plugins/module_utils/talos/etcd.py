# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one etcd health check (a control plane is not touched while etcd is unhealthy), and the etcd snapshot a
run takes before it changes control planes (the ``etcd_snapshot`` module)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib

from ansible_collections.maesh.ichor.plugins.module_utils.common import files
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors
from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine


def _member_host(member):
    for url in list(member.client_urls) + list(member.peer_urls):
        host = url.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
        if host:
            return host
    return None


def health(client, node):
    """(healthy?, detail): this member answers its status, and a quorum of the voting members does."""
    try:
        members = client.call("EtcdMemberList", node=node).messages[0].members
        status = client.call("EtcdStatus", node=node).messages[0].member_status
    except errors.TalosError as exc:
        return False, "etcd on %s does not answer (%s)" % (node, exc)
    if status.errors:
        return False, "etcd on %s reports errors" % node
    voters = [m for m in members if not m.is_learner]
    if not voters:
        return False, "etcd on %s lists no members" % node
    healthy = 0
    for member in voters:
        host = _member_host(member)
        try:
            if host and not client.call("EtcdStatus", node=host).messages[0].member_status.errors:
                healthy += 1
        except errors.TalosError:
            continue
    if healthy * 2 <= len(voters):
        return False, "only %d of %d etcd members are healthy (no quorum)" % (healthy, len(voters))
    return True, "%d of %d etcd members healthy" % (healthy, len(voters))


def snapshot_result(params, conn, check_mode):
    """The ``etcd_snapshot`` module: a snapshot of ``node``'s etcd member into the 0600 file ``path`` (a new file each
    run, renamed over what was there), after etcd answered healthy. Check mode asks etcd and writes nothing."""
    node, path = params["node"], params["path"]
    client = conn.talos()
    files.private_directory(path)  # refused before the machine is asked, in check mode as well
    healthy, detail = health(client, node)
    result = dict(changed=True, path=path, plan=["etcd on %s: %s" % (node, detail)])
    if not healthy:
        raise IchorError("no etcd snapshot taken: %s" % detail, result=dict(result, changed=False))
    if check_mode:
        result["plan"].append("etcd snapshot of %s would be written to %s (0600)" % (node, path))
        return result
    chunks = client.run(machine.etcd_snapshot(client, node))
    if not any(chunks):
        raise IchorError("the etcd snapshot of %s is empty; nothing written" % node, result=dict(result, changed=False))
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk)
    size = files.write_private(path, chunks)
    result.update(size=size, sha256=digest.hexdigest())
    result["plan"].append("etcd snapshot of %s written to %s (0600, %d bytes, sha256 %s)" % (
        node, path, size, digest.hexdigest()))
    return result
