"""cluster_facts' pure classification (seed 0103, 1.1): which DaemonSet is which CNI's agent, and the verdict row
from the DaemonSets and the Cilium releases found. The reads are tests/integration/test_cluster_facts.py's."""

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.cilium import record
from ansible_collections.maesh.ichor.plugins.module_utils.cluster import facts as cf
from tests import helm_record


def ds(name, image, namespace="kube-system", labels=None, managers=()):
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels or {},
                         "managedFields": [{"manager": m} for m in managers]},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}}


@pytest.mark.parametrize("obj, expected", [
    (ds("cilium", "quay.io/cilium/cilium:v1.20.4"), ("cilium", "name")),
    (ds("agent", "x/y:v1", labels={"k8s-app": "cilium"}), ("cilium", "label k8s-app=cilium")),
    (ds("agent", "registry.local:5000/cilium/cilium:v1.19.5@sha256:" + "ab" * 32),
     ("cilium", "image registry.local:5000/cilium/cilium:v1.19.5@sha256:" + "ab" * 32)),
    (ds("cilium-envoy", "quay.io/cilium/cilium-envoy:v1.33"), (None, None)),
    (ds("cilium-node-init", "quay.io/cilium/startup-script:1"), (None, None)),
    (ds("kube-flannel-ds", "docker.io/flannel/flannel:v0.26.7", "kube-flannel"), ("flannel", "name")),
    (ds("kube-flannel", "ghcr.io/siderolabs/flannel:v0.27.1"), ("flannel", "name")),
    (ds("net", "ghcr.io/siderolabs/flannel:v0.27.1"), ("flannel", "image ghcr.io/siderolabs/flannel:v0.27.1")),
    (ds("net", "docker.io/flannel/flannel-cni-plugin:v1.6"), (None, None)),
    (ds("calico-node", "docker.io/calico/node:v3.30.3", "calico-system"), ("calico", "name")),
    (ds("csi-node-driver", "docker.io/calico/csi:v3.30.3", "calico-system"), (None, None)),
    (ds("canal", "docker.io/calico/node:v3.30.3"), ("canal", "name")),
    (ds("weave-net", "weaveworks/weave-kube:2.8.1"), ("weave", "name")),
    (ds("kube-proxy", "registry.k8s.io/kube-proxy:v1.36.3"), (None, None)),
    (ds("agent", "not a reference"), (None, None)),
])
def test_classify_daemonset(obj, expected):
    assert cf.classify_daemonset(obj) == expected


def test_kube_proxy_by_name_or_label():
    assert cf.is_kube_proxy(ds("kube-proxy", "k"))
    assert cf.is_kube_proxy(ds("proxy", "k", labels={"k8s-app": "kube-proxy"}))
    assert not cf.is_kube_proxy(ds("cilium", "k"))


def test_cni_daemonsets_version_and_managers():
    found = cf.cni_daemonsets([ds("cilium", "quay.io/cilium/cilium:v1.20.4", managers=("helm", "helm")),
                               ds("kube-proxy", "registry.k8s.io/kube-proxy:v1.36.3")])
    assert found == [{"namespace": "kube-system", "name": "cilium", "cni": "cilium", "why": "name",
                      "image": "quay.io/cilium/cilium:v1.20.4", "version": "1.20.4", "managers": ["helm"]}]


def _release(namespace="kube-system", name="cilium", cli=False):
    return {"namespace": namespace, "release": name, "revision": 2, "status": "deployed", "chart": "1.19.5",
            "cli": cli, "records": 2}


CILIUM = cf.cni_daemonsets([ds("cilium", "quay.io/cilium/cilium:v1.19.5", managers=("kubectl-client-side-apply",))])


@pytest.mark.parametrize("found, releases, row", [
    ([], [], "none"),
    (CILIUM, [_release("ichor-system")], "ours"),
    (CILIUM, [_release(), _release("ichor-system")], "ours"),  # a takeover that has not retired the record yet
    (CILIUM, [_release()], "cilium-helm"),
    (CILIUM, [_release("net", "cni")], "cilium-helm"),
    (CILIUM, [_release(cli=True)], "cilium-cli"),
    (CILIUM, [], "cilium-manifest"),
    (cf.cni_daemonsets([ds("kube-flannel", "ghcr.io/siderolabs/flannel:v0.27.1")]), [], "flannel"),
    (cf.cni_daemonsets([ds("calico-node", "calico/node:v3.30.3", "calico-system")]), [], "calico"),
    (cf.cni_daemonsets([ds("kube-router", "cloudnativelabs/kube-router:v2.1")]), [], "other"),
    # the old per-architecture flannel DaemonSets are one CNI
    (cf.cni_daemonsets([ds("kube-flannel-ds", "flannel/flannel:v0.26.7", "kube-flannel"),
                        ds("kube-flannel-ds-arm64", "flannel/flannel:v0.26.7", "kube-flannel")]), [], "flannel"),
    (CILIUM + cf.cni_daemonsets([ds("calico-node", "calico/node:v3.30.3", "calico-system")]), [], "two-cnis"),
    (CILIUM + cf.cni_daemonsets([ds("cilium", "quay.io/cilium/cilium:v1.19.5", "other")]), [], "two-cnis"),
])
def test_verdict(found, releases, row):
    assert cf.verdict(found, releases)[0] == row


def test_verdict_names_both_cnis():
    found = CILIUM + cf.cni_daemonsets([ds("calico-node", "calico/node:v3.30.3", "calico-system")])
    assert cf.verdict(found, [])[1] == ["two CNIs: cilium (DaemonSet kube-system/cilium, name) and calico "
                                        "(DaemonSet calico-system/calico-node, name)"]


def test_manifest_evidence_names_the_field_managers():
    assert cf.verdict(CILIUM, [])[1][-1] == ("no Helm release record of Cilium in any namespace; field managers of the "
                                             "DaemonSet: kubectl-client-side-apply")


@pytest.mark.parametrize("config, cli", [
    ({"cluster": {"name": "lab"}, "routingMode": "tunnel"}, True),
    ({"cluster": {"name": "lab"}}, False),
    ({"routingMode": "native"}, False),
    ({}, False),
    (None, False),
])
def test_made_by_cli(config, cli):
    assert cf.made_by_cli(config) is cli


def _secret(namespace, revision, status, config, chart="1.20.4"):
    release = {"config": config, "chart": {"metadata": {"version": chart}}}
    return {"metadata": {"name": record.secret_name("cilium", revision), "namespace": namespace,
                         "labels": {"name": "cilium", "owner": "helm", "status": status, "version": str(revision)}},
            "data": {"release": helm_record.encode(release)}}


def test_release_summary_takes_the_newest_record_of_each_release():
    records = [record.Record(s) for s in (
        _secret("kube-system", 1, "superseded", {}, "1.19.5"),
        _secret("kube-system", 2, "deployed", {"cluster": {"name": "x"}, "routingMode": "tunnel"}),
        _secret("ichor-system", 1, "failed", {}))]
    assert cf.release_summary(records) == [
        {"namespace": "ichor-system", "release": "cilium", "revision": 1, "status": "failed", "chart": "1.20.4",
         "cli": False, "records": 1},
        {"namespace": "kube-system", "release": "cilium", "revision": 2, "status": "deployed", "chart": "1.20.4",
         "cli": True, "records": 2}]


def test_release_summary_of_a_record_that_is_not_a_release():
    broken = {"metadata": {"name": "sh.helm.release.v1.cilium.v1", "namespace": "kube-system",
                           "labels": {"name": "cilium", "owner": "helm", "status": "deployed", "version": "1"}},
              "data": {"release": "bm90IGEgcmVsZWFzZQ=="}}
    assert cf.release_summary([record.Record(broken)])[0]["chart"] is None


def test_node_rows():
    node = {"metadata": {"name": "cp-1", "labels": {"node-role.kubernetes.io/control-plane": ""}},
            "status": {"conditions": [{"type": "Ready", "status": "False"}],
                       "addresses": [{"type": "Hostname", "address": "cp-1"}, {"type": "InternalIP", "address": "10.5.0.2"}],
                       "nodeInfo": {"kubeletVersion": "v1.36.3"}}}
    assert cf.node_rows([node, {"metadata": {"name": "bare"}}]) == [
        {"name": "bare", "ready": False, "kubelet_version": None, "internal_ip": None, "controlplane": False},
        {"name": "cp-1", "ready": False, "kubelet_version": "v1.36.3", "internal_ip": "10.5.0.2", "controlplane": True}]
