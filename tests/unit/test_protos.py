"""Tests for the generated Talos API code (proto/ -> plugins/module_utils/talos/proto).

Run from the repository root:
    ~/.cache/maesh-ichor/env-2.19/bin/python -m pytest tests/unit/test_protos.py
"""

import binascii
import importlib
import os
import pkgutil
import subprocess
import sys

import pytest

from tests import collection_path

collection_path.ensure()

REPO = collection_path.REPO
PKG = "ansible_collections.maesh.ichor.plugins.module_utils.talos.proto"


def _proto(name):
    """A generated module: the messages from the collection's package, the grpclib stubs from the tests' own."""
    if name.endswith("_grpc"):
        return importlib.import_module("tests.protos_grpc." + name)
    return importlib.import_module("%s.%s" % (PKG, name))


def test_generated_code_is_fresh():
    script = os.path.join(REPO, "scripts", "gen-protos")
    proc = subprocess.run([sys.executable, script, "--check"], cwd=REPO,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stdout


def test_every_module_imports_by_collection_path():
    pkg = importlib.import_module(PKG)
    names = sorted(m.name for m in pkgutil.iter_modules(pkg.__path__))
    assert "machine_pb2" in names and not [n for n in names if n.endswith("_grpc")], "the stubs are the tests' own"
    for name in names:
        mod = _proto(name)
        assert mod.__name__ == "%s.%s" % (PKG, name)
        # every module is listed in the package docstring
        assert name in pkg.__doc__, name


def test_no_protoc_style_imports_left():
    pkg_dir = os.path.join(REPO, "plugins", "module_utils", "talos", "proto")
    for name in sorted(os.listdir(pkg_dir)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(pkg_dir, name)) as f:
            for line in f:
                line = line.strip()
                if line.startswith(("import ", "from ")) and not line.startswith("from __future__"):
                    assert (PKG in line or "google.protobuf" in line or "grpclib" in line
                            or "google.rpc" in line or line.split()[1] in ("abc", "typing")), (name, line)


def test_version_response_round_trip():
    machine_pb2 = _proto("machine_pb2")
    msg = machine_pb2.VersionResponse(messages=[machine_pb2.Version(
        metadata={"hostname": "10.5.0.2"},
        version={"tag": "v1.14.1", "sha": "abc", "go_version": "go1.26", "os": "linux", "arch": "amd64"},
        platform={"name": "metal", "mode": "metal"},
        features={"rbac": True},
    )])
    data = msg.SerializeToString()
    back = machine_pb2.VersionResponse.FromString(data)
    assert back == msg
    assert back.messages[0].version.tag == "v1.14.1"
    assert back.messages[0].metadata.hostname == "10.5.0.2"
    # messages = 1 (0x0a), metadata = 1 inside the element (0x0a)
    assert data[0] == 0x0A and data[2] == 0x0A


# MemberSpec encoded by Talos (pkg/machinery proto tests, current NetIP encoding)
MEMBER_SPEC_HEX = (
    "0a2c3778315375433845676535424758644166544566663569516e6c575a4c66763968314c474d7841327059"
    "6b4312060a04ac14000212120a10fd508d6042386302f85723fffe21d1e01a1c74616c6f732d64656661756c"
    "742d636f6e74726f6c706c616e652d3120022a0e54616c6f73202876312e302e3029"
)


def test_resource_with_member_spec_round_trip():
    cosi = _proto("cosi_resource_pb2")
    state = _proto("cosi_state_pb2")
    cluster = _proto("spec_cluster_pb2")
    enums = _proto("spec_enums_pb2")

    raw = binascii.unhexlify(MEMBER_SPEC_HEX)
    spec = cluster.MemberSpec.FromString(raw)
    assert spec.node_id == "7x1SuC8Ege5BGXdAfTEff5iQnlWZLfv9h1LGMxA2pYkC"
    assert [a.ip for a in spec.addresses] == [
        bytes([172, 20, 0, 2]), binascii.unhexlify("fd508d6042386302f85723fffe21d1e0")]
    assert spec.hostname == "talos-default-controlplane-1"
    assert spec.machine_type == enums.TYPE_CONTROL_PLANE
    assert spec.operating_system == "Talos (v1.0.0)"
    assert spec.SerializeToString() == raw

    spec.control_plane.api_server_port = 6443
    res = cosi.Resource(
        metadata=cosi.Metadata(namespace="cluster", type="Members.cluster.talos.dev",
                               id=spec.node_id, version="3", owner="cluster.MemberController",
                               phase="running", labels={"a": "b"}),
        spec=cosi.Spec(proto_spec=spec.SerializeToString(), yaml_spec="nodeId: x\n"),
    )
    reply = state.GetResponse.FromString(state.GetResponse(resource=res).SerializeToString())
    assert reply.resource == res
    back = cluster.MemberSpec.FromString(reply.resource.spec.proto_spec)
    assert back.control_plane.api_server_port == 6443
    assert back.addresses[0].ip == bytes([172, 20, 0, 2])


# Spec bytes written by Talos' own encoder (protoenc.Marshal of the machinery
# v1.14.1 Go structs, after proto.RegisterDefaultTypes()).
PROTOENC_VECTORS = {
    "member": "0a026e3112060a040a0500021a0363703120022a0f54616c6f73202876312e31342e3129320308ab32",
    "machine_status": "0804120e120c0a04657463641204646f776e",
    "volume_status": (
        "080612092f6465762f73646134400448808080800450016001a80101b2010d0a0b07ffffffffffffffffff01"
        "ca0102085a7a110a042f76617230fbffffffffffffffff01"),
    "version": "120554616c6f730a0776312e31342e31",
}


def test_protoenc_vectors_decode():
    cluster = _proto("spec_cluster_pb2")
    runtime = _proto("spec_runtime_pb2")
    block = _proto("spec_block_pb2")
    enums = _proto("spec_enums_pb2")

    member = cluster.MemberSpec.FromString(binascii.unhexlify(PROTOENC_VECTORS["member"]))
    assert member.node_id == "n1" and member.hostname == "cp1"
    assert member.addresses[0].ip == bytes([10, 5, 0, 2])
    assert member.machine_type == enums.TYPE_CONTROL_PLANE
    assert member.operating_system == "Talos (v1.14.1)"
    assert member.control_plane.api_server_port == 6443

    status = runtime.MachineStatusSpec.FromString(binascii.unhexlify(PROTOENC_VECTORS["machine_status"]))
    assert status.stage == enums.MACHINE_STAGE_RUNNING
    assert not status.status.ready
    assert [(c.name, c.reason) for c in status.status.unmet_conditions] == [("etcd", "down")]

    vol = block.VolumeStatusSpec.FromString(binascii.unhexlify(PROTOENC_VECTORS["volume_status"]))
    assert vol.phase == enums.VOLUME_PHASE_READY
    assert vol.location == "/dev/sda4" and vol.partition_index == 4 and vol.size == 1 << 30
    assert vol.filesystem == enums.FILESYSTEM_TYPE_XFS
    assert vol.encryption_provider == enums.ENCRYPTION_PROVIDER_LUKS2
    assert vol.encryption_slot == 1
    assert list(vol.tpm_encryption_options.pc_rs) == [7, -1]
    assert vol.trim_interval.seconds == 90
    assert vol.mount_spec.target_path == "/var" and vol.mount_spec.uid == -5

    version = runtime.VersionSpec.FromString(binascii.unhexlify(PROTOENC_VECTORS["version"]))
    assert (version.version, version.name) == ("v1.14.1", "Talos")

    for msg in (member, status, vol, version):
        assert msg.FromString(msg.SerializeToString()) == msg


def test_machine_config_spec():
    config = _proto("spec_config_pb2")
    yaml_doc = b"version: v1alpha1\nmachine: {}\n"
    data = config.MachineConfigSpec(yaml_marshalled=yaml_doc).SerializeToString()
    assert data == b"\x0a" + bytes([len(yaml_doc)]) + yaml_doc


def _field(module, message, field):
    return _proto(module).DESCRIPTOR.message_types_by_name[message].fields_by_name[field]


@pytest.mark.parametrize("module,message,field,number", [
    ("machine_pb2", "ResetRequest", "system_partitions_to_wipe", 3),
    ("machine_pb2", "ResetRequest", "mode", 5),
    ("machine_pb2", "ApplyConfigurationRequest", "mode", 4),
    ("machine_pb2", "ApplyConfigurationRequest", "try_mode_timeout", 6),
    ("machine_pb2", "EtcdMembers", "members", 3),
    ("machine_pb2", "EtcdMember", "id", 2),
    ("machine_pb2", "EtcdMemberStatus", "member_id", 10),
    ("machine_pb2", "Version", "metadata", 1),
    ("machine_pb2", "UpgradeRequest", "reboot_mode", 5),
    ("machine_image_pb2", "ImageServicePullRequest", "image_ref", 3),
    ("machine_lifecycle_pb2", "LifecycleServiceUpgradeRequest", "source", 2),
    ("common_pb2", "Metadata", "status", 3),
    ("common_pb2", "Data", "bytes", 2),
    ("storage_pb2", "Disk", "readonly", 13),
    ("cosi_resource_pb2", "Resource", "spec", 2),
    ("cosi_resource_pb2", "Metadata", "labels", 10),
    ("cosi_resource_pb2", "Metadata", "annotations", 11),
    ("cosi_state_pb2", "ListRequest", "options", 3),
    ("cosi_state_pb2", "GetRequest", "options", 4),
    ("spec_cluster_pb2", "MemberSpec", "control_plane", 6),
    ("spec_runtime_pb2", "MachineStatusSpec", "status", 2),
    ("spec_block_pb2", "VolumeStatusSpec", "encryption_provider", 12),
    ("spec_block_pb2", "DiscoveredVolumeSpec", "dev_path", 17),
    ("spec_config_pb2", "MachineConfigSpec", "yaml_marshalled", 1),
])
def test_field_numbers(module, message, field, number):
    assert _field(module, message, field).number == number


def test_types_and_enums():
    assert _field("common_pb2", "Metadata", "status").message_type.full_name == "google.rpc.Status"
    assert _field("spec_cluster_pb2", "MemberSpec", "addresses").message_type.full_name == "common.NetIP"
    enums = _proto("spec_enums_pb2")
    assert enums.RuntimeMachineStage.Value("MACHINE_STAGE_RUNNING") == 4
    assert enums.RuntimeMachineStage.Value("MACHINE_STAGE_UPGRADING") == 8
    assert enums.BlockEncryptionProviderType.Value("ENCRYPTION_PROVIDER_LUKS2") == 1
    machine_pb2 = _proto("machine_pb2")
    assert machine_pb2.ApplyConfigurationRequest.Mode.Value("TRY") == 4
    assert machine_pb2.ResetRequest.WipeMode.Value("USER_DISKS") == 2


def test_services():
    machine_pb2 = _proto("machine_pb2")
    svc = machine_pb2.DESCRIPTOR.services_by_name["MachineService"]
    assert svc.full_name == "machine.MachineService"
    assert svc.methods_by_name["Kubeconfig"].output_type.full_name == "common.Data"
    state = _proto("cosi_state_pb2").DESCRIPTOR.services_by_name["State"]
    assert state.full_name == "cosi.resource.State"
    assert sorted(state.methods_by_name) == ["Get", "List"]


def test_grpclib_stubs_end_to_end():
    """Serve the generated server bases in-process and call them through the stubs."""
    import asyncio

    from google.protobuf import empty_pb2
    from grpclib.testing import ChannelFor

    machine_pb2 = _proto("machine_pb2")
    machine_grpc = _proto("machine_grpc")
    common_pb2 = _proto("common_pb2")
    cosi_resource_pb2 = _proto("cosi_resource_pb2")
    cosi_state_pb2 = _proto("cosi_state_pb2")
    cosi_state_grpc = _proto("cosi_state_grpc")
    lifecycle_pb2 = _proto("machine_lifecycle_pb2")
    lifecycle_grpc = _proto("machine_lifecycle_grpc")

    class Machine(machine_grpc.MachineServiceBase):
        pass

    # implement just what we call; the other abstract methods stay unimplemented
    for name in list(Machine.__abstractmethods__):
        async def unimplemented(self, stream):
            raise NotImplementedError
        setattr(Machine, name, unimplemented)

    async def version(self, stream):
        await stream.recv_message()
        await stream.send_message(machine_pb2.VersionResponse(
            messages=[machine_pb2.Version(version={"tag": "v1.14.1"})]))

    async def kubeconfig(self, stream):
        await stream.recv_message()
        for chunk in (b"ab", b"cd"):
            await stream.send_message(common_pb2.Data(bytes=chunk))

    Machine.Version = version
    Machine.Kubeconfig = kubeconfig
    Machine.__abstractmethods__ = frozenset()

    class State(cosi_state_grpc.StateBase):
        async def Get(self, stream):
            req = await stream.recv_message()
            await stream.send_message(cosi_state_pb2.GetResponse(resource=cosi_resource_pb2.Resource(
                metadata={"namespace": req.namespace, "type": req.type, "id": req.id})))

        async def List(self, stream):
            req = await stream.recv_message()
            for rid in ("a", "b"):
                await stream.send_message(cosi_state_pb2.ListResponse(resource=cosi_resource_pb2.Resource(
                    metadata={"namespace": req.namespace, "type": req.type, "id": rid})))

    class Lifecycle(lifecycle_grpc.LifecycleServiceBase):
        async def Install(self, stream):
            raise NotImplementedError

        async def Upgrade(self, stream):
            req = await stream.recv_message()
            await stream.send_message(lifecycle_pb2.LifecycleServiceUpgradeResponse(
                progress={"message": "installing " + req.source.image_name}))
            await stream.send_message(lifecycle_pb2.LifecycleServiceUpgradeResponse(progress={"exit_code": 0}))

    async def scenario():
        async with ChannelFor([Machine(), State(), Lifecycle()]) as channel:
            machine = machine_grpc.MachineServiceStub(channel)
            reply = await machine.Version(empty_pb2.Empty())
            assert reply.messages[0].version.tag == "v1.14.1"
            chunks = await machine.Kubeconfig(empty_pb2.Empty())
            assert b"".join(c.bytes for c in chunks) == b"abcd"

            state = cosi_state_grpc.StateStub(channel)
            got = await state.Get(cosi_state_pb2.GetRequest(namespace="config", type="MachineConfigs.config.talos.dev",
                                                            id="v1alpha1"))
            assert got.resource.metadata.id == "v1alpha1"
            listed = await state.List(cosi_state_pb2.ListRequest(namespace="cluster", type="Members.cluster.talos.dev"))
            assert [r.resource.metadata.id for r in listed] == ["a", "b"]

            lifecycle = lifecycle_grpc.LifecycleServiceStub(channel)
            progress = await lifecycle.Upgrade(lifecycle_pb2.LifecycleServiceUpgradeRequest(
                source={"image_name": "ghcr.io/siderolabs/installer:v1.14.1"}))
            assert [p.progress.WhichOneof("response") for p in progress] == ["message", "exit_code"]

    asyncio.run(scenario())


# Under the pure-Python protobuf backend the block protoc writes for it runs: every descriptor gets its offsets and
# options, and messages still round-trip.
PURE_PYTHON_PROBE = r"""
import importlib, pkgutil, sys
from google.protobuf.internal import api_implementation
assert api_implementation.Type() == "python", api_implementation.Type()
pkg = importlib.import_module(sys.argv[1])
for info in pkgutil.iter_modules(pkg.__path__):
    if info.name.endswith("_pb2"):
        importlib.import_module(sys.argv[1] + "." + info.name)
machine_pb2 = importlib.import_module(sys.argv[1] + ".machine_pb2")
request = machine_pb2.DESCRIPTOR.message_types_by_name["ApplyConfigurationRequest"]
assert request._serialized_start and request._serialized_end > request._serialized_start
reboot = request.enum_types_by_name["Mode"].values_by_name["REBOOT"]
assert reboot.GetOptions().deprecated is True
data = machine_pb2.ApplyConfigurationRequest(data=b"x", mode=machine_pb2.ApplyConfigurationRequest.AUTO).SerializeToString()
assert machine_pb2.ApplyConfigurationRequest.FromString(data).mode == machine_pb2.ApplyConfigurationRequest.AUTO
print("ok")
"""


def test_the_pure_python_backend_runs_protocs_block_for_it():
    env = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python", PYTHONPATH=collection_path.collections_root())
    done = subprocess.run([sys.executable, "-c", PURE_PYTHON_PROBE, PKG], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
