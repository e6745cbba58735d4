# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment:
    # The chart and helm options of cilium_release and cilium_takeover (module_utils/cilium/pipeline.py: options).
    DOCUMENTATION = r"""
options:
  chart:
    description:
      - The Cilium chart, at the release set's version; a directory, a C(.tgz), or an C(oci://) reference pulled at that
        version. Omitted, the chart is pulled from the Cilium Helm repository (C(https://helm.cilium.io)).
      - A chart of another version is refused.
    type: str
  chart_digest:
    description: The packaged chart's digest, C(sha256:<64 hex digits>); a chart with another digest is refused.
    type: str
  chart_repository:
    description:
      - The chart repository O(chart) omitted pulls from, for a mirror of the Cilium Helm repository (an air-gapped
        site's). Omitted, C(https://helm.cilium.io).
    type: str
  helm:
    description: The helm binary (a path, or a name found on E(PATH)); Helm 3.18 or a later 3.x.
    type: path
    default: helm
  kubeprism_port:
    description:
      - The KubePrism port C(k8sServicePort) points at when kube-proxy is replaced, usually the cluster spec's
        C(kubePrism.port).
    type: int
    default: 7445
"""
