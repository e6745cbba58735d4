"""The rollout planner (ADR 0113): order of steps, refusals, the Versions table."""

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import plan
from ansible_collections.maesh.ichor.plugins.module_utils.rollout.errors import UpgradeFailed
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import kubernetes_step
from tests import versions
from tests.versions import CONTRACT_BEHIND, KUBERNETES_BEHIND, TALOS_BEHIND

# a cluster one minor behind the set: Talos, its contract and Kubernetes
CPS = [{"name": "cp-%d" % i, "node": "10.5.0.%d" % (i + 1), "role": "controlplane", "talos": TALOS_BEHIND} for i in (1, 2, 3)]
WORKERS = [{"name": "worker-1", "node": "10.5.0.5", "role": "worker", "talos": TALOS_BEHIND}]


def _k8s(version):
    return {"cp-1 kube-apiserver": version, "worker-1 kubelet": version}


def test_behind_cluster_plans_talos_first_control_planes_first():
    steps = plan.plan_rollout(WORKERS + CPS, _k8s(KUBERNETES_BEHIND), CONTRACT_BEHIND,
                              {"name": "cilium", "version": versions.CILIUM_BEHIND})
    assert [s["step"] for s in steps] == ["talos", "kubernetes", "cilium"]
    assert steps[0]["machines"] == ["cp-1", "cp-2", "cp-3", "worker-1"]
    # one line per machine in the step's order, in talos_upgrade's words, then the contract that moves with Talos
    upgrade = "upgrade Talos from %s to %s with %s, reboot, " % (TALOS_BEHIND, release.TALOS, versions.installer())
    assert steps[0]["lines"] == [
        "cp-1 (10.5.0.2): " + upgrade + "wait for it, its etcd member and its Node",
        "cp-2 (10.5.0.3): " + upgrade + "wait for it, its etcd member and its Node",
        "cp-3 (10.5.0.4): " + upgrade + "wait for it, its etcd member and its Node",
        "worker-1 (10.5.0.5): " + upgrade + "wait for it and its Node",
        "then record the version contract %s (it moves with Talos)" % release.CONTRACT]
    mirror = "registry.example:5000/siderolabs/installer:" + release.TALOS
    steps = plan.plan_rollout(CPS[:1], _k8s(release.KUBERNETES), release.CONTRACT, None, image=mirror, target=release.TALOS)
    assert steps[0]["lines"] == ["cp-1 (10.5.0.2): upgrade Talos from %s to %s with %s, reboot, wait for "
                                 "it, its etcd member and its Node" % (TALOS_BEHIND, release.TALOS, mirror)]


def test_config_step_only_after_talos_and_before_kubernetes():
    done = [dict(m, talos=release.TALOS) for m in CPS + WORKERS]
    pending = [{"name": "cp-1", "form": CONTRACT_BEHIND}]
    steps = plan.plan_rollout(done, _k8s(KUBERNETES_BEHIND), CONTRACT_BEHIND, None, config_pending=pending)
    assert [s["step"] for s in steps] == ["config", "kubernetes"]
    assert steps[0]["machines"] == ["cp-1"]
    assert "move the config of cp-1 from the %s form to %s" % (CONTRACT_BEHIND, release.CONTRACT) in steps[0]["lines"][0]
    # behind a Talos step the plan still shows the config step (ADR 0113: the rollout never hides it)
    steps = plan.plan_rollout(CPS, _k8s(KUBERNETES_BEHIND), CONTRACT_BEHIND, None, config_pending=pending)
    assert [s["step"] for s in steps] == ["talos", "config", "kubernetes"]
    # no controller applies a pending config here, so the config step also runs with Kubernetes at the set
    steps = plan.plan_rollout(done, _k8s(release.KUBERNETES), CONTRACT_BEHIND, None, config_pending=pending)
    assert [s["step"] for s in steps] == ["config"]


def test_up_to_date_cluster_needs_nothing():
    done = [dict(m, talos=release.TALOS) for m in CPS + WORKERS]
    cni = {"name": "cilium", "version": release.CILIUM}
    assert plan.plan_rollout(done, _k8s(release.KUBERNETES), release.CONTRACT, cni) == []
    rows = plan.versions_table(done, release.KUBERNETES, release.CONTRACT, cni)
    assert [r["state"] for r in rows] == ["Up to date"] * 4


def test_a_record_a_stopped_run_left_behind_is_brought_to_what_every_machine_runs():
    # a run killed after the Talos step upgraded every machine and before it recorded the step (the fault campaign)
    machines = [{"name": "cp-1", "role": "controlplane", "talos": release.TALOS, "node": "10.5.0.2"},
                {"name": "worker-1", "role": "worker", "talos": release.TALOS, "node": "10.5.0.3"}]
    stored = {"talos": TALOS_BEHIND, "contract": CONTRACT_BEHIND, "kubernetes": KUBERNETES_BEHIND}
    assert plan.record_behind(stored, machines, KUBERNETES_BEHIND) == {"talos": release.TALOS, "contract": release.CONTRACT}
    # one machine still behind: the record never states more than the lowest
    between = versions.patch_ahead(TALOS_BEHIND)
    machines[1]["talos"] = between
    assert plan.record_behind(stored, machines, KUBERNETES_BEHIND) == {"talos": between}
    # a Kubernetes step stopped before its record; a current record needs nothing
    assert plan.record_behind(stored, machines[:1], release.KUBERNETES) == {
        "talos": release.TALOS, "contract": release.CONTRACT, "kubernetes": release.KUBERNETES}
    assert plan.record_behind({"talos": release.TALOS, "contract": release.CONTRACT, "kubernetes": release.KUBERNETES},
                              machines[:1], release.KUBERNETES) == {}
    # a record ahead of a machine is not lowered here (the plan's own checks judge that)
    assert plan.record_behind({"talos": release.TALOS, "kubernetes": release.KUBERNETES}, machines, KUBERNETES_BEHIND) == {}


def test_newer_components_are_refused_naming_both_versions():
    with pytest.raises(plan.Refused) as exc:
        plan.plan_rollout(CPS + [{"name": "w", "role": "worker", "talos": versions.TALOS_NEWER}], _k8s(KUBERNETES_BEHIND),
                          CONTRACT_BEHIND)
    assert "Talos on w is %s, newer than the release set's %s" % (versions.TALOS_NEWER, release.TALOS) in str(exc.value)
    with pytest.raises(plan.Refused) as exc:
        plan.plan_rollout(CPS, _k8s(versions.KUBERNETES_NEWER), CONTRACT_BEHIND)
    assert "%s, newer than the release set's %s" % (versions.KUBERNETES_NEWER, release.KUBERNETES) in str(exc.value)


def test_two_minor_kubernetes_gap_and_unsupported_kubernetes_are_refused():
    with pytest.raises(plan.Refused) as exc:
        plan.plan_rollout(CPS, _k8s(versions.KUBERNETES_TWO_BEHIND), CONTRACT_BEHIND)
    assert "more than one minor behind" in str(exc.value)
    with pytest.raises(plan.Refused) as exc:
        plan.plan_rollout(CPS, _k8s(versions.KUBERNETES_UNSUPPORTED), CONTRACT_BEHIND)
    assert "not supported by Talos %s" % release.TALOS in str(exc.value)


def test_a_flannel_version_is_never_judged_as_ciliums():
    steps = plan.plan_rollout(CPS, _k8s(KUBERNETES_BEHIND), CONTRACT_BEHIND, {"name": "flannel", "version": "0.28.9"})
    assert "cilium" not in [s["step"] for s in steps]
    rows = plan.versions_table(CPS, KUBERNETES_BEHIND, CONTRACT_BEHIND, {"name": "flannel", "version": "0.28.9"})
    assert [r["component"] for r in rows] == ["Talos", "Version contract", "Kubernetes"]


def test_cilium_two_minors_behind_is_refused():
    with pytest.raises(plan.Refused):
        plan.plan_rollout(CPS, _k8s(KUBERNETES_BEHIND), CONTRACT_BEHIND,
                          {"name": "cilium", "version": versions.minor_behind(release.CILIUM, 2)})


def test_table_text():
    rows = plan.versions_table(CPS, KUBERNETES_BEHIND, CONTRACT_BEHIND, None)
    text = plan.format_table(rows)
    assert text[0].split() == ["Component", "Running", "Target", "State"]
    assert "Behind" in text[1]


METRICS = """# HELP apiserver_requested_deprecated_apis Gauge of deprecated APIs that have been requested
# TYPE apiserver_requested_deprecated_apis gauge
apiserver_requested_deprecated_apis{group="flowcontrol.apiserver.k8s.io",removed_release="1.32",resource="flowschemas",subresource="",version="v1beta3"} 1
apiserver_requested_deprecated_apis{group="example.io",removed_release="1.38",resource="widgets",subresource="",version="v1beta1"} 1
apiserver_requested_deprecated_apis{group="",removed_release="",resource="componentstatuses",subresource="",version="v1"} 1
"""


def test_removed_apis_from_recorded_metrics():
    assert kubernetes_step.removed_apis_in_use(METRICS, "v1.36.6") == [
        "flowcontrol.apiserver.k8s.io/v1beta3 flowschemas (removed in 1.32)"]
    assert kubernetes_step.removed_apis_in_use(METRICS, "v1.38.0") == [
        "example.io/v1beta1 widgets (removed in 1.38)",
        "flowcontrol.apiserver.k8s.io/v1beta3 flowschemas (removed in 1.32)"]
    assert kubernetes_step.removed_apis_in_use("", "v1.36.6") == []
    # the kubernetes step's refusal, before anything is written
    with pytest.raises(UpgradeFailed) as exc:
        kubernetes_step.check_removed_apis(METRICS, "v1.36.6")
    assert str(exc.value) == ("removed APIs are still in use, Kubernetes v1.36.6 no longer serves them: "
                              "flowcontrol.apiserver.k8s.io/v1beta3 flowschemas (removed in 1.32); move their clients "
                              "to the replacement APIs first")
    kubernetes_step.check_removed_apis("", "v1.36.6")


def _fixture_machines(case, talos):
    import os
    from ansible_collections.maesh.ichor.plugins.module_utils.rollout import model as rollout
    base = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "configs", case)
    out = []
    for role, name in (("controlplane", "cp-1"), ("worker", "worker-1")):
        with open(os.path.join(base, role + ".conf")) as handle:
            out.append(rollout.Machine(name, "10.5.0.%d" % (len(out) + 2), role, talos, handle.read()))
    return out


def test_config_pending_and_the_kubernetes_phases_over_real_talos_configs():
    from ansible_collections.maesh.ichor.plugins.module_utils.config import documents, render
    from ansible_collections.maesh.ichor.plugins.module_utils.rollout import model as rollout
    from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
    # v1.13 configs on a machine upgraded to the set's Talos: still in the v1.13 form, so a config change is pending
    model = rollout.model(_fixture_machines("v1.13/v1.13.9/k8s-older", release.TALOS))
    assert [(m.name, m.form) for m in rollout.config_pending(model)] == [("cp-1", "v1.13"), ("worker-1", "v1.13")]
    assert rollout.lowest_form(model) == "v1.13"
    cp = model.machines[0]
    assert cp.images == dict((c, "1.35.4") for c in render.COMPONENTS)
    with pytest.raises(ConfigError, match="not yet in the %s form: run the config step first" % release.CONTRACT):
        rollout.kubernetes_phases(model, release.KUBERNETES)
    # what the config step applies: the set's contract form with the images the machine runs
    moved = model.render(cp, release.CONTRACT, cp.images)
    assert documents.find(moved, "KubeletConfig").body["image"].endswith(":v1.35.4")

    # once every config is in the set's contract form, the phases move their components and keep the later ones
    for m in model.machines:
        m.docs = model.render(m, release.CONTRACT, m.images)
        rollout.find_form(model, m)
    assert rollout.config_pending(model) == []
    phases = rollout.kubernetes_phases(model, release.KUBERNETES)
    assert [p for p, _work in phases] == ["control plane", "kube-proxy", "kubelet"]
    (cp_m, cp_images, _r), = phases[0][1]
    assert cp_m.name == "cp-1" and cp_images["kube-apiserver"] == versions.bare(release.KUBERNETES)
    assert cp_images["kube-proxy"] == "1.35.4"
    assert cp_images["kubelet"] == "1.35.4"
    assert [m.name for m, _i, _r in phases[1][1]] == ["cp-1"]
    assert [m.name for m, _i, _r in phases[2][1]] == ["cp-1", "worker-1"]
    last = phases[2][1][1][2]
    assert documents.find(last, "KubeletConfig").body["image"].endswith(":" + release.KUBERNETES)


def test_a_config_the_engine_cannot_render_is_refused_naming_the_paths():
    from ansible_collections.maesh.ichor.plugins.module_utils.rollout import model as rollout
    from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
    with pytest.raises(ConfigError) as exc:
        rollout.model(_fixture_machines("v1.12/v1.12.7/kitchen-sink", release.TALOS))
    assert "cp-1: its live config is not what the cluster's spec renders" in str(exc.value)
    assert "inlineManifests[platform-extras]" in str(exc.value)
    machines = _fixture_machines("v1.13/v1.13.9/k8s-older", release.TALOS)
    other = _fixture_machines("v1.13/v1.13.9/basic", release.TALOS)
    with pytest.raises(ConfigError, match="worker-1: the secrets bundle belongs to another cluster"):
        rollout.model([machines[0], other[1]])


def test_a_given_spec_overrides_what_the_live_configs_state():
    from ansible_collections.maesh.ichor.plugins.module_utils.rollout import model as rollout
    from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
    machines = _fixture_machines("v1.13/v1.13.9/k8s-older", release.TALOS)
    # an inventory that gives only the name (as reclaim needs) renders the same
    model = rollout.model(machines, cluster={"name": "k8s-older"})
    assert [m.form for m in model.machines] == ["v1.13", "v1.13"]
    # a spec that differs from the running configs is refused, naming the paths it would change
    with pytest.raises(ConfigError) as exc:
        rollout.model(_fixture_machines("v1.13/v1.13.9/k8s-older", release.TALOS), cluster={"name": "prod"})
    assert "cp-1: its live config is not what the cluster's spec renders" in str(exc.value)
    assert "v1alpha1:cluster.clusterName" in str(exc.value)
