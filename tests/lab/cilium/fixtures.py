"""pytest fixtures for Cilium on the lab's real API server (see README.md).

``cilium_charts`` (session): ``{"1.20": entry, "1.19": entry, "1.18": entry}`` from ``charts.ensure``
(fetched and packaged once, cached under ~/.cache/maesh-ichor/cilium).

``cilium_lab`` (function, factory): ``cilium_lab(nodes=2, kube_proxy=False)`` gives a ``CiliumLab`` on the
session's kube lab: ``nodes`` Nodes (Ready), a lab agent marking the Cilium DaemonSet and operator ready
(no agent or operator runs here), and optionally a kube-proxy DaemonSet in kube-system. Foreign installs
are made as users make them: ``helm_install`` (``helm install cilium`` into kube-system with user values),
``cli_install`` (the Cilium CLI's Helm-backed install: release ``cilium`` in kube-system, with the values the
CLI adds), ``template_apply`` (``helm template | kubectl apply``). Each applies the Cilium CRDs of its
chart's source first, as the operator would. At teardown every object any render named, the Helm records
in kube-system and ichor-system, the takeover's backups and its key in the cluster record, the extra objects a
test registered, the Nodes and the agent are removed,
and the namespace cilium-secrets is waited out (a reinstall fails while it terminates).

Import the fixtures into a test module: ``from tests.lab.cilium.fixtures import cilium_charts, cilium_lab``.
"""

import copy
import datetime
import json
import os
import sys
import time
import uuid

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from ansible_collections.maesh.ichor.plugins.module_utils.cilium import values as cilium_values
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient
from tests.lab.agent import MANAGED, LabAgent
from tests.lab.cilium import charts
from tests.lab.kube.cluster import binaries

# The Talos guide's values (kube-proxy replaced, KubePrism), as a user following it passes them.
TALOS_VALUES = {
    "ipam": {"mode": "kubernetes"},
    "kubeProxyReplacement": True,
    "k8sServiceHost": "localhost",
    "k8sServicePort": 7445,
    "securityContext": {"capabilities": {
        "ciliumAgent": ["CHOWN", "KILL", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "SYS_ADMIN", "SYS_RESOURCE", "DAC_OVERRIDE",
                        "FOWNER", "SETGID", "SETUID"],
        "cleanCiliumState": ["NET_ADMIN", "SYS_ADMIN", "SYS_RESOURCE"]}},
    "cgroup": {"autoMount": {"enabled": False}, "hostRoot": "/sys/fs/cgroup"},
}
# What `cilium install` (cilium-cli 0.19, seed 0103 A3) writes into the record's config besides the user's --set:
# the cluster name of the kubeconfig context and the routing mode.
CLI_ADDED = {"cluster": {"name": "lab"}, "routingMode": "tunnel"}
RECORD_NAMESPACES = ("kube-system", "ichor-system")


def merged(*layers):
    out = {}
    for layer in layers:
        out = _merge(out, layer or {})
    return out


def _merge(base, layer):
    out = copy.deepcopy(base)
    for key, value in layer.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else \
            copy.deepcopy(value)
    return out


@pytest.fixture(scope="session")
def cilium_charts():
    helm = binaries(names=("helm",), stream=sys.stderr)["helm"]
    return charts.ensure(helm, stream=sys.stderr)


class CiliumLab:
    def __init__(self, kube_lab, cilium_charts, workdir):
        self.kube = kube_lab
        self.charts = cilium_charts
        self.workdir = workdir
        self.owner = "cilium-%s" % uuid.uuid4().hex[:6]
        self.core = k8s.CoreV1Api(kube_lab.api)
        self.apps = k8s.AppsV1Api(kube_lab.api)
        self.agent = None
        self.manifests = []  # every manifest rendered for an install: what teardown deletes
        self.extra = []      # (apiVersion, kind, namespace, name) a test created besides
        self._files = 0

    # -- the cluster ------------------------------------------------------------------------
    def add_nodes(self, count):
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        for index in range(count):
            name = "%s-node-%d" % (self.owner, index + 1)
            labels = {MANAGED: self.owner, "kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
            self.core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}})
            self.core.patch_node_status(name, {"status": {"conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "lab",
                 "lastHeartbeatTime": now, "lastTransitionTime": now}]}})

    def start_agent(self):
        self.agent = LabAgent(self.kube.api_client(), talos_lab=None, owner=self.owner, interval=0.2).start()

    def add_kube_proxy(self):
        labels = {"k8s-app": "kube-proxy"}
        body = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "kube-proxy", "namespace": "kube-system"},
                "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                    "containers": [{"name": "kube-proxy", "image": "registry.k8s.io/kube-proxy:v1.36.3"}]}}}}
        self.apps.create_namespaced_daemon_set("kube-system", body)
        self.extra.append(("apps/v1", "DaemonSet", "kube-system", "kube-proxy"))

    def file(self, name, data):
        self._files += 1
        path = os.path.join(self.workdir, "%02d-%s" % (self._files, name))
        with open(path, "w") as handle:
            handle.write(data if isinstance(data, str) else json.dumps(data))
        return path

    # -- charts -----------------------------------------------------------------------------
    def chart(self, minor):
        return self.charts[minor]["chart"]

    def apply_crds(self, minor):
        self.kube.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager", "cilium-operator",
                          "-f", self.charts[minor]["crds"])

    def render(self, minor, values, namespace="kube-system", release="cilium", track=True):
        out = self.kube.helm("template", release, self.chart(minor), "--namespace", namespace, "--kube-version",
                             self.kube.version, "-f", self.file("values.json", values)).stdout
        if track:
            self.manifests.append(self.file("manifest.yaml", out))
        return out

    def older_collection_release(self, minor, user_values, nodes):
        """The collection's own release at an older chart, as a maesh.ichor whose set had that minor left it: stored
        in ichor-system, objects in kube-system, its values and chart in the cluster record. Returns its values."""
        owned = cilium_values.owned("replaced", "vxlan")
        effective = cilium_values.effective(nodes, user_values, owned)
        self.helm_install(minor, effective, namespace="ichor-system", args=("--create-namespace",))
        self.wait_ready()
        cluster_record.update(KubeClient(kubeconfig=self.kube.kubeconfig), lambda data: data.update(cilium={
            "release": "ichor-system/cilium", "chart": self.charts[minor]["version"], "values": user_values,
            "tunnel": "vxlan", "kubeProxy": "replaced"}))
        return effective

    def helm_install(self, minor, values, release="cilium", namespace="kube-system", args=()):
        """``helm install`` as a user runs it (no --wait: the lab agent marks the workloads ready)."""
        self.apply_crds(minor)
        self.render(minor, values, namespace, release)
        return self.kube.helm("install", release, self.chart(minor), "--namespace", namespace,
                              "-f", self.file("values.json", values), *args)

    def cli_install(self, minor, values, cluster_name="lab"):
        """The Cilium CLI's Helm-backed install: release cilium in kube-system, the CLI's values added."""
        return self.helm_install(minor, merged(CLI_ADDED, {"cluster": {"name": cluster_name}}, values))

    def template_apply(self, minor, values):
        """``helm template | kubectl apply``: no record, kubectl's last-applied annotation on every object."""
        self.apply_crds(minor)
        manifest = self.render(minor, values)
        return self.kube.kubectl("apply", "-f", self.manifests[-1]) if manifest else None

    # -- state ------------------------------------------------------------------------------
    def wait_ready(self, timeout=30):
        """The DaemonSet kube-system/cilium and the operator ready on every Node (the agent's work)."""
        nodes = len(self.core.list_node().items)
        deadline = time.monotonic() + timeout
        while True:
            ds = self.apps.read_namespaced_daemon_set("cilium", "kube-system")
            op = self.apps.read_namespaced_deployment("cilium-operator", "kube-system")
            dst, opst = ds.status, op.status
            if dst.observed_generation == ds.metadata.generation and dst.number_ready == nodes and \
                    opst.observed_generation == op.metadata.generation and \
                    (opst.ready_replicas or 0) == min(op.spec.replicas, nodes):
                return
            if time.monotonic() > deadline:
                raise AssertionError("Cilium not ready after %ss: %s / %s" % (timeout, dst, opst))
            time.sleep(0.1)

    def records(self, namespace="kube-system", release="cilium"):
        return sorted(self.core.list_namespaced_secret(namespace, label_selector="owner=helm,name=%s" % release).items,
                      key=lambda s: int(s.metadata.labels["version"]))

    def forget_installer_namespace(self):
        """The installer bundle applies Namespace cilium-secrets (the Cilium release's RBAC lives there); a test that
        ran the install playbook leaves it without Helm's ownership, which a later ``helm install`` in kube-system
        refuses. Each Cilium test starts without it, whatever ran before on this API server."""
        try:
            ns = self.core.read_namespace("cilium-secrets")
        except ApiException as exc:
            if exc.status == 404:
                return
            raise
        if (ns.metadata.labels or {}).get("app.kubernetes.io/managed-by") != "Helm":
            self._delete(lambda: self.core.delete_namespace("cilium-secrets"))
            self._wait_gone("cilium-secrets")

    # -- teardown ---------------------------------------------------------------------------
    def cleanup(self):
        for path in reversed(self.manifests):
            self.kube.kubectl("delete", "--ignore-not-found", "--wait=false", "-f", path, check=False)
        for namespace in RECORD_NAMESPACES:
            for secret in self.core.list_namespaced_secret(namespace, label_selector="owner=helm").items:
                self._delete(lambda: self.core.delete_namespaced_secret(secret.metadata.name, namespace))
        for secret in self.core.list_namespaced_secret("ichor-system", label_selector="ichor.maesh.dev/backup-of").items:
            self._delete(lambda: self.core.delete_namespaced_secret(secret.metadata.name, "ichor-system"))
        self._forget_cilium_in_the_cluster_record()
        # the installer applies the collection's policies where Cilium runs; they outlive it (never pruned)
        self.kube.kubectl("delete", "--ignore-not-found", "ciliumnetworkpolicies.cilium.io", "-n", "ichor-system",
                          "-l", "app.kubernetes.io/name=ichor", check=False)
        for api_version, kind, namespace, name in self.extra:
            group = api_version.split("/")[0] if "/" in api_version else ""
            self.kube.kubectl("delete", "--ignore-not-found", "--wait=false", kind.lower() + ("." + group if group else ""),
                              name, *(["-n", namespace] if namespace else []), check=False)
        if self.agent is not None:
            self.agent.stop()
        self._wait_gone("cilium-secrets")

    def _forget_cilium_in_the_cluster_record(self):
        try:
            record = self.core.read_namespaced_config_map("ichor-cluster", "ichor-system")
        except ApiException as exc:
            if exc.status == 404:
                return
            raise
        data = json.loads((record.data or {}).get("record") or "{}")
        if data.pop("cilium", None) is not None:
            record.data["record"] = json.dumps(data, sort_keys=True, indent=2)
            self.core.replace_namespaced_config_map("ichor-cluster", "ichor-system", record)

    @staticmethod
    def _delete(call):
        try:
            call()
        except ApiException as exc:
            if exc.status != 404:
                raise

    def _wait_gone(self, namespace, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.core.read_namespace(namespace)
            except ApiException as exc:
                if exc.status == 404:
                    return
                raise
            time.sleep(0.2)
        raise AssertionError("namespace %s still terminating after %ss" % (namespace, timeout))


@pytest.fixture
def cilium_lab(kube_lab, cilium_charts, tmp_path):
    made = []

    def factory(nodes=2, kube_proxy=False):
        lab = CiliumLab(kube_lab, cilium_charts, str(tmp_path))
        made.append(lab)
        lab.forget_installer_namespace()
        lab.add_nodes(nodes)
        if kube_proxy:
            lab.add_kube_proxy()
        lab.start_agent()
        return lab

    yield factory
    for lab in made:
        lab.cleanup()
