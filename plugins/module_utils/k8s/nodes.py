# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Nodes: the one Node-Ready rule, and what a Node reports of its kubelet and OS image."""

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
