"""The Cilium concern's pieces without a cluster: values and owned keys, the release-record codec, the gate's
comparison, the live reading and the version rule, and the helm wrapper (on a fake helm)."""

import base64
import gzip
import json
import os

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.cilium import gate, helm, live, record, values
from ansible_collections.maesh.ichor.plugins.module_utils.cilium.errors import CiliumError, HelmError, Refused
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from tests import helm_record

TALOS = {"ipam": {"mode": "kubernetes"}, "kubeProxyReplacement": True, "k8sServiceHost": "localhost",
         "k8sServicePort": 7445, "debug": {"enabled": True}, "tunnelProtocol": "geneve",
         "securityContext": {"capabilities": {"ciliumAgent": ["CHOWN"], "other": ["X"]}}}


# -- values -------------------------------------------------------------------------------
def test_lift_removes_the_owned_keys_and_says_which_it_took():
    lifted, taken = values.lift(TALOS)
    assert lifted == {"debug": {"enabled": True}, "securityContext": {"capabilities": {"other": ["X"]}}}
    assert taken == {"ipam.mode": "kubernetes", "kubeProxyReplacement": True, "k8sServiceHost": "localhost",
                     "k8sServicePort": 7445, "tunnelProtocol": "geneve",
                     "securityContext.capabilities.ciliumAgent": ["CHOWN"]}
    assert TALOS["ipam"] == {"mode": "kubernetes"}  # the input is not changed


def test_owned_values_follow_the_kube_proxy_mode_and_the_tunnel():
    replaced = values.owned("replaced", "geneve", 7446)
    assert (replaced["kubeProxyReplacement"], replaced["k8sServiceHost"], replaced["k8sServicePort"]) == (True, "localhost", 7446)
    assert (replaced["routingMode"], replaced["tunnelProtocol"]) == ("tunnel", "geneve")
    enabled = values.owned("enabled", "native")
    assert enabled["kubeProxyReplacement"] is False and "k8sServiceHost" not in enabled
    assert enabled["routingMode"] == "native" and "tunnelProtocol" not in enabled
    assert enabled["namespaceOverride"] == "kube-system" and enabled["ipam"] == {"mode": "kubernetes"}
    assert enabled["cgroup"] == {"autoMount": {"enabled": False}, "hostRoot": "/sys/fs/cgroup"}


def test_effective_values_layer_preset_user_and_owned():
    owned = values.owned("replaced", "vxlan")
    one = values.effective(1, {"debug": {"enabled": True}, "ipam": {"mode": "cluster-pool"}}, owned)
    assert one["operator"] == {"replicas": 1} and one["ipam"] == {"mode": "kubernetes"} and one["debug"]["enabled"]
    assert "operator" not in values.effective(2, {}, owned)
    assert values.effective(1, {"operator": {"replicas": 3}}, owned)["operator"] == {"replicas": 3}
    # a list replaces the chart's, as Helm coalesces
    assert values.merge({"a": [1, 2], "b": {"c": 1}}, {"a": [3], "b": {"d": 2}}) == {"a": [3], "b": {"c": 1, "d": 2}}


# -- records ------------------------------------------------------------------------------
def _secret(release, revision=1, status="deployed", name="cilium", namespace="kube-system"):
    return {"metadata": {"name": record.secret_name(name, revision), "namespace": namespace, "uid": "u%d" % revision,
                         "labels": {"name": name, "owner": "helm", "status": status, "version": str(revision)}},
            "type": record.TYPE, "data": {"release": helm_record.encode(release)}}


def test_the_record_codec_is_base64_twice_gzip_json():
    release = {"name": "cilium", "config": {"debug": {"enabled": True}},
               "chart": {"metadata": {"name": "cilium", "version": "1.19.5"}}}
    encoded = helm_record.encode(release)
    raw = base64.b64decode(base64.b64decode(encoded))
    assert raw[:3] == record.GZIP_MAGIC and json.loads(gzip.decompress(raw)) == release
    assert record.decode(encoded) == release
    # Helm writes without gzip when the magic is missing: plain JSON, base64 twice
    plain = base64.b64encode(base64.b64encode(json.dumps(release).encode())).decode()
    assert record.decode(plain) == release
    rec = record.Record(_secret(release, revision=3, status="superseded"))
    assert (rec.revision, rec.status, rec.chart_version, rec.config, rec.ref) == (
        3, "superseded", "1.19.5", {"debug": {"enabled": True}}, "kube-system/sh.helm.release.v1.cilium.v3")
    assert record.newest([record.Record(_secret(release, 1)), rec]).revision == 3
    with pytest.raises(CiliumError, match="is not a Helm release"):
        record.decode(base64.b64encode(b"not base64 !!").decode())


def test_a_records_status_is_the_one_helm_reports_from_the_release_it_holds():
    # the soak's seed 2963: a helm stopped by AWX's cancel left the label deployed on a release it recorded failed;
    # helm list and helm status say failed, and so do we
    said = 'Release "cilium" failed: context canceled'
    release = {"name": "cilium", "info": {"status": "failed", "description": said},
               "chart": {"metadata": {"name": "cilium", "version": "1.20.4"}}}
    rec = record.Record(_secret(release, revision=1, status="deployed"))
    assert (rec.status, rec.label_status) == ("failed", "deployed")
    assert rec.summary()["status"] == "failed"
    # a record that cannot be read (or says no known status) keeps its label's
    unreadable = _secret(release, revision=1, status="deployed")
    unreadable["data"]["release"] = base64.b64encode(b"not a release").decode()
    assert record.Record(unreadable).status == "deployed"
    assert record.Record(_secret(dict(release, info={"status": 7}), revision=1, status="superseded")).status == \
        "superseded"


# -- the gate's comparison ----------------------------------------------------------------
PEM = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()
PEM2 = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n").decode()


def test_comparable_drops_what_the_server_kubectl_and_helm_manage_and_masks_secret_data():
    obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "cilium-ca", "namespace": "kube-system", "uid": "x", "resourceVersion": "5", "managedFields": [{}],
        "creationTimestamp": "t", "labels": {"app.kubernetes.io/managed-by": "Helm", "a": "b"},
        "annotations": {"meta.helm.sh/release-name": "cilium", "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
        "data": {"ca.crt": PEM, "password": base64.b64encode(b"hunter2").decode()}, "status": {}}
    out = gate.comparable(obj)
    assert out["metadata"] == {"name": "cilium-ca", "namespace": "kube-system", "labels": {"a": "b"}}
    assert out["data"]["ca.crt"] == "<generated certificate data: CERTIFICATE>"
    assert out["data"]["password"].startswith("<secret data sha256:") and "hunter2" not in json.dumps(out)
    other = dict(obj, data={"ca.crt": PEM2, "password": obj["data"]["password"]})
    assert gate.comparable(other) == out  # regenerated certificates are not drift
    service = gate.comparable({"kind": "Service", "metadata": {"name": "s"}, "spec": {
        "clusterIP": "10.96.0.9", "clusterIPs": ["10.96.0.9"], "ports": [{"name": "p", "port": 80, "nodePort": 30001}]}})
    assert service["spec"] == {"ports": [{"name": "p", "port": 80}]}


def test_compare_reports_per_path_with_list_items_by_name_and_what_the_takeover_keeps():
    live_obj = {"metadata": {"annotations": {"example.com/x": "y", "keep": "1"}}, "spec": {"containers": [
        {"name": "agent", "args": ["--a", "--extra"], "env": [{"name": "E", "value": "1"}, {"name": "LIVE", "value": "2"}]}]}}
    chart = {"metadata": {"annotations": {"keep": "1"}}, "spec": {"containers": [
        {"name": "agent", "args": ["--a"], "env": [{"name": "E", "value": "1"}], "image": "i:1"}]}}
    after = {"metadata": {"annotations": {"example.com/x": "y", "keep": "1"}}, "spec": {"containers": [
        {"name": "agent", "args": ["--a"], "env": [{"name": "E", "value": "1"}], "image": "i:1"}]}}
    found = gate.compare(live_obj, chart, after)
    assert found == [
        ('metadata.annotations["example.com/x"]', "live only, kept", "y", None),
        ("spec.containers[agent].args", "differs", ["--a", "--extra"], ["--a"]),
        ("spec.containers[agent].env[LIVE].value", "live only, dropped", "2", None),
        ("spec.containers[agent].image", "missing live", None, "i:1")]
    assert gate.compare(chart, chart, chart) == []


def test_the_gate_over_a_fake_server():
    class Kube:
        def __init__(self):
            self.applied = []

        def resource(self, api_version, kind):
            return type("R", (), {"namespaced": kind != "ClusterRole"})

        def get(self, api_version, kind, name, namespace=None):
            return {"ConfigMap": {"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": name, "namespace": namespace, "uid": "1"},
                                  "data": {"a": "live"}}}.get(kind)

        def apply(self, obj, manager, dry_run=False, force=True):
            assert dry_run and manager == gate.MANAGER
            self.applied.append(obj["metadata"]["name"])
            return json.loads(json.dumps(obj))

    kube = Kube()
    rendered = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "chart"}},
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}},
                {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "annotations": {gate.HOOK: "post-install"}}}]
    found = gate.run(kube, rendered, "ichor-system", "chart 1.20.4")
    assert [(e["object"], e["path"], e["change"]) for e in found.entries] == [
        ("ConfigMap ichor-system/c", "data.a", "differs"),
        ("ClusterRole r", None, "absent live: Helm creates it")]
    assert found.objects == 2 and found.skipped and kube.applied == ["c" + gate.SCRATCH, "c", "r" + gate.SCRATCH]
    assert found.summary() == "diff gate: 2 differences in 2 of 2 objects"


# -- live ---------------------------------------------------------------------------------
def _live(config, env=(), caps=None, image="quay.io/cilium/cilium:v1.19.5@sha256:" + "a" * 64):
    agent = {"name": "cilium-agent", "image": image, "env": [{"name": k, "value": v} for k, v in env]}
    if caps:
        agent["securityContext"] = {"capabilities": {"add": caps}}
    ds = {"metadata": {"annotations": {"meta.helm.sh/release-name": "my-cilium", "meta.helm.sh/release-namespace": "net"}},
          "spec": {"template": {"spec": {"containers": [agent], "initContainers": [{"name": "mount-cgroup"}]}}}}
    return live.LiveCilium(ds, {"data": config}, None)


@pytest.mark.parametrize("config, tunnel", [
    ({}, "vxlan"), ({"routing-mode": "tunnel", "tunnel-protocol": "geneve"}, "geneve"),
    ({"routing-mode": "native", "tunnel-protocol": "vxlan"}, "native"), ({"tunnel": "disabled"}, "native"),
    ({"tunnel": "geneve"}, "geneve")])
def test_the_tunnel_is_mapped(config, tunnel):
    assert _live(config).tunnel == tunnel


def test_what_the_running_cilium_says_about_the_owned_keys():
    running = _live({"ipam": "kubernetes", "kube-proxy-replacement": "true", "cgroup-root": "/run/cilium/cgroupv2"},
                    env=[("KUBERNETES_SERVICE_HOST", "localhost"), ("KUBERNETES_SERVICE_PORT", "7445")], caps=["CHOWN"])
    assert running.version == "1.19.5" and running.helm_release == ("my-cilium", "net")
    owned = running.owned_as_running()
    assert (owned["k8sServiceHost"], owned["k8sServicePort"], owned["kubeProxyReplacement"]) == ("localhost", 7445, True)
    assert owned["cgroup.autoMount.enabled"] is True and owned["cgroup.hostRoot"] == "/run/cilium/cgroupv2"
    assert owned["securityContext.capabilities.ciliumAgent"] == ["CHOWN"]
    assert _live({}).ipam == "cluster-pool"  # the chart's default when the ConfigMap does not say


def test_the_version_rule():
    assert live.version_step("1.20.2", "1.20.4") == "takeover"
    assert live.version_step("1.19.5", "1.20.4") == "upgrade"
    with pytest.raises(Refused, match="more than one minor below the chart 1.20.4: upgrade it with the tool that "
                                      r"installed it first \(to 1.19\)"):
        live.version_step("1.18.6", "1.20.4")
    with pytest.raises(Refused, match="newer than this collection's chart"):
        live.version_step("1.21.0", "1.20.4")
    with pytest.raises(Refused, match="without a version tag"):
        live.version_step(None, "1.20.4")


def test_health_needs_the_daemonset_on_every_node_and_the_operator_replicas():
    def status(ready, desired, op_ready, replicas=2):
        running = _live({})
        running.daemonset.update({"metadata": {"generation": 2}, "status": {
            "observedGeneration": 2, "desiredNumberScheduled": desired, "numberReady": ready, "updatedNumberScheduled": desired}})
        running.operator = {"metadata": {"generation": 1}, "spec": {"replicas": replicas},
                            "status": {"observedGeneration": 1, "readyReplicas": op_ready, "updatedReplicas": op_ready}}
        return running
    assert live.health(status(3, 3, 2), 3)[0] is True
    assert live.health(status(2, 2, 2), 3) == (False, ["DaemonSet kube-system/cilium: 2 of 3 nodes ready",
                                                       "Deployment kube-system/cilium-operator: 2 of 2 replicas ready"])
    assert live.health(status(1, 1, 1), 1)[0] is False


# -- helm ---------------------------------------------------------------------------------
class FakeHelm:
    def __init__(self, version="v3.21.4", chart_version="1.20.4"):
        self.calls = []
        self.version = version
        self.chart_version = chart_version
        self.kubeconfig_seen = None

    def __call__(self, argv, env, timeout, pass_fds=()):
        self.calls.append(argv)
        kubeconfig = env.get("KUBECONFIG")
        if kubeconfig and os.path.exists(kubeconfig):
            self.kubeconfig_seen = (open(kubeconfig).read(), kubeconfig, pass_fds)
        if argv[1] == "version":
            return 0, self.version, ""
        if argv[1] == "show":
            return 0, "name: cilium\nversion: %s\n" % self.chart_version, ""
        if argv[1] == "pull":
            dest = argv[argv.index("-d") + 1]
            open(os.path.join(dest, "cilium-1.20.4.tgz"), "wb").write(b"chart")
            return 0, "", ""
        if argv[1] == "template":
            return 1, "", "Error: INSTALLATION FAILED: something\n"
        return 0, "", ""


def test_the_kubeconfig_content_is_an_in_memory_file_helm_inherits_and_gone_afterwards(tmp_path):
    fake = FakeHelm()
    with helm.Helm("helm", kubeconfig_content="apiVersion: v1\n", run_process=fake) as h:
        directory = h.dir
        assert h.version() == (3, 21, 4)
    text, path, inherited = fake.kubeconfig_seen
    assert text == "apiVersion: v1\n"
    assert path.startswith("/proc/self/fd/") and inherited == (int(path.rsplit("/", 1)[1]),)
    assert not os.path.exists(path) or not os.readlink(path).startswith("/memfd:maesh-ichor-helm")  # closed
    assert not os.path.exists(directory)


@pytest.mark.parametrize("version", ["v3.17.3", "v4.0.1", "dev"])
def test_an_unsupported_helm_is_refused(version):
    with helm.Helm("helm", run_process=FakeHelm(version=version)) as h:
        with pytest.raises(CiliumError, match="helm"):
            h.version()


def test_the_chart_is_the_sets_version_from_a_path_or_pulled_with_a_digest(tmp_path):
    tgz = tmp_path / "cilium.tgz"
    tgz.write_bytes(b"chart")
    digest = "sha256:" + __import__("hashlib").sha256(b"chart").hexdigest()
    with helm.Helm("helm", run_process=FakeHelm()) as h:
        assert h.resolve_chart(str(tgz), digest)[1]["version"] == "1.20.4"
        with pytest.raises(CiliumError, match="has digest sha256:"):
            h.resolve_chart(str(tgz), "sha256:" + "0" * 64)
        with pytest.raises(CiliumError, match="does not exist"):
            h.resolve_chart(str(tmp_path / "missing"))
        with pytest.raises(CiliumError, match="not a directory|applies to a packaged chart"):
            h.resolve_chart(str(tmp_path), digest)
    fake = FakeHelm()
    with helm.Helm("helm", run_process=fake) as h:
        h.resolve_chart(None, digest)
        h.resolve_chart("oci://quay.io/cilium/charts/cilium")
    pulls = [argv for argv in fake.calls if argv[1] == "pull"]
    assert pulls[0][:7] == ["helm", "pull", "cilium", "--repo", "https://helm.cilium.io", "--version", "1.20.4"]
    assert pulls[1][:5] == ["helm", "pull", "oci://quay.io/cilium/charts/cilium", "--version", "1.20.4"]
    with helm.Helm("helm", run_process=FakeHelm(chart_version="1.20.2")) as h:
        with pytest.raises(CiliumError, match=r"is Cilium 1.20.2; this collection's release set pins Cilium 1.20.4 \(no override\)"):
            h.resolve_chart(str(tgz))


def test_a_failing_helm_is_one_line_with_its_last_words():
    with helm.Helm("helm", run_process=FakeHelm()) as h:
        with pytest.raises(HelmError, match=r"^helm template failed \(exit 1\): Error: INSTALLATION FAILED: something$"):
            h.template("chart", "cilium", "ichor-system", {"a": 1}, "v1.36.3")
    with helm.Helm("/nonexistent/helm") as h:
        with pytest.raises(CiliumError, match="cannot run /nonexistent/helm"):
            h.version()


# -- the flow on a fake cluster -----------------------------------------------------------
class FakeKube:
    """get, list (resource().get), raw_get, apply (dry run only) over a dict of objects."""

    source = None

    def __init__(self, objects):
        self.objects = dict(((o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]), o) for o in objects)
        self.writes = []

    def get(self, api_version, kind, name, namespace=None):
        return self.objects.get((kind, namespace, name))

    def resource(self, api_version, kind):
        return type("R", (), {"namespaced": kind not in ("Node", "ClusterRole", "ClusterRoleBinding", "Namespace")})

    def list(self, api_version, kind, namespace=None, label_selector=None):
        wanted = dict(p.split("=") for p in label_selector.split(",")) if label_selector else {}
        return [o for (k, ns, name), o in self.objects.items() if name and k == kind and (namespace is None or ns == namespace)
                and all((o["metadata"].get("labels") or {}).get(a) == b for a, b in wanted.items())]

    def apply(self, obj, manager, dry_run=False, force=True):
        assert dry_run
        return obj


def _running(version="1.20.4", annotations=None):
    ds = {"kind": "DaemonSet", "metadata": {"name": "cilium", "namespace": "kube-system", "generation": 1,
                                            "annotations": annotations or {}},
          "spec": {"template": {"spec": {"containers": [{"name": "cilium-agent", "image": "c:v%s" % version}]}}},
          "status": {"observedGeneration": 1, "desiredNumberScheduled": 1, "numberReady": 1, "updatedNumberScheduled": 1}}
    return [ds, {"kind": "ConfigMap", "metadata": {"name": "cilium-config", "namespace": "kube-system"},
                 "data": {"ipam": "kubernetes", "kube-proxy-replacement": "true"}},
            {"kind": "Node", "metadata": {"name": "n1"}}]


def _flow(objects, **params):
    from ansible_collections.maesh.ichor.plugins.module_utils.cilium import takeover
    base = dict(chart="/chart.tgz", chart_digest=None, kube_proxy=None, kubeprism_port=7445, cilium_values=None, accept_cilium_changes=False,
                accept_cilium_diff=False)
    base.update(params)
    fake = FakeHelm()
    fake_kube = FakeKube(objects)
    with helm.Helm("helm", run_process=fake) as h:
        h.resolve_chart = lambda chart, digest, repository: (chart, {"version": "1.20.4"})
        return takeover.Takeover(base, fake_kube, h).preconditions().result, fake_kube


def test_the_flow_refuses_without_a_cilium_and_says_nothing_to_do_for_its_own_release():
    with pytest.raises(Refused, match="no Cilium runs here") as info:
        _flow([])
    assert info.value.result["plan"][-1].startswith("refused: no Cilium runs here")
    own = _secret({"name": "cilium"}, namespace="ichor-system")
    ours = _running(annotations={"meta.helm.sh/release-name": "cilium", "meta.helm.sh/release-namespace": "ichor-system"})
    stored = dict(cluster_record.encode(cluster_record.ClusterRecord(
        {"schema": cluster_record.SCHEMA, "cilium": {"release": "ichor-system/cilium"}}, "1")), kind="ConfigMap")
    result, kube = _flow(ours + [dict(own, kind="Secret"), stored])
    assert result["changed"] is False and result["step"] == "none" and kube.writes == []
    assert result["plan"][-1] == "Cilium 1.20.4 is already the Helm release ichor-system/cilium: nothing to take over"
    # deployed but not in the cluster record yet (a run stopped before recording it): the hand-over is finished
    with pytest.raises(Refused, match="Cilium is not healthy") as info:
        _flow(ours + [dict(own, kind="Secret")])
    assert "the cluster record does not name it yet" in "\n".join(info.value.result["plan"])


def test_the_flow_refuses_an_unhealthy_cilium_with_the_plan_so_far():
    objects = _running(version="1.19.5")
    objects[0]["status"]["numberReady"] = 0
    with pytest.raises(Refused, match="Cilium is not healthy") as info:
        _flow(objects)
    result = info.value.result
    assert result["step"] == "upgrade" and result["cilium"]["kube_proxy"] == "replaced"
    assert "health: Deployment kube-system/cilium-operator: missing" in result["plan"]


def test_a_backup_is_the_record_byte_for_byte_in_a_secret_helm_does_not_read():
    from ansible_collections.maesh.ichor.plugins.module_utils.cilium import takeover
    rec = record.Record(_secret({"name": "cilium"}, revision=2))
    backup = takeover.backup_secret(rec)
    assert backup["data"] == rec.secret["data"] and backup["type"] == "Opaque"
    assert backup["metadata"]["name"] == "ichor-cilium-prior.kube-system.sh.helm.release.v1.cilium.v2"
    assert backup["metadata"]["namespace"] == "ichor-system" and "owner" not in backup["metadata"]["labels"]
    assert json.loads(backup["metadata"]["annotations"]["ichor.maesh.dev/backup-labels"])["owner"] == "helm"


def test_a_record_is_deleted_only_while_it_is_the_one_read():
    from ansible_collections.maesh.ichor.plugins.module_utils.cilium import pipeline
    from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import Conflict, NotFound

    class Kube:
        def __init__(self, error=None):
            self.error, self.calls = error, []

        def delete(self, api_version, kind, name, namespace=None, uid=None):
            self.calls.append((kind, namespace, name, uid))
            if self.error:
                raise self.error
    rec = record.Record(_secret({"name": "cilium"}))
    kube = Kube()
    pipeline.delete_record(kube, rec)
    assert kube.calls == [("Secret", "kube-system", "sh.helm.release.v1.cilium.v1", "u1")]
    pipeline.delete_record(Kube(NotFound("gone", status=404)), rec)
    with pytest.raises(CiliumError, match="changed since this run read it"):
        pipeline.delete_record(Kube(Conflict("uid", status=409)), rec)
