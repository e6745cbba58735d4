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

import re
import time

from ansible_collections.maesh.ichor.plugins.module_utils import release
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as tc
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, machine

INSTALLER = "ghcr.io/siderolabs/installer"


def installer_image(version=None):
    return "%s:%s" % (INSTALLER, version or release.TALOS)


def image_version(image):
    return image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else None


class UpgradeFailed(Exception):
    """One line: which machine, what did not happen, what to do."""


def _member_host(member):
    for url in list(member.client_urls) + list(member.peer_urls):
        host = url.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
        if host:
            return host
    return None


def etcd_health(client, node):
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


def node_ready(kube, hostname, version):
    """The machine's Node is Ready and reports the new Talos in its OS image."""
    node = kube.get("v1", "Node", hostname)
    if node is None:
        return False
    status = node.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return ready and version in ((status.get("nodeInfo") or {}).get("osImage") or "")


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


def wait_back(client, kube, node, hostname, role, target, timeout, interval=1.0, clock=time):
    """Wait for the machine to answer with the target version, then etcd (control planes), then its Node."""
    deadline = clock.time() + timeout
    waiting_for = "it to answer with Talos %s" % target
    while clock.time() < deadline:
        try:
            version = client.run(machine.version(client, node))["tag"]
        except errors.TalosError:
            version = None
        if version == target:
            if role == "controlplane":
                healthy, detail = etcd_health(client, node)
                if not healthy:
                    waiting_for = "its etcd member to be healthy (%s)" % detail
                    clock.sleep(interval)
                    continue
            if kube is not None and not node_ready(kube, hostname, target):
                waiting_for = "its Node %s to be Ready on Talos %s" % (hostname, target)
                clock.sleep(interval)
                continue
            return
        clock.sleep(interval)
    raise UpgradeFailed("%s (%s) did not come back within %ss: waited for %s; the remaining machines were not "
                        "touched; fix the machine and rerun, the rollout continues from it" % (
                            hostname, node, int(timeout), waiting_for))


# -- the kubernetes step (ADR 0057): removed APIs, kubelets ---------------------------------

_DEPRECATED = re.compile(r'^apiserver_requested_deprecated_apis\{([^}]*)\}\s+(\S+)', re.M)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def removed_apis_in_use(metrics_text, target):
    """APIs still requested whose removed_release is at or below the target minor (apiserver /metrics)."""
    target_minor = release.minor(target)
    hits = set()
    for labels, value in _DEPRECATED.findall(metrics_text or ""):
        fields = dict(_LABEL.findall(labels))
        removed = fields.get("removed_release")
        if not removed or float(value) <= 0:
            continue
        if release.minor(removed) <= target_minor:
            group = fields.get("group") or "core"
            hits.add("%s/%s %s (removed in %s)" % (group, fields.get("version"), fields.get("resource"), removed))
    return sorted(hits)


def check_removed_apis(metrics_text, target):
    """Refuse the Kubernetes step (UpgradeFailed) while an API the target no longer serves is requested."""
    hits = removed_apis_in_use(metrics_text, target)
    if hits:
        raise UpgradeFailed("removed APIs are still in use, Kubernetes %s no longer serves them: %s; move their "
                            "clients to the replacement APIs first" % (target, "; ".join(hits)))


def node_kubelet(kube, hostname):
    node = kube.get("v1", "Node", hostname)
    status = (node or {}).get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return ((status.get("nodeInfo") or {}).get("kubeletVersion"), ready)


def wait_kubelet(kube, hostname, target, timeout, interval=0.5, clock=time):
    deadline = clock.time() + timeout
    while clock.time() < deadline:
        version, ready = node_kubelet(kube, hostname)
        if version == target and ready:
            return
        clock.sleep(interval)
    raise UpgradeFailed("the kubelet of %s did not report %s and Ready within %ss; the remaining machines were not "
                        "touched; rerun to continue" % (hostname, target, int(timeout)))
