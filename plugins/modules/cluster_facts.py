#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: cluster_facts
short_description: Read the Kubernetes side of a cluster as adopt judges it (CNI, kube-proxy, Nodes)
version_added: 0.1.0
description:
  - Reads, cluster-wide and read-only, which CNI the cluster runs and who installed it, the kube-proxy
    DaemonSet, Cilium's C(kube-proxy-replacement) setting, the Nodes' readiness and kubelet versions, and
    returns them as the C(ichor_cluster_facts) fact.
  - Every namespace is searched, in one list of DaemonSets; Calico's operator installs into C(calico-system),
    upstream flannel into C(kube-flannel), Talos's flannel and Cilium into C(kube-system).
  - The CNI verdict is one row of the adopt CNI table. C(ours) is a Cilium whose Helm release the collection
    keeps (C(cilium) in C(ichor-system)). C(cilium-helm) and C(cilium-cli) are a Cilium with a foreign Helm
    release (in any namespace); C(cilium-cli) when the release's values hold what the Cilium CLI adds
    (C(cluster.name) and C(routingMode)). C(cilium-manifest) is a Cilium with no Helm release (a Talos inline
    manifest or an applied C(helm template)). C(flannel), C(calico) and C(other) (weave, kube-router, antrea,
    kube-ovn, ovn-kubernetes, aws-node, kindnet, canal) are those CNIs. C(two-cnis) is CNI DaemonSets of two
    CNIs, or of one CNI in two namespaces. C(none) is no CNI DaemonSet in any namespace.
  - The Talos side (the machine config's CNI selection, KubePrism, kube-proxy) is M(maesh.ichor.talos_facts)'s.
notes:
  - The flow of this module is C(plugins/module_utils/cluster/facts.py), run in the controller by its action plugin
    C(plugins/action/cluster_facts.py).
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.kubernetes
attributes:
  check_mode:
    support: full
    description: Reads only; check mode returns the same facts.
  diff_mode:
    support: none
    description: Nothing is changed, so there is nothing to diff.
"""

EXAMPLES = r"""
- name: Read the cluster's CNI and Nodes
  maesh.ichor.cluster_facts:
    kubeconfig: "{{ ichor_kubeconfig }}"

- name: Refuse a cluster that runs two CNIs
  ansible.builtin.assert:
    that: ansible_facts.ichor_cluster_facts.cni.verdict != 'two-cnis'
    fail_msg: "{{ ansible_facts.ichor_cluster_facts.cni.evidence | join('; ') }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts about the cluster.
  returned: success
  type: dict
  contains:
    ichor_cluster_facts:
      description: The Kubernetes side of the cluster.
      returned: success
      type: dict
      contains:
        cni:
          description: The CNI found and the verdict.
          type: dict
          contains:
            verdict:
              description: The row of the adopt CNI table.
              type: str
              choices: [ours, cilium-helm, cilium-cli, cilium-manifest, flannel, calico, other, two-cnis, none]
              sample: cilium-helm
            names:
              description: The CNIs whose agent DaemonSets were found.
              type: list
              elements: str
              sample: [cilium]
            evidence:
              description: Why the verdict is what it is, one line each.
              type: list
              elements: str
            daemonsets:
              description: Every CNI agent DaemonSet, with C(namespace), C(name), C(cni), C(why) (what matched),
                C(image), C(version) (from the image tag) and C(managers) (its field managers).
              type: list
              elements: dict
        cilium:
          description:
            - The Cilium agent DaemonSet's namespace, image and C(version), whether C(cilium-config) exists
              (C(config)), C(kube_proxy_replacement) (bool) and C(kube_proxy_replacement_setting) (as written),
              the Helm release its objects name (C(helm_release)), the release summaries (C(releases)) and
              whether the CiliumNode and CiliumNetworkPolicy CRDs exist.
            - null when no Cilium agent DaemonSet runs.
          type: dict
        cilium_releases:
          description: The Helm releases of Cilium in any namespace (newest revision, status, chart, C(cli)).
          type: list
          elements: dict
        crds:
          description: Whether the CRDs C(ciliumnodes) and C(ciliumnetworkpolicies) exist.
          type: dict
        kube_proxy:
          description: C(present) and the kube-proxy C(daemonset) (namespace, name, image, version) or null.
          type: dict
        nodes:
          description: Each Node's C(name), C(ready), C(kubelet_version), C(internal_ip), C(controlplane).
          type: list
          elements: dict
        nodes_ready:
          description: How many Nodes are Ready.
          type: int
        kubelet_versions:
          description: The kubelet versions the Nodes report.
          type: list
          elements: str
plan:
  description: Human-readable lines about the cluster, gathered by the C(maesh.ichor.plan) callback.
  returned: always
  type: list
  elements: str
  sample: ["CNI: cilium-helm", "kube-proxy: no DaemonSet", "Nodes: 3 of 3 Ready, kubelet v1.36.3"]
"""
