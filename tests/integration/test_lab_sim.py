"""Tests of the Talos lab simulator itself, with a raw grpclib client on Python ssl."""

import asyncio
import base64
import io
import os
import re
import ssl
import tarfile
import time

import pytest
import yaml
from cryptography.x509.oid import ExtendedKeyUsageOID
from grpclib.const import Status
from grpclib.exceptions import GRPCError, StreamTerminatedError

from tests.lab import pki
from tests.lab.rawclient import RawTalos, insecure_ssl
from tests.lab.talos_sim import protos as P

pytestmark = pytest.mark.lab

MS = "/machine.MachineService/"
COSI = "/cosi.resource.State/"

TLS_ERRORS = (ssl.SSLError, ConnectionError, StreamTerminatedError, OSError,
              asyncio.IncompleteReadError)


def call(address, ctx, path, request=None, node=None, timeout=10.0):
    async def go():
        async with RawTalos(address, ctx) as c:
            return await c.call(path, request, node=node, timeout=timeout)
    return asyncio.run(go())


def lab_ca(lab):
    return pki.KeyPair(pki.load_cert_pem(lab.ca_pem), pki.load_key_pem(lab.ca_key_pem))


def client_ctx(lab, pair):
    return pki.client_ssl_context(lab.ca_pem, pair)


def grpc_code(excinfo):
    return excinfo.value.status


# --- mTLS and roles ------------------------------------------------------------------------

@pytest.mark.parametrize("ca", ["ed25519", "ecdsa"])
def test_version_with_admin_cert(talos_lab, ca):
    lab = talos_lab(controlplanes=1, workers=0, ca=ca)
    assert lab.state()["ca_algorithm"] == ca
    # the talosconfig key uses Talos' PEM label for Ed25519 and SEC1 for ECDSA
    from tests.lab.rawclient import talosconfig_context
    _e, _n, _ca, crt, key = talosconfig_context(lab.talosconfig)
    assert (b"ED25519 PRIVATE KEY" if ca == "ed25519" else b"EC PRIVATE KEY") in key
    cp = lab.machine("cp-1")
    reply = call(cp["address"], lab.ssl(), MS + "Version")
    assert reply.messages[0].version.tag == "v1.14.1"
    assert reply.messages[0].platform.name == "metal"
    assert reply.messages[0].metadata.hostname == ""


def test_tls_refusals_and_roles(talos_lab):
    lab = talos_lab(controlplanes=1, workers=0)
    addr = lab.address("cp-1")
    ca = lab_ca(lab)

    # a client certificate from another CA is refused at the TLS level
    other = pki.new_ca()
    with pytest.raises(TLS_ERRORS):
        call(addr, client_ctx(lab, pki.issue_client(other, ["os:admin"])), MS + "Version",
             timeout=5)
    # no client certificate at all
    with pytest.raises(TLS_ERRORS):
        call(addr, pki.client_ssl_context(lab.ca_pem, None), MS + "Version", timeout=5)

    # EKU serverAuth+clientAuth: TLS passes, apid refuses the call
    both = pki.issue_client(ca, ["os:admin"], ext_key_usage=[
        ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH])
    with pytest.raises(GRPCError) as ei:
        call(addr, client_ctx(lab, both), MS + "Version")
    assert grpc_code(ei) == Status.PERMISSION_DENIED
    assert ei.value.message == "not authorized"

    reader = lab.ssl(lab.context + "-reader")
    assert call(addr, reader, MS + "Hostname").messages[0].hostname == "cp-1"
    with pytest.raises(GRPCError) as ei:
        call(addr, reader, MS + "Reset", P.machine().ResetRequest(graceful=True, reboot=True))
    assert grpc_code(ei) == Status.PERMISSION_DENIED
    # the machine config is sensitive: readers may not get it, admins may
    req = P.cosi_state().GetRequest(namespace="config", type="MachineConfigs.config.talos.dev",
                                    id="v1alpha1")
    with pytest.raises(GRPCError) as ei:
        call(addr, reader, COSI + "Get", req)
    assert grpc_code(ei) == Status.PERMISSION_DENIED
    got = call(addr, lab.ssl(), COSI + "Get", req)
    # the spec's YAML is one string scalar holding the whole config (as Talos marshals it)
    assert yaml.safe_load(got.resource.spec.yaml_spec) == lab.machine("cp-1")["machine_config"]
    assert P.spec("config").MachineConfigSpec.FromString(
        got.resource.spec.proto_spec).yaml_marshalled.decode() == \
        lab.machine("cp-1")["machine_config"]
    # os:etcd:backup may list etcd members but not read the version
    backup = pki.issue_client(ca, ["os:etcd:backup"])
    members = call(addr, client_ctx(lab, backup), MS + "EtcdMemberList",
                   P.machine().EtcdMemberListRequest())
    assert len(members.messages[0].members) == 1
    with pytest.raises(GRPCError) as ei:
        call(addr, client_ctx(lab, backup), MS + "Version")
    assert grpc_code(ei) == Status.PERMISSION_DENIED


def test_maintenance_by_version(talos_lab):
    lab = talos_lab(controlplanes=0, workers=0, additions=[
        {"name": "m112", "version": "v1.12.11", "mode": "maintenance"},
        {"name": "m114", "version": "v1.14.1", "mode": "maintenance"}])
    insecure = insecure_ssl()
    with pytest.raises(GRPCError) as ei:
        call(lab.address("m112"), insecure, MS + "Version")
    assert grpc_code(ei) == Status.UNIMPLEMENTED
    assert ei.value.message == "API is not implemented in maintenance mode"
    assert len(call(lab.address("m112"), insecure, "/storage.StorageService/Disks")
               .messages[0].disks) == 2
    assert call(lab.address("m114"), insecure, MS + "Version").messages[0].version.tag == \
        "v1.14.1"
    with pytest.raises(GRPCError) as ei:
        call(lab.address("m114"), insecure, MS + "Reset", P.machine().ResetRequest())
    assert grpc_code(ei) == Status.PERMISSION_DENIED
    # the maintenance certificate is self-signed, per boot
    pem = ssl.get_server_certificate((lab.address("m114"), 50000))
    assert pki.load_cert_pem(pem).subject.rfc4514_string() == \
        "CN=maintenance-service.talos.dev"


# --- routing, faults ------------------------------------------------------------------------

def test_node_proxy_and_faults(talos_lab):
    lab = talos_lab(controlplanes=1, workers=2)
    cp, w1, w2 = (lab.machine(n) for n in ("cp-1", "worker-1", "worker-2"))
    admin = lab.ssl()
    reply = call(cp["address"], admin, MS + "Hostname", node=w1["address"])
    assert reply.messages[0].hostname == "worker-1"
    # COSI through the proxy: the target's identity
    ident = call(cp["address"], admin, COSI + "Get", P.cosi_state().GetRequest(
        namespace="cluster", type="Identities.cluster.talos.dev", id="local"),
        node=w2["address"])
    assert w2["node_id"] in ident.resource.spec.yaml_spec

    # unreachable target through the endpoint, and directly
    lab.control.set_faults("worker-1", unreachable=True)
    with pytest.raises(GRPCError) as ei:
        call(cp["address"], admin, MS + "Hostname", node=w1["address"])
    assert grpc_code(ei) == Status.UNAVAILABLE
    assert w1["address"] in ei.value.message
    with pytest.raises(TLS_ERRORS):
        call(w1["address"], admin, MS + "Hostname", timeout=3)
    assert lab.machine("worker-1")["up"] is False
    lab.control.clear_faults("worker-1")
    assert lab.machine("worker-1")["up"] is True
    assert call(w1["address"], admin, MS + "Hostname").messages[0].hostname == "worker-1"

    # one call failing with a given code
    lab.control.set_faults("worker-2", fail_call="Version", fail_code="RESOURCE_EXHAUSTED")
    with pytest.raises(GRPCError) as ei:
        call(cp["address"], admin, MS + "Version", node=w2["address"])
    assert grpc_code(ei) == Status.RESOURCE_EXHAUSTED
    assert call(w2["address"], admin, MS + "Hostname").messages[0].hostname == "worker-2"
    lab.control.clear_faults("worker-2")

    # latency
    t0 = time.monotonic()
    call(w2["address"], admin, MS + "Version")
    fast = time.monotonic() - t0
    lab.control.set_faults("worker-2", latency_ms=400)
    t0 = time.monotonic()
    call(w2["address"], admin, MS + "Version")
    slow = time.monotonic() - t0
    assert slow >= 0.4 and slow > fast + 0.3


# --- lifecycle ------------------------------------------------------------------------------

def test_reset_to_maintenance_same_uuid_new_address(talos_lab):
    lab = talos_lab(controlplanes=3, workers=1)
    before = lab.machine("cp-3")
    admin = lab.ssl()
    members = call(lab.address("cp-1"), admin, MS + "EtcdMemberList",
                   P.machine().EtcdMemberListRequest()).messages[0].members
    assert before["etcd_member_id"] in [m.id for m in members]

    new_addr = before["address"].rsplit(".", 1)[0] + ".200"
    lab.control.set_faults("cp-3", new_address_on_reboot=new_addr)
    mp = P.machine()
    req = mp.ResetRequest(graceful=True, reboot=True, system_partitions_to_wipe=[
        mp.ResetPartitionSpec(label="STATE", wipe=True),
        mp.ResetPartitionSpec(label="EPHEMERAL", wipe=True)])
    call(before["address"], admin, MS + "Reset", req)
    after = lab.wait_for("cp-3", lambda m: m["up"] and m["mode"] == "maintenance", timeout=15)
    assert after["uuid"] == before["uuid"]
    assert after["address"] == new_addr
    assert after["machine_config"] == ""
    # graceful: it left etcd; the others no longer list it
    members = call(lab.address("cp-1"), admin, MS + "EtcdMemberList",
                   P.machine().EtcdMemberListRequest()).messages[0].members
    assert before["etcd_member_id"] not in [m.id for m in members]
    assert len(members) == 2
    # it answers in maintenance (v1.14: Version allowed) at the new address
    assert call(new_addr, insecure_ssl(), MS + "Version").messages[0].version.tag == "v1.14.1"

    # a non-graceful reset leaves a dead etcd member behind until it is removed by id
    cp2 = lab.machine("cp-2")
    call(cp2["address"], admin, MS + "Reset", mp.ResetRequest(graceful=False, reboot=True))
    lab.wait_for("cp-2", lambda m: m["up"] and m["mode"] == "maintenance", timeout=15)
    members = call(lab.address("cp-1"), admin, MS + "EtcdMemberList",
                   P.machine().EtcdMemberListRequest()).messages[0].members
    assert cp2["etcd_member_id"] in [m.id for m in members]
    call(lab.address("cp-1"), admin, MS + "EtcdRemoveMemberByID",
         mp.EtcdRemoveMemberByIDRequest(member_id=cp2["etcd_member_id"]))
    members = call(lab.address("cp-1"), admin, MS + "EtcdMemberList",
                   P.machine().EtcdMemberListRequest()).messages[0].members
    assert [m.hostname for m in members] == ["cp-1"]


def test_reset_interrupted_comes_back_configured(talos_lab):
    lab = talos_lab(controlplanes=1, workers=1)
    lab.control.set_faults("worker-1", interrupt_reset=True)
    before = lab.machine("worker-1")
    call(before["address"], lab.ssl(), MS + "Reset", P.machine().ResetRequest(reboot=True))
    lab.wait_for("worker-1", lambda m: not m["up"], timeout=5)
    after = lab.wait_for("worker-1", lambda m: m["up"], timeout=10)
    assert after["mode"] == "configured"
    assert after["machine_config"] == before["machine_config"]


def test_apply_config_from_maintenance(talos_lab):
    lab = talos_lab(controlplanes=1, workers=0, additions=[
        {"name": "new", "role": "worker", "version": "v1.13.9", "mode": "maintenance"}])
    admin = lab.ssl()
    cfg = lab.machine("cp-1")["machine_config"]
    docs = list(yaml.safe_load_all(cfg))
    docs[0]["machine"]["type"] = "worker"
    docs[0]["machine"]["ca"]["key"] = ""
    docs[0]["machine"]["network"]["hostname"] = "joined"
    data = "---\n".join(yaml.safe_dump(d) for d in docs).encode()
    new = lab.machine("new")
    mp = P.machine()
    reply = call(new["address"], insecure_ssl(), MS + "ApplyConfiguration",
                 mp.ApplyConfigurationRequest(data=data, mode=mp.ApplyConfigurationRequest.AUTO))
    assert reply.messages[0].mode_details
    after = lab.wait_for("new", lambda m: m["up"] and m["mode"] == "configured", timeout=15)
    assert after["uuid"] == new["uuid"]
    assert after["role"] == "worker" and after["hostname"] == "joined"
    assert after["cluster_id"] == lab.state()["cluster"]["id"]
    assert after["machine_config"].encode() == data
    # now it is served under the config's CA with mTLS, also through the endpoint
    assert call(new["address"], admin, MS + "Hostname").messages[0].hostname == "joined"
    assert call(lab.address("cp-1"), admin, MS + "Hostname",
                node=new["address"]).messages[0].hostname == "joined"
    members = call(lab.address("cp-1"), admin, COSI + "List", P.cosi_state().ListRequest(
        namespace="cluster", type="Members.cluster.talos.dev"))
    assert sorted(r.resource.metadata.id for r in members) == sorted(
        [lab.machine("cp-1")["node_id"], after["node_id"]])


def test_apply_config_modes_and_dry_run(talos_lab):
    lab = talos_lab(controlplanes=1, workers=0, overrides=[{"name": "cp-1",
                                                            "version": "v1.13.9"}])
    admin = lab.ssl()
    addr = lab.address("cp-1")
    mp = P.machine()
    Mode = mp.ApplyConfigurationRequest
    cfg = lab.machine("cp-1")["machine_config"]
    docs = list(yaml.safe_load_all(cfg))
    docs[0]["machine"]["network"]["hostname"] = "renamed"
    data = "---\n".join(yaml.safe_dump(d) for d in docs).encode()
    dry = call(addr, admin, MS + "ApplyConfiguration",
               Mode(data=data, mode=Mode.AUTO, dry_run=True)).messages[0]
    assert dry.mode == Mode.NO_REBOOT and "Dry run summary" in dry.mode_details
    assert "renamed" in dry.mode_details
    assert lab.machine("cp-1")["hostname"] == "cp-1"
    real = call(addr, admin, MS + "ApplyConfiguration", Mode(data=data, mode=Mode.AUTO))
    assert real.messages[0].mode == Mode.NO_REBOOT
    assert call(addr, admin, MS + "Hostname").messages[0].hostname == "renamed"
    # an install change needs a reboot on 1.13: NO_REBOOT refuses, AUTO reboots
    docs[0]["machine"]["install"]["disk"] = "/dev/sdb"
    data2 = "---\n".join(yaml.safe_dump(d) for d in docs).encode()
    with pytest.raises(GRPCError) as ei:
        call(addr, admin, MS + "ApplyConfiguration", Mode(data=data2, mode=Mode.NO_REBOOT))
    assert grpc_code(ei) == Status.INVALID_ARGUMENT
    # without the v1alpha1 document
    with pytest.raises(GRPCError) as ei:
        call(addr, admin, MS + "ApplyConfiguration", Mode(
            data=yaml.safe_dump(docs[1]).encode(), mode=Mode.AUTO))
    assert grpc_code(ei) == Status.INVALID_ARGUMENT


def test_upgrade_legacy_and_lifecycle(talos_lab):
    lab = talos_lab(controlplanes=1, workers=1, overrides=[{"name": "worker-1",
                                                            "version": "v1.12.11"}])
    admin = lab.ssl()
    mp = P.machine()
    img, lc = P.image(), P.lifecycle()
    w = lab.machine("worker-1")
    # 1.12 has no LifecycleService: talosctl falls back to the legacy Upgrade
    with pytest.raises(GRPCError) as ei:
        call(w["address"], admin, "/machine.LifecycleService/Upgrade",
             lc.LifecycleServiceUpgradeRequest(source=lc.InstallArtifactsSource(
                 image_name="ghcr.io/siderolabs/installer:v1.13.9")))
    assert grpc_code(ei) == Status.UNIMPLEMENTED
    call(w["address"], admin, MS + "Upgrade",
         mp.UpgradeRequest(image="ghcr.io/siderolabs/installer:v1.13.9"))
    lab.wait_for("worker-1", lambda m: m["stage"] == "upgrading", timeout=5)
    after = lab.wait_for("worker-1", lambda m: m["up"] and m["version"] == "v1.13.9",
                         timeout=10)
    assert after["uuid"] == w["uuid"] and after["stage"] == "running"

    cp = lab.address("cp-1")
    system = P.common().ContainerdInstance(driver=1, namespace=1)  # what talosctl upgrade sends
    pulled = call(cp, admin, "/machine.ImageService/Pull", img.ImageServicePullRequest(
        containerd=system, image_ref="ghcr.io/siderolabs/installer:v1.14.2"))
    assert pulled[-1].name.startswith("ghcr.io/siderolabs/installer@sha256:")  # pinned, as Talos reports it
    progress = call(cp, admin, "/machine.LifecycleService/Upgrade",
                    lc.LifecycleServiceUpgradeRequest(containerd=system, source=lc.InstallArtifactsSource(
                        image_name="ghcr.io/siderolabs/installer:v1.14.2")))
    assert progress[-1].progress.WhichOneof("response") == "exit_code"
    assert progress[-1].progress.exit_code == 0
    assert lab.machine("cp-1")["version"] == "v1.14.1"  # only after the reboot
    call(cp, admin, MS + "Reboot", mp.RebootRequest())
    after = lab.wait_for("cp-1", lambda m: m["up"] and m["version"] == "v1.14.2", timeout=10)
    assert call(cp, admin, MS + "Version").messages[0].version.tag == "v1.14.2"


def test_etcd_bootstrap_kubeconfig(talos_lab):
    lab = talos_lab(controlplanes=2, workers=1, bootstrapped=False)
    admin = lab.ssl()
    mp = P.machine()
    cp1, cp2, w = lab.address("cp-1"), lab.address("cp-2"), lab.address("worker-1")
    with pytest.raises(GRPCError):
        call(cp1, admin, MS + "EtcdMemberList", mp.EtcdMemberListRequest())
    with pytest.raises(GRPCError) as ei:
        call(w, admin, MS + "EtcdStatus")
    assert grpc_code(ei) == Status.UNIMPLEMENTED
    call(cp1, admin, MS + "Bootstrap", mp.BootstrapRequest())
    with pytest.raises(GRPCError) as ei:
        call(cp2, admin, MS + "Bootstrap", mp.BootstrapRequest())
    assert grpc_code(ei) == Status.ALREADY_EXISTS
    members = call(cp2, admin, MS + "EtcdMemberList",
                   mp.EtcdMemberListRequest()).messages[0].members
    assert sorted(m.hostname for m in members) == ["cp-1", "cp-2"]
    status = call(cp2, admin, MS + "EtcdStatus").messages[0].member_status
    assert status.member_id == lab.machine("cp-2")["etcd_member_id"]
    # remove cp-2 by id through cp-1
    call(cp1, admin, MS + "EtcdRemoveMemberByID",
         mp.EtcdRemoveMemberByIDRequest(member_id=status.member_id))
    members = call(cp1, admin, MS + "EtcdMemberList",
                   mp.EtcdMemberListRequest()).messages[0].members
    assert [m.hostname for m in members] == ["cp-1"]

    lab.control.settings(kubeconfig_server="https://127.0.0.1:7443")
    chunks = call(cp1, admin, MS + "Kubeconfig")
    blob = b"".join(c.bytes for c in chunks)
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        assert tar.getnames() == ["kubeconfig"]
        kc = yaml.safe_load(tar.extractfile("kubeconfig").read())
    assert kc["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:7443"
    with pytest.raises(GRPCError) as ei:
        call(w, admin, MS + "Kubeconfig")
    assert grpc_code(ei) == Status.UNIMPLEMENTED


def test_cosi_reads(talos_cluster):
    lab = talos_cluster
    cs = P.cosi_state()
    reader = lab.ssl(lab.context + "-reader")
    cp = lab.address("cp-1")
    vols = call(cp, reader, COSI + "List", cs.ListRequest(
        namespace="runtime", type="VolumeStatuses.block.talos.dev"))
    by_id = {r.resource.metadata.id: r.resource for r in vols}
    assert {"STATE", "EPHEMERAL", "META", "u-data", "u-secret"} <= set(by_id)
    block = P.spec("block")
    spec = block.VolumeStatusSpec.FromString(by_id["u-secret"].spec.proto_spec)
    assert spec.encryption_provider == P.spec("enums").ENCRYPTION_PROVIDER_LUKS2
    assert "encryptionProvider: luks2" in by_id["u-secret"].spec.yaml_spec
    si = call(cp, reader, COSI + "Get", cs.GetRequest(
        namespace="hardware", type="SystemInformations.hardware.talos.dev",
        id="systeminformation"))
    assert P.spec("hardware").SystemInformationSpec.FromString(
        si.resource.spec.proto_spec).uuid == lab.machine("cp-1")["uuid"]
    assert si.resource.metadata.version.isdigit()
    with pytest.raises(GRPCError) as ei:
        call(cp, reader, COSI + "Get", cs.GetRequest(namespace="x", type="Nope.talos.dev", id="x"))
    assert grpc_code(ei) == Status.NOT_FOUND
    info = call(cp, reader, COSI + "Get", cs.GetRequest(
        namespace="cluster", type="Infos.cluster.talos.dev", id="current"))
    assert P.spec("cluster").InfoSpec.FromString(info.resource.spec.proto_spec).cluster_id == \
        lab.state()["cluster"]["id"]
    members = call(cp, reader, COSI + "List", cs.ListRequest(
        namespace="cluster", type="Members.cluster.talos.dev"))
    assert len(members) == 5


def test_try_staged_and_power_off(talos_lab):
    from google.protobuf import duration_pb2
    lab = talos_lab(controlplanes=1, workers=1)
    admin = lab.ssl()
    mp = P.machine()
    Mode = mp.ApplyConfigurationRequest
    addr = lab.address("worker-1")
    docs = list(yaml.safe_load_all(lab.machine("worker-1")["machine_config"]))

    def with_host(name):
        docs[0]["machine"]["network"]["hostname"] = name
        return "---\n".join(yaml.safe_dump(d) for d in docs).encode()

    reply = call(addr, admin, MS + "ApplyConfiguration", Mode(
        data=with_host("trying"), mode=Mode.TRY,
        try_mode_timeout=duration_pb2.Duration(seconds=1))).messages[0]
    assert "reverted back in 1s" in reply.mode_details
    assert call(addr, admin, MS + "Hostname").messages[0].hostname == "trying"
    lab.wait_for("worker-1", lambda m: m["hostname"] == "worker-1", timeout=5)

    call(addr, admin, MS + "ApplyConfiguration", Mode(data=with_host("staged"),
                                                      mode=Mode.STAGED))
    assert call(addr, admin, MS + "Hostname").messages[0].hostname == "worker-1"
    call(addr, admin, MS + "Reboot", mp.RebootRequest())
    lab.wait_for("worker-1", lambda m: m["up"] and m["hostname"] == "staged", timeout=10)

    # Reset without reboot powers the machine off until the lab powers it on
    uuid = lab.machine("worker-1")["uuid"]
    call(addr, admin, MS + "Reset", mp.ResetRequest(graceful=True, reboot=False))
    lab.wait_for("worker-1", lambda m: m["stage"] == "stopped", timeout=10)
    lab.control.power("worker-1", True)
    m = lab.wait_for("worker-1", lambda m: m["up"], timeout=10)
    assert m["mode"] == "maintenance" and m["uuid"] == uuid


def test_resource_definitions(talos_cluster):
    lab = talos_cluster
    cs = P.cosi_state()
    defs = call(lab.address("cp-1"), lab.ssl(), COSI + "List", cs.ListRequest(
        namespace="meta", type="ResourceDefinitions.meta.cosi.dev"))
    by_id = {r.resource.metadata.id: yaml.safe_load(r.resource.spec.yaml_spec) for r in defs}
    mc = by_id["machineconfigs.config.talos.dev"]
    assert mc["defaultNamespace"] == "config" and mc["sensitivity"] == "sensitive"
    assert "member" in by_id["members.cluster.talos.dev"]["aliases"]


def test_lab_json_shape(talos_cluster):
    import json
    with open(talos_cluster.lab_json) as fh:
        data = json.load(fh)
    assert set(data) == {"control", "talosconfig", "context", "ca_algorithm", "cluster",
                         "machines"}
    assert set(data["cluster"]) == {"name", "id"}
    keys = {"name", "address", "role", "mode", "version", "uuid", "hostname", "stage", "node_id",
            "cluster_name", "cluster_id", "etcd_member_id", "up", "disks", "volumes",
            "machine_config", "cni_files", "extensions"}
    for m in data["machines"]:
        assert set(m) == keys
    cps = [m for m in data["machines"] if m["role"] == "controlplane"]
    assert len(cps) == 3 and all(m["etcd_member_id"] for m in cps)
    import os
    import stat
    assert stat.S_IMODE(os.stat(talos_cluster.talosconfig).st_mode) == 0o600


def test_fan_out(talos_cluster):
    lab = talos_cluster
    nodes = [lab.address("cp-2"), lab.address("worker-1"), lab.address("cp-1")[:-1] + "250"]

    async def go(path):
        async with RawTalos(lab.address("cp-1"), lab.ssl()) as c:
            return await c.call(path, metadata=[("nodes", ",".join(nodes))])
    reply = asyncio.run(go(MS + "Hostname"))
    assert [m.metadata.hostname for m in reply.messages] == nodes
    assert [m.hostname for m in reply.messages[:2]] == ["cp-2", "worker-1"]
    assert reply.messages[2].metadata.status.code == Status.UNAVAILABLE.value
    assert "rpc error: code = Unavailable" in reply.messages[2].metadata.error
    # not for COSI (server streaming)
    with pytest.raises(GRPCError) as ei:
        asyncio.run(go(COSI + "List"))
    assert grpc_code(ei) == Status.INVALID_ARGUMENT


# --- call counters and the etcd peer port ---------------------------------------------------

def test_call_counters_and_peer_port(talos_lab):
    import socket
    lab = talos_lab(controlplanes=2, workers=1)
    cp1, cp2, w1 = lab.address("cp-1"), lab.address("cp-2"), lab.address("worker-1")
    assert lab.control.calls("cp-1") == {}
    call(cp1, lab.ssl(), MS + "Version")
    call(cp1, lab.ssl(), MS + "Version")
    # proxied through cp-1 to worker-1: counted on both machines
    call(cp1, lab.ssl(), MS + "Hostname", node=w1)
    assert lab.control.calls("cp-1") == {"Version": 2, "Hostname": 1}
    assert lab.control.calls("worker-1") == {"Hostname": 1}
    assert lab.control.calls("cp-2") == {}
    # a refused call still reached the machine
    with pytest.raises(GRPCError):
        call(cp1, lab.ssl(lab.context + "-reader"), MS + "Reset", P.machine().ResetRequest())
    assert lab.control.calls("cp-1")["Reset"] == 1
    assert lab.control.reset_calls("cp-1") == {}
    assert lab.control.calls("cp-1") == {}

    def peer_open(address):
        try:
            socket.create_connection((address, 2380), timeout=0.5).close()
            return True
        except OSError:
            return False
    # etcd members answer on their peer port, a worker does not
    assert peer_open(cp1) and peer_open(cp2)
    assert not peer_open(w1)
    lab.control.power("cp-2", on=False)
    assert not peer_open(cp2)


# --- labs from real fixture cases -----------------------------------------------------------

CASES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "configs")


def _case_file(case, name):
    with open(os.path.join(CASES, case, name), "rb") as fh:
        return fh.read()


def _check_case_lab(lab, case, version, cluster_name):
    """Our client with the lab's talosconfig reaches every machine; each serves its case file
    unchanged; all are one cluster with the control planes in etcd."""
    from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as tc
    from ansible_collections.maesh.ichor.plugins.module_utils.machine import facts as machine_facts
    from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine, talosconfig
    from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res

    state = lab.state()
    assert state["case"] == os.path.join(CASES, case)
    bundle = yaml.safe_load(_case_file(case, "secrets.yaml"))
    # the lab CA (and so the talosconfig's) is the case's OS CA
    assert lab.ca_pem == base64.b64decode(bundle["certs"]["os"]["crt"])
    assert state["ca_algorithm"] == "ed25519"
    configured = [m for m in state["machines"] if m["mode"] == "configured"]
    addresses = [m["address"] for m in configured]
    with tc.TalosClient(talosconfig.load(lab.talosconfig), timeout=10) as client:
        facts = client.fan_out(lambda n: machine_facts.machine_facts(client, n), addresses)
        for m in configured:
            text = _case_file(case, "%s.conf" % m["role"])
            assert m["machine_config"].encode() == text
            # the server certificate is signed by the case CA: verified by our client's TLS
            f = facts[m["address"]]
            assert f.error is None, f.error
            f = f.message
            assert f["version"] == version and f["role"] == m["role"]
            # no hostname in the case config: Talos's default (talos-xxx-yyy), not the lab's name for the machine
            assert f["hostname"] == m["hostname"] and re.fullmatch(r"talos-[0-9a-f]{3}-[0-9a-f]{3}", f["hostname"])
            assert f["cluster"] == {"name": cluster_name, "id": state["cluster"]["id"]}
            assert sorted(x["hostname"] for x in f["members"]) == sorted(x["hostname"] for x in configured)
            spec = client.run(machine.get_resource(client, res.MACHINE_CONFIG, m["address"]))["spec"]
            assert spec == text.decode()
            raw = client.call("Get", tc.resource_request(res.MACHINE_CONFIG.type, res.MACHINE_CONFIG.namespace,
                                                         "v1alpha1"), node=m["address"])
            assert P.spec("config").MachineConfigSpec.FromString(
                raw.resource.spec.proto_spec).yaml_marshalled == text
        cp = [m for m in configured if m["role"] == "controlplane"][0]
        members = client.first(client.call("EtcdMemberList", node=cp["address"])).members
    cps = [m for m in configured if m["role"] == "controlplane"]
    assert sorted(x.hostname for x in members) == sorted(m["hostname"] for m in cps)
    assert {x.id for x in members} == {m["etcd_member_id"] for m in cps}
    return state


def test_lab_from_a_v113_case(talos_lab):
    case = "v1.13/v1.13.9/k8s-older"
    lab = talos_lab(controlplanes=1, workers=1, version="v1.13.9", case=case)
    state = _check_case_lab(lab, case, "v1.13.9", "k8s-older")
    bundle = yaml.safe_load(_case_file(case, "secrets.yaml"))
    assert state["cluster"] == {"name": "k8s-older", "id": bundle["cluster"]["id"]}


def test_lab_from_a_v114_case(talos_lab):
    # typed documents: cluster id from DiscoveryIdentityConfig, name from KubeClusterConfig;
    # --add in configured mode also starts from the case; a maintenance machine has no config
    case = "v1.14/v1.14.1/basic"
    lab = talos_lab(controlplanes=1, workers=1, version="v1.14.1", case=case, additions=[
        {"name": "cp-extra", "role": "controlplane", "mode": "configured"},
        {"name": "spare", "role": "worker", "mode": "maintenance"}])
    state = _check_case_lab(lab, case, "v1.14.1", "basic")
    assert state["cluster"] == {"name": "basic", "id": "zRDF+kakRR3Ff51l4LoNrECaHdNhS4mj/WUzsspjSjQ="}
    assert lab.machine("spare")["machine_config"] == ""
    # a config applied in typed form (v1.14 contract) is read the same way: the worker's own
    # config with a new KubeletConfig image applies without a reboot and keeps the cluster
    worker = lab.machine("worker-1")
    data = _case_file(case, "worker.conf").replace(b"kubelet:v1.37.0", b"kubelet:v1.37.1")
    mp = P.machine()
    reply = call(worker["address"], lab.ssl(), MS + "ApplyConfiguration",
                 mp.ApplyConfigurationRequest(data=data, mode=mp.ApplyConfigurationRequest.AUTO))
    assert reply.messages[0].mode == mp.ApplyConfigurationRequest.NO_REBOOT
    after = lab.machine("worker-1")
    assert after["machine_config"].encode() == data
    # a config that sets no hostname keeps Talos's default one
    assert after["cluster_id"] == state["cluster"]["id"] and after["hostname"] == worker["hostname"]


def test_config_facts_read_typed_documents():
    from tests.lab.talos_sim import config as cfg
    v114 = cfg.ConfigFacts(_case_file("v1.14/v1.14.1/basic", "controlplane.conf"))
    assert v114.install_image == "ghcr.io/siderolabs/installer:v1.14.1"
    assert v114.endpoint == "https://10.5.0.2:6443"
    assert v114.kubelet_image == "ghcr.io/siderolabs/kubelet:v1.37.0"
    assert (v114.cluster_name, v114.cluster_id) == ("basic", "zRDF+kakRR3Ff51l4LoNrECaHdNhS4mj/WUzsspjSjQ=")
    assert v114.machine_type == "controlplane" and v114.hostname is None
    v113 = cfg.ConfigFacts(_case_file("v1.13/v1.13.9/k8s-older", "worker.conf"))
    assert v113.install_image == "ghcr.io/siderolabs/installer:v1.13.9"
    assert v113.endpoint == "https://k8s-older.example.com:6443"
    assert v113.kubelet_image == "ghcr.io/siderolabs/kubelet:v1.35.4"
    assert v113.machine_type == "worker" and v113.ca_key_pem is None
    # a 1.13 machine needs a reboot when the typed install document changes, not for the kubelet
    worker = _case_file("v1.14/v1.14.1/basic", "worker.conf")
    assert cfg.needs_reboot(worker, worker.replace(b"kubelet:v1.37.0", b"kubelet:v1.37.1")) is None
    assert "machine.install" in cfg.needs_reboot(worker, worker.replace(b"installer:v1.14.1", b"installer:v1.14.2"))
    # the case: its OS CA (Talos' Ed25519 PEM label) and the config bytes as they are
    case = cfg.Case("v1.13/v1.13.9/k8s-older")
    assert case.ca.algorithm == "ed25519"
    assert case.ca.cert_pem == v113.ca_crt_pem
    assert case.config("worker") == _case_file("v1.13/v1.13.9/k8s-older", "worker.conf")
    with pytest.raises(cfg.ConfigError):
        cfg.Case("v1.13/v1.13.9/no-such-case")


def test_the_default_lab_starts_from_real_talos_configs_with_their_bundle(talos_lab):
    """`python -m tests.lab up` without --generated: a fixture case made by machinery, with its secrets bundle."""
    from tests.lab.__main__ import DEFAULT_CASE, _parser
    from tests.lab.talos_sim.config import find_case_dir
    args = _parser().parse_args(["up", "--workdir", "/nonexistent"])
    assert args.case == DEFAULT_CASE and not args.generated
    case = find_case_dir(DEFAULT_CASE)
    assert os.path.exists(os.path.join(case, "secrets.yaml"))
    lab = talos_lab(controlplanes=1, workers=1, case=DEFAULT_CASE)
    from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as tc, machine, resources, talosconfig
    with tc.TalosClient(talosconfig.load(lab.talosconfig), timeout=5) as client:
        live = client.run(machine.get_resource(client, resources.MACHINE_CONFIG, lab.address("worker-1")))
    with open(os.path.join(case, "worker.conf")) as handle:
        assert live["spec"] == handle.read()


# --- etcd leadership and slow or failing pulls (a batched rollout) ----------------------------------------------------

def _talos_client(lab, endpoint=None, timeout=10):
    from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as tc
    from ansible_collections.maesh.ichor.plugins.module_utils.talos import talosconfig
    return tc.TalosClient(talosconfig.load(lab.talosconfig), endpoint=endpoint, timeout=timeout)


def _leaders(lab):
    return [name for name, what in lab.control.timeline() if what == "etcd-leader"]


def test_etcd_forfeit_leadership_moves_it_and_is_empty_on_a_member_that_does_not_lead(talos_lab):
    from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, etcd
    lab = talos_lab(controlplanes=3, workers=1)
    ids = dict((m["name"], m["etcd_member_id"]) for m in lab.machines if m["role"] == "controlplane")
    names = dict((mid, name) for name, mid in ids.items())
    with _talos_client(lab) as client:
        first = etcd.leader(client, lab.address("cp-1"))
        assert first in names and all(etcd.leader(client, lab.address(n)) == first for n in ids)
        lab.control.reset_timeline()
        follower = sorted(n for n in ids if ids[n] != first)[0]
        # Talos: a member that does not lead forfeits nothing and says so with ""
        assert etcd.forfeit_leadership(client, lab.address(follower)) == ""
        assert etcd.leader(client, lab.address(follower)) == first and _leaders(lab) == []
        # the leader hands it to the first other member in member id order (etcd's MoveLeader); the reply names the
        # new leader by its etcd member name, the machine's hostname, as Talos v1.14.1 does (not its id)
        new = sorted(mid for mid in ids.values() if mid != first)[0]
        status = client.call("EtcdStatus", node=lab.address(names[first])).messages[0].member_status
        assert etcd.forfeit_leadership(client, lab.address(names[first])) == lab.machine(names[new])["hostname"]
        after = client.call("EtcdStatus", node=lab.address(names[first])).messages[0].member_status
        assert after.leader == new and after.raft_term == status.raft_term + 1 and not after.errors
        assert all(etcd.leader(client, lab.address(n)) == new for n in ids)
        assert _leaders(lab) == [names[new]]
        assert (names[first], "EtcdForfeitLeadership") in [tuple(e) for e in lab.control.timeline()]
        assert etcd.forfeit_leadership(client, lab.address(names[first])) == ""  # no longer the leader
        with pytest.raises(errors.TalosCallError) as exc:
            etcd.forfeit_leadership(client, lab.address("worker-1"))
        assert exc.value.code == "UNIMPLEMENTED" and "etcd forfeit leadership is only available on control plane " \
            "nodes" in str(exc.value)
    # os:admin only, as machined's rule for it
    with pytest.raises(GRPCError) as ei:
        call(lab.address("cp-1"), lab.ssl(lab.context + "-reader"), MS + "EtcdForfeitLeadership",
             P.machine().EtcdForfeitLeadershipRequest())
    assert grpc_code(ei) == Status.PERMISSION_DENIED


def test_etcd_forfeit_leadership_refused_with_one_member(talos_lab):
    from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, etcd
    lab = talos_lab(controlplanes=1, workers=0)
    with _talos_client(lab) as client:
        with pytest.raises(errors.TalosCallError) as exc:
            etcd.forfeit_leadership(client, lab.address("cp-1"))
        assert exc.value.code == "UNKNOWN"
        assert "cannot forfeit leadership, only one member" in str(exc.value) and lab.address("cp-1") in str(exc.value)
        assert etcd.leader(client, lab.address("cp-1")) == lab.machine("cp-1")["etcd_member_id"]


def test_etcd_leadership_moves_when_the_leaders_machine_goes_down(talos_lab):
    from ansible_collections.maesh.ichor.plugins.module_utils.talos import etcd
    lab = talos_lab(controlplanes=3, workers=0)
    ids = dict((m["name"], m["etcd_member_id"]) for m in lab.machines)
    names = dict((mid, name) for name, mid in ids.items())
    with _talos_client(lab, endpoint=lab.address("cp-1")) as client:
        first = names[etcd.leader(client, lab.address("cp-1"))]
    lab.control.set_timing(first, reboot_seconds=1.5)
    lab.control.reset_timeline()
    lab.control.reboot(first, seconds=1.5)
    lab.wait_for(first, lambda m: not m["up"], timeout=10)
    others = sorted(n for n in ids if n != first)
    new = names[sorted(ids[n] for n in others)[0]]  # the lab elects the first running member, in member id order
    with _talos_client(lab, endpoint=lab.address(others[0])) as client:
        assert etcd.leader(client, lab.address(others[1])) == ids[new]
    timeline = [tuple(e) for e in lab.control.timeline()]
    assert timeline.index((first, "down:unasked")) < timeline.index((new, "etcd-leader"))
    # the old leader comes back as a follower: nobody else changes
    lab.wait_for(first, lambda m: m["up"] and m["stage"] == "running", timeout=15)
    with _talos_client(lab, endpoint=lab.address(first)) as client:
        assert etcd.leader(client, lab.address(first)) == ids[new]
    assert _leaders(lab) == [new]
    # a leader switched off (Shutdown, power): the next running member leads
    lab.control.power(new, on=False)
    rest = [n for n in ids if n != new]
    then = names[sorted(ids[n] for n in rest)[0]]
    with _talos_client(lab, endpoint=lab.address(rest[0])) as client:
        assert etcd.leader(client, lab.address(rest[1])) == ids[then]
    assert _leaders(lab) == [new, then]


def _pull(client, node, image="ghcr.io/siderolabs/installer:v1.14.2"):
    return client.call("ImagePull", _pull_request(image), node=node)


def test_image_pull_faults_delay_and_fail_the_pull(talos_lab):
    from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors
    lab = talos_lab(controlplanes=1, workers=1)
    worker = lab.address("worker-1")
    lab.control.set_faults("worker-1", pull_seconds=1.5)
    with _talos_client(lab) as client:
        lab.control.reset_timeline()
        started = time.monotonic()
        replies = _pull(client, worker)
        assert time.monotonic() - started >= 1.5
        assert replies[-1].name.startswith("ghcr.io/siderolabs/installer@sha256:")
        assert [tuple(e) for e in lab.control.timeline()] == [("worker-1", "Pull")]
        # a pull that outlasts the caller's deadline is the caller's timeout
        with pytest.raises(errors.TalosError):
            client.call("ImagePull", _pull_request(), node=worker, timeout=0.5)
        lab.control.set_faults("worker-1", pull_seconds=0, pull_error=True)
        with pytest.raises(errors.TalosCallError) as exc:
            _pull(client, worker, "ghcr.io/siderolabs/installer:v9.9.9")
        assert exc.value.code == "NOT_FOUND" and str(exc.value).startswith(worker + ": NOT_FOUND (ImagePull)")
        assert 'failed to resolve reference "ghcr.io/siderolabs/installer:v9.9.9": ' \
            'ghcr.io/siderolabs/installer:v9.9.9: not found' in str(exc.value)
        said = "failed to pull image: failed to resolve reference: dial tcp: lookup ghcr.io: i/o timeout"
        lab.control.set_faults("worker-1", pull_error=said)
        with pytest.raises(errors.TalosCallError) as exc:
            _pull(client, worker)
        assert exc.value.code == "UNKNOWN" and worker in str(exc.value) and said in str(exc.value)
        # a failed pull stores nothing: the installer it names is not there to run
        from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as tc
        lab.control.clear_faults("worker-1")
        upgrade = tc.request_type("LifecycleUpgrade")()
        upgrade.containerd.driver, upgrade.containerd.namespace = 1, 1
        upgrade.source.image_name = "ghcr.io/siderolabs/installer:v9.9.9"
        with pytest.raises(errors.TalosCallError) as exc:
            client.call("LifecycleUpgrade", upgrade, node=worker)
        assert exc.value.code == "INTERNAL" and "not found in containerd store" in str(exc.value)
    assert lab.machine("worker-1")["version"] == "v1.14.1"


def _pull_request(image="ghcr.io/siderolabs/installer:v1.14.2"):
    from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as tc
    request = tc.request_type("ImagePull")(image_ref=image)
    request.containerd.driver, request.containerd.namespace = 1, 1  # what talosctl upgrade sends
    return request
