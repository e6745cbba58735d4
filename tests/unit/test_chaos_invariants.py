"""The fault campaign's invariants judge what they are given: each one fails on the history it must refuse (a test of
the judge, on made-up audit events and simulator timelines; the campaign runs them on real ones)."""

import datetime
import json

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.installer import snapshot
from tests.chaos import __main__ as chaos_main
from tests.chaos import campaign, reclaim, upgrade
from tests.chaos.adopt import BACKUP_OF, deletes_backed_up
from tests.chaos.install import NAMESPACE, check_backups
from tests.chaos.scenario import (BROKEN_ANNOTATION, HOLD_BREAKERS, PROCESS_ANNOTATION, RUN_USER_PREFIX, Violation,
                                  applied_while_held, check_lock_history, check_quiet_after, check_unchanged_recap,
                                  check_writes_apart, hold_windows, lease_state, production_lock_duration, recap,
                                  run_writes)


def _lease_event(verb, holder, renewed, duration=45, code=200, at=None, pid=None, broken=None, user=None):
    annotations = {}
    if pid is not None:
        annotations[PROCESS_ANNOTATION] = "vm/0a1b2c3d %d 1234" % pid
    if broken is not None:
        annotations[BROKEN_ANNOTATION] = broken
    body = {"metadata": {"annotations": annotations},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration, "renewTime": renewed}}
    return {"verb": verb, "objectRef": {"resource": "leases", "namespace": "ichor-system", "name": "ichor-cluster-lock"},
            "user": {"username": user or "lab-admin"}, "responseStatus": {"code": code},
            "responseObject": None if verb == "delete" else body, "requestReceivedTimestamp": at or renewed,
            "stageTimestamp": at or renewed}


T0 = "2026-12-03T10:00:00.000000Z"
T10 = "2026-12-03T10:00:10.000000Z"
T40 = "2026-12-03T10:00:40.000000Z"


def test_a_lock_taken_over_before_it_expired_is_a_violation():
    events = [_lease_event("create", "run-a", T0), _lease_event("update", "run-b", T10)]
    with pytest.raises(Violation, match="from run-a to run-b .* 35.0 s before it expired"):
        check_lock_history(events)


def test_a_lock_renewed_given_back_or_expired_then_taken_is_not():
    assert check_lock_history([
        _lease_event("create", "run-a", T0), _lease_event("update", "run-a", T10),
        _lease_event("update", "run-b", "2026-12-03T10:00:55.000000Z")]) == 1  # run-a's ran out at :55
    check_lock_history([_lease_event("create", "run-a", T0), _lease_event("delete", None, None, at=T10),
                        _lease_event("create", "run-b", T10)])
    # a refused write (409) changed nothing
    check_lock_history([_lease_event("create", "run-a", T0), _lease_event("update", "run-b", T10, code=409)])


def test_a_lock_is_taken_over_at_once_only_from_a_run_whose_playbook_had_ended():
    events = [_lease_event("create", "run-a", T0, pid=4242), _lease_event("update", "run-b", T10, pid=4343)]
    assert check_lock_history(events, ended={4242: _epoch(T10) - 0.5}) == 1
    with pytest.raises(Violation, match="from run-a to run-b .* while its playbook .pid 4242. still ran"):
        check_lock_history(events, ended={4242: _epoch(T10) + 0.5})  # it ended after the takeover
    with pytest.raises(Violation, match="nothing says its playbook .pid 4242. had ended"):
        check_lock_history(events, ended={4343: _epoch(T0)})
    broken = [events[0], _lease_event("update", "run-b", T10, broken="run-a, broken by ops at " + T10)]
    assert check_lock_history(broken, ended={}) == 1  # broken as asked, its id typed back


def test_a_lock_held_for_another_duration_than_the_production_one_is_a_violation():
    check_lock_history([_lease_event("create", "run-a", T0)], duration=45)
    with pytest.raises(Violation, match="for 20 s by run-a, not for the production 45 s"):
        check_lock_history([_lease_event("create", "run-a", T0, duration=20)], duration=45)


def test_the_lock_state_is_read_from_the_leases_own_fields():
    lease = _lease_event("create", "run-a", T0)["responseObject"]
    assert lease_state(lease, _epoch(T10)) == ("run-a", _epoch(T0) + 45, False)
    assert lease_state(lease, _epoch(T0) + 45)[2] is True
    assert lease_state(None, _epoch(T0)) == (None, None, True)
    lease["spec"]["leaseDurationSeconds"] = "45"
    with pytest.raises(Violation, match="no renewTime or no leaseDurationSeconds"):
        lease_state(lease, _epoch(T0))


# -- no two runs' writes interleaved, none after a run's playbook was gone ----------------------------------------------
def _write(run, received, stored=None, verb="update", resource="configmaps", name="x", code=200):
    return {"verb": verb, "objectRef": {"resource": resource, "namespace": "ichor-system", "name": name},
            "user": {"username": RUN_USER_PREFIX + run if run else "lab-admin"}, "responseStatus": {"code": code},
            "requestReceivedTimestamp": received, "stageTimestamp": stored or received}


def _t(seconds):
    return "2026-12-03T10:00:%09.6fZ" % seconds


def test_runs_writing_one_after_another_are_apart():
    events = [_write("faulted", _t(1), _t(1.1)), _lease_event("update", "a", _t(2), user=RUN_USER_PREFIX + "faulted"),
              _write(None, _t(3)),  # the lab's own write between two of a run's
              _write("second", _t(4), code=403), _write("second", _t(4.5), code=409),  # refused: nothing changed
              _write("faulted", _t(5), _t(5.2)), _write("calm", _t(6)), _write("third", _t(9), verb="get")]
    assert check_writes_apart(events) == {"faulted": 3, "calm": 1}


@pytest.mark.parametrize("second", [
    _write("calm", _t(4)),  # between two writes of the faulted run
    _write("calm", _t(5.1)),  # received while the faulted run's last write was being stored
    _lease_event("update", "calm", _t(4), user=RUN_USER_PREFIX + "calm"),  # the lock's write counts too
    _write("calm", _t(4), code=504),  # answered 5xx: it may have landed
])
def test_interleaved_writes_of_two_runs_are_a_violation(second):
    events = sorted([_write("faulted", _t(1)), _write("faulted", _t(5), _t(5.5)), second],
                    key=lambda e: e["requestReceivedTimestamp"])
    with pytest.raises(Violation, match="the writes of runs faulted and calm interleave: calm wrote"):
        check_writes_apart(events)


def test_a_run_writing_on_after_its_playbook_was_gone_is_a_violation():
    heartbeat = _lease_event("update", "a", _t(11.5), user=RUN_USER_PREFIX + "faulted")
    check_quiet_after([_write("faulted", _t(9)), heartbeat], {"faulted": _epoch(_t(10))})  # within the grace
    with pytest.raises(Violation, match=r"run faulted wrote \(update leases ichor-system/ichor-cluster-lock\) at "
                                        r"10:00:13.00, 3.0 s after its ansible-playbook was gone"):
        check_quiet_after([_lease_event("update", "a", _t(13), user=RUN_USER_PREFIX + "faulted")],
                          {"faulted": _epoch(_t(10))})
    check_quiet_after([_write("calm", _t(30))], {"faulted": _epoch(_t(10)), "calm": _epoch(_t(31))})


# -- the third run's recap, per host -------------------------------------------------------------------------------------
def _recap(*lines):
    head = ["PLAY [x] ****", "", "PLAY RECAP *********************************************"]
    return "\n".join(head + list(lines) + ["", "plan: nothing to do"])


UNCHANGED = "%-20s : ok=5    changed=0    unreachable=0    failed=0    skipped=2    rescued=0    ignored=0"


def test_a_recap_unchanged_for_every_host_passes():
    out = _recap(*(UNCHANGED % host for host in ("cp-1", "cp-2", "localhost")))
    assert recap(out)["cp-2"]["skipped"] == 2
    assert check_unchanged_recap(out) == 3


@pytest.mark.parametrize("bad, message", [
    ("cp-2 : ok=5 changed=1 unreachable=0 failed=0 skipped=2 rescued=0 ignored=0", "cp-2 ok=5 changed=1"),
    ("cp-2 : ok=5 changed=0 unreachable=1 failed=0 skipped=0 rescued=0 ignored=0", "cp-2 .*unreachable=1"),
    ("cp-2 : ok=5 changed=0 unreachable=0 failed=1 skipped=0 rescued=0 ignored=0", "cp-2 .*failed=1"),
    ("cp-2 : ok=5 unreachable=0 failed=0", "cp-2 ok=5 changed=None"),
])
def test_one_host_of_the_recap_that_changed_failed_or_was_unreachable_is_a_violation(bad, message):
    # the other host's line holds "changed=0": a substring test of the output would pass
    with pytest.raises(Violation, match=message):
        check_unchanged_recap(_recap(UNCHANGED % "cp-1", bad))


def test_a_run_without_a_recap_is_a_violation():
    with pytest.raises(Violation, match="no PLAY RECAP"):
        check_unchanged_recap("ERROR! the playbook could not be found\n")
    # only the last recap counts (a playbook of several plays prints one)
    assert recap(_recap("cp-1 : ok=1 changed=1 unreachable=0 failed=0") + "\n" + _recap(UNCHANGED % "cp-1")) == {
        "cp-1": {"ok": 5, "changed": 0, "unreachable": 0, "failed": 0, "skipped": 2, "rescued": 0, "ignored": 0}}


# -- a run that exits 0 has done its work -------------------------------------------------------------------------------
class _ReclaimLab:
    """What reclaim's judge reads: the reclaimed machine (the simulator) and the cluster record (the API server)."""

    def __init__(self, mode, pending):
        self.talos = self
        self.client = self
        self.mode, self.pending = mode, pending

    def machine(self, name):
        assert name == reclaim.RECLAIMED
        return {"mode": self.mode, "uuid": "u-1", "address": "10.5.0.3"}

    def get(self, api_version, kind, name, namespace):
        machines = [{"uuid": "u-1", "address": "10.5.0.3", "state": "pending", "source": "reclaim"}] if \
            self.pending else []
        return {"metadata": {"resourceVersion": "7"}, "data": {"record": json.dumps({"machines": machines})}}


def _reclaim(mode, pending):
    scenario = reclaim.Reclaim("/nonexistent")
    scenario.lab = _ReclaimLab(mode, pending)
    scenario.target = {"uuid": "u-1", "address": "10.5.0.3"}
    return scenario


@pytest.mark.parametrize("mode, pending", [("configured", False), ("configured", True), ("maintenance", False)])
def test_a_run_that_exits_0_without_having_done_its_work_is_a_violation(mode, pending):
    with pytest.raises(Violation, match="the faulted run exited 0 without having done its work"):
        campaign._done(_reclaim(mode, pending), "faulted", 0)  # pylint: disable=protected-access
    campaign._done(_reclaim(mode, pending), "faulted", 2)  # pylint: disable=protected-access  # failed: not judged
    campaign._done(_reclaim(mode, pending), "faulted", None)  # pylint: disable=protected-access  # killed


def test_a_run_that_exits_0_having_done_its_work_passes():
    campaign._done(_reclaim("maintenance", True), "calm", 0)  # pylint: disable=protected-access


# -- the production lock, the slice ---------------------------------------------------------------------------------------
def test_the_campaign_runs_hold_the_production_lock_of_the_roles_defaults():
    assert production_lock_duration() == 45


def test_cis_slice_meets_every_fault_kind_and_playbook_and_keeps_the_regression_seeds():
    commit, seeds = campaign.ci_slice("0123456789abcdef0123456789abcdef01234567")
    assert commit.startswith("0123")
    assert {2963, 2992} <= set(seeds) and len(seeds) <= 25
    assert set(campaign.Schedule(s).fault for s in seeds) == set(campaign.FAULT_KINDS)
    assert len(campaign.FAULT_KINDS) == 14
    assert set(campaign.Schedule(s).playbook for s in seeds) == set(campaign.PLAYBOOKS)
    assert campaign.ci_slice("f" * 40)[1] != seeds  # another commit, other schedules
    assert min(s for s in seeds if s not in campaign.REGRESSION_SEEDS) >= campaign.COMMIT_SEEDS_FROM


def test_the_regression_seeds_draw_the_schedules_that_found_their_faults():
    assert campaign.Schedule(2939).describe(["cp-1", "cp-2", "cp-3", "worker-1", "worker-2"]) == \
        "upgrade: cp-2 rebooting unasked (down 7.99 s) 3.79 s after the start"
    assert campaign.Schedule(3067).describe(["cp-1", "cp-2", "cp-3", "worker-2"]) == \
        "init: worker-2 loses the reply to its next write (carried out)"
    assert (campaign.Schedule(2963).playbook, campaign.Schedule(2963).fault) == ("adopt", "sigterm")


def test_a_soak_refuses_seeds_used_before_and_takes_the_next_unused_ones():
    ranges = [(0, 3399), (3400, 3599)]
    assert chaos_main.soak_seeds(None, 200, ranges) == (3600, None)
    assert chaos_main.soak_seeds(5000, 10, ranges) == (5000, None)
    first, refusal = chaos_main.soak_seeds(2912, 200, ranges)
    assert first is None and "2912-3111 meet the used range(s) 0-3399" in refusal
    assert chaos_main.soak_seeds(3590, 20, ranges)[0] is None
    assert chaos_main.used_ranges()[0] == (0, 3399)  # the committed list: the soaks' 2912-3111 among them


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


LOOK, PULL, INSTALL, REBOOT, DOWN = "EtcdMemberList", "Pull", "Upgrade", "Reboot", "down:rebooting"


@pytest.mark.parametrize("timeline, judged", [
    # seed 2939: cp-3 went down unasked after the run's last look at etcd through cp-2, just before its reboot
    ([("cp-2", LOOK), ("cp-2", PULL), ("cp-2", INSTALL), ("cp-2", LOOK), ("cp-3", "down:unasked"), ("cp-2", REBOOT),
      ("cp-2", DOWN)], None),
    # a look before the pull and the install is stale at the reboot: cp-3 went down meanwhile
    ([("cp-2", LOOK), ("cp-2", PULL), ("cp-3", "down:unasked"), ("cp-2", INSTALL), ("cp-2", REBOOT), ("cp-2", DOWN)],
     "cp-2 went down .rebooting. while control plane cp-3 was down"),
    # cp-3 was down when the run looked
    ([("cp-3", "down:unasked"), ("cp-2", LOOK), ("cp-2", REBOOT), ("cp-2", DOWN)],
     "cp-2 went down .rebooting. while control plane cp-3 was down"),
])
def test_a_control_plane_is_judged_by_what_the_run_saw_at_its_last_look_before_the_reboot(timeline, judged):
    if judged is None:
        upgrade.check_machines(_Lab(timeline))
    else:
        with pytest.raises(Violation, match=judged):
            upgrade.check_machines(_Lab(timeline))


def test_a_machine_never_rolled_is_found_once_the_calm_rerun_ended():
    with pytest.raises(Violation, match="never went down.*worker-2"):
        upgrade.check_machines(_Lab(_rolled(ALL[:-1])), complete=True)
    assert upgrade.check_machines(_Lab(_rolled(ALL[:-1]))) == 4  # after the faulted run it may be left


def _record_event(verb, held, received, done=None, code=200, audited=True):
    """An audited write of the cluster record holding ``held`` (adopt's hold, by machine name)."""
    body = {"data": {"record": json.dumps({"talos": "v1.14.1", "held": dict((name, "adopt") for name in held)})}}
    return {"verb": verb, "objectRef": {"resource": "configmaps", "namespace": "ichor-system", "name": "ichor-cluster"},
            "responseStatus": {"code": code}, "responseObject": body if audited and verb != "delete" else None,
            "requestReceivedTimestamp": received, "stageTimestamp": done or received}


def _epoch(stamp):
    return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()


T5, T20, T30 = "2026-12-03T10:00:05.000000Z", "2026-12-03T10:00:20.000000Z", "2026-12-03T10:00:30.000000Z"


def test_hold_windows_open_when_the_hold_is_written_and_close_when_its_lift_is_received():
    events = [_record_event("create", ["cp-1", "worker-1"], T0, done="2026-12-03T10:00:00.500000Z"),
              _record_event("update", ["cp-1", "worker-1"], T5, code=409),  # refused: nothing changed
              _record_event("update", ["worker-1"], T10, done="2026-12-03T10:00:10.900000Z"),
              _record_event("patch", ["worker-1"], T20, audited=False),  # not audited with its object: not judged
              _record_event("update", [], T30)]
    windows = hold_windows(events)
    assert windows == {"cp-1": [(_epoch(T0) + 0.5, _epoch(T10))], "worker-1": [(_epoch(T0) + 0.5, _epoch(T30))]}
    # a hold never lifted lasts; a record deleted holds nothing
    assert hold_windows([_record_event("create", ["cp-2"], T0)]) == {"cp-2": [(_epoch(T0), float("inf"))]}
    assert hold_windows([_record_event("create", ["cp-2"], T0), _record_event("delete", [], T10)]) == {
        "cp-2": [(_epoch(T0), _epoch(T10))]}


@pytest.mark.parametrize("what", sorted(HOLD_BREAKERS))
def test_a_machine_changed_while_held_is_found(what):
    windows = hold_windows([_record_event("create", ["cp-1"], T0), _record_event("update", [], T30)])
    assert applied_while_held(windows, [("cp-1", what, _epoch(T10))]) == ("cp-1", what, _epoch(T10), _epoch(T0))


def test_reads_other_machines_and_writes_outside_the_hold_are_not():
    windows = hold_windows([_record_event("create", ["cp-1"], T10), _record_event("update", [], T20)])
    timeline = [("cp-1", "ApplyConfiguration", _epoch(T5)),  # before the hold
                ("cp-1", "Version", _epoch(T10) + 1),  # a read
                ("cp-2", "Upgrade", _epoch(T10) + 1),  # another machine
                ("cp-1", "ApplyConfiguration", _epoch(T30))]  # after adopt lifted it
    assert applied_while_held(windows, timeline) is None


# -- nothing deleted without a backup read back first ------------------------------------------------------------------
FOREIGN_RECORD = "sh.helm.release.v1.cilium.v1"
ADOPT_BACKUP = "ichor-cilium-prior.kube-system." + FOREIGN_RECORD


def _secret_event(verb, namespace, name, code=200):
    return {"verb": verb, "objectRef": {"resource": "secrets", "namespace": namespace, "name": name},
            "user": {"username": "lab-admin"}, "userAgent": "OpenAPI-Generator/37.0.2/python",
            "responseStatus": {"code": code}, "stageTimestamp": T10}


def _adopt_backups():
    return {ADOPT_BACKUP: {"metadata": {"name": ADOPT_BACKUP, "annotations": {
        BACKUP_OF: "kube-system/" + FOREIGN_RECORD}}}}


def _adopt_history(create_code, read=True):
    """Seed 2992: the faulted adopt killed as it created the backup (the API server answered 504 and stored it), the
    calm rerun finding the backup, comparing it and retiring the record."""
    events = [_secret_event("get", "ichor-system", ADOPT_BACKUP, code=404),
              _secret_event("create", "ichor-system", ADOPT_BACKUP, code=create_code)]
    if read:
        events.append(_secret_event("get", "ichor-system", ADOPT_BACKUP))
    return events + [_secret_event("delete", "kube-system", FOREIGN_RECORD)]


@pytest.mark.parametrize("create_code", [201, 504, 500, 409])
def test_a_delete_after_its_backup_was_written_or_maybe_written_and_read_back_passes(create_code):
    assert deletes_backed_up(_adopt_history(create_code), _adopt_backups()) == 1


@pytest.mark.parametrize("create_code,read,message", [
    (201, False, "without its backup .* read back after it was written"),
    (504, False, "without its backup .* read back after it was written"),
    (403, True, "before its backup .* was written"),
    (422, True, "before its backup .* was written"),
])
def test_a_delete_without_its_backup_landed_and_read_back_is_a_violation(create_code, read, message):
    with pytest.raises(Violation, match=message):
        deletes_backed_up(_adopt_history(create_code, read), _adopt_backups())
    with pytest.raises(Violation, match="with no backup of it"):
        deletes_backed_up(_adopt_history(create_code, read), {})


def _install_history(write_code, read=True):
    events = [_secret_event("create", NAMESPACE, snapshot.SNAPSHOT_NAME, code=write_code)]
    if read:
        events.append(_secret_event("get", NAMESPACE, snapshot.SNAPSHOT_NAME))
    event = _secret_event("delete", "default", "dropped")
    event["objectRef"]["resource"] = "configmaps"
    return events + [event]


@pytest.mark.parametrize("write_code", [201, 504, 409])
def test_the_installer_deletes_after_its_snapshot_was_written_or_maybe_written_and_read_back(write_code):
    assert check_backups(_install_history(write_code)) == 1


@pytest.mark.parametrize("write_code,read,message", [
    (201, False, "without reading it back"),
    (504, False, "without reading it back"),
    (403, True, "with no snapshot .* written before it"),
])
def test_the_installer_deleting_without_its_snapshot_landed_and_read_back_is_a_violation(write_code, read, message):
    with pytest.raises(Violation, match=message):
        check_backups(_install_history(write_code, read))
