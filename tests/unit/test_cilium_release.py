"""cilium_release's pure parts: the version step (one minor at a time, no downgrade), the operator-replica rule,
the effective values, the CNI-unmanaged refusal, the values lines, the backoff, and the retry loop on a fake helm
(the lab tests run the real one)."""

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.cilium import pipeline, release, values
from ansible_collections.maesh.ichor.plugins.module_utils.cilium.errors import CiliumError, HelmError, Refused


def test_the_version_step_is_one_minor_at_a_time_and_never_down():
    assert release.version_step("1.20.4", "1.20.4") == "same"
    assert release.version_step("1.20.2", "1.20.4") == "upgrade"
    assert release.version_step("1.19.5", "1.20.4") == "upgrade"
    with pytest.raises(Refused) as skip:
        release.version_step("1.18.6", "1.20.4", result={"plan": []})
    assert skip.value.message == ("the Cilium release runs chart 1.18.6, more than one minor below 1.20.4: Cilium moves "
                                  "one minor at a time; upgrade it to 1.19 first with a maesh.ichor whose release set "
                                  "has that minor")
    assert skip.value.result == {"plan": []}
    for newer in ("1.20.5", "1.21.0", "2.0.0"):
        with pytest.raises(Refused, match="refusing a downgrade"):
            release.version_step(newer, "1.20.4")


def test_operator_replicas_follow_the_nodes_and_the_spec():
    assert values.operator_replicas(1) == 1
    assert values.operator_replicas(2) is None and values.operator_replicas(5) is None
    assert values.operator_replicas(3, control_planes=1) == 1  # one control plane, workers included
    assert values.operator_replicas(1, control_planes=3) == 1  # an HA cluster that has one Node yet
    assert values.operator_replicas(3, control_planes=3) is None
    assert values.operator_replicas(0, control_planes=1) == 1 and values.operator_replicas(0) is None


def test_effective_values_layer_the_rule_the_user_and_the_owned_keys():
    owned = values.owned("replaced", "geneve")
    one = values.effective(1, {"debug": {"enabled": True}, "k8sServicePort": 6443}, owned)
    assert one["operator"] == {"replicas": 1} and one["k8sServicePort"] == 7445 and one["debug"] == {"enabled": True}
    assert "operator" not in values.effective(2, {}, owned)
    assert values.effective(4, {}, owned, control_planes=1)["operator"] == {"replicas": 1}
    assert values.effective(1, {"operator": {"replicas": 2}}, owned)["operator"] == {"replicas": 2}
    # the takeover's (no spec: no control planes) at one Node, as the release's with any spec
    assert values.effective(1, {}, owned) == values.effective(1, {}, owned, control_planes=3)


def test_the_unmanaged_preset_is_read_from_the_record_spec():
    assert pipeline.unmanaged({"cluster": {"cni": {"preset": "unmanaged"}}})
    assert not pipeline.unmanaged({"cluster": {"cni": {"preset": "cilium"}}})
    assert not pipeline.unmanaged({}) and not pipeline.unmanaged({"cluster": "x"}) and not pipeline.unmanaged(None)


def test_values_lines_name_each_changed_path():
    assert release._values_lines({"debug": {"enabled": False}, "a": 1}, {"debug": {"enabled": True}, "b": [1]}) == [
        "values: a: 1 -> unset", "values: b: unset -> [1]", "values: debug.enabled: false -> true"]
    assert release._values_lines({"x": 1}, {"x": 1}) == []
    # from no values (an install) or to none: only the paths that are set, never the empty root
    assert release._values_lines({}, {"a": {"b": 1}}) == ["values: a.b: unset -> 1"]
    assert release._values_lines({"a": 1}, {}) == ["values: a: 1 -> unset"]
    assert release._values_lines({}, {}) == []


def test_the_backoff_doubles_up_to_its_cap():
    assert [release.BACKOFF(n) for n in range(1, release.ATTEMPTS)] == [5.0, 10.0, 20.0, 30.0, 30.0]


class FakeHelm:
    def __init__(self, failures):
        self.failures = failures
        self.calls = []

    def file(self, name, data):
        return "/private/" + name

    def run(self, *args, **kwargs):
        self.calls.append(args)
        if len(self.calls) <= self.failures:
            raise HelmError("helm upgrade failed (exit 1): the server is currently unable to handle the request")
        return ""


class FakeFlow(release.CiliumRelease):
    def _repair_after_failure(self):
        self.repaired = getattr(self, "repaired", 0) + 1


def _flow(failures):
    slept = []
    flow = FakeFlow({}, kube=None, helm=FakeHelm(failures), sleep=slept.append)
    flow.current = object()  # a release exists: helm upgrade
    flow.effective = {"debug": {"enabled": True}}
    return flow, slept


def test_a_failing_apply_is_retried_with_backoff_and_repaired_between_attempts():
    flow, slept = _flow(failures=2)
    assert flow._apply_with_retries() == 3
    assert slept == [5.0, 10.0] and flow.repaired == 2
    assert [c[0] for c in flow.helm.calls] == ["upgrade"] * 3
    assert "--reset-values" in flow.helm.calls[0] and "--atomic" not in flow.helm.calls[0]
    assert flow.plan.lines[0].startswith("attempt 1 of 6 failed, next in 5s: helm upgrade failed (exit 1)")


def test_an_apply_failing_every_time_stops_after_the_last_attempt():
    flow, slept = _flow(failures=99)
    with pytest.raises(CiliumError) as info:
        flow._apply_with_retries()
    assert info.value.message.startswith("helm failed 6 times in a row; the last: helm upgrade failed (exit 1)")
    assert slept == [5.0, 10.0, 20.0, 30.0, 30.0] and len(flow.helm.calls) == 6
    assert info.value.result is flow.plan.result


def test_an_install_runs_helm_install_into_ichor_system():
    flow, _slept = _flow(failures=0)
    flow.current = None
    flow._apply_with_retries()
    (call,) = flow.helm.calls
    assert call[:5] == ("install", "cilium", None, "--namespace", "ichor-system") and "--create-namespace" in call
    assert "--take-ownership" in call
