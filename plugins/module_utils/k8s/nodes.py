# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Nodes: the one Node-Ready rule, what a Node reports of its kubelet and OS image, and the machine whose Node the
cluster does not have (a machine is known by the Node Talos names for it, never by an inventory's label)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def ready(node):
    """Whether the Node object (a dict, or None) has condition Ready=True."""
    status = (node or {}).get("status") or {}
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def info(node):
    """The Node's nodeInfo (kubeletVersion, osImage, ...)."""
    return ((node or {}).get("status") or {}).get("nodeInfo") or {}


def get(kube, name):
    return kube.get("v1", "Node", name)


def names(kube):
    """The names of every Node the cluster has (one list call)."""
    return set((n.get("metadata") or {}).get("name") for n in kube.list("v1", "Node"))


def unregistered(*machines):
    """The refusal for machines whose Node (the name Talos reports for each) the cluster does not have: a step that
    waits for that Node after a write would wait for nothing, with the machine already changed. Each machine is
    (label, address, Node name)."""
    (label, node, node_name), others = machines[0], machines[1:]
    rest = "".join("; %s (%s): Node %s" % other for other in others)
    return ("%s (%s): Talos names its Node %s and the cluster has no Node of that name (its kubelet has not "
            "registered, or it registers under another name)%s; nothing was sent: compare `kubectl get nodes -o wide` "
            "with `talosctl -n %s get nodename`" % (label, node, node_name or "(none)", rest, node))
