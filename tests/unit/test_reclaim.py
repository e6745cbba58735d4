"""module_utils/reclaim without Ansible and without a lab: the decisions, texts and the flow on a fake world."""

import pytest

from tests import collection_path

collection_path.ensure()

from ansible_collections.maesh.ichor.plugins.module_utils.reclaim import audit, flow, policy, request  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim import inspection as reading  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim.errors import ReclaimError  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors  # noqa: E402

UUID = "4c4c4544-0042-3010-8050-b4c04f4e3332"
PEM = "-----BEGIN ED25519 PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIFAKEFAKEFAKE\n-----END ED25519 PRIVATE KEY-----"


def member(name, healthy=True, this=False):
    return {"id": name, "hostname": name, "peer": "10.0.0.%s:2380" % name[-1], "this_node": this,
            "healthy": healthy, "checked_by": "x"}


def inspection(role="worker", members=None, cps=None, cluster=("foreign", "fid"), volumes=None, stage="running"):
    insp = {"address": "10.0.0.7", "mode": "configured", "uuid": UUID, "hostname": "w-7", "role": role,
            "version": "v1.14.5", "stage": stage, "cluster": {"name": cluster[0], "id": cluster[1]},
            "members": [], "disks": [{"id": "sda", "dev_path": "/dev/sda", "size": "11 GB", "model": "", "serial": "",
                                      "system_disk": True}],
            "volumes": volumes if volumes is not None else [], "etcd": None}
    if role == "controlplane":
        insp["etcd"] = {"running": True, "members": members or [member("cp-1", this=True)], "error": ""}
    else:
        insp["control_planes"] = cps if cps is not None else [{"hostname": "cp-1", "address": "10.0.0.1",
                                                               "healthy": True, "checked_by": "x"}]
    return insp


MANAGED = {"name": "managed", "id": "mid", "record_id": None, "uuids": ["u-managed-1"], "machines": []}


def kinds(found):
    return [(r["kind"], r["overridden"]) for r in found]


# --- address, talosconfig, user ---------------------------------------------------------------

@pytest.mark.parametrize("bad", ["", "10.0.0.1,10.0.0.2", "10.0.0.1 10.0.0.2", "10.0.0.0/24", "10.0.0.1:99999"])
def test_exactly_one_address(bad):
    with pytest.raises(ReclaimError) as exc:
        reading.check_address(bad)
    assert exc.value.message.endswith("nothing was sent")


def test_one_address_with_port():
    assert reading.check_address(" 10.0.0.1:50001 ") == "10.0.0.1:50001"


def _talosconfig(names):
    import base64
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").decode()
    body = "".join("  %s:\n    endpoints: [10.0.0.1]\n    ca: %s\n" % (n, ca) for n in names)
    return "context: %s\ncontexts:\n%s" % (names[0], body)


def test_several_contexts_need_one_named():
    text = _talosconfig(["a", "b"])
    with pytest.raises(ReclaimError) as exc:
        reading.load_foreign(content=text)
    assert exc.value.message == ("the foreign talosconfig content holds several contexts (a, b); name the one to use "
                                 "with foreign_context; nothing was sent")
    assert reading.load_foreign(content=text, context="b").name == "b"
    assert reading.load_foreign(content=_talosconfig(["only"])).name == "only"


def test_no_foreign_talosconfig():
    with pytest.raises(ReclaimError) as exc:
        reading.load_foreign()
    assert "set TALOSCONFIG" in exc.value.message


# --- the one reset request ------------------------------------------------------------------------

@pytest.mark.parametrize("graceful", [True, False])
def test_reset_request(graceful):
    from ansible_collections.maesh.ichor.plugins.module_utils.talos import client
    cls = client.request_type("Reset")
    req = request.reset_request(cls, graceful)
    assert [(p.label, p.wipe) for p in req.system_partitions_to_wipe] == [("STATE", True), ("EPHEMERAL", True)]
    assert req.reboot is True and req.graceful is graceful
    assert req.mode == cls.SYSTEM_DISK and list(req.user_disks_to_wipe) == []


# --- volumes ------------------------------------------------------------------------------------

def test_user_volumes_and_encryption():
    items = [
        {"id": "STATE", "spec": {"type": "partition", "encryptionProvider": "luks2"}},
        {"id": "EPHEMERAL", "spec": {"type": "partition"}},
        {"id": "/var/log", "spec": {"type": "directory"}},
        {"id": "u-data", "spec": {"type": "partition", "location": "/dev/sdb1", "parentLocation": "/dev/sdb"}},
        {"id": "u-secret", "spec": {"type": "partition", "location": "/dev/sdb2", "parentLocation": "/dev/sdb",
                                    "encryptionProvider": "luks2"}},
        {"id": "u-none", "spec": {"type": "partition", "encryptionProvider": "none"}},
    ]
    vols = {v["id"]: v["encrypted"] for v in reading.user_volumes(items)}
    assert vols == {"u-data": False, "u-secret": True, "u-none": False}


# --- refusals -----------------------------------------------------------------------------------

def test_worker_of_a_healthy_cluster_no_refusal_graceful():
    insp = inspection()
    assert policy.refusals(insp, MANAGED) == []
    assert policy.cluster_healthy(insp) is True


def test_worker_of_a_dead_cluster_needs_force_ungraceful():
    insp = inspection(cps=[{"hostname": "cp-1", "address": "a", "healthy": False, "checked_by": "x"}])
    found = policy.refusals(insp, MANAGED)
    assert kinds(found) == [("graceful", False)]
    assert "pass force_ungraceful" in found[0]["text"]
    assert policy.refusals(insp, MANAGED, force_ungraceful=True) == []


def test_managed_cluster_by_cluster_id_points_at_add_machine():
    found = policy.refusals(inspection(cluster=("managed", "mid")), MANAGED, force=True, confirm_cluster="managed",
                            force_ungraceful=True)
    assert kinds(found) == [("managed", False)]
    assert found[0]["text"].startswith("node %s is already an Ichor machine: it carries the CAs" % UUID)
    assert "add-machine" in found[0]["text"]


def test_managed_cluster_by_uuid_and_record():
    live = dict(MANAGED, uuids=[UUID])
    assert policy.refusals(inspection(), live)[0]["text"] == \
        'node %s is already an Ichor machine (of cluster "managed"); nothing was sent' % UUID
    joined = dict(MANAGED, machines=[{"uuid": UUID, "state": "approved"}])
    assert kinds(policy.refusals(inspection(), joined)) == [("managed", False)]
    # ADR 0128: a stale pending entry is not an Ichor machine
    pending = dict(MANAGED, machines=[{"uuid": UUID, "state": "pending"}])
    assert policy.refusals(inspection(), pending) == []


def test_record_cluster_id_counts_too():
    managed = dict(MANAGED, id="other", record_id="fid")
    assert kinds(policy.refusals(inspection(), managed)) == [("managed", False)]


def test_quorum_two_members():
    insp = inspection("controlplane", [member("cp-1", this=True), member("cp-2")])
    found = policy.refusals(insp, MANAGED)
    assert kinds(found) == [("quorum", False)]
    assert found[0]["text"].startswith('cluster "foreign" has 2 etcd members; removing one loses quorum; '
                                       'pass force to override')
    forced = policy.refusals(insp, MANAGED, force=True, confirm_cluster="foreign")
    assert kinds(forced) == [("quorum", True)]
    assert policy.cluster_healthy(insp) is True  # 2 healthy members can let one leave gracefully


def test_three_members_healthy_or_not():
    healthy = inspection("controlplane", [member("cp-1", this=True), member("cp-2"), member("cp-3")])
    assert policy.refusals(healthy, MANAGED) == []
    one_down = inspection("controlplane", [member("cp-1", this=True), member("cp-2"), member("cp-3", False)])
    assert kinds(policy.refusals(one_down, MANAGED)) == [("quorum", False)]
    assert policy.cluster_healthy(one_down) is True


def test_last_control_plane():
    insp = inspection("controlplane")
    found = policy.refusals(insp, MANAGED)
    assert kinds(found) == [("last", False), ("graceful", False)]
    assert found[0]["text"].startswith('this is the last control plane of cluster "foreign"; pass force to override')
    assert kinds(policy.refusals(insp, MANAGED, force=True, confirm_cluster="foreign", force_ungraceful=True)) == \
        [("last", True)]
    assert kinds(policy.refusals(insp, MANAGED, force=True, confirm_cluster="FOREIGN", force_ungraceful=True)) == \
        [("last", False)]


def test_confirm_cluster_texts():
    found = policy.refusals(inspection("controlplane"), MANAGED, force=True, force_ungraceful=True)
    assert "typed as confirm_cluster" in policy.confirm_cluster_error(found, True, None, "foreign")
    assert policy.confirm_cluster_error(found, True, "x", "foreign") == policy.CLUSTER_MISMATCH
    assert policy.confirm_cluster_error(found, False, None, "foreign") is None


def test_busy_machine_refused():
    assert kinds(policy.refusals(inspection(stage="resetting"), MANAGED)) == [("busy", False)]


# --- consent ------------------------------------------------------------------------------------

def test_consent_is_the_exact_uuid():
    policy.consent(UUID, UUID)
    for typed in (UUID.upper(), " " + UUID, UUID + "\n", "yes", "true"):
        with pytest.raises(ReclaimError) as exc:
            policy.consent(typed, UUID)
        assert exc.value.message == "the typed UUID does not match the node's UUID; nothing was sent"
    for typed in (None, ""):
        with pytest.raises(ReclaimError) as exc:
            policy.consent(typed, UUID)
        assert "confirm_uuid is required" in exc.value.message


# --- the wait and the record ------------------------------------------------------------------------

class Clock:
    def __init__(self):
        self.now = 0.0

    def time(self):
        return self.now

    def sleep(self, seconds):
        self.now += max(seconds, 0.01)


def test_wait_success_after_a_few_probes():
    clock = Clock()
    answers = iter([errors.TalosUnavailable("down"), ("other-uuid", "maintenance"), (UUID, "maintenance")])

    def probe():
        item = next(answers)
        if isinstance(item, Exception):
            raise item
        return item
    assert flow.wait_for_maintenance(probe, UUID, 600, clock=clock) is None


def test_wait_deadline_returns_the_last_probe():
    clock = Clock()

    def probe():
        raise errors.unreachable("10.0.0.7")
    last = flow.wait_for_maintenance(probe, UUID, 5, clock=clock)
    assert last.startswith("10.0.0.7: connection failed")
    assert 5 <= clock.now <= 6


def test_did_not_return_texts():
    message, hint = policy.did_not_return("10.0.0.7", UUID, 600, "no answer")
    assert message.startswith("the reset was sent but the machine did not come back at 10.0.0.7")
    assert "10.0.0.7 did not return to maintenance mode with UUID %s" % UUID in message
    assert hint.startswith("The machine may have taken a new address from DHCP after the reboot. Find it (its UUID "
                           "is %s)" % UUID)


def test_add_pending():
    data = {"machines": [{"uuid": "x", "state": "approved"},
                         {"uuid": UUID, "state": "pending", "address": "old", "at": "t0"}]}
    flow.add_pending(data, UUID, "new", "t1")
    assert data["machines"] == [{"uuid": "x", "state": "approved"}, flow.pending_entry(UUID, "new", "t1")]
    flow.add_pending(data, UUID, "new", "t2")  # the same entry is kept as it is
    assert data["machines"][-1]["at"] == "t1"
    empty = {}
    flow.add_pending(empty, UUID, "a", "t")
    assert empty == {"machines": [{"uuid": UUID, "address": "a", "state": "pending", "source": "reclaim", "at": "t"}]}


# --- the flow on a fake world -----------------------------------------------------------------------

class FakeIO:
    def __init__(self, insp=None, maintenance=None, back=True, managed=None, inspect_error=None):
        self.insp = insp
        self.maint = maintenance
        self.back = back
        self.managed_ = managed or dict(MANAGED)
        self.inspect_error = inspect_error
        self.resets = []
        self.registered = []
        self.reset_done = False
        self.managed_uuid = None

    def managed(self):
        if isinstance(self.managed_, Exception):
            raise self.managed_
        return self.managed_

    def inspect(self):
        if self.inspect_error is not None:
            raise self.inspect_error
        if self.insp is None:
            raise errors.tls_error("10.0.0.7", "CERTIFICATE_VERIFY_FAILED")
        return self.insp

    def managed_identity(self):
        if self.managed_uuid is None:
            raise errors.tls_error("10.0.0.7", "CERTIFICATE_VERIFY_FAILED")
        return self.managed_uuid

    def maintenance(self):
        if self.maint is None:
            raise errors.unreachable("10.0.0.7")
        return self.maint

    def send_reset(self, graceful):
        self.resets.append(graceful)

    def probe(self):
        if self.back:
            return UUID, "maintenance"
        raise errors.unreachable("10.0.0.7")

    def register(self, uuid, node, at):
        self.registered.append((uuid, node))
        return True


def opts(**kw):
    kw.setdefault("user", "alice")
    return flow.Options("10.0.0.7", **kw)


def test_check_mode_sends_nothing_and_plans():
    io = FakeIO(inspection(volumes=[{"id": "u-s", "location": "/dev/sdb1", "parent": "/dev/sdb", "encrypted": True}]))
    result = flow.run(opts(), io, check_mode=True)
    assert io.resets == [] and io.registered == []
    assert result["changed"] is True and result["reset_sent"] is False
    text = "\n".join(result["plan"])
    assert 'cluster "foreign" (ID fid) loses this machine' in text
    assert "encrypted user volumes whose data becomes unreadable" in text
    assert "would send the reset: STATE and EPHEMERAL, reboot, graceful: true" in text


def test_success_and_audit():
    io = FakeIO(inspection())
    result = flow.run(opts(confirm_uuid=UUID), io, clock=lambda: 0)
    assert io.resets == [True] and io.registered == [(UUID, "10.0.0.7")]
    assert result["changed"] is True
    assert result["audit"] == [
        "1970-01-01T00:00:00Z ReclaimRequested: alice requested the reclaim of 10.0.0.7",
        '1970-01-01T00:00:00Z ReclaimInspected: 10.0.0.7 is UUID %s (w-7, worker) of cluster "foreign" (ID fid)'
        % UUID,
        "1970-01-01T00:00:00Z ReclaimConfirmed: alice confirmed UUID %s" % UUID,
        "1970-01-01T00:00:00Z ReclaimReset: reset sent to 10.0.0.7 (STATE and EPHEMERAL, reboot), graceful: true",
        '1970-01-01T00:00:00Z ReclaimCompleted: 10.0.0.7 is in maintenance mode with UUID %s; registered as a '
        'pending machine of cluster "managed"' % UUID,
    ]


def test_mismatch_sends_nothing():
    io = FakeIO(inspection())
    with pytest.raises(ReclaimError) as exc:
        flow.run(opts(confirm_uuid="wrong"), io)
    assert exc.value.message == policy.MISMATCH and exc.value.sent is False
    assert io.resets == [] and io.registered == []
    assert exc.value.result["audit"][-1].split(" ", 2)[1] == "ReclaimFailed:"


def test_refusal_sends_nothing_even_with_the_right_uuid():
    io = FakeIO(inspection(cluster=("managed", "mid")))
    with pytest.raises(ReclaimError) as exc:
        flow.run(opts(confirm_uuid=UUID, force=True, confirm_cluster="managed", force_ungraceful=True), io)
    assert "is already an Ichor machine" in exc.value.message
    assert io.resets == []


def test_the_managed_cluster_is_always_read():
    io = FakeIO(inspection(), managed=errors.unreachable("10.1.0.1"))
    with pytest.raises(ReclaimError) as exc:
        flow.run(opts(confirm_uuid=UUID), io)
    assert exc.value.message.startswith("cannot read the managed cluster")
    assert io.resets == []
    io = FakeIO(inspection())
    with pytest.raises(ReclaimError) as exc:
        flow.run(opts(confirm_uuid=UUID, cluster_name="prod"), io)
    assert 'reaches cluster "managed", not "prod"' in exc.value.message
    assert io.resets == []


def test_machine_does_not_come_back():
    io = FakeIO(inspection(), back=False)
    with pytest.raises(ReclaimError) as exc:
        flow.run(opts(confirm_uuid=UUID, wait_timeout=0), io)
    assert exc.value.sent is True and "may have taken a new address from DHCP" in exc.value.hint
    assert io.registered == []
    names = [line.split(" ", 2)[1] for line in exc.value.result["audit"]]
    assert names[-3:] == ["ReclaimReset:", "ReclaimExpired:", "ReclaimFailed:"]
    assert exc.value.result["changed"] is True


def test_already_in_maintenance_no_second_reset():
    io = FakeIO(None, maintenance=(UUID, "maintenance"))
    result = flow.run(opts(confirm_uuid=UUID), io)
    assert io.resets == [] and result["reset_sent"] is False
    assert io.registered == [(UUID, "10.0.0.7")]
    assert "no reset sent" in result["audit"][-1]
    # already recorded: nothing changes
    io = FakeIO(None, maintenance=(UUID, "maintenance"),
                managed=dict(MANAGED, machines=[flow.pending_entry(UUID, "10.0.0.7", "t")]))
    planned = flow.run(opts(), io, check_mode=True)
    assert planned["changed"] is False and io.registered == []


def test_maintenance_with_wrong_uuid_sends_nothing():
    io = FakeIO(None, maintenance=("other", "maintenance"))
    with pytest.raises(ReclaimError) as exc:
        flow.run(opts(confirm_uuid=UUID), io)
    assert exc.value.message == policy.MISMATCH


def test_unreachable_machine():
    io = FakeIO(None, maintenance=None)
    with pytest.raises(ReclaimError) as exc:
        flow.run(opts(confirm_uuid=UUID), io)
    assert exc.value.message.startswith("cannot inspect 10.0.0.7 with the foreign talosconfig: 10.0.0.7: TLS:")
    assert io.resets == []


def test_no_credential_in_errors_or_audit():
    io = FakeIO(inspect_error=errors.TalosCallError("10.0.0.7: broken: " + PEM))
    with pytest.raises(ReclaimError) as exc:
        flow.run(opts(confirm_uuid=UUID), io)
    everything = exc.value.message + "\n".join(exc.value.result["audit"])
    assert "FAKEFAKE" not in everything and "BEGIN" not in everything
    trail = audit.Audit("u", "a", clock=lambda: 0)
    trail.failed("x " + PEM)
    assert "FAKEFAKE" not in trail.lines[0]


def test_machine_that_takes_the_managed_credential_is_refused():
    io = FakeIO(None, maintenance=None)
    io.managed_uuid = "u-managed-1"
    with pytest.raises(ReclaimError) as exc:
        flow.run(opts(confirm_uuid="u-managed-1"), io)
    assert exc.value.message == 'node u-managed-1 is already an Ichor machine (of cluster "managed"); nothing was sent'
    io = FakeIO(None, maintenance=None)
    io.managed_uuid = "u-unknown"
    with pytest.raises(ReclaimError) as exc:
        flow.run(opts(confirm_uuid="u-unknown"), io)
    assert "add-machine" in exc.value.message
    assert io.resets == []
