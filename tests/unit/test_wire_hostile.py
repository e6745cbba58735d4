"""The transport (talos/wire.py on h2) against servers that break HTTP/2 and gRPC on purpose. Reclaim and maintenance
mode dial machines someone else controls, so what such a machine sends must end each call within its deadline, as
one TalosError line, with the controller's memory bounded: no flood of frames, no header block or message without
end, and no setting out of range surfaces as anything else (a traceback, "a bug", a hang, gigabytes)."""

import asyncio
import random
import re
import struct
import time
import tracemalloc

import hpack as peer
import pytest
from hpack.hpack import encode_integer

from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as talos_client
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors
from tests import scripted_h2 as h2f
from tests.scripted_h2 import OK_HEADERS, OK_TRAILERS, Server, drain, grpc_message, headers, read_request

# the runtime dependencies' floors (h2, hpack, hyperframe, protobuf, kubernetes, PyYAML) run these too
pytestmark = pytest.mark.floor

DEADLINE = 1.0
# what a call may take beyond its deadline (the loop's turn, closing the connection) on a loaded CI machine
SLACK = 1.5
# peak memory a hostile server may make this process allocate, as tracemalloc counts it (server and client share the
# process, and both are counted; the process's own peak RSS would hide it below what earlier tests reached): the old
# transport grew by over a gigabyte within seconds on several of these
MEMORY_MB = 100


@pytest.fixture(scope="module")
def server():
    made = Server()
    yield made
    made.stop()


@pytest.fixture
def allocated():
    """The peak of what Python allocated during the test, in MB (tracemalloc)."""
    tracemalloc.start()
    try:
        yield lambda: tracemalloc.get_traced_memory()[1] / float(1 << 20)
    finally:
        tracemalloc.stop()


async def _forever(writer, chunk):
    """Write ``chunk`` until the client is gone, without reading what it sends."""
    while not writer.is_closing():
        writer.write(chunk)
        await writer.drain()
        await asyncio.sleep(0)  # drain returns at once on a transport the client closed
    raise ConnectionResetError("the client is gone")


def _after_request(then):
    async def behave(reader, writer, seen):
        await read_request(reader, seen)
        await then(reader, writer, seen)
    return behave


def _write(data, and_then=None):
    async def then(reader, writer, seen):
        writer.write(data)
        if and_then is not None:
            await and_then(writer)
        await drain(reader, seen)
    return _after_request(then)


def _bomb():
    # one 4 KB field into the dynamic table, then indexed 12000 times: a 16 KB block that decodes to 48 MB
    block = peer.Encoder().encode([("x", "a" * 4000)], huffman=False) + b"\xbe" * 12000
    return h2f.frame(h2f.HEADERS, h2f.END_HEADERS, 1, block)


def _slow_block():
    # a single Huffman-coded value of 1 MB ("a", 5 bits, 1.6 million times) over HEADERS and 61 CONTINUATION frames:
    # all of it is decoded before its size can be judged
    value = int("00011" * 8, 2).to_bytes(5, "big") * 200000
    length = encode_integer(len(value), 7)
    block = b"\x00\x01x" + bytes([0x80 | length[0]]) + bytes(length[1:]) + value
    chunks = [block[i:i + 16384] for i in range(0, len(block), 16384)]
    frames = [h2f.frame(h2f.HEADERS, 0, 1, chunks[0])]
    for index, chunk in enumerate(chunks[1:], 2):
        frames.append(h2f.frame(h2f.CONTINUATION, h2f.END_HEADERS if index == len(chunks) else 0, 1, chunk))
    return b"".join(frames)


def _trailers(status):
    return (h2f.frame(h2f.HEADERS, h2f.END_HEADERS, 1, headers(OK_HEADERS)) +
            h2f.frame(h2f.HEADERS, h2f.END_HEADERS | h2f.END_STREAM, 1, headers([("grpc-status", status)])))


def _ok_headers():
    return h2f.frame(h2f.HEADERS, h2f.END_HEADERS, 1, headers(OK_HEADERS))


HOSTILE = {
    "a header block that decodes to megabytes": (_write(_bomb()), "Oversized header block"),
    "a header block slow to decode": (_write(_slow_block()), "Oversized header block"),
    "an endless CONTINUATION": (_after_request(lambda reader, writer, seen: _forever_after(
        writer, h2f.frame(h2f.HEADERS, 0, 1, headers(OK_HEADERS)[:2]), h2f.frame(h2f.CONTINUATION, 0, 1, b"\x00" * 100))),
        "broke the gRPC protocol"),
    "a frame over the announced size": (_write(_ok_headers() + h2f.frame(h2f.DATA, 0, 1, b"\x00" * 20000)),
                                        "announced a frame larger than 16384 bytes"),
    "SETTINGS_MAX_FRAME_SIZE of 0": ("preface", h2f.settings(MAX_FRAME_SIZE=0), "broke the gRPC protocol"),
    "SETTINGS_MAX_FRAME_SIZE of 2^24": ("preface", h2f.settings(MAX_FRAME_SIZE=1 << 24), "broke the gRPC protocol"),
    "SETTINGS_INITIAL_WINDOW_SIZE of 2^31": ("preface", h2f.settings(INITIAL_WINDOW_SIZE=1 << 31), "broke the gRPC"),
    "SETTINGS_ENABLE_PUSH of 2": ("preface", h2f.settings(ENABLE_PUSH=2), "broke the gRPC protocol"),
    "a 4 GiB gRPC length prefix": (_write(_ok_headers() + h2f.frame(h2f.DATA, 0, 1, b"\x00\xff\xff\xff\xff" + b"x" * 100)),
                                   "over the limit of 32 MiB"),
    "a length prefix then endless DATA": (_after_request(lambda reader, writer, seen: _forever_after(
        writer, _ok_headers() + h2f.frame(h2f.DATA, 0, 1, b"\x00\x01\xff\xff\xff"), h2f.frame(h2f.DATA, 0, 1, b"\x00" * 16384))),
        "no answer within|over 32 MiB|16384 messages"),
    "endless empty messages": (_after_request(lambda reader, writer, seen: _forever_after(
        writer, _ok_headers(), h2f.frame(h2f.DATA, 0, 1, b"\x00" * 16380))), "16384 messages|no answer within"),
    "endless empty DATA frames": (_after_request(lambda reader, writer, seen: _forever_after(
        writer, _ok_headers(), h2f.frame(h2f.DATA, 0, 1, b""))), "carry no call forward"),
    "a window overflow": (_write(h2f.frame(h2f.WINDOW_UPDATE, 0, 0, struct.pack(">I", (1 << 31) - 1)) * 2),
                          "broke the gRPC protocol"),
    "a SETTINGS flood": (_after_request(lambda reader, writer, seen: _forever(writer, h2f.frame(h2f.SETTINGS, 0, 0) * 64)),
                         "carry no call forward"),
    "a PING flood": (_after_request(lambda reader, writer, seen: _forever(writer, h2f.frame(h2f.PING, 0, 0, b"p" * 8) * 64)),
                     "carry no call forward"),
    "headers then silence": (_write(_ok_headers()), "no answer within"),
    "DATA after RST_STREAM": (_after_request(lambda reader, writer, seen: _forever_after(
        writer, _ok_headers() + h2f.frame(h2f.RST_STREAM, 0, 1, struct.pack(">I", 2)),
        h2f.frame(h2f.DATA, 0, 1, grpc_message(b"late")))), "closed the connection|reset"),
    "GOAWAY below the open stream": (_write(h2f.frame(h2f.GOAWAY, 0, 0, struct.pack(">II", 0, 0))),
                                     "closed the connection"),
    "garbage instead of the preface": ("preface", random.Random(7).randbytes(4096),
                                       "broke the gRPC|no answer within|announced a frame larger"),
    "a frame header announcing 16 MiB": ("preface", b"\xff\xff\xff" + b"\x00" * 6 + b"\x00" * 40000,
                                         "announced a frame larger than 16384 bytes"),
    "grpc-status of full-width digits": (_write(_trailers("\uff19")), "broke the gRPC protocol"),
    "grpc-status of twenty digits": (_write(_trailers("9" * 20)), "broke the gRPC protocol"),
    "grpc-status of -1": (_write(_trailers("-1")), "broke the gRPC protocol"),
    "grpc-status of 99": (_write(_trailers("99")), "UNKNOWN"),
    "a PUSH_PROMISE": (_write(h2f.frame(h2f.PUSH_PROMISE, h2f.END_HEADERS, 1, b"\x00\x00\x00\x02" + headers(OK_HEADERS))),
                       "broke the gRPC protocol"),
}


async def _forever_after(writer, first, chunk):
    writer.write(first)
    await _forever(writer, chunk)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_server_ends_the_call_within_its_deadline_as_one_line(server, allocated, name):
    case = HOSTILE[name]
    if case[0] == "preface":
        server.preface, server.behave, said = case[1], (lambda reader, unused_writer, seen: drain(reader, seen)), case[2]
    else:
        server.preface, (server.behave, said) = h2f.frame(h2f.SETTINGS, 0, 0), case
    talos = talos_client.TalosClient(endpoint=server.address, maintenance=True, timeout=DEADLINE)
    started = time.monotonic()
    try:
        with pytest.raises(errors.TalosError) as raised:
            talos.call("Version")
    finally:
        talos.close()
    took = time.monotonic() - started
    text = str(raised.value)
    assert "\n" not in text and "bug" not in text, text
    assert re.search(said, text), text
    assert took < DEADLINE + SLACK, (name, took)
    assert allocated() < MEMORY_MB, (name, allocated())


def test_a_streamed_call_ends_at_its_callers_bound(server):
    # a snapshot that never ends: the caller's bound on the whole stream ends it, one message at a time
    server.preface = h2f.frame(h2f.SETTINGS, 0, 0)
    server.behave = _after_request(lambda reader, writer, seen: _forever_after(
        writer, _ok_headers(), h2f.frame(h2f.DATA, 0, 1, grpc_message(b"\x12\x80\x20" + b"s" * 4096) * 3)))
    talos = talos_client.TalosClient(endpoint=server.address, maintenance=True, timeout=DEADLINE)
    got = 0
    try:
        with pytest.raises(errors.TalosError, match="over 1 MiB"):
            for reply in talos.stream("EtcdSnapshot", max_bytes=1 << 20):
                got += len(reply.bytes)
    finally:
        talos.close()
    assert 0 < got <= 1 << 20


def test_a_streamed_call_has_a_deadline_between_messages_not_over_the_whole(server):
    # five messages 0.4 s apart: 2 s in all, each well within the 1 s between them
    async def slow(reader, writer, seen):
        writer.write(_ok_headers())
        for _index in range(5):
            await asyncio.sleep(0.4)
            writer.write(h2f.frame(h2f.DATA, 0, 1, grpc_message(b"\x12\x02ok")))
        writer.write(h2f.frame(h2f.HEADERS, h2f.END_HEADERS | h2f.END_STREAM, 1, headers(OK_TRAILERS)))
        await drain(reader, seen)
    server.preface, server.behave = h2f.frame(h2f.SETTINGS, 0, 0), _after_request(slow)
    talos = talos_client.TalosClient(endpoint=server.address, maintenance=True, timeout=DEADLINE)
    try:
        assert [reply.bytes for reply in talos.stream("EtcdSnapshot")] == [b"ok"] * 5
    finally:
        talos.close()


def test_a_streamed_call_that_stalls_between_messages_is_a_timeout(server):
    server.preface = h2f.frame(h2f.SETTINGS, 0, 0)
    server.behave = _write(_ok_headers() + h2f.frame(h2f.DATA, 0, 1, grpc_message(b"\x12\x02ok")))
    talos = talos_client.TalosClient(endpoint=server.address, maintenance=True, timeout=DEADLINE)
    got = []
    try:
        with pytest.raises(errors.TalosUnavailable, match="no answer within"):
            for reply in talos.stream("EtcdSnapshot"):
                got.append(reply.bytes)
    finally:
        talos.close()
    assert got == [b"ok"]


def test_frame_lengths_are_judged_as_each_header_arrives_however_the_stream_is_cut():
    """The server's stream cut at every seeded point: frames up to the limit pass; one over it is refused as soon as
    its header is complete, before any of its payload (h2 itself would buffer all of it first)."""
    from ansible_collections.maesh.ichor.plugins.module_utils.talos import wire
    rng = random.Random(42)
    for unused_round in range(200):
        frames = [h2f.frame(h2f.DATA, 0, 1, b"\x00" * rng.choice((0, 1, 100, 16384))) for unused in range(5)]
        stream = b"".join(frames)
        over = (16385).to_bytes(3, "big") + b"\x00" * 6
        tracker = wire.FrameLengths()
        cuts = sorted(rng.sample(range(1, len(stream)), 3))
        for begin, end in zip([0] + cuts, cuts + [len(stream)]):
            tracker.feed(stream[begin:end])
        with pytest.raises(wire.LimitExceeded, match="larger than 16384 bytes"):
            tracker.feed(over[:4])
            tracker.feed(over[4:])
