# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The etcd snapshot a run takes before it changes control planes (the ``etcd_snapshot`` module)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib

from ansible_collections.maesh.ichor.plugins.module_utils.common import files
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.talos import etcd, machine


def run(params, conn, check_mode):
    """The ``etcd_snapshot`` module: a snapshot of ``node``'s etcd member into the 0600 file ``path`` (a new file each
    run, renamed over what was there), after etcd answered healthy. Check mode asks etcd and writes nothing."""
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
