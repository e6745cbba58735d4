"""machine.machine_config and machine.secrets (the talos_machine_config and talos_secrets flows) without
Ansible and without a lab: a fake Talos machine answering Version, Get (the machine config) and
ApplyConfiguration with real protobuf messages, a fake runner Connections and a fake clock.

The machine's configs and bundles are real ones from tests/fixtures/configs (made by Talos's own code).
"""

import asyncio
import os
import stat

import pytest

from tests import collection_path

collection_path.ensure()

from ansible_collections.maesh.ichor.plugins.module_utils.config import documents  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.machine import machine_config, secrets as bundle_file  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.config import secrets  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as talos_client  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.talos.proto import (  # noqa: E402
    cosi_resource_pb2, cosi_state_pb2, machine_pb2, spec_config_pb2)
from tests import config_cases  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BASIC = os.path.join(REPO, "tests", "fixtures", "configs", "v1.14", "v1.14.1", "basic")
OTHER = os.path.join(REPO, "tests", "fixtures", "configs", "v1.14", "v1.14.1", "cert-sans")
NODE = "10.5.0.7"
APPLY = talos_client.request_type("ApplyConfiguration")


def _read(*parts):
    with open(os.path.join(*parts)) as handle:
        return handle.read()


def _case():
    """(cluster spec, machine spec without role) of the fixture case."""
    import json
    return config_cases.spec_of_case(json.loads(_read(BASIC, "case.json")))


class Clock:
    def __init__(self):
        self.now = 1000.0
        self.slept = 0.0

    def time(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds
        self.slept += seconds


class Machine:
    """One Talos machine: its mode, version, config text; whether an apply reboots and how long that takes."""

    def __init__(self, config=None, version="v1.14.1", mode="configured", reboots=False, reboot_seconds=5.0,
                 keeps_config=False):
        self.config = config
        self.version = version
        self.mode = mode
        self.reboots = reboots
        self.reboot_seconds = reboot_seconds
        self.keeps_config = keeps_config  # a machine that takes an apply but keeps its old config
        self.up_at = 0.0
        self.applied = []  # (mode name, maintenance client)
        self.uuid = "4c4c4544-0047-3510-8057-b4c04f4b3332"


class FakeTalos:
    """The part of TalosClient the flows use, over a Machine: run, call, ainvoke, first, close."""

    first = staticmethod(talos_client.TalosClient.first)

    def __init__(self, world, maintenance, dial_only):
        self.world = world
        self.maintenance = maintenance
        self.dial_only = dial_only
        self.endpoints = [(dial_only or "10.5.0.2", 50000)]
        self.closed = False
        self._loop = asyncio.new_event_loop()

    def run(self, coro):
        assert not self.closed, "a call on a closed client"
        return self._loop.run_until_complete(coro)

    def call(self, call, request=None, node=None, timeout=None):
        return self.run(self.ainvoke(call, request, node=node, timeout=timeout))

    def close(self):
        if not self.closed:
            self._loop.close()
        self.closed = True

    async def ainvoke(self, call, request=None, node=None, timeout=None):
        assert not (node and self.dial_only), "a dial_only client sends no node metadata"
        m = self.world.machine
        address = node or self.dial_only or "10.5.0.2"
        if self.world.clock.time() < m.up_at:
            raise errors.unreachable(address)
        if self.maintenance != (m.mode == "maintenance") or m.mode == "other-cluster":
            raise errors.tls_error(address, "CERTIFICATE_VERIFY_FAILED")
        if call == "Version":
            return machine_pb2.VersionResponse(messages=[machine_pb2.Version(version=machine_pb2.VersionInfo(tag=m.version))])
        if call == "Get" and request.type == "SystemInformations.hardware.talos.dev":
            # the identity a machine in maintenance mode answers with (checked before an apply)
            return cosi_state_pb2.GetResponse(resource=cosi_resource_pb2.Resource(
                metadata=cosi_resource_pb2.Metadata(type=request.type, id="systeminformation"),
                spec=cosi_resource_pb2.Spec(yaml_spec="uuid: %s\n" % m.uuid)))
        if call == "Get" and request.type == "MachineStatuses.runtime.talos.dev":
            return cosi_state_pb2.GetResponse(resource=cosi_resource_pb2.Resource(
                metadata=cosi_resource_pb2.Metadata(type=request.type, id="machine"),
                spec=cosi_resource_pb2.Spec(yaml_spec="stage: %s\n" % m.mode)))
        if call == "Get":
            assert request.type == talos_client.MACHINE_CONFIG_TYPE
            if m.config is None:
                raise errors.call_error(address, "NOT_FOUND")
            blob = spec_config_pb2.MachineConfigSpec(yaml_marshalled=m.config.encode()).SerializeToString()
            return cosi_state_pb2.GetResponse(resource=cosi_resource_pb2.Resource(
                metadata=cosi_resource_pb2.Metadata(type=talos_client.MACHINE_CONFIG_TYPE, id="v1alpha1"),
                spec=cosi_resource_pb2.Spec(proto_spec=blob)))
        if call == "ApplyConfiguration":
            return self._apply(m, request, address)
        raise AssertionError("unexpected call %s" % call)

    def _apply(self, m, request, address):
        reboot = m.reboots or self.maintenance
        if request.dry_run:
            return machine_pb2.ApplyConfigurationResponse(messages=[machine_pb2.ApplyConfiguration(
                mode=APPLY.REBOOT if reboot else APPLY.NO_REBOOT)])
        mode = APPLY.Mode.Name(request.mode)
        if reboot and mode == "NO_REBOOT":
            raise errors.call_error(address, "FAILED_PRECONDITION")
        m.applied.append((mode, self.maintenance))
        if not m.keeps_config:
            m.config = request.data.decode()
        if reboot:
            m.mode = "configured"
            m.up_at = self.world.clock.time() + m.reboot_seconds
        return machine_pb2.ApplyConfigurationResponse(messages=[machine_pb2.ApplyConfiguration(mode=request.mode)])


class Conn:
    """The runner's Connections: a new Talos client per call, each recorded."""

    def __init__(self, machine, clock=None):
        self.machine = machine
        self.clock = clock or Clock()
        self.clients = []

    def talos(self, maintenance=False, dial_only=None):
        client = FakeTalos(self, maintenance, dial_only)
        self.clients.append(client)
        return client


def params(cluster=None, role="worker", **extra):
    cluster_spec, machine_spec = _case()
    out = dict(node=NODE, secrets=os.path.join(BASIC, "secrets.yaml"), cluster=cluster or cluster_spec,
               machine=config_cases.for_role(machine_spec, role), maintenance=False, accept_class_b=False, allow_reboot=True,
               wait=True, wait_timeout=30.0)
    out.update(extra)
    return out


def with_sysctl():
    return dict(_case()[0], sysctls={"vm.max_map_count": "262144"})


def worker_machine(**kwargs):
    return Machine(config=_read(BASIC, "worker.conf"), **kwargs)


def run(p, conn, check_mode=False):
    return machine_config.run(p, conn, check_mode, clock=conn.clock)


# ---------------------------------------------------------------------------- talos_machine_config


def test_zero_drift_applies_nothing():
    machine = worker_machine()
    conn = Conn(machine)
    result = run(params(), conn)
    assert not result["changed"] and result["apply_mode"] == "none" and result["contract"] == "v1.14"
    assert result["drift"]["zero"] and "diff" not in result and "probe" not in result
    assert result["plan"] == ["%s: zero drift at contract v1.14; nothing to apply" % NODE]
    assert machine.applied == []


def test_zero_drift_with_the_contract_probed():
    cluster = dict(_case()[0])
    cluster.pop("versionContract")
    result = run(params(cluster), Conn(worker_machine()))
    assert sorted(result["probe"]) == ["v1.12", "v1.13", "v1.14"] and result["contract"] == "v1.14"
    assert result["plan"][0].startswith("%s: Talos v1.14.1; contract probed v1.14: " % NODE)
    assert not result["changed"]


def _class_c_machine():
    docs = documents.parse(_read(BASIC, "worker.conf"))
    documents.find(docs, documents.LEGACY).body["machine"].setdefault("kubelet", {})["registerWithFQDN"] = True
    return Machine(config=documents.emit(docs))


def refusal(p, machine):
    """The ConfigError of a run in check mode and of a real run: the same message and result, nothing applied."""
    failures = []
    for check_mode in (True, False):
        with pytest.raises(ConfigError) as exc:
            run(p, Conn(machine), check_mode=check_mode)
        failures.append(exc.value)
    checked, real = failures
    assert checked.message == real.message and checked.result == real.result
    assert not real.result["changed"] and machine.applied == []
    return real


def test_class_c_blocks_check_mode_as_a_real_run_with_one_line():
    error = refusal(params(), _class_c_machine())
    assert error.message == "%s: 1 class C path(s) cannot be represented; nothing applied (no spec field covers this path)" % NODE
    result = error.result
    assert result["drift"]["counts"]["C"] == 1 and result["drift"]["C"]
    assert result["plan"][-1] == "%s: blocked by 1 class C path(s); nothing is applied" % NODE
    assert "<redacted>" in result["diff"]["before"] and "PRIVATE KEY" not in result["diff"]["after"]


def _managed():
    return dict(_case()[0], cni={"preset": "cilium", "kubeProxy": "replaced"})


def test_class_b_needs_consent():
    machine = Machine(config=_read(BASIC, "controlplane.conf"))
    error = refusal(params(_managed(), role="controlplane"), machine)
    count = error.result["drift"]["counts"]["B"]
    assert count and error.message == ("%s: %d class B (Ichor-owned) change(s) need consent (accept_class_b: true); "
                                       "nothing applied" % (NODE, count))
    assert error.result["plan"][-1] == "%s: class B (Ichor-owned) changes need accept_class_b: true" % NODE
    # with consent: applied and read back
    result = run(params(_managed(), role="controlplane", accept_class_b=True), Conn(machine))
    assert result["verified"] and result["apply_mode"] == "no_reboot" and machine.applied == [("NO_REBOOT", False)]


def test_class_b_refusal_names_the_consent_as_the_caller_gives_it():
    """Adopt's release passes the role's variable: the playbook's user is told what they set, not accept_class_b."""
    machine = Machine(config=_read(BASIC, "controlplane.conf"))
    consent = "ichor_accept_changes=true, module option accept_changes"
    error = refusal(dict(params(_managed(), role="controlplane"), consent=consent), machine)
    assert "need consent (%s); nothing applied" % consent in error.message and "accept_class_b" not in error.message
    assert error.result["plan"][-1] == "%s: class B (Ichor-owned) changes need %s" % (NODE, consent)
    assert machine.applied == []


def test_reboot_needed_but_not_allowed():
    error = refusal(params(with_sysctl(), allow_reboot=False), worker_machine(reboots=True))
    line = "%s: the change needs a reboot and allow_reboot is false; nothing applied" % NODE
    assert error.message == line and error.result["apply_mode"] == "reboot" and error.result["plan"][-1] == line


def test_check_mode_plans_the_apply_and_writes_nothing():
    machine = worker_machine()
    result = run(params(with_sysctl()), Conn(machine), check_mode=True)
    assert result["changed"] and result["apply_mode"] == "no_reboot" and "verified" not in result
    assert [d["path"] for d in result["drift"]["A"]] == ["SysctlConfig:", "SysctlConfig:params.vm.max_map_count"]
    assert result["plan"][-1] == "%s: apply without a reboot" % NODE
    assert machine.applied == []


def test_apply_without_reboot_is_read_back():
    machine = worker_machine()
    conn = Conn(machine)
    result = run(params(with_sysctl()), conn)
    assert result["changed"] and result["verified"] and result["apply_mode"] == "no_reboot"
    assert machine.applied == [("NO_REBOOT", False)] and "vm.max_map_count" in machine.config
    assert result["plan"][-2:] == ["%s: apply without a reboot" % NODE, "%s: read back, zero drift" % NODE]
    assert len(conn.clients) == 1 and conn.clock.slept == 0
    # a rerun is zero drift
    assert not run(params(with_sysctl()), Conn(machine))["changed"]


def test_apply_without_reboot_and_without_wait_is_still_read_back():
    machine = worker_machine()
    result = run(params(with_sysctl(), wait=False), Conn(machine))
    assert result["verified"] and result["plan"][-1] == "%s: read back, zero drift" % NODE


def test_apply_with_reboot_waits_back_and_reads_back():
    machine = worker_machine(reboots=True, reboot_seconds=5.0)
    conn = Conn(machine)
    result = run(params(with_sysctl()), conn)
    assert result["verified"] and result["apply_mode"] == "reboot" and machine.applied == [("AUTO", False)]
    assert result["plan"][-2:] == ["%s: apply with a reboot" % NODE, "%s: read back, zero drift" % NODE]
    assert 5.0 <= conn.clock.slept <= 7.0  # polled every second until it answered
    assert len(conn.clients) > 2 and all(client.closed for client in conn.clients[1:])


def test_apply_with_reboot_and_without_wait_returns_unverified():
    machine = worker_machine(reboots=True)
    conn = Conn(machine)
    result = run(params(with_sysctl(), wait=False), conn)
    assert result["changed"] and "verified" not in result and machine.applied == [("AUTO", False)]
    assert result["plan"][-1] == "%s: applied; not waiting for it to come back (wait: false), so not read back" % NODE
    assert conn.clock.slept == 0 and len(conn.clients) == 1


def test_timeout_while_waiting_back():
    machine = worker_machine(reboots=True, reboot_seconds=float("inf"))
    conn = Conn(machine)
    with pytest.raises(ConfigError) as exc:
        run(params(with_sysctl(), wait_timeout=30.0), conn)
    assert exc.value.message.startswith("%s did not come back with its config within 30s (%s: " % (NODE, NODE))
    assert "port 50000" in exc.value.message and "\n" not in exc.value.message
    assert exc.value.result["plan"][-1] == "%s: apply with a reboot" % NODE and "verified" not in exc.value.result
    assert 30.0 <= conn.clock.slept <= 32.0
    assert all(client.closed for client in conn.clients[1:])


def test_read_back_that_differs_fails():
    machine = worker_machine(keeps_config=True)
    with pytest.raises(ConfigError) as exc:
        run(params(with_sysctl()), Conn(machine))
    assert exc.value.message == "%s: the config read back differs from the render in 2 paths" % NODE
    assert exc.value.result["verified"] is False


def test_maintenance_applies_through_the_maintenance_api_and_reads_back():
    machine = Machine(config=None, mode="maintenance", reboot_seconds=3.0)
    conn = Conn(machine)
    plan_line = "%s: maintenance mode; apply the worker config at contract v1.14 (installs and reboots)" % NODE
    result = run(params(maintenance=True), conn, check_mode=True)
    assert result["changed"] and result["apply_mode"] == "maintenance" and result["plan"] == [plan_line]
    assert result["diff"]["before"] == "" and "<redacted>" in result["diff"]["after"]
    assert machine.applied == [] and machine.mode == "maintenance"

    # it was asked first over the talosconfig, then its UUID over the maintenance API (check mode reads it too)
    assert [(c.maintenance, c.dial_only, c.closed) for c in conn.clients] == [(False, NODE, True), (True, NODE, True)]

    conn = Conn(machine, conn.clock)
    result = run(params(maintenance=True), conn)
    assert machine.applied == [("AUTO", True)] and machine.mode == "configured"
    assert [(c.maintenance, c.dial_only) for c in conn.clients[:2]] == [(False, NODE), (True, NODE)]
    assert conn.clients[0].closed and conn.clients[1].closed
    assert result["verified"] and result["drift"]["zero"]
    assert result["plan"] == [plan_line, "%s: configured at contract v1.14 (Talos v1.14.1), read back with zero drift" % NODE]
    # then configured: the same spec is zero drift
    assert not run(params(), Conn(machine, conn.clock))["changed"]


def test_maintenance_checks_the_uuid_first_and_refuses_another_machine_at_the_address():
    machine = Machine(config=None, mode="maintenance")
    for check_mode in (True, False):
        with pytest.raises(ConfigError) as exc:
            run(params(maintenance=True, uuid="00000000-0000-0000-0000-00000000beef"), Conn(machine), check_mode)
        assert exc.value.message == (
            "%s answers with UUID %s, but the inventory expects 00000000-0000-0000-0000-00000000beef: another machine "
            "holds this address now (a DHCP lease moved?); nothing applied. Correct the address or the expected UUID"
            % (NODE, machine.uuid))
    assert machine.applied == [] and machine.mode == "maintenance"
    assert run(params(maintenance=True, uuid=machine.uuid), Conn(machine), True)["uuid"] == machine.uuid


def test_maintenance_refuses_a_machine_another_cluster_configured_with_the_reclaim_hint():
    machine = Machine(config=None, mode="other-cluster")  # refuses this talosconfig and the maintenance API alike
    with pytest.raises(ConfigError) as exc:
        run(params(maintenance=True), Conn(machine))
    assert exc.value.message.startswith("%s is configured, and not by this cluster (it does not accept this "
                                        "talosconfig's CA, and it refuses the maintenance API: " % NODE)
    assert exc.value.message.endswith("A configured machine is never reset here: to reuse it, reclaim it with "
                                      "maesh.ichor.reclaim (it resets it to maintenance mode), then run again")
    assert machine.applied == []


def test_a_rerun_with_maintenance_on_a_configured_machine_takes_the_drift_path():
    machine = Machine(config=None, mode="maintenance")
    clock = Clock()  # one clock: the reboot is over for the reruns
    run(params(maintenance=True), Conn(machine, clock))
    assert machine.applied == [("AUTO", True)]
    said = "%s: maintenance: true, but the machine is configured (it answers under the talosconfig's CA with a config)" % NODE
    for check_mode in (True, False):
        conn = Conn(machine, clock)
        result = run(params(maintenance=True), conn, check_mode=check_mode)
        assert not result["changed"] and result["apply_mode"] == "none" and result["drift"]["zero"]
        assert result["plan"][0].startswith(said) and result["plan"][-1].endswith("nothing to apply")
        assert not any(c.maintenance for c in conn.clients)
    assert machine.applied == [("AUTO", True)]
    # a change on the rerun goes through the normal API, without a reboot, and is read back
    result = run(params(with_sysctl(), maintenance=True), Conn(machine, clock))
    assert result["changed"] and result["apply_mode"] == "no_reboot" and result["verified"]
    assert machine.applied == [("AUTO", True), ("NO_REBOOT", False)]


def test_maintenance_on_an_unreachable_machine_fails_before_anything():
    machine = Machine(config=None, mode="maintenance")
    machine.up_at = float("inf")
    conn = Conn(machine)
    with pytest.raises(errors.TalosUnavailable) as exc:
        run(params(maintenance=True), conn)
    assert "port 50000" in exc.value.message and exc.value.result["plan"] == []
    assert machine.applied == [] and [c.maintenance for c in conn.clients] == [False]


def test_maintenance_without_wait_and_without_a_contract():
    machine = Machine(config=None, mode="maintenance")
    result = run(params(maintenance=True, wait=False), Conn(machine))
    assert machine.applied == [("AUTO", True)] and "verified" not in result
    assert result["plan"][-1].endswith("not waiting for it to reboot into its config (wait: false), so not read back")
    cluster = dict(_case()[0])
    cluster.pop("versionContract")
    with pytest.raises(ConfigError) as exc:
        run(params(cluster, maintenance=True), Conn(Machine(mode="maintenance")))
    assert "set cluster.versionContract" in exc.value.message and exc.value.result["plan"] == []


def test_a_configured_flow_on_a_maintenance_machine_says_so():
    with pytest.raises(errors.TalosError) as exc:
        run(params(), Conn(Machine(mode="maintenance")))
    assert "TLS" in exc.value.message and exc.value.result == dict(changed=False, plan=[], apply_mode="none")


def test_another_clusters_bundle_is_refused():
    machine = worker_machine()
    with pytest.raises(ConfigError) as exc:
        run(params(secrets=os.path.join(OTHER, "secrets.yaml")), Conn(machine))
    assert "belongs to another cluster" in exc.value.message and machine.applied == []


# ---------------------------------------------------------------------------- talos_secrets


def secrets_params(path, **extra):
    out = dict(path=str(path), source="generate", node=None, version_contract=None)
    out.update(extra)
    return out


def test_recover_check_mode_then_write_then_keep(tmp_path):
    path = tmp_path / "dir" / "secrets.yaml"
    machine = Machine(config=_read(BASIC, "controlplane.conf"))
    p = secrets_params(path, source="recover", node=NODE, version_contract="v1.14")
    result = bundle_file.run(p, Conn(machine), True)
    assert result["changed"] and result["action"] == "recovered" and not path.exists()
    assert result["plan"] == ["would recover the secrets bundle from %s's config (read-only) and write it to %s (mode 0600)" % (
        NODE, path)]
    result = bundle_file.run(p, Conn(machine), False)
    assert result["changed"] and stat.S_IMODE(os.stat(str(path)).st_mode) == 0o600
    assert secrets.load(str(path)) == secrets.load(os.path.join(BASIC, "secrets.yaml"))
    conn = Conn(machine)
    result = bundle_file.run(p, conn, False)
    assert not result["changed"] and result["action"] == "kept" and conn.clients == []
    assert result["plan"] == ["%s: a valid secrets bundle exists (CA fingerprint %s); kept" % (path, result["fingerprint"])]


def test_keep_sets_the_mode(tmp_path):
    path = tmp_path / "secrets.yaml"
    path.write_text(_read(BASIC, "secrets.yaml"))
    os.chmod(str(path), 0o644)
    result = bundle_file.run(secrets_params(path), Conn(None), True)
    assert result["changed"] and result["plan"][1] == "%s: set mode 0600 (was 0644)" % path
    assert stat.S_IMODE(os.stat(str(path)).st_mode) == 0o644
    bundle_file.run(secrets_params(path), Conn(None), False)
    assert stat.S_IMODE(os.stat(str(path)).st_mode) == 0o600


def test_a_corrupt_file_is_never_overwritten(tmp_path):
    path = tmp_path / "secrets.yaml"
    path.write_text("certs: [broken\n")
    with pytest.raises(ConfigError) as exc:
        bundle_file.run(secrets_params(path), Conn(None), False)
    assert "not valid YAML" in exc.value.message and exc.value.result == dict(plan=[], path=str(path))
    assert path.read_text() == "certs: [broken\n"


def test_recover_from_a_machine_without_config(tmp_path):
    path = tmp_path / "secrets.yaml"
    with pytest.raises(ConfigError) as exc:
        bundle_file.run(secrets_params(path, source="recover", node=NODE), Conn(Machine(config=None)), False)
    assert exc.value.message == "%s has no machine config to recover the secrets bundle from" % NODE
    assert not path.exists()


def test_recover_from_an_unreachable_machine(tmp_path):
    machine = Machine(config=_read(BASIC, "controlplane.conf"))
    machine.up_at = float("inf")
    with pytest.raises(errors.TalosUnavailable) as exc:
        bundle_file.run(secrets_params(tmp_path / "s.yaml", source="recover", node=NODE), Conn(machine), False)
    assert exc.value.result == dict(plan=[], path=str(tmp_path / "s.yaml"))


def test_a_write_that_fails_is_one_line(tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    path = blocker / "secrets.yaml"
    machine = Machine(config=_read(BASIC, "controlplane.conf"))
    with pytest.raises(ConfigError) as exc:
        bundle_file.run(secrets_params(path, source="recover", node=NODE), Conn(machine), False)
    assert exc.value.message.startswith("cannot write the secrets bundle %s: " % path)
    assert exc.value.result == dict(plan=[], path=str(path))


def test_a_contract_tie_is_reported_with_the_rule_used():
    """A v1.12 config whose machine.network has content reads as v1.12 and v1.13 alike (issue 11 §2)."""
    import json
    case = os.path.join(REPO, "tests", "fixtures", "configs", "v1.12", "v1.12.7", "network-content")
    cluster_spec, machine_spec = config_cases.spec_of_case(json.loads(_read(case, "case.json")))
    cluster_spec = dict(cluster_spec)
    cluster_spec.pop("versionContract", None)
    p = params(cluster_spec, secrets=os.path.join(case, "secrets.yaml"), machine=config_cases.for_role(machine_spec, "worker"))
    with pytest.raises(ConfigError) as exc:  # the interfaces are class C: blocked, the tie reported all the same
        run(p, Conn(Machine(config=_read(case, "worker.conf"), version="v1.13.9")), check_mode=True)
    assert ("%s: contract tie: its config reads as v1.13 and v1.12 alike; took v1.13, the highest (set "
            "cluster.versionContract to choose; a cluster-wide run settles ties for all its machines)" % NODE
            ) in exc.value.result["plan"]
