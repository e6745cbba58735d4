"""A whole lab cluster: simulated Talos machines, the real API server, and the lab agent between them.

``talos_kube_lab(**talos_lab_kwargs)`` (function scope, factory): starts a Talos lab whose control
planes' Kubeconfig call returns the kube lab's admin kubeconfig, and a LabAgent that mirrors its
machines as Nodes and marks workloads ready. Each new lab starts without a cluster record and without a
cluster lock (the API server is shared by the session). The agent's Nodes are removed at teardown.

``talos_kube_lab(case="v1.13/v1.13.9/k8s-older", version="v1.13.9", ...)`` starts the machines from a
real fixture case (see ``tests.lab.fixtures``): the Nodes' kubelet version is the one its configs
name (legacy ``machine.kubelet.image`` or a typed ``KubeletConfig``).
"""

import itertools

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record, lock
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient

from tests.lab.agent import LabAgent

_owners = itertools.count()


@pytest.fixture
def talos_kube_lab(talos_lab, kube_lab):
    agents = []

    def factory(**kwargs):
        # the API server is shared by the session: a new simulated cluster starts without a cluster record, and
        # without a lock an earlier test's run left held (a failed test must not fail the ones after it)
        kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
        for api_version, kind, name, namespace in (("v1", "ConfigMap", cluster_record.NAME, cluster_record.NAMESPACE),
                                                   (lock.API_VERSION, "Lease", lock.NAME, lock.NAMESPACE)):
            if kube.get(api_version, kind, name, namespace) is not None:
                kube.delete(api_version, kind, name, namespace)
        lab = talos_lab(**kwargs)
        lab.control.settings(kubeconfig_path=kube_lab.kubeconfig)
        agent = LabAgent(kube_lab.api_client(), talos_lab=lab, owner="lab%d" % next(_owners))
        agent.sync_once()
        agent.start()
        agents.append(agent)
        lab.agent = agent
        lab.kube = kube_lab
        return lab

    yield factory
    for agent in agents:
        agent.stop()
