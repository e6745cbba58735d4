"""The rollout planner (ADR 0113): order of steps, refusals, the Versions table."""

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils import release

CPS = [{"name": "cp-%d" % i, "role": "controlplane", "talos": "v1.13.9"} for i in (1, 2, 3)]
WORKERS = [{"name": "worker-1", "role": "worker", "talos": "v1.13.9"}]


def _k8s(version):
    return {"cp-1 kube-apiserver": version, "worker-1 kubelet": version}


def test_behind_cluster_plans_talos_first_control_planes_first():
    steps = release.plan_rollout(WORKERS + CPS, _k8s("v1.35.4"), "v1.13", {"name": "cilium", "version": "1.19.10"})
    assert [s["step"] for s in steps] == ["talos", "kubernetes", "cilium"]
    assert steps[0]["machines"] == ["cp-1", "cp-2", "cp-3", "worker-1"]
    assert "version contract to v1.14" in steps[0]["lines"][0]


def test_config_step_only_after_talos_and_before_kubernetes():
    done = [dict(m, talos=release.TALOS) for m in CPS + WORKERS]
    steps = release.plan_rollout(done, _k8s("v1.35.4"), "v1.14", None, config_pending=["cp-1"])
    assert [s["step"] for s in steps] == ["config", "kubernetes"]
    steps = release.plan_rollout(CPS, _k8s("v1.35.4"), "v1.13", None, config_pending=["cp-1"])
    assert [s["step"] for s in steps] == ["talos", "kubernetes"]


def test_up_to_date_cluster_needs_nothing():
    done = [dict(m, talos=release.TALOS) for m in CPS + WORKERS]
    cni = {"name": "cilium", "version": release.CILIUM}
    assert release.plan_rollout(done, _k8s(release.KUBERNETES), release.CONTRACT, cni) == []
    rows = release.versions_table(done, release.KUBERNETES, release.CONTRACT, cni)
    assert [r["state"] for r in rows] == ["Up to date"] * 4


def test_newer_components_are_refused_naming_both_versions():
    with pytest.raises(release.Refused) as exc:
        release.plan_rollout(CPS + [{"name": "w", "role": "worker", "talos": "v1.14.6"}], _k8s("v1.35.4"), "v1.13")
    assert "Talos on w is v1.14.6, newer than the release set's v1.14.5" in str(exc.value)
    with pytest.raises(release.Refused) as exc:
        release.plan_rollout(CPS, _k8s("v1.37.0"), "v1.13")
    assert "v1.37.0, newer than the release set's v1.36.6" in str(exc.value)


def test_two_minor_kubernetes_gap_and_unsupported_kubernetes_are_refused():
    with pytest.raises(release.Refused) as exc:
        release.plan_rollout(CPS, _k8s("v1.34.2"), "v1.13")
    assert "more than one minor behind" in str(exc.value)
    with pytest.raises(release.Refused) as exc:
        release.plan_rollout(CPS, _k8s("v1.32.0"), "v1.13")
    assert "not supported by Talos v1.14.5" in str(exc.value)


def test_a_flannel_version_is_never_judged_as_ciliums():
    steps = release.plan_rollout(CPS, _k8s("v1.35.4"), "v1.13", {"name": "flannel", "version": "0.28.9"})
    assert "cilium" not in [s["step"] for s in steps]
    rows = release.versions_table(CPS, "v1.35.4", "v1.13", {"name": "flannel", "version": "0.28.9"})
    assert [r["component"] for r in rows] == ["Talos", "Version contract", "Kubernetes"]


def test_cilium_two_minors_behind_is_refused():
    with pytest.raises(release.Refused):
        release.plan_rollout(CPS, _k8s("v1.35.4"), "v1.13", {"name": "cilium", "version": "1.18.16"})


def test_table_text():
    rows = release.versions_table(CPS, "v1.35.4", "v1.13", None)
    text = release.format_table(rows)
    assert text[0].split() == ["Component", "Running", "Target", "State"]
    assert "Behind" in text[1]


METRICS = """# HELP apiserver_requested_deprecated_apis Gauge of deprecated APIs that have been requested
# TYPE apiserver_requested_deprecated_apis gauge
apiserver_requested_deprecated_apis{group="flowcontrol.apiserver.k8s.io",removed_release="1.32",resource="flowschemas",subresource="",version="v1beta3"} 1
apiserver_requested_deprecated_apis{group="example.io",removed_release="1.38",resource="widgets",subresource="",version="v1beta1"} 1
apiserver_requested_deprecated_apis{group="",removed_release="",resource="componentstatuses",subresource="",version="v1"} 1
"""


def test_removed_apis_from_recorded_metrics():
    from ansible_collections.maesh.ichor.plugins.module_utils import upgrade
    assert upgrade.removed_apis_in_use(METRICS, "v1.36.6") == [
        "flowcontrol.apiserver.k8s.io/v1beta3 flowschemas (removed in 1.32)"]
    assert upgrade.removed_apis_in_use(METRICS, "v1.38.0") == [
        "example.io/v1beta1 widgets (removed in 1.38)",
        "flowcontrol.apiserver.k8s.io/v1beta3 flowschemas (removed in 1.32)"]
    assert upgrade.removed_apis_in_use("", "v1.36.6") == []


def test_retag_changes_only_the_named_components():
    from ansible_collections.maesh.ichor.plugins.module_utils import upgrade
    text = ("machine:\n  kubelet:\n    image: ghcr.io/siderolabs/kubelet:v1.35.4\n"
            "cluster:\n  apiServer:\n    image: registry.k8s.io/kube-apiserver:v1.35.4\n"
            "  proxy:\n    image: registry.k8s.io/kube-proxy:v1.35.4\n")
    out, changed = upgrade.retag(text, upgrade.CONTROL_PLANE_COMPONENTS, "v1.36.6")
    assert changed == ["kube-apiserver"]
    assert "kube-apiserver:v1.36.6" in out and "kubelet:v1.35.4" in out and "kube-proxy:v1.35.4" in out
    assert upgrade.retag(out, upgrade.CONTROL_PLANE_COMPONENTS, "v1.36.6") == (out, [])
