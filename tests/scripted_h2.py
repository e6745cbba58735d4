"""A scripted HTTP/2 server on loopback TLS for the transport's tests, and HTTP/2 frames as bytes (RFC 9113 4.1): a
test writes exactly the frames it means, well formed or not, which a library made to speak HTTP/2 correctly would
not let it; header blocks come from the ``hpack`` package."""

import asyncio
import struct
import time

import hpack as peer

from tests.lab import pki
from tests.unit.loop_thread import LoopThread

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# frame types (RFC 9113 6)
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
# flags
END_STREAM = 0x1
ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20
# settings
HEADER_TABLE_SIZE, ENABLE_PUSH, MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE, MAX_HEADER_LIST_SIZE = range(1, 7)


def frame(kind, flags, stream_id, payload=b""):
    """One frame: its 24-bit length, type, flags and 31-bit stream id, then the payload."""
    return struct.pack(">I", len(payload))[1:] + struct.pack(">BBI", kind, flags, stream_id) + payload


def settings(**values):
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", globals()[k], v) for k, v in values.items()))


async def read_frame(reader):
    head = await reader.readexactly(9)
    length = int.from_bytes(head[:3], "big")
    payload = await reader.readexactly(length) if length else b""
    return head[3], head[4], int.from_bytes(head[5:9], "big") & 0x7FFFFFFF, payload


def until(condition, seconds=5.0):
    """Whether the condition held within the time (what the server's thread reads arrives on its own time)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def headers(fields, huffman=True):
    return peer.Encoder().encode(fields, huffman=huffman)


def grpc_message(data):
    return b"\x00" + struct.pack(">I", len(data)) + data


OK_HEADERS = [(":status", "200"), ("content-type", "application/grpc")]
OK_TRAILERS = [("grpc-status", "0")]


def reply(body, stream_id=1):
    """A whole reply: headers, one DATA frame, trailers."""
    return (frame(HEADERS, END_HEADERS, stream_id, headers(OK_HEADERS)) +
            frame(DATA, 0, stream_id, grpc_message(body)) +
            frame(HEADERS, END_HEADERS | END_STREAM, stream_id, headers(OK_TRAILERS)))


class Server:
    """A TLS server on its own thread's loop; ``behave(reader, writer, seen)`` is the test's script for each
    connection, ``seen`` the frames it read (its own list per connection, in ``connections``)."""

    def __init__(self):
        self.behave = None
        self.preface = frame(SETTINGS, 0, 0)  # what the server writes first (HTTP/2: its SETTINGS)
        self.connections = []
        context = pki.server_ssl_context(pki.maintenance_certificate(["127.0.0.1"]))

        async def started():
            return await asyncio.start_server(self._connection, "127.0.0.1", 0, ssl=context)

        self.running = LoopThread(started)
        self.address = "127.0.0.1:%d" % self.running.server.sockets[0].getsockname()[1]

    async def _connection(self, reader, writer):
        seen = []
        self.connections.append(seen)
        try:
            assert await reader.readexactly(len(PREFACE)) == PREFACE
            writer.write(self.preface)
            await self.behave(reader, writer, seen)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def stop(self):
        self.running.stop()


async def read_request(reader, seen):
    """The frames up to the client's request's END_STREAM; returns the request body."""
    body = b""
    while True:
        kind, flags, stream_id, payload = await read_frame(reader)
        seen.append((kind, flags, stream_id, payload))
        if kind == DATA:
            body += payload
            if flags & END_STREAM:
                return body


async def drain(reader, seen):
    """What the client sends until it closes."""
    while True:
        seen.append(await read_frame(reader))


def answer(data):
    async def behave(reader, writer, seen):
        await read_request(reader, seen)
        writer.write(data)
        await drain(reader, seen)
    return behave
