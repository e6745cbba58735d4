"""The talos_reset module's backend (module_utils/reclaim: live.reclaim, flow, the wait) on fake I/O, fake
connections and a fake clock: the managed-cluster refusal, the options, wait: false, the wait on common.poll,
the registration's retries and what is an expected failure."""

import json

import pytest

from tests import collection_path

collection_path.ensure()

from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import Conflict, KubeError  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim import flow, live, policy  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim import inspection as reading  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim.errors import ReclaimError  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors  # noqa: E402
from tests.unit.test_reclaim import UUID, FakeIO, inspection  # noqa: E402

PARAMS = dict(node="10.0.0.7", confirm_uuid=None, force=False, confirm_cluster=None, force_ungraceful=False,
              wait=True, wait_timeout=600.0, cluster_name=None, requested_by="alice", foreign_talosconfig=None,
              foreign_talosconfig_content=None, foreign_context=None, talosconfig="/managed/talosconfig",
              talosconfig_content=None, context=None, endpoint=None, kubeconfig="/managed/kubeconfig",
              kubeconfig_content=None, kube_context=None, timeout=30.0)


def params(**kw):
    return dict(PARAMS, **kw)


class FakeConn:
    """The module's connections: what the backend asked of them."""

    def __init__(self, params, talos=None, kube=None):
        self.params = params
        self.talos_client = talos
        self.kube_client = kube
        self.asked = []

    def has_kube(self):
        return bool(self.params.get("kubeconfig") or self.params.get("kubeconfig_content"))

    def talos(self, maintenance=False, dial_only=None):
        self.asked.append("talos")
        return self.talos_client

    def kube(self):
        self.asked.append("kube")
        if isinstance(self.kube_client, Exception):
            raise self.kube_client
        return self.kube_client


class RecordingIO(FakeIO):
    """FakeIO that also counts probes and says whether it was closed."""

    def __init__(self, *args, **kwargs):
        FakeIO.__init__(self, *args, **kwargs)
        self.probes = 0
        self.closed = False
        self.register_error = None

    def probe(self):
        self.probes += 1
        return FakeIO.probe(self)

    def register(self, uuid, node, at):
        if self.register_error is not None:
            raise self.register_error
        return FakeIO.register(self, uuid, node, at)

    def close(self):
        self.closed = True


class Clock:
    """common.poll's clock: time passes only when the wait sleeps."""

    def __init__(self):
        self.now = 0.0
        self.slept = []

    def time(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


def names(audit_lines):
    return [line.split(" ", 2)[1].rstrip(":") for line in audit_lines]


# --- the errors ---------------------------------------------------------------------------------

def test_reclaim_error_is_an_expected_failure_with_its_result():
    exc = ReclaimError("x -----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY----- y", sent=True,
                       hint="h", result={"plan": []})
    assert isinstance(exc, IchorError)
    assert exc.message == "x <redacted> y" and exc.sent is True and exc.hint == "h" and exc.result == {"plan": []}


# --- the module's entry ---------------------------------------------------------------------------

@pytest.mark.parametrize("missing", [dict(talosconfig=None), dict(kubeconfig=None)])
def test_the_managed_cluster_is_required(missing):
    p = params(**missing)
    conn = FakeConn(p)
    io = RecordingIO(inspection())
    with pytest.raises(ReclaimError) as exc:
        live.reclaim(p, conn, False, io=io)
    assert exc.value.message == policy.MANAGED_REQUIRED
    assert exc.value.result == flow.empty_result()
    assert conn.asked == [] and io.resets == [] and io.registered == []


def test_the_managed_cluster_may_be_given_as_content():
    p = params(talosconfig=None, talosconfig_content="...", kubeconfig=None, kubeconfig_content="...")
    io = RecordingIO(inspection())
    result = live.reclaim(p, FakeConn(p), True, io=io)
    assert result["reset_sent"] is False and io.closed


def test_options_from_the_module_params():
    opts = live.options(params(node=" 10.0.0.7 ", wait=False, wait_timeout=30.0, cluster_name="prod",
                               confirm_uuid=UUID, force=True, confirm_cluster="old", force_ungraceful=True))
    assert (opts.node, opts.wait, opts.wait_timeout, opts.cluster_name) == (" 10.0.0.7 ", False, 30.0, "prod")
    assert (opts.confirm_uuid, opts.force, opts.confirm_cluster, opts.force_ungraceful) == (UUID, True, "old", True)
    assert opts.user == "alice"
    assert live.options(params(requested_by=None)).user  # the local user


def test_success_returns_the_diff_and_closes_the_io():
    io = RecordingIO(inspection())
    result = live.reclaim(params(confirm_uuid=UUID), FakeConn(PARAMS), False, io=io, clock=lambda: 0)
    assert io.closed and io.resets == [True] and io.registered == [(UUID, "10.0.0.7")]
    assert result["diff"] == {
        "before": {"address": "10.0.0.7", "mode": "configured", "uuid": UUID, "cluster": "foreign"},
        "after": {"address": "10.0.0.7", "mode": "maintenance", "uuid": UUID,
                  "record": {"cluster": "managed", "uuid": UUID, "address": "10.0.0.7", "state": "pending"}}}


def test_a_refusal_carries_the_diff_too():
    io = RecordingIO(inspection())
    with pytest.raises(ReclaimError) as exc:
        live.reclaim(params(confirm_uuid="wrong"), FakeConn(PARAMS), False, io=io)
    assert exc.value.message == policy.MISMATCH and io.closed
    assert exc.value.result["diff"]["before"] == exc.value.result["diff"]["after"]
    json.dumps(exc.value.result)  # what the module returns is plain data


def test_wait_timeout_below_zero_is_refused():
    io = RecordingIO(inspection())
    with pytest.raises(ReclaimError) as exc:
        live.reclaim(params(confirm_uuid=UUID, wait_timeout=-1.0), FakeConn(PARAMS), False, io=io)
    assert exc.value.message == "wait_timeout must be 0 or more seconds; nothing was sent"
    assert io.resets == []


# --- wait: false --------------------------------------------------------------------------------------

def test_wait_false_sends_the_reset_and_registers_nothing():
    io = RecordingIO(inspection())
    result = flow.run(flow.Options("10.0.0.7", confirm_uuid=UUID, wait=False, user="alice"), io)
    assert io.resets == [True] and io.probes == 0 and io.registered == []
    assert result["changed"] is True and result["reset_sent"] is True and result["registered"] is None
    assert names(result["audit"]) == ["ReclaimRequested", "ReclaimInspected", "ReclaimConfirmed", "ReclaimReset"]
    assert result["plan"][-1].startswith("then returns without waiting (wait: false) and registers nothing")


def test_wait_false_check_mode_says_what_it_leaves_to_do():
    io = RecordingIO(inspection())
    result = flow.run(flow.Options("10.0.0.7", wait=False, user="alice"), io, check_mode=True)
    assert io.resets == [] and result["changed"] is True
    assert policy.not_waiting("10.0.0.7", UUID, "managed") in result["plan"]
    assert not any(line.startswith("then waits up to") for line in result["plan"])


def test_wait_false_then_a_rerun_registers_without_a_second_reset():
    # the rerun finds the machine in maintenance mode: registration needs no wait, whatever `wait` says
    io = RecordingIO(None, maintenance=(UUID, "maintenance"))
    result = flow.run(flow.Options("10.0.0.7", confirm_uuid=UUID, wait=False, user="alice"), io)
    assert io.resets == [] and io.registered == [(UUID, "10.0.0.7")]
    assert result["registered"]["state"] == "pending" and "no reset sent" in result["audit"][-1]


# --- the wait, on common.poll ------------------------------------------------------------------------

def test_the_wait_polls_every_half_second_until_the_machine_is_back():
    clock = Clock()
    answers = iter([errors.unreachable("10.0.0.7"), (UUID, "rebooting"), (UUID, "maintenance")])

    def probe():
        item = next(answers)
        if isinstance(item, Exception):
            raise item
        return item
    assert flow.wait_for_maintenance(probe, UUID, 600, clock=clock) is None
    assert clock.slept == [0.5, 0.5]


def test_the_wait_reports_the_last_probe_at_its_deadline():
    clock = Clock()
    assert flow.wait_for_maintenance(lambda: (UUID, "booting"), UUID, 2, clock=clock) == \
        "UUID %s answers but in stage booting" % UUID
    assert clock.now == 2
    assert flow.wait_for_maintenance(lambda: ("other", "maintenance"), UUID, 0, clock=clock) == \
        "a machine with UUID other answers there"


def test_run_waits_with_the_given_clock():
    clock = Clock()
    io = RecordingIO(inspection(), back=False)
    with pytest.raises(ReclaimError) as exc:
        flow.run(flow.Options("10.0.0.7", confirm_uuid=UUID, wait_timeout=600, user="alice"), io, wait_clock=clock)
    assert clock.now == 600 and io.probes == 1201
    assert "deadline of 600s exceeded" in exc.value.message and exc.value.sent is True
    assert names(exc.value.result["audit"])[-2:] == ["ReclaimExpired", "ReclaimFailed"]


# --- registration and failures -------------------------------------------------------------------------

def test_a_record_that_cannot_be_written_is_a_clean_failure_after_the_reset():
    io = RecordingIO(inspection())
    io.register_error = Conflict("the cluster record changed since this run read it; rerun")
    with pytest.raises(ReclaimError) as exc:
        flow.run(flow.Options("10.0.0.7", confirm_uuid=UUID, user="alice"), io)
    assert exc.value.message == ('10.0.0.7 is in maintenance mode with UUID %s, but recording it in cluster '
                                 '"managed"\'s record failed: the cluster record changed since this run read it; '
                                 'rerun' % UUID)
    assert exc.value.sent is True and exc.value.result["registered"] is None


def test_a_bug_is_not_turned_into_a_one_liner():
    io = RecordingIO(inspection())
    io.register_error = KeyError("machines")
    with pytest.raises(KeyError):
        flow.run(flow.Options("10.0.0.7", confirm_uuid=UUID, user="alice"), io)


def test_an_unusable_managed_connection_fails_with_the_audit():
    io = RecordingIO(inspection(), managed=IchorError("protobuf and PyYAML are required"))
    with pytest.raises(ReclaimError) as exc:
        flow.run(flow.Options("10.0.0.7", confirm_uuid=UUID, user="alice"), io)
    assert exc.value.message == "protobuf and PyYAML are required"
    assert names(exc.value.result["audit"]) == ["ReclaimRequested", "ReclaimFailed"]


# --- LiveIO on fake connections ------------------------------------------------------------------------

class FakeKube:
    """Just enough of KubeClient for the cluster record: the ConfigMap, with a number of conflicts first."""

    def __init__(self, conflicts=0):
        self.conflicts = conflicts
        self.objects = {}
        self.writes = 0

    def get(self, api_version, kind, name, namespace=None):
        if kind == "Namespace":
            return {"metadata": {"name": name}}
        return self.objects.get(name)

    def create(self, obj, dry_run=False):
        self._write(obj)

    def replace(self, obj, dry_run=False):
        self._write(obj)

    def _write(self, obj):
        self.writes += 1
        if self.conflicts:
            self.conflicts -= 1
            raise Conflict("409", status=409)
        obj = dict(obj, metadata=dict(obj["metadata"], resourceVersion=str(self.writes)))
        self.objects[obj["metadata"]["name"]] = obj


def test_registration_retries_a_conflict_twice():
    kube = FakeKube(conflicts=2)
    io = live.LiveIO(FakeConn(PARAMS, talos=object(), kube=kube), "10.0.0.7", None, None)
    assert io.register(UUID, "10.0.0.7", "t") is True
    record = json.loads(kube.objects["ichor-cluster"]["data"]["record"])
    assert record["machines"] == [flow.pending_entry(UUID, "10.0.0.7", "t")]
    assert io.register(UUID, "10.0.0.7", "t2") is False  # already recorded
    with pytest.raises(Conflict):
        live.LiveIO(FakeConn(PARAMS, talos=object(), kube=FakeKube(conflicts=3)), "10.0.0.7", None, None).register(
            UUID, "10.0.0.7", "t")


def test_an_unusable_kubeconfig_is_a_refusal():
    conn = FakeConn(PARAMS, talos=object(), kube=KubeError("no such context"))
    with pytest.raises(ReclaimError) as exc:
        live.LiveIO(conn, "10.0.0.7", None, None).managed()
    assert exc.value.message == "cannot use the managed cluster's kubeconfig: no such context; nothing was sent"
    assert conn.asked == ["talos", "kube"]


# --- inspection: a worker's view of its control planes ---------------------------------------------------

def test_control_planes_probed_on_their_first_address():
    members = [{"hostname": "cp-1", "addresses": ["10.0.0.1", "10.9.0.1"], "machine_type": "controlplane"},
               {"hostname": "cp-0", "addresses": ["10.0.0.2"], "machine_type": "init"},
               {"hostname": "w-1", "addresses": ["10.0.0.3"], "machine_type": "worker"}]
    asked = []

    def probe(host, port):
        asked.append((host, port))
        return host == "10.0.0.1"
    cps = reading.probe_control_planes(members, probe)
    assert asked == [("10.0.0.1", 2380), ("10.0.0.2", 2380)]
    assert [(c["hostname"], c["healthy"], c["checked_by"]) for c in cps] == [
        ("cp-1", True, "etcd peer port answers"), ("cp-0", False, "etcd peer port does not answer")]


def test_the_audit_keeps_the_foreign_cluster_id():
    # a Talos cluster ID is 32 random bytes in base64: the shape redaction hides in free text
    cluster_id = "aawx6wzvHf0RhUJk5drGJAYZBAAT-o74Z25COr9jxwg="
    insp = inspection(cluster=("foreign", cluster_id))
    result = flow.run(flow.Options("10.0.0.7", user="alice"), RecordingIO(insp), check_mode=True)
    assert result["audit"][1].endswith('of cluster "foreign" (ID %s)' % cluster_id)
