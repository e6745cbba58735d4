"""The client's gRPC transport (talos/wire.py) against grpc-go, the stack a Talos machine's apid serves with, in a
peer that shares none of our code: the lab's etcd (built from its Go modules by tests/lab/kube/build.sh), serving
its gRPC API over mutual TLS with an Ed25519 CA as Talos makes them. Our TLS setup (transport.client_context from a
talosconfig), grpc-go's header blocks (Huffman-coded, indexed from its dynamic table across calls; hpack decodes them), its statuses and
messages, a request larger than grpc-go's first window, a reply larger than ours, and concurrent calls on one
connection. etcd's messages are written and read by hand here: the checks need only a few of their fields."""

import asyncio
import contextlib
import os
import subprocess
import time

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.talos import talosconfig, transport, wire
from tests.lab import pki
from tests.lab.kube.cluster import _free_port as free_port  # pylint: disable=protected-access
from tests.lab.kube.cluster import binaries


def varint(value):
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def field(number, data):
    """A length-delimited protobuf field."""
    return varint(number << 3 | 2) + varint(len(data)) + data


def fields(message):
    """[(number, value)] of a protobuf message: ints for varints, bytes for length-delimited fields."""
    out = []
    pos = 0
    while pos < len(message):
        key, pos = _read_varint(message, pos)
        number, kind = key >> 3, key & 7
        if kind == 0:
            value, pos = _read_varint(message, pos)
        elif kind == 2:
            size, pos = _read_varint(message, pos)
            value, pos = message[pos:pos + size], pos + size
        else:
            raise AssertionError("a wire type these checks do not read: %d" % kind)
        out.append((number, value))
    return out


def _read_varint(data, pos):
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


@pytest.fixture(scope="module")
def etcd(tmp_path_factory):
    """(address, talosconfig context) of an etcd serving gRPC over mutual TLS with an Ed25519 CA."""
    with etcd_over_tls(str(tmp_path_factory.mktemp("etcd-tls"))) as served:
        yield served


@contextlib.contextmanager
def etcd_over_tls(work, *options):
    """The lab's etcd with ``options``, serving gRPC over mutual TLS with an Ed25519 CA: (port, talosconfig context)."""
    ca = pki.new_ca(pki.ED25519)
    server_crt, server_key = pki.issue_server(ca, "etcd", ["127.0.0.1"]).write(work, "server")
    with open(os.path.join(work, "ca.crt"), "wb") as fh:
        fh.write(ca.cert_pem)
    port, peer = free_port(), free_port()
    url = "https://127.0.0.1:%d" % port
    process = subprocess.Popen([
        binaries(names=("etcd",))["etcd"], "--name", "wire", "--data-dir", os.path.join(work, "data"),
        "--listen-client-urls", url, "--advertise-client-urls", url,
        "--listen-peer-urls", "http://127.0.0.1:%d" % peer, "--initial-advertise-peer-urls",
        "http://127.0.0.1:%d" % peer, "--initial-cluster", "wire=http://127.0.0.1:%d" % peer,
        "--cert-file", server_crt, "--key-file", server_key, "--client-cert-auth",
        "--trusted-ca-file", os.path.join(work, "ca.crt"), "--log-level", "error"] + list(options),
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "etcd.log"), "wb"))
    path = pki.write_talosconfig(os.path.join(work, "talosconfig"), {"etcd": {
        "endpoints": ["127.0.0.1:%d" % port], "nodes": [], "ca": ca,
        "client": pki.issue_client(ca, roles=("os:admin",))}}, "etcd")
    context = talosconfig.load(path=path)
    try:
        _wait_ready(process, port, context, work)
        yield port, context
    finally:
        process.terminate()
        process.wait(20)


def _wait_ready(process, port, context, work):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            with open(os.path.join(work, "etcd.log")) as fh:
                raise AssertionError("etcd exited: %s" % fh.read()[-2000:])
        try:
            calls(context, port, lambda channel: channel.call("/etcdserverpb.Maintenance/Status", b"", timeout=5))
            return
        except (OSError, wire.Terminated, wire.CallError, asyncio.TimeoutError):
            time.sleep(0.2)
    raise AssertionError("etcd did not answer over TLS within 60 s")


def calls(context, port, use):
    """``use(channel)``'s result (a coroutine) on a fresh channel of our transport and loop."""
    async def run():
        channel = wire.Channel("127.0.0.1", port, transport.client_context(context.credentials))
        try:
            return await asyncio.wait_for(use(channel), 60)
        finally:
            channel.close()
    return asyncio.run(run())


def test_status_over_mutual_tls_with_an_ed25519_ca(etcd):
    port, context = etcd
    (reply,) = calls(context, port, lambda channel: channel.call("/etcdserverpb.Maintenance/Status", b"", timeout=5))
    status = dict(fields(reply))
    assert status[2].startswith(b"3.6.")  # StatusResponse.version


def test_grpc_gos_statuses_and_messages(etcd):
    port, context = etcd

    async def use(channel):
        outcomes = []
        for path, request in (("/etcdserverpb.KV/Put", b""), ("/etcdserverpb.Nope/Missing", b"")):
            try:
                await channel.call(path, request, timeout=5)
            except wire.CallError as exc:
                outcomes.append((exc.status, exc.message))
        return outcomes

    put, missing = calls(context, port, use)
    assert put == ("INVALID_ARGUMENT", "etcdserver: key is not provided")
    assert missing[0] == "UNIMPLEMENTED" and "etcdserverpb.Nope" in missing[1]


def test_large_requests_and_a_reply_beyond_our_window_on_one_connection(etcd):
    port, context = etcd
    value = os.urandom(1000 * 1000)  # under etcd's 1.5 MiB request limit, far over grpc-go's first 64 KiB window
    count = 20  # the Range reply: about 20 MB, over RECEIVE_WINDOW

    async def use(channel):
        puts = [channel.call("/etcdserverpb.KV/Put", field(1, b"wire/%02d" % i) + field(2, value), timeout=30)
                for i in range(count)]
        await asyncio.gather(*puts)  # concurrent calls, each larger than the window, on one connection
        connections = {id(channel._connection)}  # pylint: disable=protected-access
        ranged = await channel.call("/etcdserverpb.KV/Range", field(1, b"wire/") + field(2, b"wire0"), timeout=30)
        connections.add(id(channel._connection))  # pylint: disable=protected-access
        return ranged, connections

    (reply,), connections = calls(context, port, use)
    assert len(reply) > wire.RECEIVE_WINDOW and len(connections) == 1
    kvs = [dict(fields(kv)) for number, kv in fields(reply) if number == 2]
    assert [kv[1] for kv in kvs] == [b"wire/%02d" % i for i in range(count)]
    assert all(kv[5] == value for kv in kvs)


def test_many_calls_in_flight_at_once(etcd):
    port, context = etcd

    async def use(channel):
        return await asyncio.gather(*[channel.call("/etcdserverpb.Maintenance/Status", b"", timeout=10)
                                      for _index in range(200)])

    replies = calls(context, port, use)
    assert len(replies) == 200 and all(dict(fields(r[0]))[2].startswith(b"3.6.") for r in replies)
