"""Client pieces that need no lab: reply unwrapping with per-node errors, kubeconfig archives,
the plan callback's text."""

import asyncio
import io
import tarfile

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as tc
from ansible_collections.maesh.ichor.plugins.module_utils.talos import kubeconfig as talos_kubeconfig
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors
from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine
from ansible_collections.maesh.ichor.plugins.module_utils.talos.proto import common_pb2, machine_pb2

# the runtime dependencies' floors (h2, hpack, hyperframe, protobuf, kubernetes, PyYAML) run these too
pytestmark = pytest.mark.floor


def test_first_returns_the_message():
    reply = machine_pb2.VersionResponse(messages=[machine_pb2.Version(version={"tag": "v1.14.1"})])
    assert tc.version_info(tc.TalosClient.first(reply))["tag"] == "v1.14.1"


def test_first_raises_the_nodes_error_from_its_metadata():
    reply = machine_pb2.VersionResponse(messages=[machine_pb2.Version(metadata={
        "hostname": "10.0.0.7", "error": "rpc error: connection refused", "status": {"code": 14}})])
    with pytest.raises(errors.TalosCallError) as exc:
        tc.TalosClient.first(reply, "10.0.0.7")
    assert exc.value.code == "UNAVAILABLE"
    assert str(exc.value).startswith("10.0.0.7: UNAVAILABLE")


def test_first_of_an_empty_reply():
    with pytest.raises(errors.TalosCallError):
        tc.TalosClient.first(machine_pb2.VersionResponse(), "n")


def _targz(files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_kubeconfig_from_chunks():
    data = _targz({"kubeconfig": b"apiVersion: v1\nkind: Config\n"})
    chunks = [common_pb2.Data(bytes=data[:10]), common_pb2.Data(bytes=data[10:])]
    assert talos_kubeconfig.kubeconfig_bytes(chunks).startswith(b"apiVersion: v1")
    with pytest.raises(errors.TalosCallError):
        talos_kubeconfig.kubeconfig_bytes([common_pb2.Data(bytes=_targz({"other": b"x"}))])


def test_dial_only_refuses_to_address_other_nodes():
    client = tc.TalosClient(dial_only="127.0.0.1", maintenance=True, timeout=1)
    try:
        with pytest.raises(errors.TalosError) as exc:
            client.call("Version", node="10.0.0.8")
        assert "dials 127.0.0.1 only" in str(exc.value)
    finally:
        client.close()


def test_call_error_hint_for_maintenance():
    err = errors.call_error("10.0.0.1", "UNIMPLEMENTED", "API is not implemented in maintenance mode")
    assert "maintenance mode" in str(err) and "10.0.0.1" in str(err)


def test_gather_runs_every_read_to_its_end_then_raises_the_first_failure_in_order():
    finished = []

    async def read(name, delay, fails=False):
        await asyncio.sleep(delay)
        finished.append(name)
        if fails:
            raise errors.TalosError("%s failed" % name)
        return name

    async def reads():
        return await machine.gather(read("slow", 0.05), read("second", 0.02, fails=True), read("first", 0.0, fails=True))

    with pytest.raises(errors.TalosError, match="second failed"):  # the given order, not the order they failed in
        asyncio.run(reads())
    assert sorted(finished) == ["first", "second", "slow"]  # none abandoned while running

    async def fine():
        return await machine.gather(read("a", 0.01), read("b", 0.0))

    assert asyncio.run(fine()) == ["a", "b"]
