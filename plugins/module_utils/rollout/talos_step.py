# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout's Talos step for one machine (ADR 0113 / ADR 0043): upgrade, wait for it to come
back with the new version, its etcd member healthy and the cluster with quorum, its Node Ready.

Talos v1.13+ machines: ImageService Pull, LifecycleService Upgrade, then Reboot (as talosctl 1.14
does); v1.12 machines: the legacy Upgrade call.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils import release
from ansible_collections.maesh.ichor.plugins.module_utils.common import poll
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
