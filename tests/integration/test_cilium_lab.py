"""The lab's real Cilium charts (tests/lab/cilium) and the foreign installs the takeover tests start from,
against the real API server: made the way users make them, read back the way the takeover reads them."""

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.cilium import record
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient

from tests.lab.cilium import charts
from tests.lab.cilium import fixtures
from tests.lab.cilium.fixtures import TALOS_VALUES, merged
from tests import helm_record

pytestmark = pytest.mark.lab

cilium_charts = fixtures.cilium_charts
cilium_lab = fixtures.cilium_lab

USER_VALUES = {"debug": {"enabled": True}, "cluster": {"name": "prod"}, "hubble": {"relay": {"enabled": False}}}


def _kinds(manifest):
    kinds = {}
    for doc in yaml.safe_load_all(manifest):
        if doc:
            kinds[doc["kind"]] = kinds.get(doc["kind"], 0) + 1
    return kinds


def _show_chart(kube_lab, entry):
    return yaml.safe_load(kube_lab.helm("show", "chart", entry["chart"]).stdout)


def test_each_chart_is_pinned_by_go_sum_and_the_1_20_stand_in_names_its_source(cilium_charts, kube_lab):
    sums = charts.pinned()
    assert sorted(cilium_charts) == ["1.18", "1.19", "1.20"]
    for entry in cilium_charts.values():
        assert entry["sum"] == sums[entry["source"]]
    assert [(m, e["version"], e["source"]) for m, e in sorted(cilium_charts.items())] == [
        ("1.18", "1.18.6", "v1.18.6"), ("1.19", "1.19.5", "v1.19.5"), ("1.20", "1.20.4", "v1.20.2")]
    meta = _show_chart(kube_lab, cilium_charts["1.20"])
    assert (meta["version"], meta["appVersion"]) == ("1.20.4", "1.20.4")
    annotations = meta["annotations"]
    assert annotations["ichor.maesh.dev/lab-source"] == "github.com/cilium/cilium@v1.20.2 install/kubernetes/cilium"
    assert annotations["ichor.maesh.dev/lab-source-sum"] == sums["v1.20.2"]
    assert "lab-source" not in str(_show_chart(kube_lab, cilium_charts["1.19"]).get("annotations"))
    assert len(charts.crd_documents(cilium_charts["1.20"])) >= 17


def test_a_zip_whose_hash_is_not_go_sums_is_refused(cilium_charts, tmp_path, monkeypatch):
    # ensure() checks the go command's h1 hash of the zip it reads; a zip with other content has another hash
    import zipfile
    real = charts.download("v1.18.6")["Zip"]
    assert charts.zip_hash(real) == charts.pinned()["v1.18.6"]
    forged = str(tmp_path / "forged.zip")
    with zipfile.ZipFile(real) as src, zipfile.ZipFile(forged, "w") as dst:
        for name in src.namelist():
            data = src.read(name)
            if name.endswith("install/kubernetes/cilium/values.yaml"):
                data += b"\n# changed\n"
            dst.writestr(name, data)
    monkeypatch.setattr(charts, "download", lambda version, go="go": {"Sum": charts.pinned()[version], "Zip": forged})
    with pytest.raises(charts.ChartError, match="the zip's hash is not go.sum's"):
        charts._build("helm", "v1.18.6", charts.pinned()["v1.18.6"], str(tmp_path), "go")  # pylint: disable=protected-access


def test_helm_template_of_the_1_20_chart_with_the_talos_values_renders_25_objects(cilium_charts, kube_lab):
    rendered = {}
    for minor in ("1.20", "1.19", "1.18"):
        rendered[minor] = kube_lab.helm("template", "cilium", cilium_charts[minor]["chart"], "-n", "kube-system",
                                        "--kube-version", kube_lab.version, "--set", "ipam.mode=kubernetes",
                                        "--set", "kubeProxyReplacement=true", "--set", "k8sServiceHost=localhost",
                                        "--set", "k8sServicePort=7445").stdout
    assert _kinds(rendered["1.20"]) == {"ClusterRole": 2, "ClusterRoleBinding": 2, "ConfigMap": 2, "DaemonSet": 2,
                                        "Deployment": 1, "Namespace": 1, "Role": 4, "RoleBinding": 4, "Secret": 2,
                                        "Service": 2, "ServiceAccount": 3}
    assert sum(_kinds(rendered["1.20"]).values()) == 25
    assert sum(_kinds(rendered["1.19"]).values()) == 25
    assert sum(_kinds(rendered["1.18"]).values()) == 23
    # the stand-in runs the set's version: its agent and operator images carry v1.20.4
    assert "quay.io/cilium/cilium:v1.20.4" in rendered["1.20"] and "v1.20.2" not in rendered["1.20"]
    assert "quay.io/cilium/operator-generic:v1.20.4" in rendered["1.20"]


def _record(kube_lab, namespace="kube-system"):
    client = KubeClient(kubeconfig=kube_lab.kubeconfig)
    secrets = client.resource("v1", "Secret").get(namespace=namespace, label_selector="owner=helm,name=cilium")
    return [record.Record(s) for s in secrets.to_dict()["items"]]


def test_a_helm_install_with_user_values_leaves_a_record_the_takeover_can_read(cilium_lab, kube_lab):
    lab = cilium_lab(nodes=2)
    lab.helm_install("1.19", merged(TALOS_VALUES, USER_VALUES))
    lab.wait_ready()
    (found,) = _record(kube_lab)
    assert (found.name, found.status, found.revision, found.chart_version) == ("sh.helm.release.v1.cilium.v1", "deployed",
                                                                               1, "1.19.5")
    assert found.config == merged(TALOS_VALUES, USER_VALUES)
    ds = lab.apps.read_namespaced_daemon_set("cilium", "kube-system")
    assert ds.metadata.annotations["meta.helm.sh/release-namespace"] == "kube-system"
    assert ds.spec.template.spec.containers[0].image.startswith("quay.io/cilium/cilium:v1.19.5")
    assert ds.status.number_ready == 2
    # the record codec: what encode writes, decode reads (base64 twice, gzip, JSON)
    assert record.decode(helm_record.encode(found.release)) == found.release


def test_a_cilium_cli_style_install_writes_its_record_in_kube_system(cilium_lab, kube_lab):
    lab = cilium_lab(nodes=1)
    lab.cli_install("1.20", merged(TALOS_VALUES, {"tunnelProtocol": "geneve", "operator": {"replicas": 1}}),
                    cluster_name="lab-one")
    lab.wait_ready()
    (found,) = _record(kube_lab)
    assert found.config["cluster"] == {"name": "lab-one"}
    assert found.config["routingMode"] == "tunnel" and found.config["tunnelProtocol"] == "geneve"
    config = lab.core.read_namespaced_config_map("cilium-config", "kube-system").data
    assert (config["routing-mode"], config["tunnel-protocol"], config["cluster-name"]) == ("tunnel", "geneve", "lab-one")


def test_helm_template_piped_to_kubectl_apply_leaves_no_record(cilium_lab, kube_lab):
    lab = cilium_lab(nodes=2)
    lab.template_apply("1.20", TALOS_VALUES)
    lab.wait_ready()
    assert _record(kube_lab) == []
    ds = lab.apps.read_namespaced_daemon_set("cilium", "kube-system")
    assert "kubectl.kubernetes.io/last-applied-configuration" in ds.metadata.annotations
    assert "meta.helm.sh/release-name" not in ds.metadata.annotations


def test_one_node_leaves_the_second_default_operator_replica_pending(cilium_lab):
    lab = cilium_lab(nodes=1)
    lab.template_apply("1.20", TALOS_VALUES)  # the chart's default: two operator replicas
    lab.agent.sync_once()
    op = lab.apps.read_namespaced_deployment("cilium-operator", "kube-system")
    assert (op.spec.replicas, op.status.ready_replicas) == (2, 1)


def test_a_warm_cache_needs_neither_go_nor_helm(cilium_charts):
    again = charts.ensure("/nonexistent/helm", go="/nonexistent/go")
    assert all(entry["seconds"] == 0 for entry in again.values())
    assert again["1.20"]["chart"] == cilium_charts["1.20"]["chart"]
    with pytest.raises(charts.ChartError, match="go is needed"):
        charts.download("v1.20.2", go="/nonexistent/go")
