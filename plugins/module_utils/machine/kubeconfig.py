# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster's admin kubeconfig, fetched from a control plane over the Talos API (MachineService/Kubeconfig, as
``talosctl kubeconfig`` does) into a 0600 file (the ``talos_kubeconfig`` module).

Talos mints a new client certificate on every call, so a file that already holds this cluster's kubeconfig (the
same API server and cluster CA) is kept: a rerun changes nothing. A file that is another cluster's, or no
kubeconfig, is never overwritten. The content is a root credential: it is never returned or printed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.maesh.ichor.plugins.module_utils.common import files, poll
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import client as kube_client
from ansible_collections.maesh.ichor.plugins.module_utils.talos import kubeconfig


def options():
    return dict(node=dict(type="str", required=True), path=dict(type="path", required=True),
                wait=dict(type="bool", default=True), wait_timeout=dict(type="float", default=300.0))


def run(params, conn, check_mode, clock=None):
    node, path = params["node"], params["path"]
    result = dict(changed=False, path=path, plan=[])
    client = conn.talos()
    fetched = kubeconfig.kubeconfig_bytes(client.call("Kubeconfig", node=node))
    wanted = kubeconfig.cluster_of(fetched)
    if wanted is None:
        raise IchorError("%s answered with no kubeconfig" % node, result=result)
    result["server"] = wanted[0]
    if os.path.exists(path):
        try:
            with open(path, "rb") as handle:
                have = kubeconfig.cluster_of(handle.read())
        except (IOError, OSError) as exc:
            raise IchorError("cannot read %s: %s" % (path, exc.strerror or exc), result=result)
        if have == wanted:
            result["plan"].append("%s: the kubeconfig of this cluster (%s) is there; kept" % (path, wanted[0]))
            return _wait(params, result, check_mode, clock)
        found = "another cluster's kubeconfig (%s)" % have[0] if have else "no kubeconfig"
        raise IchorError("%s holds %s, not this cluster's kubeconfig (%s, its CA): it is not overwritten; name another "
                         "path or move it away" % (path, found, wanted[0]), result=result)
    result["changed"] = True
    directory = os.path.dirname(os.path.abspath(path))
    problem = os.path.isdir(directory) and files.others_can_replace(path, directory, os.stat(directory))
    if problem:  # refused in check mode too (write_private refuses it again)
        raise IchorError(problem, result=result)
    if check_mode:
        result["plan"].append("would write the admin kubeconfig of %s (from %s) to %s, mode 0600" % (wanted[0], node, path))
        return result
    files.write_private(path, fetched)
    result["plan"].append("%s: the admin kubeconfig of %s (from %s) written, mode 0600; it is a root credential" % (
        path, wanted[0], node))
    return _wait(params, result, check_mode, clock)


def _wait(params, result, check_mode, clock):
    """Until the API server answers /readyz with the kubeconfig."""
    if check_mode or not params["wait"]:
        return result

    def check():
        kube = kube_client.KubeClient(kubeconfig=params["path"], timeout=10)
        try:
            answer = kube.raw_get("/readyz")
        except kube_client.KubeError as exc:
            return False, str(exc)
        finally:
            kube.close()
        return (True, answer) if answer.strip() == "ok" else (False, answer.strip()[:200])

    ready, detail = poll.until(check, params["wait_timeout"], clock=clock or poll.Clock)
    if not ready:
        raise IchorError("the API server %s is not ready within %ds (%s); run again to go on waiting" % (
            result["server"], params["wait_timeout"], detail), result=result)
    result["plan"].append("the API server %s answers ready" % result["server"])
    return result
