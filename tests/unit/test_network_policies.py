"""The network-policy gate (seed 0103, 1.1a): the collection's CiliumNetworkPolicies only where Cilium runs and
the CRD exists; the shipped policy is a default deny of ichor-system that the installer never prunes."""

import os

import yaml

from tests import collection_path

collection_path.ensure()

# pylint: disable=wrong-import-position
from ansible_collections.maesh.ichor.plugins.module_utils.installer import policies, prune  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.installer.objects import Ref  # noqa: E402

POLICIES = os.path.join(os.path.dirname(__file__), "..", "..", "roles", "installer", "files", "network-policies")


def test_the_gate_needs_a_cilium_agent_and_the_crd():
    assert policies.gate(["cilium"], True) == (
        True, "maesh.ichor's network policies are applied: Cilium runs and the CRD ciliumnetworkpolicies.cilium.io exists")
    applied, why = policies.gate(["flannel"], True)  # a CRD left behind by an old Cilium does not count
    assert not applied and why.startswith("maesh.ichor's network policies are not applied: the CNI is flannel, ")
    applied, why = policies.gate([], True)
    assert not applied and "the CNI is none (no CNI DaemonSet runs)" in why
    applied, why = policies.gate(["cilium"], False)
    assert not applied and "Cilium runs but the CRD ciliumnetworkpolicies.cilium.io does not exist" in why


def test_the_gate_reads_cluster_facts_as_adopt_has_them():
    facts = {"cni": {"names": ["calico"]}, "crds": {"ciliumnetworkpolicies": True, "ciliumnodes": True}}
    assert policies.of_facts(facts) == policies.gate(["calico"], True)


def test_the_shipped_policies_deny_all_in_ichor_system_and_are_never_pruned():
    docs = []
    for name in sorted(os.listdir(POLICIES)):
        with open(os.path.join(POLICIES, name)) as handle:
            docs += [d for d in yaml.safe_load_all(handle) if d]
    assert docs, "the role ships at least one policy"
    for doc in docs:
        assert (doc["apiVersion"], doc["kind"], doc["metadata"]["namespace"]) == (
            "cilium.io/v2", "CiliumNetworkPolicy", "ichor-system")
        prunable, why = prune.is_prunable(Ref.of(doc), "ichor-system")
        assert not prunable and why == "CiliumNetworkPolicy is not a kind the installer prunes"
    deny = [d for d in docs if d["metadata"]["name"] == "ichor-system-default-deny"][0]["spec"]
    # every endpoint of the namespace, an empty rule in each direction: selected, nothing allowed
    assert deny["endpointSelector"] == {} and deny["ingress"] == [{}] and deny["egress"] == [{}]
