# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gRPC calls over HTTP/2 (RFC 9113; gRPC's PROTOCOL-HTTP2) on asyncio streams over Python's ssl.

The Talos API needs of gRPC only unary and server-streaming calls with protobuf messages, so the client speaks
the protocol itself: a general gRPC stack (grpclib on h2) cost every module a fifth of its start-up in imports.
One ``Connection`` multiplexes concurrent calls (a fan-out through one endpoint); a ``Channel`` opens a new one
when the last has closed or the server sent GOAWAY. Every frame is written whole, in one write, from the
event loop's one thread, so calls never interleave inside a frame.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import asyncio
import ssl
import struct
from urllib.parse import unquote

from ansible_collections.maesh.ichor.plugins.module_utils.talos import hpack

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

DEFAULT_WINDOW = 65535
DEFAULT_FRAME_SIZE = 16384
# stream ids, windows and their increments are 31 bits (the top bit of a frame's stream id is reserved)
MAX_31 = (1 << 31) - 1
MAX_WINDOW = MAX_31
# what we receive before the server must wait for a WINDOW_UPDATE: large, so a snapshot streams without stalls
RECEIVE_WINDOW = 1 << 24
MAX_HEADER_LIST = 1 << 20
# Streams open at once on one connection: the server's SETTINGS_MAX_CONCURRENT_STREAMS once read, this until then
# and when the server states none (RFC 9113 6.5.2 recommends servers allow at least 100). No call goes out before the
# server's SETTINGS are read (its preface), so a server that allows fewer is never sent more: it would end the
# connection and every call on it.
DEFAULT_MAX_STREAMS = 100

# Tables as strings split once: this file is compiled from source by every module process, and a string is one
# token where a tuple literal is dozens.
# the error codes of RST_STREAM and GOAWAY (RFC 9113 7), by number
_H2_ERRORS = ("NO_ERROR PROTOCOL_ERROR INTERNAL_ERROR FLOW_CONTROL_ERROR SETTINGS_TIMEOUT STREAM_CLOSED FRAME_SIZE_ERROR "
              "REFUSED_STREAM CANCEL COMPRESSION_ERROR CONNECT_ERROR ENHANCE_YOUR_CALM INADEQUATE_SECURITY "
              "HTTP_1_1_REQUIRED").split()
_CANCEL = 8
# gRPC status codes, by number
STATUS_NAMES = ("OK CANCELLED UNKNOWN INVALID_ARGUMENT DEADLINE_EXCEEDED NOT_FOUND ALREADY_EXISTS PERMISSION_DENIED "
                "RESOURCE_EXHAUSTED FAILED_PRECONDITION ABORTED OUT_OF_RANGE UNIMPLEMENTED INTERNAL UNAVAILABLE "
                "DATA_LOSS UNAUTHENTICATED").split()
# a reply with an HTTP status other than 200 has no gRPC status: gRPC's mapping (doc/http-grpc-status-mapping.md)
_HTTP_STATUS = dict(pair.split("=") for pair in (
    "400=INTERNAL 401=UNAUTHENTICATED 403=PERMISSION_DENIED 404=UNIMPLEMENTED 429=UNAVAILABLE 502=UNAVAILABLE "
    "503=UNAVAILABLE 504=UNAVAILABLE").split())

USER_AGENT = "maesh.ichor"


def status_name(code):
    """The name of a gRPC status code; UNKNOWN for one gRPC does not define."""
    return STATUS_NAMES[code] if 0 <= code < len(STATUS_NAMES) else "UNKNOWN"


class CallError(Exception):
    """The server ended the call with a gRPC status other than OK."""

    def __init__(self, status, message=""):
        super(CallError, self).__init__("%s: %s" % (status, message))
        self.status = status  # its name
        self.message = message


class Terminated(Exception):
    """The stream or its connection ended before the call's status arrived."""


class NotSent(Terminated):
    """The connection stopped taking calls (GOAWAY) while this one waited for a free stream: nothing of it was sent,
    so another connection may carry it."""


class ProtocolViolation(Exception):
    """The server broke HTTP/2 or gRPC."""


def frame(kind, flags, stream_id, payload=b""):
    return struct.pack(">I", len(payload))[1:] + struct.pack(">BBI", kind, flags, stream_id) + payload


def _timeout_header(seconds):
    """grpc-timeout: at most eight digits and a unit."""
    millis = max(1, int(seconds * 1000))
    return "%dm" % millis if millis < 10 ** 8 else "%dS" % min(int(seconds), 10 ** 8 - 1)


def messages(data):
    """The length-prefixed gRPC messages of a reply body."""
    out = []
    pos = 0
    view = memoryview(data)
    while pos < len(data):
        if pos + 5 > len(data):
            raise ProtocolViolation("a reply ends inside a message's prefix")
        if data[pos]:
            raise ProtocolViolation("a reply holds a compressed message, and none was asked for")
        size = struct.unpack(">I", view[pos + 1:pos + 5])[0]
        pos += 5
        if pos + size > len(data):
            raise ProtocolViolation("a reply ends inside a message")
        out.append(bytes(view[pos:pos + size]))
        pos += size
    return out


class _Stream:
    """One call's stream: what it received, its windows, and how it ended."""

    def __init__(self, stream_id, send_window):
        self.id = stream_id
        self.send_window = send_window
        self.headers = None
        self.trailers = None
        self.data = bytearray()
        self.unacknowledged = 0
        self.closed = False  # the server ended or reset it
        self.ended = asyncio.get_running_loop().create_future()

    def end(self, error=None):
        self.closed = True
        if not self.ended.done():
            if error is None:
                self.ended.set_result(None)
            else:
                self.ended.set_exception(error)

    def headers_received(self, fields, end_stream):
        if self.headers is None:
            self.headers = dict(fields)
        elif end_stream:
            self.trailers = dict(fields)
        else:
            raise ProtocolViolation("a reply sent a second header block before its end")
        if end_stream:
            self.end()

    def result(self):
        """The reply's messages as bytes; raises CallError for a status other than OK."""
        headers = self.headers or {}
        http_status = headers.get(":status")
        if http_status != "200":
            raise CallError(_HTTP_STATUS.get(http_status, "UNKNOWN"), "the server answered with HTTP status %s"
                            % http_status)
        content_type = headers.get("content-type", "")
        if not content_type.startswith("application/grpc"):
            raise ProtocolViolation("the server answered with content type %r, not gRPC" % content_type[:64])
        # a reply with no message is "trailers-only": its status is in its one header block
        status = (self.trailers if self.trailers is not None else headers).get("grpc-status")
        if status is None or not status.isdigit():
            raise ProtocolViolation("the reply ended without a gRPC status")
        code = int(status)
        if code:
            message = (self.trailers if self.trailers is not None else headers).get("grpc-message", "")
            raise CallError(status_name(code), unquote(message, errors="replace"))  # percent-encoded UTF-8
        return messages(self.data)


class Connection:
    """One HTTP/2 connection over TLS, with the calls in flight on it."""

    def __init__(self, host, port, ssl_context):
        self.host = host
        self.port = port
        self.authority = host if port == 443 else "%s:%d" % ("[%s]" % host if ":" in host else host, port)
        self._ssl = ssl_context
        self._writer = None
        self.task = None  # the frame reader
        self.error = None  # why the connection can carry no more calls
        self.going_away = False
        self._streams = {}
        self._next_id = 1
        self._send_window = DEFAULT_WINDOW
        self._peer_window = DEFAULT_WINDOW  # SETTINGS_INITIAL_WINDOW_SIZE: each new stream's send window
        self._peer_frame_size = DEFAULT_FRAME_SIZE
        self._peer_max_streams = DEFAULT_MAX_STREAMS
        self._settings_seen = False  # the server's preface (its first SETTINGS) was read
        self._unacknowledged = 0
        self._decoder = hpack.Decoder(max_list_size=MAX_HEADER_LIST)
        self._header_block = None  # (stream id, END_STREAM, fragments) while CONTINUATION frames are due
        self._changed = None  # set when a window opens, a stream ends or the connection fails

    @property
    def usable(self):
        return self.error is None and not self.going_away and self._next_id < MAX_31

    async def open(self):
        reader, self._writer = await asyncio.open_connection(self.host, self.port, ssl=self._ssl)
        ssl_object = self._writer.get_extra_info("ssl_object")
        protocol = ssl_object.selected_alpn_protocol() if ssl_object is not None else None
        if protocol not in (None, "h2"):
            self._writer.close()
            raise ProtocolViolation("the server chose %s, not HTTP/2" % protocol)
        self._changed = asyncio.Event()
        settings = struct.pack(">HIHIHI", ENABLE_PUSH, 0, INITIAL_WINDOW_SIZE, RECEIVE_WINDOW,
                               MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST)
        self._writer.write(PREFACE + frame(SETTINGS, 0, 0, settings) +
                           frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", RECEIVE_WINDOW - DEFAULT_WINDOW)))
        self.task = asyncio.get_running_loop().create_task(self._read(reader))

    def close(self):
        if self.error is None:
            self.error = Terminated("the connection was closed")
        if self.task is not None:
            self.task.cancel()
        if self._writer is not None:
            self._writer.close()

    # -- calls -----------------------------------------------------------------------------
    async def call(self, path, request, metadata=None, timeout=None):
        """One call: the request's bytes out, the reply's messages (bytes) back. It waits for the server's SETTINGS
        and for a free stream within the server's limit (the caller's deadline bounds the wait)."""
        while self.usable and (not self._settings_seen or len(self._streams) >= self._peer_max_streams):
            await self._wait_change()
        if self.error is None and not self.usable:
            raise NotSent("the server is going away")
        self._check()
        stream = _Stream(self._next_id, self._peer_window)
        self._next_id += 2
        self._streams[stream.id] = stream
        fields = [(":method", "POST"), (":scheme", "https"), (":path", path), (":authority", self.authority),
                  ("te", "trailers"), ("content-type", "application/grpc"), ("user-agent", USER_AGENT)]
        if timeout is not None:
            fields.append(("grpc-timeout", _timeout_header(timeout)))
        fields.extend(metadata or ())
        try:
            self._write_headers(stream.id, hpack.encode(fields))
            await self._send(stream, b"\x00" + struct.pack(">I", len(request)) + request)
            await stream.ended
            return stream.result()
        except asyncio.CancelledError:  # its deadline passed: the server may stop working on it
            if not stream.closed and self.error is None:
                self._writer.write(frame(RST_STREAM, 0, stream.id, struct.pack(">I", _CANCEL)))
            raise
        finally:
            self._streams.pop(stream.id, None)
            if not stream.ended.done():
                stream.ended.cancel()
            elif not stream.ended.cancelled():
                stream.ended.exception()  # retrieved, so asyncio does not report it at exit
            self._changed.set()

    def streams_open(self):
        return len(self._streams)

    def _check(self):
        if self.error is not None:
            raise self.error
        if not self.usable:
            raise Terminated("the server is going away")

    async def _wait_change(self):
        self._changed.clear()
        await self._changed.wait()

    def _write_headers(self, stream_id, block):
        size = self._peer_frame_size
        chunks = [block[i:i + size] for i in range(0, len(block), size)] or [b""]
        frames = [frame(HEADERS, END_HEADERS if len(chunks) == 1 else 0, stream_id, chunks[0])]
        for i, chunk in enumerate(chunks[1:], 2):
            frames.append(frame(CONTINUATION, END_HEADERS if i == len(chunks) else 0, stream_id, chunk))
        self._writer.write(b"".join(frames))

    async def _send(self, stream, body):
        """The body as DATA frames within the server's windows, the last with END_STREAM."""
        view = memoryview(body)
        offset = 0
        while True:
            self._check()
            if stream.closed:
                return  # the server answered (or reset the stream) before reading all of it
            allowed = min(len(body) - offset, self._send_window, stream.send_window, self._peer_frame_size)
            if allowed <= 0 and offset < len(body):
                await self._wait_change()
                continue
            chunk = view[offset:offset + allowed]
            offset += allowed
            self._send_window -= allowed
            stream.send_window -= allowed
            self._writer.write(frame(DATA, END_STREAM if offset == len(body) else 0, stream.id, bytes(chunk)))
            if offset == len(body):
                break
        await self._writer.drain()

    # -- frames in -------------------------------------------------------------------------
    async def _read(self, reader):
        try:
            while True:
                head = await reader.readexactly(9)
                length = int.from_bytes(head[:3], "big")
                if length > DEFAULT_FRAME_SIZE:
                    raise ProtocolViolation("the server sent a frame larger than allowed")
                payload = await reader.readexactly(length) if length else b""
                self._frame(head[3], head[4], int.from_bytes(head[5:9], "big") & MAX_31, payload)
                if self.going_away and not self._streams:
                    raise Terminated("the server closed the connection (GOAWAY)")
        except asyncio.CancelledError:
            self._fail(self.error or Terminated("the connection was closed"))
            raise
        except (asyncio.IncompleteReadError, ConnectionError, OSError, ssl.SSLError):
            self._fail(Terminated("the server closed the connection"))
        except (ProtocolViolation, hpack.HpackError) as exc:
            self._fail(exc if isinstance(exc, ProtocolViolation) else ProtocolViolation(str(exc)))
        except Terminated as exc:
            self._fail(exc)
        self._writer.close()

    def _fail(self, error):
        if self.error is None:
            self.error = error
        for stream in list(self._streams.values()):
            stream.end(error)
        if self._changed is not None:
            self._changed.set()

    def _frame(self, kind, flags, stream_id, payload):
        if not self._settings_seen:
            if kind != SETTINGS or flags & ACK:
                raise ProtocolViolation("the server did not begin with a SETTINGS frame (its HTTP/2 preface)")
            self._settings_seen = True
        if self._header_block is not None and kind != CONTINUATION:
            raise ProtocolViolation("a header block was interrupted by another frame")
        if kind == DATA:
            self._data(flags, stream_id, payload)
        elif kind in (HEADERS, CONTINUATION):
            self._headers(kind, flags, stream_id, payload)
        elif kind == RST_STREAM:
            stream = self._streams.get(stream_id)
            if stream is not None and len(payload) == 4:
                stream.end(Terminated("the server reset the stream (%s)" % _h2_error(payload)))
        elif kind == SETTINGS:
            if not flags & ACK:
                self._settings(payload)
        elif kind == PING:
            if not flags & ACK:
                self._writer.write(frame(PING, ACK, 0, payload))
        elif kind == GOAWAY:
            self._goaway(payload)
        elif kind == WINDOW_UPDATE:
            self._window_update(stream_id, payload)
        elif kind == PUSH_PROMISE:
            raise ProtocolViolation("the server pushed, and push is off")
        # PRIORITY and frame types this client does not know are ignored (RFC 9113 4.1)

    def _data(self, flags, stream_id, payload):
        self._unacknowledged += len(payload)
        if self._unacknowledged >= RECEIVE_WINDOW // 2:
            self._writer.write(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", self._unacknowledged)))
            self._unacknowledged = 0
        stream = self._streams.get(stream_id)
        if stream is None:
            return  # a stream given up on (its deadline passed); its bytes still counted for the connection
        if stream.headers is None:
            raise ProtocolViolation("the server sent data before headers")
        stream.data += _unpadded(flags, payload)
        if flags & END_STREAM:
            stream.end()
            return
        stream.unacknowledged += len(payload)
        if stream.unacknowledged >= RECEIVE_WINDOW // 2:
            self._writer.write(frame(WINDOW_UPDATE, 0, stream.id, struct.pack(">I", stream.unacknowledged)))
            stream.unacknowledged = 0

    def _headers(self, kind, flags, stream_id, payload):
        if kind == HEADERS:
            if self._header_block is not None:
                raise ProtocolViolation("a header block began inside another")
            payload = _unpadded(flags, payload)
            if flags & PRIORITY_FLAG:
                payload = payload[5:]
            self._header_block = (stream_id, flags & END_STREAM, [payload])
        else:
            if self._header_block is None or self._header_block[0] != stream_id:
                raise ProtocolViolation("a CONTINUATION frame outside a header block")
            self._header_block[2].append(payload)
        if not flags & END_HEADERS:
            return
        stream_id, end_stream, fragments = self._header_block
        self._header_block = None
        fields = self._decoder.decode(b"".join(fragments))  # always: the table is the connection's
        stream = self._streams.get(stream_id)
        if stream is not None:
            stream.headers_received(fields, end_stream)

    def _settings(self, payload):
        if len(payload) % 6:
            raise ProtocolViolation("a SETTINGS frame of a wrong size")
        for i in range(0, len(payload), 6):
            key, value = struct.unpack(">HI", payload[i:i + 6])
            if key == INITIAL_WINDOW_SIZE:
                if value > MAX_WINDOW:
                    raise ProtocolViolation("a window size above the maximum")
                for stream in self._streams.values():
                    stream.send_window += value - self._peer_window
                self._peer_window = value
            elif key == MAX_FRAME_SIZE:
                self._peer_frame_size = value
            elif key == MAX_CONCURRENT_STREAMS:
                self._peer_max_streams = value
        self._writer.write(frame(SETTINGS, ACK, 0))
        self._changed.set()

    def _goaway(self, payload):
        self.going_away = True
        last = struct.unpack(">I", payload[:4])[0] & MAX_31 if len(payload) >= 8 else 0
        for stream in list(self._streams.values()):
            if stream.id > last:  # never processed: a new connection may carry it
                stream.end(Terminated("the server is going away (%s)" % _h2_error(payload[4:8])))
        self._changed.set()

    def _window_update(self, stream_id, payload):
        if len(payload) != 4:
            raise ProtocolViolation("a WINDOW_UPDATE frame of a wrong size")
        increment = struct.unpack(">I", payload)[0] & MAX_31
        if stream_id == 0:
            self._send_window += increment
        elif stream_id in self._streams:
            self._streams[stream_id].send_window += increment
        self._changed.set()


def _h2_error(payload):
    """The name of the error code of RST_STREAM or GOAWAY."""
    code = struct.unpack(">I", payload)[0] if len(payload) == 4 else 0
    return _H2_ERRORS[code] if code < len(_H2_ERRORS) else "error %d" % code


def _unpadded(flags, payload):
    if not flags & PADDED:
        return payload
    if not payload or payload[0] >= len(payload):
        raise ProtocolViolation("a frame's padding is longer than the frame")
    return payload[1:len(payload) - payload[0]]


class Channel:
    """Calls to one address: one connection at a time, a new one once the last can carry no more."""

    def __init__(self, host, port, ssl_context):
        self.host = host
        self.port = port
        self._ssl = ssl_context
        self._connection = None
        self._draining = []  # connections that went away with calls still to finish on them
        self._opening = None

    async def _usable(self):
        if self._connection is not None and self._connection.usable:
            return self._connection
        if self._opening is None:
            self._opening = asyncio.get_running_loop().create_task(self._open())
        try:
            return await asyncio.shield(self._opening)
        finally:
            if self._opening is not None and self._opening.done():
                self._opening = None

    async def _open(self):
        old = self._connection
        self._draining = [c for c in self._draining if c.error is None]
        if old is not None:
            if old.error is None and old.streams_open():
                self._draining.append(old)  # after GOAWAY its calls finish there; its reader ends it then
            else:
                old.close()
        connection = Connection(self.host, self.port, self._ssl)
        await connection.open()
        self._connection = connection
        return connection

    async def call(self, path, request, metadata=None, timeout=None):
        try:
            return await (await self._usable()).call(path, request, metadata=metadata, timeout=timeout)
        except NotSent:  # it waited for a stream on a connection that went away: once more, on a new one
            return await (await self._usable()).call(path, request, metadata=metadata, timeout=timeout)

    def close(self):
        """Stop the connection; its reader task ends when the loop next runs."""
        if self._opening is not None:
            self._opening.cancel()
        for connection in [self._connection] + self._draining:
            if connection is not None:
                connection.close()
        self._draining = []
