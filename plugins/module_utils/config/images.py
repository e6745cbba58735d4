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

import re

try:
    import yaml
    HAS_YAML = True
except ImportError:  # pragma: no cover
    HAS_YAML = False

COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "kubelet")
_IMAGE = re.compile(r"/(kube-apiserver|kube-controller-manager|kube-scheduler|kube-proxy|kubelet):(v[0-9][^@\s]*)")


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


def component_versions(config_text):
    """{component: version} from every image in the machine config's documents."""
    out = {}
    for doc in yaml.safe_load_all(config_text or ""):
        for image in _images(doc):
            match = _IMAGE.search(image)
            if match:
                out[match.group(1)] = match.group(2)
    return out
