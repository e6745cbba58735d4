# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes as it runs on Talos: the component images a machine config names.

Legacy configs name them under ``cluster.apiServer.image`` ... and ``machine.kubelet.image``;
contract 1.14 configs in typed documents (KubeAPIServerConfig, KubeletConfig, ...). Either way
the tag of each image is the version that component runs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.common import images, versions
from ansible_collections.maesh.ichor.plugins.module_utils.config import yamlio

COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "kubelet")


def tag_version(image):
    """The version an image's tag states, as vX.Y.Z (``name:v1.36.3``, ``name:1.36.3@sha256:...``), or None when the
    reference is not one, has no tag, or its tag is no version."""
    try:
        ref = images.parse(image)
    except images.ImageRefError:
        return None
    stated = versions.read(ref.tag or "")
    return stated.text() if stated and stated.full else None


def _component(image):
    """(component, version) of a Kubernetes component's image, or None."""
    try:
        ref = images.parse(image)
    except images.ImageRefError:
        return None
    name = ref.path.rsplit("/", 1)[-1]
    version = tag_version(image)
    return (name, version) if name in COMPONENTS and version else None


def _images(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "image" and isinstance(value, str):
                yield value
            else:
                yield from _images(value)
    elif isinstance(node, list):
        for item in node:
            yield from _images(item)


def component_versions(config):
    """{component: version} from every image in a machine config: its text, or its documents already read
    (``yamlio.load_all``'s objects or ``documents.parse``'s Documents), so a config read once is parsed once."""
    out = {}
    objs = yamlio.load_all(config or "") if config is None or isinstance(config, (str, bytes)) else config
    for obj in objs:
        for image in _images(getattr(obj, "body", obj)):
            found = _component(image)
            if found:
                out[found[0]] = found[1]
    return out
