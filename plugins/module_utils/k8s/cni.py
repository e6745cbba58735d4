# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which CNI a cluster runs, from what is in kube-system (adopt grows this later)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.common import images, versions

# name -> (DaemonSet in kube-system, container image repository suffix)
KNOWN = (
    ("cilium", "cilium", "cilium/cilium"),
    ("flannel", "kube-flannel", "flannel"),
    ("calico", "calico-node", "calico/node"),
)


def image_version(image):
    """'quay.io/cilium/cilium:v1.20.4@sha256:...' -> '1.20.4' (None when the tag is not a version or the
    reference is malformed: what a cluster runs is not ours to refuse here)."""
    try:
        tag = images.parse(image).tag
    except images.ImageRefError:
        return None
    stated = versions.read(tag or "")
    return stated.text()[1:] if stated and stated.patch_written and "+" not in stated.suffix else None


def detect(client):
    """{'name': 'cilium'|'flannel'|'calico'|'unknown'|'none', 'version': str or None, 'image': str}."""
    for name, daemonset, repo in KNOWN:
        ds = client.get("apps/v1", "DaemonSet", daemonset, "kube-system")
        if ds is None:
            continue
        images = [c.get("image", "") for c in ds["spec"]["template"]["spec"].get("containers", [])]
        image = next((i for i in images if repo in i), images[0] if images else "")
        return {"name": name, "version": image_version(image), "image": image}
    return {"name": "none", "version": None, "image": ""}
