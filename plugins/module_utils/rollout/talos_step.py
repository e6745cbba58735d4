# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout's Talos step for one machine (ADR 0113 / ADR 0043): upgrade, wait for it to come
back with the new version, its etcd member healthy and the cluster with quorum, its Node Ready.

Talos v1.13+ machines: ImageService Pull, LifecycleService Upgrade, then Reboot (as talosctl 1.14
does); v1.12 machines: the legacy Upgrade call. ``run`` is the ``talos_upgrade`` module's flow.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils import release
from ansible_collections.maesh.ichor.plugins.module_utils.common import poll
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import nodes
from ansible_collections.maesh.ichor.plugins.module_utils.rollout.errors import UpgradeFailed
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as tc
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, etcd, machine

INSTALLER = "ghcr.io/siderolabs/installer"


def installer_image(version=None):
    return "%s:%s" % (INSTALLER, version or release.TALOS)


def image_version(image):
    return image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else None


def node_ready(kube, hostname, version):
    """The machine's Node is Ready and reports the new Talos in its OS image."""
    node = nodes.get(kube, hostname)
    return nodes.ready(node) and version in (nodes.info(node).get("osImage") or "")


def start_upgrade(client, node, running, image):
    """Send the upgrade the machine's Talos version takes."""
    if release.minor(running) >= (1, 13):
        client.call("ImagePull", tc.request_type("ImagePull")(image_ref=image), node=node)
        req = tc.request_type("LifecycleUpgrade")()
        req.source.image_name = image
        client.call("LifecycleUpgrade", req, node=node)
        client.call("Reboot", node=node)
    else:
        client.call("Upgrade", tc.request_type("Upgrade")(image=image), node=node)


def wait_back(client, kube, node, hostname, role, target, timeout, interval=1.0, clock=None):
    """Wait for the machine to answer with the target version, then etcd (control planes), then its Node."""

    def back():
        try:
            version = client.run(machine.version(client, node))["tag"]
        except errors.TalosError:
            version = None
        if version != target:
            return False, "it to answer with Talos %s" % target
        if role == "controlplane":
            healthy, detail = etcd.health(client, node)
            if not healthy:
                return False, "its etcd member to be healthy (%s)" % detail
        if kube is not None and not node_ready(kube, hostname, target):
            return False, "its Node %s to be Ready on Talos %s" % (hostname, target)
        return True, None

    done, waiting_for = poll.until(back, timeout, interval, clock)
    if not done:
        raise UpgradeFailed("%s (%s) did not come back within %ss: waited for %s; the remaining machines were not "
                            "touched; fix the machine and rerun, the rollout continues from it" % (
                                hostname, node, int(timeout), waiting_for))


def run(params, conn, check_mode, clock=None):
    """Upgrade the machine ``params["node"]`` unless it runs the target already; the result dict.

    A control plane is not started while etcd is unhealthy (UpgradeFailed, nothing sent). With
    ``wait`` the machine is waited for (``wait_back``); without it the run returns once the upgrade
    is sent. Without a kubeconfig there is no Node to wait for.
    """
    image = params["image"] or installer_image()
    target = image_version(image)
    node = params["node"]
    client = conn.talos()
    kube = conn.kube() if conn.has_kube() else None
    before = ""
    try:
        facts = client.run(machine.machine_facts(client, node))
        hostname = params["hostname"] or facts["hostname"]
        before = facts["version"]
        result = dict(changed=False, before=before, after=target,
                      diff={"before": "talos: %s\n" % before, "after": "talos: %s\n" % target})
        if before == target:
            result.update(plan=["%s (%s): already at Talos %s, skipped" % (hostname, node, target)],
                          diff={"before": "", "after": ""})
            return result
        controlplane = params["role"] == "controlplane"
        if controlplane:
            healthy, detail = etcd.health(client, node)
            if not healthy:
                raise UpgradeFailed("%s is a control plane and etcd is not healthy (%s); no upgrade was started" % (
                    hostname, detail), result=dict(plan=[], before=before, after=before))
        if params["wait"]:
            then = "wait for it%s" % (", its etcd member and its Node" if controlplane else " and its Node")
        else:
            then = "not waiting for it (wait: false)"
        result.update(changed=True, plan=["%s (%s): upgrade Talos from %s to %s with %s, reboot, %s" % (
            hostname, node, before, target, image, then)])
        if check_mode:
            return result
        start_upgrade(client, node, before, image)
        if params["wait"]:
            wait_back(client, kube, node, hostname, params["role"], target, params["wait_timeout"], clock=clock)
    except IchorError as exc:
        if exc.result is None:
            exc.result = dict(plan=[], before=before, after="")
        raise
    return result
