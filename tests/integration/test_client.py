"""Our Talos client against the simulated machines: mTLS (Ed25519 and ECDSA), node targeting,
dial-only, maintenance mode, every call the collection makes, and errors that are one line
and never hold key material."""

import base64
import json
import socket
import threading
import time

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.rollout import talos_step
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as tc
from ansible_collections.maesh.ichor.plugins.module_utils.talos import kubeconfig as talos_kubeconfig
from ansible_collections.maesh.ichor.plugins.module_utils.machine import facts as machine_facts
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, machine, talosconfig
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res

pytestmark = pytest.mark.lab

COMMENT_MARKER = "ICHOR-SECRET-MARKER-91c2"


def _client(lab, context=None, **kw):
    return tc.TalosClient(talosconfig.load(lab.talosconfig, context=context), **kw)


def _secret_markers(path):
    """Slices of the talosconfig's key and certificate (base64 and PEM forms) that must never show."""
    with open(path) as f:
        data = yaml.safe_load(f)
    out = [COMMENT_MARKER]
    for ctx in data["contexts"].values():
        for field in ("key", "crt"):
            b64 = ctx[field]
            pem = base64.b64decode(b64).decode()
            body = "".join(pem.splitlines()[1:-1])
            out += [b64[20:60], body[10:50]]
    return out


def _assert_clean(text, markers):
    for marker in markers:
        assert marker not in text, "credential material leaked"


@pytest.mark.parametrize("ca", ["ed25519", "ecdsa"])
def test_version_to_every_machine_through_the_endpoint(talos_lab, ca):
    lab = talos_lab(controlplanes=1, workers=2, ca=ca)
    assert lab.state()["ca_algorithm"] == ca
    with _client(lab) as client:
        for m in lab.machines:
            reply = client.call("Version", node=m["address"])
            assert tc.version_info(client.first(reply, m["address"]))["tag"] == m["version"]
            assert client.call("Hostname", node=m["address"]).messages[0].hostname == m["hostname"]


def test_machine_facts_match_the_lab(talos_cluster):
    state = talos_cluster.state()
    with _client(talos_cluster) as client:
        results = client.fan_out(lambda node: machine_facts.machine_facts(client, node),
                                 [m["address"] for m in state["machines"]])
    for m in state["machines"]:
        result = results[m["address"]]
        assert result.error is None, result.error
        facts = result.message
        assert facts["uuid"] == m["uuid"]
        assert facts["hostname"] == m["hostname"]
        assert facts["role"] == m["role"]
        assert facts["stage"] == m["stage"]
        assert facts["version"] == m["version"]
        assert facts["node_id"] == m["node_id"]
        assert facts["cluster"] == {"name": state["cluster"]["name"], "id": state["cluster"]["id"]}
        assert sorted(x["hostname"] for x in facts["members"]) == sorted(x["hostname"] for x in state["machines"])


def test_resource_reads(talos_cluster):
    cp = talos_cluster.machines[0]
    worker = [m for m in talos_cluster.machines if m["role"] == "worker"][0]
    with _client(talos_cluster) as client:
        config = client.run(machine.get_resource(client, res.MACHINE_CONFIG, worker["address"]))
        assert config["spec"] == worker["machine_config"]
        volumes = client.run(machine.list_resources(client, res.VOLUME_STATUSES, cp["address"]))
        by_id = dict((v["id"], v["spec"]) for v in volumes)
        assert by_id["u-secret"]["encryptionProvider"] == "luks2"
        disks = client.run(machine.list_resources(client, res.DISKS, cp["address"]))
        assert sorted(d["spec"]["dev_path"] for d in disks) == sorted(d["dev_path"] for d in cp["disks"])
        assert client.run(machine.get_resource(client, res.SYSTEM_DISK, cp["address"]))["spec"]["devPath"] == "/dev/sda"
        assert client.run(machine.list_resources(client, res.DISCOVERED_VOLUMES, cp["address"]))
        services = client.call("ServiceList", node=cp["address"]).messages[0].services
        assert "etcd" in [s.id for s in services]
        disks = client.call("Disks", node=cp["address"]).messages[0].disks
        assert "/dev/sda" in [d.device_name for d in disks]


def test_reader_cannot_read_the_machine_config(talos_cluster):
    worker = talos_cluster.machines[-1]
    with _client(talos_cluster, context=talos_cluster.context + "-reader") as client:
        assert client.run(machine.version(client, worker["address"]))["tag"] == worker["version"]
        with pytest.raises(errors.TalosCallError) as exc:
            client.run(machine.get_resource(client, res.MACHINE_CONFIG, worker["address"]))
    assert exc.value.code == "PERMISSION_DENIED"
    assert "os:admin" in str(exc.value)


def test_etcd_calls(talos_cluster):
    cps = [m for m in talos_cluster.machines if m["role"] == "controlplane"]
    with _client(talos_cluster) as client:
        members = client.call("EtcdMemberList", node=cps[0]["address"]).messages[0].members
        assert sorted(m.id for m in members) == sorted(m["etcd_member_id"] for m in cps)
        status = client.call("EtcdStatus", node=cps[1]["address"]).messages[0].member_status
        assert status.member_id == cps[1]["etcd_member_id"]


def test_kubeconfig(talos_cluster):
    with _client(talos_cluster) as client:
        kubeconfig = talos_kubeconfig.kubeconfig_bytes(client.call("Kubeconfig", node=talos_cluster.machines[0]["address"]))
    assert yaml.safe_load(kubeconfig)["kind"] == "Config"


def test_write_calls(talos_lab):
    lab = talos_lab(controlplanes=2, workers=2, bootstrapped=False, mixed_versions=True)
    cp1, cp2, w112, w113 = lab.machines
    assert w112["version"].startswith("v1.12") and w113["version"].startswith("v1.13")
    with _client(lab, timeout=10) as client:
        # ApplyConfiguration dry run changes nothing
        req = tc.request_type("ApplyConfiguration")(data=cp2["machine_config"].encode(), mode=1, dry_run=True)
        client.call("ApplyConfiguration", req, node=cp2["address"])
        assert lab.machine("cp-2")["machine_config"] == cp2["machine_config"]
        # Bootstrap once; a second time is refused
        client.call("Bootstrap", node=cp1["address"])
        with pytest.raises(errors.TalosCallError) as exc:
            client.call("Bootstrap", node=cp1["address"])
        assert exc.value.code == "ALREADY_EXISTS"
        # the legacy Upgrade RPC on a v1.12 machine
        client.call("Upgrade", tc.request_type("Upgrade")(image="ghcr.io/siderolabs/installer:v1.13.9"),
                    node=w112["address"])
        lab.wait_for("worker-1", lambda m: m["up"] and m["version"] == "v1.13.9")
        # the 1.13+ path as the Talos step sends it: ImageService Pull, LifecycleService Upgrade, then Reboot
        talos_step.start_upgrade(client, w113["address"], "v1.13.9", "ghcr.io/siderolabs/installer:v1.14.1")
        lab.wait_for("worker-2", lambda m: m["up"] and m["version"] == "v1.14.1")
        # remove cp-2 from etcd (it joined after the bootstrap), then reset it
        lab.wait_for("cp-2", lambda m: m["etcd_member_id"])
        cp2 = lab.machine("cp-2")  # reset: STATE and EPHEMERAL wiped -> maintenance, same UUID
        client.call("EtcdRemoveMemberByID", tc.request_type("EtcdRemoveMemberByID")(member_id=cp2["etcd_member_id"]),
                    node=cp1["address"])
        members = client.call("EtcdMemberList", node=cp1["address"]).messages[0].members
        assert cp2["etcd_member_id"] not in [m.id for m in members]
        reset = tc.request_type("Reset")(graceful=False, reboot=True)
        for label in ("STATE", "EPHEMERAL"):
            reset.system_partitions_to_wipe.add(label=label, wipe=True)
        client.call("Reset", reset, node=cp2["address"])
    lab.wait_for("cp-2", lambda m: m["up"] and m["mode"] == "maintenance")
    assert lab.machine("cp-2")["uuid"] == cp2["uuid"]
    with tc.TalosClient(dial_only=cp2["address"], maintenance=True, timeout=5) as client:
        assert client.run(machine.version(client))["tag"] == cp2["version"]
        sysinfo = client.run(machine.get_resource(client, res.SYSTEM_INFORMATION))
        assert sysinfo["spec"]["uuid"] == cp2["uuid"]


def test_maintenance_mode_per_version(talos_lab):
    lab = talos_lab(controlplanes=1, workers=0, extra_maintenance=True)
    m112, m114 = lab.machine("m-112"), lab.machine("m-114")
    with tc.TalosClient(dial_only=m114["address"], maintenance=True, timeout=5) as client:
        assert client.run(machine.version(client))["tag"] == m114["version"]
        assert client.call("Disks").messages[0].disks
    with tc.TalosClient(dial_only=m112["address"], maintenance=True, timeout=5) as client:
        with pytest.raises(errors.TalosCallError) as exc:
            client.run(machine.version(client))
        assert exc.value.code == "UNIMPLEMENTED" and "maintenance mode" in str(exc.value)
        disks = client.call("Disks").messages[0].disks
        assert disks
    # a configured call (mTLS, the cluster's CA) to a machine in maintenance: the certificate is not the CA's
    with _client(lab, dial_only=m114["address"], timeout=5) as client:
        with pytest.raises(errors.TalosUnavailable) as exc:
            client.call("Version")
    assert "maintenance mode" in str(exc.value) and m114["address"] in str(exc.value)


class _Spy:
    """A TCP listener on a loopback address that counts connections (to prove nobody dialled it)."""

    def __init__(self, address):
        self.sock = socket.socket()
        self.sock.bind((address, 50000))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.count = 0
        self._stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self._stop:
            try:
                conn, _addr = self.sock.accept()
            except OSError:
                continue
            self.count += 1
            conn.close()

    def close(self):
        self._stop = True
        self.thread.join(2)
        self.sock.close()


def test_dial_only_reaches_exactly_one_address(talos_lab, tmp_path):
    lab = talos_lab(controlplanes=1, workers=1)
    target = lab.machines[1]
    base = target["address"].rsplit(".", 1)[0]
    spies = [_Spy("%s.%d" % (base, n)) for n in (201, 202)]
    try:
        # a talosconfig whose endpoints and nodes are the spies
        with open(lab.talosconfig) as f:
            data = yaml.safe_load(f)
        ctx = data["contexts"][data["context"]]
        ctx["endpoints"] = ["%s.201" % base]
        ctx["nodes"] = ["%s.202" % base]
        path = tmp_path / "talosconfig"
        path.write_text(yaml.safe_dump(data))
        with tc.TalosClient(talosconfig.load(str(path)), dial_only=target["address"], timeout=5) as client:
            assert client.run(machine.version(client))["tag"] == target["version"]
            with pytest.raises(errors.TalosError):
                client.call("Version", node="%s.202" % base)
        time.sleep(0.3)
        assert [s.count for s in spies] == [0, 0]
    finally:
        for spy in spies:
            spy.close()


def test_endpoint_fails_over_to_the_next(talos_lab, tmp_path):
    lab = talos_lab(controlplanes=2, workers=1)
    cp1, cp2, worker = lab.machines
    lab.control.set_faults("cp-1", unreachable=True)
    ctx = talosconfig.load(lab.talosconfig)
    ctx.endpoints = [cp1["address"], cp2["address"]]
    with tc.TalosClient(ctx, timeout=3) as client:
        assert client.run(machine.version(client, worker["address"]))["tag"] == worker["version"]


# What a call may take where the test expects an answer: the behaviour is asserted, not the machine's speed (on a loaded
# machine a TLS handshake alone took more than the 2 s this test once gave). Deadlines a test asserts are set per call.
ANSWER_TIMEOUT = 30


def test_errors_are_one_line_and_hold_no_key_material(talos_lab, tmp_path):
    lab = talos_lab(controlplanes=1, workers=2)
    cp, w1, w2 = lab.machines
    # the talosconfig with a comment marker; its key and cert are markers too
    text = "# %s\n" % COMMENT_MARKER + open(lab.talosconfig).read()
    markers = _secret_markers(lab.talosconfig)
    seen = []
    ctx = talosconfig.parse(text)
    seen += [str(ctx), repr(ctx), json.dumps(ctx.credentials.key, default=str)]
    with tc.TalosClient(ctx, timeout=ANSWER_TIMEOUT) as client:
        seen.append(json.dumps(client.run(machine_facts.machine_facts(client, w1["address"]))))
        lab.control.set_faults("worker-2", unreachable=True)
        with pytest.raises(errors.TalosError) as exc:
            client.call("Version", node=w2["address"])
        assert w2["address"] in str(exc.value)
        seen.append(str(exc.value))
        lab.control.set_faults("worker-1", fail_call="Version", fail_code=13)
        with pytest.raises(errors.TalosCallError) as exc:
            client.call("Version", node=w1["address"])
        seen.append(str(exc.value))
        lab.control.set_faults("worker-1", latency_ms=3000)
        with pytest.raises(errors.TalosError) as exc:
            client.call("Version", node=w1["address"], timeout=0.5)
        assert "within 0.5" in str(exc.value) or "DEADLINE" in str(exc.value)
        seen.append(str(exc.value))
    # a machine that does not answer at all
    with tc.TalosClient(ctx, endpoint="127.0.0.9", timeout=ANSWER_TIMEOUT) as client:  # refused at once
        with pytest.raises(errors.TalosUnavailable) as exc:
            client.call("Version")
        assert "127.0.0.9" in str(exc.value)
        seen.append(str(exc.value))
    # a server certificate from another CA: another lab's talosconfig against this lab
    other = talos_lab(controlplanes=1, workers=0)
    with tc.TalosClient(talosconfig.load(other.talosconfig), endpoint=cp["address"], timeout=ANSWER_TIMEOUT) as client:
        with pytest.raises(errors.TalosUnavailable) as exc:
            client.call("Version")
        assert "CA" in str(exc.value)
        seen.append(str(exc.value))
    for line in seen[3:]:
        assert "\n" not in line and "Traceback" not in line
    _assert_clean("\n".join(seen), markers)
