"""Case C with an inline manifest (seed 0103 A1) on the lab: simulated Talos machines started from a real Talos config
(contract v1.13, Cilium as the inline manifest ``cilium``, CNI none, kube-proxy disabled, KubePrism on 7445), the real
API server, real helm and the real chart.

The user's Cilium: ``helm template`` of chart 1.19 with the Talos guide's values, applied to the API server (what
Talos's create-only manifest apply does at bootstrap; kubectl stands in for it here) and held in the control plane's
config as the inline manifest (``talosctl patch mc`` puts the same text there). The takeover finds the entry by
content, takes Cilium over as an upgrade to 1.20 and records the entry's name with the hand-over; the config step then
removes it from every machine config; a Kubernetes step afterwards leaves the DaemonSet as the takeover left it. Also
KubePrism as the health check reads it: each machine's config and Talos's KubePrismStatuses.
"""

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.ansible_module.runner import Connections
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import takeover
from ansible_collections.maesh.ichor.plugins.module_utils.cilium.errors import Refused
from ansible_collections.maesh.ichor.plugins.module_utils.config import documents
from ansible_collections.maesh.ichor.plugins.module_utils.config import spec as specs
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import check, config_step, kubernetes_step
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as talos_client
from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine, talosconfig
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res

from tests.integration.ansible_env import REPO
from tests.lab.cilium import fixtures, rbac_fixtures
from tests.lab.cilium.fixtures import TALOS_VALUES

pytestmark = pytest.mark.lab

cilium_charts = fixtures.cilium_charts
cilium_lab = fixtures.cilium_lab
cilium_caller = rbac_fixtures.cilium_caller

CASE = REPO + "/tests/fixtures/configs/v1.13/v1.14.1/cilium-inline"  # contract v1.13, Kubernetes 1.36.3


def _machines(lab):
    return [{"name": m["name"], "node": m["address"], "role": m["role"]} for m in lab.machines]


def _talos(lab):
    return talos_client.TalosClient(talosconfig.load(lab.talosconfig))


def _configs(lab):
    """Every machine's config as its Talos API returns it (documents)."""
    with _talos(lab) as client:
        return dict((m["name"], documents.parse(client.run(machine.get_resource(client, res.MACHINE_CONFIG, m["address"]))["spec"]))
                    for m in lab.machines)


def _cilium_entries(docs):
    found = [d.name for d in docs if d.kind == "KubeInlineManifestConfig" and specs.is_cilium_manifest(d.body.get("manifest"))]
    legacy = documents.find(docs, documents.LEGACY)
    for item in documents.get_path(legacy.body, "cluster.inlineManifests") or []:
        if specs.is_cilium_manifest(item.get("contents")):
            found.append(item["name"])
    return found


def _hold_in_config(lab, manifest):
    """The control plane's inline manifest ``cilium`` becomes the rendered chart (as ``talosctl patch mc`` does)."""
    cp = [m for m in lab.machines if m["role"] == "controlplane"][0]
    docs = [d for d in yaml.safe_load_all(cp["machine_config"]) if d]
    (entry,) = docs[0]["cluster"]["inlineManifests"]
    entry["contents"] = manifest
    with _talos(lab) as client:
        machine.apply_config(client, cp["address"], yaml.safe_dump_all(docs, sort_keys=False))


def _params(lab, kube_lab, cilium_charts, **extra):
    params = dict(chart=cilium_charts["1.20"]["chart"], chart_digest=None, helm=kube_lab.bins["helm"],
                  kubeconfig=kube_lab.kubeconfig, kubeconfig_content=None, kube_context=None, timeout=30.0,
                  talosconfig=lab.talosconfig, talosconfig_content=None, context=None, endpoint=None,
                  machines=_machines(lab), kube_proxy=None, kubeprism_port=7445, cilium_values=TALOS_VALUES,
                  accept_cilium_changes=False, accept_cilium_diff=True, wait=True, wait_timeout=60.0,
                  cluster=None, secrets=None, desired=None)
    params.update(extra)
    return params


def _run(module_run, params, check_mode):
    conn = Connections(params)
    try:
        return module_run(params, conn, check_mode)
    finally:
        conn.close()


def _daemonset(kube):
    ds = kube.get("apps/v1", "DaemonSet", "cilium", "kube-system")
    return ds["spec"]["template"]["spec"]["containers"][0]["image"], ds["metadata"]["generation"]


def _case_c(talos_kube_lab, cilium_lab):
    lab = talos_kube_lab(case=CASE, controlplanes=1, workers=1, version=release.TALOS)
    cilium = cilium_lab(nodes=0)  # the Nodes are the Talos machines'
    cilium.template_apply("1.19", TALOS_VALUES)
    cilium.wait_ready()
    cilium.render("1.20", TALOS_VALUES)  # what the takeover installs, for teardown
    _hold_in_config(lab, open(cilium.manifests[0]).read())
    return lab, cilium


def test_a1_an_inline_manifest_cilium_is_taken_over_and_its_entry_leaves_every_config(
        talos_kube_lab, cilium_lab, cilium_charts, kube_lab, cilium_caller):
    lab, cilium = _case_c(talos_kube_lab, cilium_lab)
    kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
    # the takeover runs as the installer bundle's ServiceAccount (exactly its rules); the rollout steps as the admin
    caller = dict(kubeconfig=cilium_caller().kubeconfig)
    params = _params(lab, kube_lab, cilium_charts)
    assert [_cilium_entries(docs) for docs in _configs(lab).values()] == [["cilium"], []]

    # before the hand-over the config step keeps the entry (the v1.14 form carries it as a document)
    planned = _run(config_step.run, params, True)
    assert [m["drop"] for m in planned["machines"]] == [[], []]
    assert "kind: KubeInlineManifestConfig\nname: cilium" in planned["diff"][0]["after"]

    # the plan: the entry found by content, KubePrism answering on every machine; nothing written anywhere
    plan = _run(takeover.run, dict(params, **caller), True)
    assert plan["inline_manifests"] == [{"machine": "cp-1", "name": "cilium", "in": "cluster.inlineManifests"}]
    assert "inline manifest: cilium in the config of cp-1 holds the DaemonSet kube-system/cilium" in plan["plan"]
    assert [line for line in plan["health"] if line.startswith("KubePrism")] == [
        "KubePrism on cp-1: localhost:7445 healthy", "KubePrism on worker-1: localhost:7445 healthy"]
    assert plan["step"] == "upgrade" and not cluster_record.read(kube).exists

    result = _run(takeover.run, dict(params, **caller), False)
    assert result["changed"] is True
    record = cluster_record.read(kube).get("cilium")
    assert (record["release"], record["inlineManifests"]) == ("ichor-system/cilium", ["cilium"])
    assert _cilium_entries(_configs(lab)["cp-1"]) == ["cilium"]  # the takeover writes to no machine
    image, generation = _daemonset(kube)
    assert image.startswith("quay.io/cilium/cilium:v1.20.")

    # the rollout: release_check plans the config step for the entry; the step renders every config without it
    judged = _run(check.run, params, True)
    assert judged["step"] == "config"
    assert [p["drop"] for p in judged["config_pending"]] == [["cilium"], []]
    done = _run(config_step.run, params, False)
    assert done["changed"] is True and [m["drop"] for m in done["machines"]] == [["cilium"], []]
    configs = _configs(lab)
    for name, docs in configs.items():
        assert _cilium_entries(docs) == [], name
        assert documents.find(docs, "KubeInlineManifestConfig") is None, name
        assert documents.find(docs, "KubeletConfig") is not None, name  # now in the v1.14 form
    assert _daemonset(kube) == (image, generation)  # Talos deletes nothing it applied
    assert _run(config_step.run, params, True)["changed"] is False

    # a Kubernetes step afterwards: every machine to the set's Kubernetes, the DaemonSet untouched
    assert _run(check.run, params, True)["step"] == "kubernetes"
    moved = _run(kubernetes_step.run, params, False)
    assert moved["changed"] is True
    for name, docs in _configs(lab).items():
        assert documents.find(docs, "KubeletConfig").body["image"].endswith(release.KUBERNETES), name
        assert _cilium_entries(docs) == [] and documents.find(docs, "KubeInlineManifestConfig") is None, name
    assert _daemonset(kube) == (image, generation)
    again = _run(takeover.run, dict(params, **caller), False)
    assert again["changed"] is False and cilium.records() == []


def test_kubeprism_not_answering_on_a_machine_refuses_the_takeover(talos_kube_lab, cilium_lab, cilium_charts, kube_lab):
    lab, _cilium = _case_c(talos_kube_lab, cilium_lab)
    kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
    lab.control.set_faults("worker-1", kubeprism_unhealthy=True)
    with pytest.raises(Refused) as info:
        _run(takeover.run, _params(lab, kube_lab, cilium_charts), False)
    assert "KubePrism on worker-1: localhost:7445 not healthy" in str(info.value)
    assert "KubePrism on cp-1: localhost:7445 healthy" in info.value.result["health"]
    assert not cluster_record.read(kube).exists
    assert kube.get("v1", "Secret", "sh.helm.release.v1.cilium.v1", "ichor-system") is None
    # another port than the one Cilium is to reach the API server on is not KubePrism answering there
    lab.control.clear_faults("worker-1")
    with pytest.raises(Refused) as info:
        _run(takeover.run, _params(lab, kube_lab, cilium_charts, kubeprism_port=7446), True)
    assert "KubePrism on cp-1: on port 7445 in its config, not 7446" in str(info.value)
