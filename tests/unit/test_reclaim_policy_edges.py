"""reclaim.policy, the edges mutation testing found untested (issue 43, scripts/mutation): the majority thresholds at
the count where they decide, a pending entry without a state, the confirm_cluster refusals, the plan and the seed's
texts in full, how a machine's value and a duration are shown."""

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.reclaim import policy
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim.errors import ReclaimError
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim.request import REQUEST_TEXT

from tests.unit.test_reclaim import MANAGED, UUID, inspection, member

HEAD = "reclaim 10.0.0.7: w-7, UUID %s, %s, Talos v1.14.5, stage running"
FORCE = "pass force to override (with confirm_cluster set to the cluster name)"
UNGRACEFUL = ", so a graceful reset would fail; pass force_ungraceful to reset without leaving etcd or draining"


def _cp(healthy, total):
    return inspection("controlplane", members=[member("cp-%d" % i, healthy=i <= healthy, this=i == 1)
                                               for i in range(1, total + 1)])


def _worker(healthy, total):
    return inspection(cps=[{"hostname": "cp-%d" % i, "address": "10.0.0.%d" % i, "healthy": i <= healthy,
                            "checked_by": "x"} for i in range(1, total + 1)])


def test_a_majority_is_more_than_half_at_the_count_where_it_decides():
    assert policy.cluster_healthy(_cp(3, 5)) and not policy.cluster_healthy(_cp(2, 5))
    assert policy.cluster_healthy(_worker(3, 4)) and not policy.cluster_healthy(_worker(2, 4))


def test_an_entry_without_a_state_is_pending_and_not_an_ichor_machine():
    assert policy.managed_refusal(inspection(), dict(MANAGED, uuids=[], machines=[{"uuid": UUID}])) is None
    assert policy.managed_refusal(inspection(), dict(MANAGED, uuids=[], machines=[{"uuid": UUID, "state": "joined"}]))


def test_the_managed_refusals_in_full():
    assert policy.managed_refusal({"uuid": "U-1", "cluster": {"id": "x"}}, {"uuids": ["U-1"]}) == \
        'node U-1 is already an Ichor machine (of cluster "?"); nothing was sent'
    assert policy.managed_refusal({"uuid": "U-1", "cluster": {"id": "mid"}}, {"name": "managed", "id": "mid"}) == (
        'node U-1 is already an Ichor machine: it carries the CAs of cluster "managed" (same cluster ID) but is not '
        "registered; add it with adopt's add-machine step (list it in the inventory and run maesh.ichor.adopt) instead "
        "of reclaiming it; nothing was sent")


def test_confirm_cluster_is_asked_for_an_overridable_refusal_only():
    graceful = [{"kind": "graceful", "overridden": False, "text": "t"}]
    assert policy.confirm_cluster_error(graceful, True, None, "foreign") is None
    for kind in ("quorum", "last"):
        found = [{"kind": kind, "overridden": False, "text": "t"}]
        for typed in (None, ""):
            assert policy.confirm_cluster_error(found, True, typed, "foreign") == (
                'force needs the name of the cluster that loses the node typed as confirm_cluster ("foreign"); '
                "nothing was sent")
        assert policy.confirm_cluster_error(found, True, "other", "foreign") == policy.CLUSTER_MISMATCH
        assert policy.confirm_cluster_error(found, False, "other", "foreign") is None


def test_consent_without_a_uuid_in_full():
    with pytest.raises(ReclaimError) as info:
        policy.consent("", UUID)
    assert str(info.value) == \
        "confirm_uuid is required: type the node's UUID (shown by a --check run); nothing was sent"


def test_how_a_machines_value_and_a_duration_are_shown():
    assert policy.shown(1234) == "1234" and policy.shown("a" * 128) == "a" * 128
    assert policy.shown("a" * 129) == "(129 characters, not shown)"
    assert policy.shown("a\nb") == "(3 characters, not shown)"
    assert policy.quoted(None) == '"?"' and policy.quoted("c") == '"c"'
    assert [policy.seconds(v) for v in (600.0, 2.5, 1000000, 2.5e-05)] == ["600", "2.5", "1000000", "2.5e-05"]


def test_the_refusals_in_full():
    quorum = 'cluster "foreign" has 3 etcd members; removing one loses quorum; ' + FORCE
    assert policy.refusals(_cp(2, 3), MANAGED) == [{"kind": "quorum", "overridden": False, "text": quorum}]
    assert policy.refusals(inspection(stage="rebooting", cps=[]), MANAGED) == [
        {"kind": "busy", "overridden": False, "text": "10.0.0.7 is rebooting; nothing was sent (rerun when it has "
                                                      "settled)"},
        {"kind": "graceful", "overridden": False, "text": 'cluster "foreign" is not healthy or not reachable from the '
                                                          "node (no control plane answers)" + UNGRACEFUL}]
    assert policy.refusals(_cp(1, 1), MANAGED, force=True, confirm_cluster="foreign") == [
        {"kind": "last", "overridden": True, "text": 'this is the last control plane of cluster "foreign"; ' + FORCE},
        {"kind": "graceful", "overridden": False, "text": "the only etcd member cannot leave etcd" + UNGRACEFUL}]
    stopped = _cp(1, 2)
    stopped["etcd"]["running"] = False
    assert policy.refusals(stopped, MANAGED) == [
        {"kind": "graceful", "overridden": False, "text": 'cluster "foreign" is not healthy or not reachable from the '
                                                          "node (etcd)" + UNGRACEFUL}]


def test_the_plan_of_a_refused_control_plane_in_full():
    insp = inspection("controlplane", members=[member("cp-1", this=True), member("cp-2"), member("cp-3", healthy=False)],
                      volumes=[{"id": "data", "location": "/var/mnt/data", "parent": "sdb", "encrypted": True},
                               {"id": "logs", "location": "/var/mnt/logs", "parent": "sdb", "encrypted": False}])
    insp["disks"].append({"id": "sdb", "dev_path": "/dev/sdb", "size": "20 GB", "model": "", "serial": "",
                          "system_disk": False})
    found = policy.refusals(insp, MANAGED)
    lines = [HEAD % (UUID, "controlplane"), 'cluster "foreign" (ID fid) loses this machine',
             "disks: /dev/sda 11 GB (system), /dev/sdb 20 GB",
             "user volumes left on disk, orphaned (not wiped): data (/var/mnt/data on sdb), logs (/var/mnt/logs on sdb)",
             "encrypted user volumes whose data becomes unreadable (their keys derived from STATE or META are gone): "
             "data (/var/mnt/data)",
             "etcd: 3 members: cp-1 (this node, healthy, x), cp-2 (healthy, x), cp-3 (unhealthy, x)",
             'refused: cluster "foreign" has 3 etcd members; removing one loses quorum; ' + FORCE]
    assert policy.plan_lines(insp, found, False, MANAGED, True, 600, True) == lines + ["nothing would be sent"]
    assert policy.plan_lines(insp, found, False, MANAGED, True, 600, False) == lines + ["nothing was sent"]


def test_the_plan_of_a_reset_sent_in_full():
    common = [HEAD % (UUID, "worker"), 'cluster "foreign" (ID fid) loses this machine', "disks: /dev/sda 11 GB (system)",
              "user volumes left on disk, orphaned (not wiped): none", "control planes of the cluster: cp-1 10.0.0.1 (x)"]
    assert policy.plan_lines(inspection(), [], True, MANAGED, True, 2.5, True) == common + [
        "would send the reset: %s, graceful: true" % REQUEST_TEXT,
        'then waits up to 2.5s for 10.0.0.7 to answer in maintenance mode with UUID %s and registers it as a pending '
        'machine of cluster "managed"' % UUID]
    assert policy.plan_lines(inspection(), [], False, MANAGED, False, 600, False) == common + [
        "sends the reset: %s, graceful: false" % REQUEST_TEXT,
        "then returns without waiting (wait: false) and registers nothing; once 10.0.0.7 answers in maintenance mode "
        'with UUID %s, a rerun with the same confirm_uuid registers it as a pending machine of cluster "managed" '
        "without a second reset" % UUID]


def test_the_plan_of_a_machine_that_says_little_in_full():
    insp = inspection(cps=[])
    insp.update(etcd={"members": [], "error": ""}, cluster={"name": None, "id": None}, hostname=None, role=None,
                version=None, stage=None, disks=[])
    overridden = [{"kind": "last", "overridden": True, "text": "T"}]
    assert policy.plan_lines(insp, overridden, False, {}, True, 10, False) == [
        "reclaim 10.0.0.7: ?, UUID %s, unknown role, Talos ?, stage ?" % UUID, 'cluster "?" (ID ?) loses this machine',
        "user volumes left on disk, orphaned (not wiped): none", "etcd: not answering (unknown)",
        "control planes of the cluster: none known", "refusal overridden: T",
        "sends the reset: %s, graceful: false" % REQUEST_TEXT,
        'then waits up to 10s for 10.0.0.7 to answer in maintenance mode with UUID %s and registers it as a pending '
        'machine of cluster "?"' % UUID]


def test_the_seeds_c7_texts_in_full():
    hint = ("The machine may have taken a new address from DHCP after the reboot. Find it (its UUID is U-1) and add it "
            "to a cluster's discovery addresses (the inventory of the cluster that joins it).")
    assert policy.did_not_return("10.0.0.9", "U-1", 600.0, "connection refused") == (
        "the reset was sent but the machine did not come back at 10.0.0.9: waiting for 10.0.0.9 to return to "
        "maintenance mode: deadline of 600s exceeded (last probe: connection refused). 10.0.0.9 did not return to "
        "maintenance mode with UUID U-1. " + hint, hint)


def test_force_is_off_unless_given_and_a_nameless_cluster_is_named_by_a_question_mark():
    assert policy.refusals(_cp(1, 1), MANAGED, confirm_cluster="foreign")[0] == {
        "kind": "last", "overridden": False, "text": 'this is the last control plane of cluster "foreign"; ' + FORCE}
    nameless = _cp(1, 1)
    nameless["cluster"]["name"] = None
    assert policy.refusals(nameless, MANAGED)[0]["text"] == 'this is the last control plane of cluster "?"; ' + FORCE


def test_two_members_one_unhealthy_is_an_unhealthy_cluster_not_the_only_member():
    assert policy.refusals(_cp(1, 2), MANAGED)[1]["text"] == \
        'cluster "foreign" is not healthy or not reachable from the node (etcd)' + UNGRACEFUL


def test_the_plan_names_every_volume_member_and_control_plane_and_etcds_error():
    volumes = [{"id": v, "location": "/var/mnt/" + v, "parent": "sdb", "encrypted": True} for v in ("a", "b")]
    insp = inspection("controlplane", volumes=volumes, members=[member("cp-1", this=True)])
    insp["etcd"]["members"][0]["hostname"] = ""
    lines = policy.plan_lines(insp, [], False, MANAGED, True, 1, False)
    assert lines[4] == ("encrypted user volumes whose data becomes unreadable (their keys derived from STATE or META are "
                        "gone): a (/var/mnt/a), b (/var/mnt/b)")
    assert lines[5] == "etcd: 1 members: cp-1 (this node, healthy, x)"
    insp["etcd"] = {"members": [], "error": "deadline exceeded"}
    assert "etcd: not answering (deadline exceeded)" in policy.plan_lines(insp, [], False, MANAGED, True, 1, False)
    worker = inspection(cps=[{"hostname": "", "address": "10.0.0.1", "healthy": True, "checked_by": "x"},
                             {"hostname": "cp-2", "address": "10.0.0.2", "healthy": True, "checked_by": "y"}])
    assert "control planes of the cluster: ? 10.0.0.1 (x), cp-2 10.0.0.2 (y)" in \
        policy.plan_lines(worker, [], False, MANAGED, True, 1, False)
