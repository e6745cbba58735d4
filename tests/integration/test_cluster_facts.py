"""cluster_facts against the lab's real API server: a CNI as each tool installs it (flannel as upstream and as Talos
deploy it, Calico's operator layout, Cilium by helm, by the Cilium CLI, by ``helm template | kubectl apply`` and
as the collection's own release), two CNIs, none; kube-proxy present and absent; the verdict of each (seed 0103,
1.1 and 1.5). Every read is real; the Cilium objects come from the real chart."""

import datetime
import json

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from ansible_collections.maesh.ichor.plugins.module_utils.cluster import facts as cluster_facts
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient

from tests import versions
from tests.integration.ansible_env import ansible_playbook
from tests.lab.cilium import fixtures
from tests.lab.cilium.fixtures import TALOS_VALUES, merged
from tests.lab.kube.cluster import event_user, is_system_user

pytestmark = pytest.mark.lab

cilium_charts = fixtures.cilium_charts
cilium_lab = fixtures.cilium_lab

ENABLED_VALUES = merged(TALOS_VALUES, {"kubeProxyReplacement": False})


class Conn:
    def __init__(self, kubeconfig):
        self.client = KubeClient(kubeconfig=kubeconfig)

    def kube(self):
        return self.client


def _facts(kube_lab):
    return cluster_facts.run(Conn(kube_lab.kubeconfig))["ansible_facts"]["ichor_cluster_facts"]


class Objects:
    """DaemonSets and Nodes a test makes as other tools would; removed afterwards (the namespaces stay)."""

    def __init__(self, kube_lab):
        self.core = k8s.CoreV1Api(kube_lab.api)
        self.apps = k8s.AppsV1Api(kube_lab.api)
        self.made = []

    def namespace(self, name):
        try:
            self.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        except ApiException as exc:
            if exc.status != 409:
                raise

    def daemonset(self, namespace, name, image, labels=None, init_image=None):
        self.namespace(namespace)
        labels = labels or {"app": name}
        pod = {"containers": [{"name": name, "image": image}]}
        if init_image:
            pod["initContainers"] = [{"name": "install-cni", "image": init_image}]
        self.apps.create_namespaced_daemon_set(namespace, {
            "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": namespace,
                                                                       "labels": labels},
            "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": pod}}})
        self.made.append(lambda: self.apps.delete_namespaced_daemon_set(name, namespace))

    def node(self, name, ready):
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
        self.made.append(lambda: self.core.delete_node(name))
        self.core.patch_node_status(name, {"status": {
            "conditions": [{"type": "Ready", "status": "True" if ready else "False", "reason": "lab", "message": "lab",
                            "lastHeartbeatTime": now, "lastTransitionTime": now}],
            "addresses": [{"type": "InternalIP", "address": "10.5.0.9"}],
            "nodeInfo": {"kubeletVersion": "v1.36.3", "architecture": "amd64", "bootID": "", "containerRuntimeVersion": "",
                         "kernelVersion": "", "kubeProxyVersion": "", "machineID": "", "operatingSystem": "linux",
                         "osImage": "Talos (v1.14.1)", "systemUUID": ""}}})

    def kube_proxy(self):
        self.daemonset("kube-system", "kube-proxy", "registry.k8s.io/kube-proxy:v1.36.3", {"k8s-app": "kube-proxy"})

    def cleanup(self):
        for delete in reversed(self.made):
            try:
                delete()
            except ApiException as exc:
                if exc.status != 404:
                    raise


@pytest.fixture
def objects(kube_lab):
    made = Objects(kube_lab)
    yield made
    made.cleanup()


def test_upstream_flannel_in_kube_flannel(kube_lab, objects):
    objects.daemonset("kube-flannel", "kube-flannel-ds", "docker.io/flannel/flannel:v0.26.7",
                      init_image="docker.io/flannel/flannel-cni-plugin:v1.6.2-flannel1")
    facts = _facts(kube_lab)
    assert facts["cni"]["verdict"] == "flannel", facts["cni"]
    assert [(d["namespace"], d["name"], d["version"]) for d in facts["cni"]["daemonsets"]] == [
        ("kube-flannel", "kube-flannel-ds", "0.26.7")]
    assert facts["cilium"] is None and facts["kube_proxy"] == {"present": False, "daemonset": None}


def test_talos_flannel_with_kube_proxy(kube_lab, objects):
    objects.daemonset("kube-system", "kube-flannel", "ghcr.io/siderolabs/flannel:v0.27.1", {"k8s-app": "flannel"})
    objects.kube_proxy()
    objects.node("cf-ready", ready=True)
    facts = _facts(kube_lab)
    assert facts["cni"]["verdict"] == "flannel"
    assert facts["cni"]["evidence"] == ["CNI flannel (DaemonSet kube-system/kube-flannel, name)"]
    assert facts["kube_proxy"] == {"present": True, "daemonset": {
        "namespace": "kube-system", "name": "kube-proxy", "image": "registry.k8s.io/kube-proxy:v1.36.3",
        "version": "1.36.3"}}
    node = [n for n in facts["nodes"] if n["name"] == "cf-ready"]
    assert node == [{"name": "cf-ready", "ready": True, "kubelet_version": "v1.36.3", "internal_ip": "10.5.0.9",
                     "controlplane": False}]
    assert "v1.36.3" in facts["kubelet_versions"]


def test_calico_in_calico_system(kube_lab, objects):
    objects.daemonset("calico-system", "calico-node", "docker.io/calico/node:v3.30.3", {"k8s-app": "calico-node"})
    objects.daemonset("calico-system", "csi-node-driver", "docker.io/calico/csi:v3.30.3")  # a part, not a CNI
    facts = _facts(kube_lab)
    assert facts["cni"]["verdict"] == "calico", facts["cni"]
    assert [(d["namespace"], d["name"], d["version"]) for d in facts["cni"]["daemonsets"]] == [
        ("calico-system", "calico-node", "3.30.3")]


def test_a_renamed_daemonset_is_found_by_its_image(kube_lab, objects):
    objects.daemonset("net", "pod-network", "quay.io/mirror/calico/node:v3.29.0", {"app": "pod-network"})
    facts = _facts(kube_lab)
    assert facts["cni"]["verdict"] == "calico"
    assert facts["cni"]["daemonsets"][0]["why"] == "image quay.io/mirror/calico/node:v3.29.0"


def test_another_cni(kube_lab, objects):
    objects.daemonset("kube-system", "weave-net", "weaveworks/weave-kube:2.8.1", {"name": "weave-net"})
    facts = _facts(kube_lab)
    assert (facts["cni"]["verdict"], facts["cni"]["names"]) == ("other", ["weave"])


def test_no_cni(kube_lab, objects):
    objects.node("cf-notready", ready=False)
    facts = _facts(kube_lab)
    assert facts["cni"]["verdict"] == "none" and facts["cni"]["daemonsets"] == []
    assert facts["cni"]["evidence"][0] == "no CNI DaemonSet in any namespace"
    not_ready = len([n for n in facts["nodes"] if not n["ready"]])
    assert not_ready >= 1 and facts["cni"]["evidence"][1] == "%d of %d Nodes NotReady" % (not_ready, len(facts["nodes"]))
    assert facts["kube_proxy"]["present"] is False


def test_cilium_by_helm_with_kube_proxy(kube_lab, cilium_lab):
    lab = cilium_lab(kube_proxy=True)
    lab.helm_install(versions.CILIUM_MINOR, ENABLED_VALUES)
    facts = _facts(kube_lab)
    assert facts["cni"]["verdict"] == "cilium-helm", facts["cni"]
    cilium = facts["cilium"]
    assert (cilium["namespace"], cilium["version"], cilium["config"]) == ("kube-system", versions.CILIUM, True)
    assert (cilium["kube_proxy_replacement"], cilium["kube_proxy_replacement_setting"]) == (False, "false")
    assert cilium["helm_release"] == {"name": "cilium", "namespace": "kube-system"}
    assert cilium["crd_ciliumnodes"] is True and facts["crds"]["ciliumnodes"] is True
    assert [(r["namespace"], r["release"], r["revision"], r["status"], r["chart"], r["cli"])
            for r in facts["cilium_releases"]] == [("kube-system", "cilium", 1, "deployed", versions.CILIUM, False)]
    assert facts["kube_proxy"]["present"] is True
    assert "foreign Helm release kube-system/cilium: revision 1, deployed, chart " + versions.CILIUM in facts["cni"]["evidence"]
    # the agent only: cilium-envoy (a DaemonSet of the chart's) is not a second CNI
    assert [d["name"] for d in facts["cni"]["daemonsets"]] == ["cilium"]


def test_cilium_by_helm_in_another_namespace(kube_lab, cilium_lab):
    lab = cilium_lab()
    objects = Objects(kube_lab)
    objects.namespace("net-cilium")
    try:
        lab.helm_install(versions.CILIUM_MINOR, TALOS_VALUES, release="cni", namespace="net-cilium")
        facts = _facts(kube_lab)
        assert facts["cni"]["verdict"] == "cilium-helm", facts["cni"]
        assert facts["cilium"]["namespace"] == "net-cilium"
        assert facts["cilium"]["kube_proxy_replacement"] is True
        assert [(r["namespace"], r["release"]) for r in facts["cilium_releases"]] == [("net-cilium", "cni")]
    finally:
        for secret in lab.core.list_namespaced_secret("net-cilium", label_selector="owner=helm").items:
            lab.core.delete_namespaced_secret(secret.metadata.name, "net-cilium")


def test_cilium_by_the_cli(kube_lab, cilium_lab):
    lab = cilium_lab()
    lab.cli_install(versions.CILIUM_MINOR, TALOS_VALUES)
    facts = _facts(kube_lab)
    assert facts["cni"]["verdict"] == "cilium-cli", facts["cni"]
    assert facts["cilium_releases"][0]["cli"] is True
    assert facts["kube_proxy"]["present"] is False and facts["cilium"]["kube_proxy_replacement"] is True


def test_cilium_from_helm_template(kube_lab, cilium_lab):
    lab = cilium_lab()
    lab.template_apply("1.19", TALOS_VALUES)
    facts = _facts(kube_lab)
    assert facts["cni"]["verdict"] == "cilium-manifest", facts["cni"]
    assert facts["cilium"]["version"] == "1.19.5" and facts["cilium_releases"] == []
    assert "kubectl-client-side-apply" in facts["cni"]["daemonsets"][0]["managers"]
    assert facts["cni"]["evidence"][-1].startswith("no Helm release record of Cilium in any namespace; field managers")


def test_our_own_release(kube_lab, cilium_lab):
    lab = cilium_lab()
    # as cilium_release installs it: the record in ichor-system, every object in kube-system
    lab.helm_install(versions.CILIUM_MINOR, merged(TALOS_VALUES, {"namespaceOverride": "kube-system"}), namespace="ichor-system",
                     args=("--create-namespace",))
    facts = _facts(kube_lab)
    assert facts["cni"]["verdict"] == "ours", facts["cni"]
    assert facts["cilium"]["namespace"] == "kube-system"
    assert facts["cni"]["evidence"][-1] == ("the collection's release ichor-system/cilium: revision 1, deployed, chart "
                                            + versions.CILIUM)


def test_two_cnis(kube_lab, cilium_lab, objects):
    lab = cilium_lab()
    lab.helm_install(versions.CILIUM_MINOR, TALOS_VALUES)
    objects.daemonset("kube-flannel", "kube-flannel-ds", "docker.io/flannel/flannel:v0.26.7")
    facts = _facts(kube_lab)
    assert facts["cni"]["verdict"] == "two-cnis"
    assert facts["cni"]["names"] == ["cilium", "flannel"]
    assert facts["cni"]["evidence"] == ["two CNIs: flannel (DaemonSet kube-flannel/kube-flannel-ds, name) and cilium "
                                        "(DaemonSet kube-system/cilium, name)"]


def test_daemonsets_are_listed_once_across_namespaces(kube_lab, objects):
    """The read's cost: one DaemonSet list for the cluster, whatever the namespaces (audit log)."""
    for index in range(3):
        objects.daemonset("cf-many-%d" % index, "agent", "example.com/agent:v1")
    mark = kube_lab.audit_mark()
    _facts(kube_lab)
    daemonset_reads = [e for e in kube_lab.audit_events(since=mark)
                       if (e.get("objectRef") or {}).get("resource") == "daemonsets" and e.get("stage") == "ResponseComplete"
                       and not is_system_user(event_user(e))]
    assert [(e["verb"], (e.get("objectRef") or {}).get("namespace")) for e in daemonset_reads] == [("list", None)]


def test_module_in_check_mode(kube_lab, objects, tmp_path):
    objects.daemonset("kube-flannel", "kube-flannel-ds", "docker.io/flannel/flannel:v0.26.7")
    out = tmp_path / "facts.json"
    play = tmp_path / "play.yml"
    play.write_text(json.dumps([{"hosts": "localhost", "connection": "local", "gather_facts": False,
                                 "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"},
                                 "tasks": [{"maesh.ichor.cluster_facts": {"kubeconfig": kube_lab.kubeconfig},
                                            "register": "read"},
                                           {"ansible.builtin.copy": {"content": "{{ read | to_json }}", "dest": str(out)},
                                            "check_mode": False}]}]))
    proc = ansible_playbook("-i", "localhost,", str(play), "--check")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["changed"] is False
    assert result["ansible_facts"]["ichor_cluster_facts"]["cni"]["verdict"] == "flannel"
    assert result["plan"][0] == "CNI: flannel"
