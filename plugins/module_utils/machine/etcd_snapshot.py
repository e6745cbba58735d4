# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The etcd snapshot a run takes before it changes control planes (the ``etcd_snapshot`` module)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib

from ansible_collections.maesh.ichor.plugins.module_utils.common import files
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.talos import etcd

# etcd's database is at most its backend quota, whose documented ceiling is 8 GiB; a stream past twice that is not a
# snapshot, and ends before it fills the disk
MAX_SNAPSHOT = 16 << 30


def run(params, conn, check_mode):
    """The ``etcd_snapshot`` module: a snapshot of ``node``'s etcd member (MachineService/EtcdSnapshot, as ``talosctl
    etcd snapshot`` takes it) streamed into the 0600 file ``path`` (a new file each run, renamed over what was there
    once whole), after etcd answered healthy. Check mode asks etcd and writes nothing."""
    node, path = params["node"], params["path"]
    client = conn.talos()
    files.private_directory(path)  # refused before the machine is asked, in check mode as well
    healthy, detail = etcd.health(client, node)
    result = dict(changed=True, path=path, plan=["etcd on %s: %s" % (node, detail)])
    if not healthy:
        raise IchorError("no etcd snapshot taken: %s" % detail, result=dict(result, changed=False))
    if check_mode:
        result["plan"].append("etcd snapshot of %s would be written to %s (0600)" % (node, path))
        return result
    try:
        size, digest = files.write_private_with(path, lambda handle: stream_into(client, node, handle))
    except IchorError as exc:  # the new file is removed; whatever was at path stays
        exc.result = dict(result, changed=False)
        raise
    result.update(size=size, sha256=digest)
    result["plan"].append("etcd snapshot of %s written to %s (0600, %d bytes, sha256 %s)" % (node, path, size, digest))
    return result


def stream_into(client, node, handle):
    """Stream ``node``'s etcd snapshot into the binary writer ``handle`` as it arrives (a snapshot of gigabytes is
    never held whole); (bytes written, sha256). IchorError for an empty snapshot."""
    digest = hashlib.sha256()
    size = 0
    for reply in client.stream("EtcdSnapshot", node=node, max_bytes=MAX_SNAPSHOT):
        digest.update(reply.bytes)
        size += len(reply.bytes)
        handle.write(reply.bytes)
    if not size:
        raise IchorError("the etcd snapshot of %s is empty; nothing written" % node)
    return size, digest.hexdigest()
