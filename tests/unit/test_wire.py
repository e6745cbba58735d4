"""The client's gRPC transport (talos/wire.py) against a scripted HTTP/2 server on loopback TLS: each test writes
the frames a server may send (header blocks from the ``hpack`` package, another implementation) and reads what the
client sent. HTTP/2's corners a Talos machine (grpc-go) may use: CONTINUATION, padding, a message split over DATA
frames, trailers-only replies, PING, SETTINGS, flow control both ways, RST_STREAM, GOAWAY. And a fuzz: a reply's
bytes mutated make the client return or fail with one TalosError line, never anything else and never a hang. The
same transport against grpc-go itself: tests/integration/test_wire_grpc_go.py."""

import asyncio
import struct

import hpack as peer
import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as talos_client
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, wire
from ansible_collections.maesh.ichor.plugins.module_utils.talos.proto import common_pb2, machine_pb2
from tests import scripted_h2 as h2f
from tests.scripted_h2 import (
    OK_HEADERS, OK_TRAILERS, Server, answer, drain, grpc_message, headers, read_frame, read_request, reply, until)
from tests.unit.conftest import mutate_bytes

# the runtime dependencies' floors (h2, hpack, hyperframe, protobuf, kubernetes, PyYAML) run these too
pytestmark = pytest.mark.floor


@pytest.fixture(scope="module")
def server():
    made = Server()
    yield made
    made.stop()


@pytest.fixture
def client(server):
    made = talos_client.TalosClient(endpoint=server.address, maintenance=True, timeout=3.0)
    server.connections.clear()
    server.preface = h2f.frame(h2f.SETTINGS, 0, 0)
    yield made
    made.close()


VERSION = machine_pb2.VersionResponse(messages=[machine_pb2.Version(version=machine_pb2.VersionInfo(tag="v1.14.5"))])


def test_a_reply_of_every_frame_shape(server, client):
    body = grpc_message(VERSION.SerializeToString())
    block = headers(OK_HEADERS + [("x-long", "v" * 300)])

    def padded(data):
        return bytes([7]) + data + b"\x00" * 7
    server.behave = answer(
        h2f.frame(h2f.SETTINGS, 0, 0, struct.pack(">HI", h2f.MAX_CONCURRENT_STREAMS, 100)) +
        h2f.frame(h2f.PING, 0, 0, b"12345678") +
        h2f.frame(h2f.HEADERS, h2f.PADDED | h2f.PRIORITY_FLAG, 1, padded(b"\x00\x00\x00\x00\x10" + block[:20])) +
        h2f.frame(h2f.CONTINUATION, 0, 1, block[20:40]) +
        h2f.frame(h2f.CONTINUATION, h2f.END_HEADERS, 1, block[40:]) +
        h2f.frame(0xFA, 0, 1, b"a frame type no one knows") +
        h2f.frame(h2f.DATA, h2f.PADDED, 1, padded(body[:3])) +
        h2f.frame(h2f.DATA, 0, 1, body[3:]) +
        h2f.frame(h2f.HEADERS, h2f.END_HEADERS | h2f.END_STREAM, 1, headers(OK_TRAILERS)))
    assert client.call("Version").messages[0].version.tag == "v1.14.5"
    client.close()
    seen = server.connections[0]
    assert until(lambda: (h2f.PING, h2f.ACK, 0, b"12345678") in seen and (h2f.SETTINGS, h2f.ACK, 0, b"") in seen)


def test_the_request_is_what_grpc_asks(server, client):
    server.behave = answer(reply(VERSION.SerializeToString()))
    client.call("Version", node="10.5.0.3")
    client.close()
    seen = server.connections[0]
    block = next(payload for kind, _flags, _sid, payload in seen if kind == h2f.HEADERS)
    fields = dict(peer.Decoder().decode(block, raw=False))
    assert fields[":method"] == "POST" and fields[":path"] == "/machine.MachineService/Version"
    assert fields["content-type"] == "application/grpc" and fields["te"] == "trailers"
    assert fields["node"] == "10.5.0.3" and fields["grpc-timeout"] == "3000m"
    assert fields[":authority"] == server.address and fields[":scheme"] == "https"


@pytest.mark.parametrize("frames, error, said", [
    # trailers-only: the status in the one header block, its message percent-encoded
    ([(h2f.HEADERS, h2f.END_HEADERS | h2f.END_STREAM, OK_HEADERS + [
        ("grpc-status", "7"), ("grpc-message", "not allowed: %C3%A9t%2525")])], errors.TalosCallError,
     "not allowed: \u00e9t%25"),
    ([(h2f.HEADERS, h2f.END_HEADERS | h2f.END_STREAM, [(":status", "404")])], errors.TalosCallError, "UNIMPLEMENTED"),
    ([(h2f.HEADERS, h2f.END_HEADERS | h2f.END_STREAM, [(":status", "200"), ("content-type", "text/html")])],
     errors.TalosCallError, "broke the gRPC protocol"),
    ([(h2f.HEADERS, h2f.END_HEADERS, OK_HEADERS), (h2f.DATA, h2f.END_STREAM, b"")], errors.TalosCallError,
     "broke the gRPC protocol"),  # no status
    ([(h2f.HEADERS, h2f.END_HEADERS, OK_HEADERS), (h2f.RST_STREAM, 0, struct.pack(">I", 2))], errors.TalosError,
     "closed the connection"),
    ([(h2f.GOAWAY, 0, struct.pack(">II", 0, 0))], errors.TalosError, "closed the connection"),
    ([(h2f.PUSH_PROMISE, h2f.END_HEADERS, b"\x00\x00\x00\x02")], errors.TalosCallError, "broke the gRPC protocol"),
    ([(h2f.HEADERS, 0, OK_HEADERS), (h2f.DATA, 0, b"")], errors.TalosCallError, "broke the gRPC protocol"),
])
def test_a_reply_that_ends_badly_is_one_talos_error(server, client, frames, error, said):
    def encoded(kind, flags, content):
        stream_id = 0 if kind == h2f.GOAWAY else 1
        data = headers(content) if isinstance(content, list) else content
        return h2f.frame(kind, flags, stream_id, data)
    server.behave = answer(b"".join(encoded(*f) for f in frames))
    with pytest.raises(error) as raised:
        client.call("Version")
    assert said in str(raised.value) and "\n" not in str(raised.value)


def test_after_goaway_the_next_call_opens_a_new_connection(server, client):
    async def behave(reader, writer, seen):
        await read_request(reader, seen)
        if len(server.connections) == 1:
            writer.write(reply(VERSION.SerializeToString()) + h2f.frame(h2f.GOAWAY, 0, 0, struct.pack(">II", 1, 0)))
        else:
            writer.write(reply(VERSION.SerializeToString()))
        await drain(reader, seen)
    server.behave = behave
    client.call("Version")
    client.call("Version")
    assert len(server.connections) == 2


def test_the_client_waits_for_the_servers_window_before_sending_more(server, client):
    request = machine_pb2.ApplyConfigurationRequest(data=b"x" * 200000, dry_run=True)
    got = {}

    async def behave(reader, writer, seen):
        body = b""
        while True:
            kind, flags, stream_id, payload = await read_frame(reader)
            if kind != h2f.DATA:
                continue
            body += payload
            # the default window: never more than 65535 bytes unacknowledged
            assert len(body) - got.get("granted", 0) <= 65535
            if len(body) - got.get("granted", 0) == 65535 or flags & h2f.END_STREAM:
                got["granted"] = len(body)
                update = struct.pack(">I", 65535)
                writer.write(h2f.frame(h2f.WINDOW_UPDATE, 0, 0, update) +
                             h2f.frame(h2f.WINDOW_UPDATE, 0, stream_id, update))
            if flags & h2f.END_STREAM:
                break
        got["body"] = body
        writer.write(reply(machine_pb2.ApplyConfigurationResponse().SerializeToString()))
        await drain(reader, seen)
    server.behave = behave
    client.call("ApplyConfiguration", request)
    assert got["body"] == grpc_message(request.SerializeToString())


def test_a_reply_larger_than_the_window_is_acknowledged_as_it_arrives(server, client):
    size = wire.RECEIVE_WINDOW + 100000
    body = grpc_message(common_pb2.Data(bytes=b"s" * size).SerializeToString())

    async def behave(reader, writer, seen):
        await read_request(reader, seen)
        writer.write(h2f.frame(h2f.HEADERS, h2f.END_HEADERS, 1, headers(OK_HEADERS)))
        granted = wire.RECEIVE_WINDOW  # what the client's settings allow the stream (and its update the connection)
        sent = 0
        reading = asyncio.ensure_future(read_frame(reader))
        while sent < len(body):
            if sent == granted:  # the window is spent: only the client's update lets the rest through
                kind, flags, stream_id, payload = await reading
                seen.append((kind, flags, stream_id, payload))
                reading = asyncio.ensure_future(read_frame(reader))
                if kind == h2f.WINDOW_UPDATE and stream_id == 1:
                    granted += struct.unpack(">I", payload)[0]
                continue
            part = body[sent:min(sent + 16384, granted)]
            writer.write(h2f.frame(h2f.DATA, 0, 1, part))
            sent += len(part)
            await writer.drain()
        writer.write(h2f.frame(h2f.HEADERS, h2f.END_HEADERS | h2f.END_STREAM, 1, headers(OK_TRAILERS)))
        seen.append(await reading)
        await drain(reader, seen)
    server.behave = behave
    client.timeout = 30.0
    chunks = client.call("Kubeconfig")
    assert len(chunks) == 1 and len(chunks[0].bytes) == size


def test_concurrent_calls_share_one_connection(server, client):
    async def behave(reader, writer, seen):
        answered = 0
        while answered < 20:
            kind, flags, stream_id, payload = await read_frame(reader)
            if kind == h2f.DATA and flags & h2f.END_STREAM:
                writer.write(reply(VERSION.SerializeToString(), stream_id))
                answered += 1
        await drain(reader, seen)
    server.behave = behave
    nodes = ["10.5.0.%d" % i for i in range(20)]
    results = client.fan_out(lambda node: client.ainvoke("Version", node=node), nodes)
    assert all(r.error is None for r in results.values()) and len(server.connections) == 1


settings = h2f.settings


def test_no_call_goes_out_before_the_servers_settings(server, client):
    server.preface = b""
    before = []

    async def behave(reader, writer, seen):
        try:  # what the client sends while the server has not yet sent its SETTINGS
            while True:
                before.append(await asyncio.wait_for(read_frame(reader), 0.3))
        except asyncio.TimeoutError:
            pass
        writer.write(settings(MAX_CONCURRENT_STREAMS=5))
        await read_request(reader, seen)
        writer.write(reply(VERSION.SerializeToString()))
        await drain(reader, seen)
    server.behave = behave
    assert client.call("Version").messages[0].version.tag == "v1.14.5"
    assert [kind for kind, _f, _s, _p in before] == [h2f.SETTINGS, h2f.WINDOW_UPDATE]  # its own preface only


def test_calls_beyond_the_servers_limit_wait_for_a_free_stream(server, client):
    server.preface = settings(MAX_CONCURRENT_STREAMS=3)
    counts = {"open": 0, "most": 0}

    async def behave(reader, writer, seen):
        async def answer_later(stream_id):
            await asyncio.sleep(0.02)
            counts["open"] -= 1
            writer.write(reply(VERSION.SerializeToString(), stream_id))
        while True:
            kind, flags, stream_id, _payload = await read_frame(reader)
            if kind == h2f.HEADERS:
                counts["open"] += 1
                counts["most"] = max(counts["most"], counts["open"])
            if kind == h2f.DATA and flags & h2f.END_STREAM:
                asyncio.ensure_future(answer_later(stream_id))
    server.behave = behave
    nodes = ["10.5.0.%d" % i for i in range(30)]
    results = client.fan_out(lambda node: client.ainvoke("Version", node=node), nodes)
    assert all(r.error is None for r in results.values())
    assert counts["most"] == 3 and len(server.connections) == 1


def test_calls_waiting_for_a_stream_go_to_a_new_connection_after_goaway(server, client):
    server.preface = settings(MAX_CONCURRENT_STREAMS=1)

    async def behave(reader, writer, seen):
        first = len(server.connections) == 1
        while True:
            await read_request(reader, seen)
            stream_id = seen[-1][2]
            if first:  # going away, this call still answered: the calls waiting for a stream were never sent here
                writer.write(h2f.frame(h2f.GOAWAY, 0, 0, struct.pack(">II", stream_id, 0)))
            writer.write(reply(VERSION.SerializeToString(), stream_id))
    server.behave = behave
    results = client.fan_out(lambda node: client.ainvoke("Version", node=node), ["10.5.0.1", "10.5.0.2", "10.5.0.3"])
    assert [r.error for r in results.values()] == [None, None, None]
    assert len(server.connections) == 2


def test_a_server_that_does_not_begin_with_settings_broke_the_protocol(server, client):
    server.preface = reply(VERSION.SerializeToString())  # a reply where its SETTINGS should be
    server.behave = lambda reader, unused_writer, seen: drain(reader, seen)
    with pytest.raises(errors.TalosCallError, match="broke the gRPC protocol"):
        client.call("Version")


def test_a_server_that_never_answers_is_a_timeout(server, client):
    async def behave(reader, writer, seen):
        await read_request(reader, seen)
        await drain(reader, seen)
    server.behave = behave
    client.timeout = 0.3
    with pytest.raises(errors.TalosUnavailable, match="no answer within"):
        client.call("Version")
    client.close()
    # the client gave the stream up with RST_STREAM CANCEL (read by the server's thread)
    assert until(lambda: (h2f.RST_STREAM, 0, 1, struct.pack(">I", 8)) in server.connections[0])


def test_fuzz_the_frames_of_a_reply(fuzz, server):
    valid = (h2f.frame(h2f.SETTINGS, 0, 0, struct.pack(">HI", h2f.INITIAL_WINDOW_SIZE, 1 << 20)) +
             reply(VERSION.SerializeToString()))
    run = fuzz("wire-frames", seconds=8.0)
    for index, rng in run.cases():
        data = valid
        for _round in range(rng.randint(1, 3)):
            data = mutate_bytes(data, rng)
        server.behave = answer(data)
        talos = talos_client.TalosClient(endpoint=server.address, maintenance=True, timeout=0.5)
        try:
            run.check(lambda: talos.call("Version"), index, data, [])
        finally:
            talos.close()
