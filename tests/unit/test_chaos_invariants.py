"""The fault campaign's invariants judge what they are given: each one fails on the history it must refuse (a test of
the judge, on made-up audit events and simulator timelines; the campaign runs them on real ones)."""

import pytest

from tests.chaos import upgrade
from tests.chaos.scenario import Violation, check_lock_history, run_writes


def _lease_event(verb, holder, renewed, duration=30, code=200, at=None):
    body = {"spec": {"holderIdentity": holder, "leaseDurationSeconds": duration, "renewTime": renewed}}
    return {"verb": verb, "objectRef": {"resource": "leases", "namespace": "ichor-system", "name": "ichor-cluster-lock"},
            "responseStatus": {"code": code}, "responseObject": None if verb == "delete" else body,
            "stageTimestamp": at or renewed}


T0 = "2026-12-03T10:00:00.000000Z"
T10 = "2026-12-03T10:00:10.000000Z"
T40 = "2026-12-03T10:00:40.000000Z"


def test_a_lock_taken_over_before_it_expired_is_a_violation():
    events = [_lease_event("create", "run-a", T0), _lease_event("update", "run-b", T10)]
    with pytest.raises(Violation, match="from run-a to run-b .* 20.0 s before it expired"):
        check_lock_history(events)


def test_a_lock_renewed_given_back_or_expired_then_taken_is_not():
    check_lock_history([_lease_event("create", "run-a", T0), _lease_event("update", "run-a", T10),
                        _lease_event("update", "run-b", "2026-12-03T10:00:41.000000Z")])  # run-a's ran out at :40
    check_lock_history([_lease_event("create", "run-a", T0), _lease_event("delete", None, None, at=T10),
                        _lease_event("create", "run-b", T10)])
    # a refused write (409) changed nothing
    check_lock_history([_lease_event("create", "run-a", T0), _lease_event("update", "run-b", T10, code=409)])


def test_only_the_runs_successful_writes_count_as_writes():
    agent = {"verb": "patch", "objectRef": {"resource": "nodes"}, "userAgent": "ichor-chaos-lab-agent/1",
             "user": {"username": "lab-admin"}, "responseStatus": {"code": 200}}
    run = dict(agent, userAgent="OpenAPI-Generator/33/python")
    refused = dict(run, responseStatus={"code": 403})
    system = dict(run, user={"username": "system:kube-controller-manager"})
    lock = dict(run, objectRef={"resource": "leases"})
    dry = dict(run, requestURI="/api/v1/nodes/x?dryRun=All")
    assert run_writes([agent, run, refused, system, lock, dry]) == [run]


class _Lab:
    def __init__(self, timeline, controlplanes=3, workers=2):
        self._timeline = timeline
        self.talos = self
        self.machines = [{"name": "cp-%d" % i, "role": "controlplane", "etcd_member_id": str(i)}
                         for i in range(1, controlplanes + 1)] + [
            {"name": "worker-%d" % i, "role": "worker"} for i in range(1, workers + 1)]

    def timeline(self):
        return self._timeline


def _rolled(names):
    return [entry for name in names for entry in ((name, "Upgrade"), (name, "down:rebooting"), (name, "boot"))]


ALL = ["cp-1", "cp-2", "cp-3", "worker-1", "worker-2"]


def test_a_rollout_one_machine_at_a_time_passes_and_counts_its_reboots():
    assert upgrade.check_machines(_Lab(_rolled(ALL)), complete=True) == 5


@pytest.mark.parametrize("timeline, message", [
    # the run takes cp-2 down while cp-3 is down on its own: etcd keeps 1 of 3
    (_rolled(["cp-1"]) + [("cp-3", "down:unasked"), ("cp-2", "Upgrade"), ("cp-2", "down:rebooting")],
     "cp-2 went down .rebooting. while control plane cp-3 was down"),
    # two control planes the runs took down at once
    ([("cp-1", "Upgrade"), ("cp-1", "down:rebooting"), ("cp-2", "Upgrade"), ("cp-2", "down:rebooting")],
     "cp-2 went down .rebooting. while control plane cp-1 was down"),
    ([("worker-1", "Reset")], "worker-1 was reset"),
    (_rolled(ALL) + _rolled(["worker-2"]), "rebooted more than once by the runs.*worker-2"),
])
def test_what_the_runs_must_never_do_is_found(timeline, message):
    with pytest.raises(Violation, match=message):
        upgrade.check_machines(_Lab(timeline))


def test_a_control_plane_that_went_down_on_its_own_after_the_runs_request_is_the_faults():
    # the run asked cp-1 to upgrade while every member was up; cp-3 went down on its own before cp-1's reboot began
    timeline = [("cp-1", "Upgrade"), ("cp-3", "down:unasked"), ("cp-1", "down:rebooting"), ("cp-1", "boot"),
                ("cp-3", "boot")] + _rolled(["cp-2", "cp-3", "worker-1", "worker-2"])
    assert upgrade.check_machines(_Lab(timeline), complete=True) == 5


def test_a_machine_never_rolled_is_found_once_the_calm_rerun_ended():
    with pytest.raises(Violation, match="never went down.*worker-2"):
        upgrade.check_machines(_Lab(_rolled(ALL[:-1])), complete=True)
    assert upgrade.check_machines(_Lab(_rolled(ALL[:-1]))) == 4  # after the faulted run it may be left
