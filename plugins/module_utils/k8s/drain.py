# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cordon, drain and uncordon Nodes as ``kubectl drain`` does (and talosctl 1.14's upgrade, through siderolabs'
go-kubernetes ``nodedrain``: IgnoreAllDaemonSets, DeleteEmptyDirData, Force): every Pod on the Node is evicted through
the Eviction API, so PodDisruptionBudgets are honoured, except DaemonSet Pods and mirror (static) Pods, which are
left where they run; a Pod a budget does not let go yet is asked again until the timeout.

A Node the operator had cordoned before is left cordoned afterwards: ``cordon`` says whether it cordoned it (or an
earlier run that stopped before its uncordon did: the field's manager says which).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# the field manager of the collection's cordons (server-side apply of spec.unschedulable)
FIELD_MANAGER = "maesh-ichor-drain"
MIRROR = "kubernetes.io/config.mirror"


def _node_patch(name, unschedulable):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {"unschedulable": unschedulable}}


def _ours(node):
    """Whether the collection's field manager set the Node's spec.unschedulable (a run stopped between its cordon and
    its uncordon left it so): a cordon by anyone else moves the field to their manager."""
    for entry in (node.get("metadata") or {}).get("managedFields") or []:
        spec = ((entry.get("fieldsV1") or {}).get("f:spec") or {})
        if entry.get("manager") == FIELD_MANAGER and "f:unschedulable" in spec:
            return True
    return False


def cordon(kube, name):
    """Mark the Node unschedulable; False when it already was by someone else's hand (the operator's cordon, kept
    after the drain), True when this cordoned it (or an earlier run of the collection did and stopped before its
    uncordon). None when the cluster has no such Node."""
    node = kube.get("v1", "Node", name)
    if node is None:
        return None
    if (node.get("spec") or {}).get("unschedulable"):
        return _ours(node)
    kube.apply(_node_patch(name, True), FIELD_MANAGER)
    return True


def uncordon(kube, name):
    """Mark the Node schedulable again (only a Node ``cordon`` cordoned)."""
    if kube.get("v1", "Node", name) is not None:
        kube.apply(_node_patch(name, False), FIELD_MANAGER)


def _left_in_place(pod):
    meta = pod.get("metadata") or {}
    if MIRROR in (meta.get("annotations") or {}):
        return True
    return any(ref.get("kind") == "DaemonSet" and ref.get("controller") for ref in meta.get("ownerReferences") or [])


def _label(pod):
    meta = pod["metadata"]
    return "%s/%s" % (meta.get("namespace"), meta.get("name"))


def evictable(kube, name):
    """The Pods on Node ``name`` a drain evicts (not DaemonSet Pods, not mirror Pods)."""
    pods = kube.list("v1", "Pod", field_selector="spec.nodeName=%s" % name)
    return [p for p in pods if not _left_in_place(p)]


class Drain:
    """One drain of several Nodes at once: ``step()`` evicts what is left (asking again for what a budget held back)
    and says whether every evicted Pod is gone; ``blocking()`` names the Pods still there."""

    def __init__(self, kube, names):
        self.kube = kube
        self.names = list(names)
        self.waiting = {}  # uid -> (node, "namespace/name"): evicted or held back, not gone yet
        self.held = set()  # uids a budget did not let go on the last ask

    def step(self):
        present = {}
        for name in self.names:
            for pod in evictable(self.kube, name):
                present[pod["metadata"]["uid"]] = (name, pod)
        self.held = set()
        for uid, (name, pod) in sorted(present.items()):
            meta = pod["metadata"]
            if meta.get("deletionTimestamp"):
                continue  # evicted: its kubelet is stopping it
            if not self.kube.evict(meta["name"], meta["namespace"], uid=uid):
                self.held.add(uid)
        self.waiting = dict((uid, (name, _label(pod))) for uid, (name, pod) in present.items())
        return not self.waiting

    def blocking(self, node=None):
        """'namespace/name' of the Pods not gone (on ``node``), those a disruption budget holds back marked so."""
        return sorted("%s%s" % (label, " (a PodDisruptionBudget does not allow its eviction)" if uid in self.held else "")
                      for uid, (name, label) in self.waiting.items() if node is None or name == node)
