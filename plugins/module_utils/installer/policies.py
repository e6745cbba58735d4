# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The network-policy gate, which follows what runs, read live. The collection's network
policies are CiliumNetworkPolicies, so they are applied only when a Cilium agent DaemonSet runs in the cluster
and the CiliumNetworkPolicy CRD exists; otherwise the installer leaves them out and says so. In one place:
adopt's plan and the installer ask the same question of the same facts."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.cluster import facts as cluster_facts

POLICY_CRD = cluster_facts.CRDS["ciliumnetworkpolicies"]


def gate(cni_names, crd_present):
    """(applied, why) for the CNIs found (cluster_facts' ``cni.names``) and whether the CRD exists."""
    if "cilium" not in cni_names:
        return False, ("maesh.ichor's network policies are not applied: the CNI is %s, and they are "
                       "CiliumNetworkPolicies; the ichor-system namespace is not isolated by the collection"
                       % (", ".join(cni_names) or "none (no CNI DaemonSet runs)"))
    if not crd_present:
        return False, ("maesh.ichor's network policies are not applied: Cilium runs but the CRD %s does not exist "
                       "(the Cilium operator creates it); run the installer again once it does" % POLICY_CRD)
    return True, "maesh.ichor's network policies are applied: Cilium runs and the CRD %s exists" % POLICY_CRD


def of_facts(facts):
    """The gate over ``cluster_facts`` facts (adopt's plan has them already)."""
    return gate(facts["cni"]["names"], facts["crds"]["ciliumnetworkpolicies"])


def read(kube):
    """The gate over the live cluster, in two calls: every namespace's DaemonSets and the CRD."""
    found = cluster_facts.cni_daemonsets(kube.list("apps/v1", "DaemonSet"))
    crd = kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", POLICY_CRD) is not None
    return gate(sorted(set(d["cni"] for d in found)), crd)
