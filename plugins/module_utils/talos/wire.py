# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gRPC calls over HTTP/2 on asyncio streams over Python's ssl: h2 (python-hyper's sans-IO HTTP/2, with hpack) does
the frames, header compression, flow control and stream states; this file is the thin gRPC layer over it (message
framing, status mapping, deadlines, the channel that reopens after GOAWAY) and the limits on what a server sends.

One ``Connection`` multiplexes concurrent calls (a fan-out through one endpoint); a ``Channel`` opens a new one when
the last has closed or the server sent GOAWAY. A call's messages are handed over as they arrive (``Call.next``); the
window a server may fill is given back as they are taken, so a slow reader holds the server back and memory stays
bounded. Reclaim and maintenance mode dial machines someone else controls: every limit below is what a hostile peer
meets.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import asyncio
import collections
import ssl
import struct
from urllib.parse import unquote

try:
    import h2.config
    import h2.connection
    import h2.errors
    import h2.events
    import h2.exceptions
    import h2.settings
    import hpack.exceptions
    import hyperframe.exceptions
    HAS_H2 = True
    H2_IMPORT_ERROR = None
except ImportError as _exc:  # reported when a client is made (talos.client)
    HAS_H2 = False
    H2_IMPORT_ERROR = _exc

# -- the limits on what a server sends (each named in the error it raises) --------------------------
# A frame's payload: HTTP/2's initial SETTINGS_MAX_FRAME_SIZE, which this client never raises.
MAX_FRAME_SIZE = 16384
# A decoded header list (SETTINGS_MAX_HEADER_LIST_SIZE, enforced by hpack while it decodes); a header block is also at
# most 64 CONTINUATION frames (h2's own bound), so at most about 1 MiB is ever decoded.
MAX_HEADER_LIST = 1 << 16
# One gRPC message: Talos's own clients accept 32 MiB (machinery's constants.GRPCMaxMessageSize).
MAX_MESSAGE = 32 << 20
# A call collected whole (``Connection.call``): its messages' bytes (each with its 5-byte prefix) and their number
# (every message becomes an object in the caller's hands). A streamed call's total is its caller's to bound.
MAX_COLLECTED = 32 << 20
MAX_COLLECTED_MESSAGES = 16384
# What a stream may receive before the messages already received are taken (SETTINGS_INITIAL_WINDOW_SIZE), and
# what the connection may (its window): large, so a snapshot streams without stalls, and the bound on what waits.
RECEIVE_WINDOW = 4 << 20
CONNECTION_WINDOW = 16 << 20
# Frames that carry no call forward (PING, SETTINGS, empty DATA, unknown types, PRIORITY...) in a row: beyond this,
# a flood; and what may wait unsent because the server does not read (its PING and SETTINGS acknowledgements).
MAX_IDLE_FRAMES = 1000
MAX_UNSENT = 4 << 20
READ_SIZE = 65536

# Streams open at once on one connection: the server's SETTINGS_MAX_CONCURRENT_STREAMS once read, this until then
# and when the server states none (RFC 9113 6.5.2 recommends servers allow at least 100). No call goes out before the
# server's SETTINGS are read (its preface), so a server that allows fewer is never sent more: it would end the
# connection and every call on it.
DEFAULT_MAX_STREAMS = 100

# gRPC status codes, by number
STATUS_NAMES = ("OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
                "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
                "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED")
# a reply with an HTTP status other than 200 has no gRPC status: gRPC's mapping (doc/http-grpc-status-mapping.md)
_HTTP_STATUS = {b"400": "INTERNAL", b"401": "UNAUTHENTICATED", b"403": "PERMISSION_DENIED", b"404": "UNIMPLEMENTED",
                b"429": "UNAVAILABLE", b"502": "UNAVAILABLE", b"503": "UNAVAILABLE", b"504": "UNAVAILABLE"}

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


class LimitExceeded(ProtocolViolation):
    """The server sent more than a named limit allows."""


def _timeout_header(seconds):
    """grpc-timeout: at most eight digits and a unit."""
    millis = max(1, int(seconds * 1000))
    return "%dm" % millis if millis < 10 ** 8 else "%dS" % min(int(seconds), 10 ** 8 - 1)


def _said(text, limit=120):
    """What h2 said of a server's fault, short and printable (it may quote the server's bytes)."""
    text = "".join(c if c.isprintable() else "?" for c in str(text))
    return text if len(text) <= limit else text[:limit] + "..."


class Call:
    """One call's stream: its messages as they arrive, its windows, and how it ended."""

    def __init__(self, connection, stream_id):
        self._connection = connection
        self.id = stream_id
        self.headers = None
        self.trailers = None
        self._buffer = bytearray()  # bytes of the message being received
        self._expected = None  # that message's length, once its prefix is read
        self._messages = collections.deque()
        self._queued = 0  # bytes (with their prefixes) of the messages received and not yet taken
        self._owed = 0  # flow-controlled bytes received and not yet given back to the server
        self.ended = False  # the server ended the stream
        self.error = None
        self._changed = asyncio.Event()

    # -- what the connection's reader hands over ---------------------------------------------
    def fail(self, error):
        if self.error is None and (not self.ended or isinstance(error, ProtocolViolation)):
            self.error = error
        self._changed.set()

    def response(self, headers, ended):
        self.headers = dict(headers)
        if ended:
            self.end()
        self._changed.set()

    def received(self, data, flow_controlled_length):
        if self.headers is None:
            raise ProtocolViolation("the server sent data before headers")
        self._owed += flow_controlled_length
        view = memoryview(data)
        while view:
            if self._expected is None:
                take = min(5 - len(self._buffer), len(view))
                self._buffer += view[:take]
                view = view[take:]
                if len(self._buffer) < 5:
                    break
                if self._buffer[0]:
                    raise ProtocolViolation("a reply holds a compressed message, and none was asked for")
                self._expected = struct.unpack(">I", self._buffer[1:5])[0]
                if self._expected > MAX_MESSAGE:
                    raise LimitExceeded("a reply's message of %d bytes is over the limit of %d MiB"
                                        % (self._expected, MAX_MESSAGE >> 20))
                self._buffer = bytearray()
            take = min(self._expected - len(self._buffer), len(view))
            self._buffer += view[:take]
            view = view[take:]
            if len(self._buffer) == self._expected:
                self._messages.append(self._buffer)  # handed over as it is: a 32 MiB message is not copied
                self._queued += 5 + self._expected
                self._buffer = bytearray()
                self._expected = None
        self._give_back()
        self._changed.set()

    def trailers_received(self, headers):
        self.trailers = dict(headers)

    def end(self):
        self.ended = True
        self._changed.set()

    def _give_back(self):
        """Give the server its window back while what waits to be taken is under half a stream's window."""
        if self._owed and self._queued < RECEIVE_WINDOW // 2:
            owed, self._owed = self._owed, 0
            self._connection.acknowledge(self.id, owed)

    # -- what the caller takes ---------------------------------------------------------------
    async def next(self):
        """The next message (bytes), or None once the call ended OK; raises CallError for another status."""
        while True:
            if self.headers is not None:
                self._check_headers()
            if self._messages:
                message = self._messages.popleft()
                self._queued -= 5 + len(message)
                self._give_back()
                return message
            if self.error is not None:
                raise self.error
            if self.ended:
                return self._status()
            self._changed.clear()
            await self._changed.wait()

    def _check_headers(self):
        http_status = self.headers.get(b":status")
        if http_status != b"200":
            raise CallError(_HTTP_STATUS.get(http_status, "UNKNOWN"), "the server answered with HTTP status %s"
                            % _said((http_status or b"").decode("ascii", "replace"), 8))
        content_type = self.headers.get(b"content-type", b"")
        if not content_type.startswith(b"application/grpc"):
            raise ProtocolViolation("the server answered with content type %r, not gRPC" % _said(content_type, 64))

    def _status(self):
        if self._buffer or self._expected is not None:
            raise ProtocolViolation("a reply ends inside a message")
        # a reply with no message is "trailers-only": its status is in its one header block
        fields = self.trailers if self.trailers is not None else self.headers
        status = fields.get(b"grpc-status", b"")
        if not status.isdigit() or len(status) > 4:  # bytes: ASCII digits only
            raise ProtocolViolation("the reply ended without a gRPC status")
        code = int(status)
        if code:
            message = fields.get(b"grpc-message", b"").decode("ascii", "replace")
            raise CallError(status_name(code), unquote(message, errors="replace"))  # percent-encoded UTF-8
        return None

    def cancel(self):
        """Give the call up (its deadline passed or its reader stopped): the server may stop working on it."""
        self._connection.finish(self)


class _AfterGoaway(h2.connection.H2ConnectionStateMachine if HAS_H2 else object):
    """h2's connection state machine, except that a received GOAWAY lets the streams it spares finish.

    h2 closes the connection on a GOAWAY and refuses every frame after it (seen as python-hyper/h2's "Invalid input
    RECV_HEADERS in state CLOSED", encode/httpcore#46), though RFC 9113 6.8 has the server finish the streams up to
    its last stream id, which grpc-go does on a graceful shutdown. Only frames of existing streams and the
    connection's upkeep are let through; no stream is opened after it (``Connection.usable``).
    """

    if HAS_H2:
        _inputs = h2.connection.ConnectionInputs
        _transitions = dict(h2.connection.H2ConnectionStateMachine._transitions)
        for _input in ("RECV_HEADERS", "RECV_DATA", "RECV_WINDOW_UPDATE", "RECV_PING", "RECV_SETTINGS",
                       "RECV_RST_STREAM", "RECV_PRIORITY", "SEND_DATA", "SEND_WINDOW_UPDATE", "SEND_PING",
                       "SEND_SETTINGS", "SEND_RST_STREAM"):
            _transitions[(h2.connection.ConnectionState.CLOSED, _inputs[_input])] = (
                None, h2.connection.ConnectionState.CLOSED)
        del _input


def _h2_connection():
    config = h2.config.H2Configuration(client_side=True, header_encoding=None, validate_inbound_headers=True)
    connection = h2.connection.H2Connection(config=config)
    connection.state_machine = _AfterGoaway()
    codes = h2.settings.SettingCodes
    connection.local_settings = h2.settings.Settings(client=True, initial_values={
        codes.ENABLE_PUSH: 0, codes.INITIAL_WINDOW_SIZE: RECEIVE_WINDOW, codes.MAX_HEADER_LIST_SIZE: MAX_HEADER_LIST,
        codes.MAX_FRAME_SIZE: MAX_FRAME_SIZE})
    connection.decoder.max_header_list_size = MAX_HEADER_LIST
    return connection


# what h2, hpack and hyperframe raise for a server's fault
_PEER_FAULTS = ((h2.exceptions.H2Error, hpack.exceptions.HPACKError, hyperframe.exceptions.HyperframeError)
                if HAS_H2 else ())


class FrameLengths:
    """The length each frame of the server's byte stream announces, judged as its 9-byte header arrives.

    h2 judges a frame's length only once all of it arrived, so a header announcing 16 MiB would be buffered first; h2
    offers no public view of its buffer. A server's stream is frames from its first byte (its preface is a SETTINGS
    frame), so following their headers here needs no more than RFC 9113 4.1: a 24-bit length first."""

    def __init__(self, limit=MAX_FRAME_SIZE):
        self.limit = limit
        self._header = b""
        self._body_left = 0  # bytes of the current frame's payload still to come

    def feed(self, data):
        """LimitExceeded when a frame in ``data`` announces more than ``limit`` bytes."""
        view = memoryview(data)
        while view:
            if self._body_left:
                taken = min(self._body_left, len(view))
                self._body_left -= taken
                view = view[taken:]
                continue
            wanted = 9 - len(self._header)
            self._header += bytes(view[:wanted])
            view = view[wanted:]
            if len(self._header) == 9:
                length = int.from_bytes(self._header[:3], "big")
                if length > self.limit:
                    raise LimitExceeded("the server announced a frame larger than %d bytes (%d)" % (self.limit, length))
                self._body_left, self._header = length, b""


class Connection:
    """One HTTP/2 connection over TLS, with the calls in flight on it."""

    def __init__(self, host, port, ssl_context):
        self.host = host
        self.port = port
        self.authority = host if port == 443 else "%s:%d" % ("[%s]" % host if ":" in host else host, port)
        self._ssl = ssl_context
        self._writer = None
        self._h2 = None
        self.task = None  # the frame reader
        self.error = None  # why the connection can carry no more calls
        self.going_away = False
        self._calls = {}
        self._peer_max_streams = DEFAULT_MAX_STREAMS
        self._settings_seen = False  # the server's preface (its first SETTINGS) was read
        self._idle_frames = 0
        self._changed = None  # set when a window opens, a stream ends or the connection fails
        self._frames = None

    @property
    def usable(self):
        return self.error is None and not self.going_away and self._h2 is not None and \
            self._h2.highest_outbound_stream_id < (1 << 31) - 3

    async def open(self):
        reader, self._writer = await asyncio.open_connection(self.host, self.port, ssl=self._ssl)
        ssl_object = self._writer.get_extra_info("ssl_object")
        protocol = ssl_object.selected_alpn_protocol() if ssl_object is not None else None
        if protocol not in (None, "h2"):
            self._writer.close()
            raise ProtocolViolation("the server chose %s, not HTTP/2" % _said(protocol, 32))
        self._changed = asyncio.Event()
        self._h2 = _h2_connection()
        self._frames = FrameLengths()
        self._h2.initiate_connection()
        self._h2.increment_flow_control_window(CONNECTION_WINDOW - 65535)
        self._flush()
        self.task = asyncio.get_running_loop().create_task(self._read(reader))

    def close(self):
        if self.error is None:
            self.error = Terminated("the connection was closed")
        if self.task is not None:
            self.task.cancel()
        if self._writer is not None:
            self._writer.close()

    def streams_open(self):
        return len(self._calls)

    # -- calls -----------------------------------------------------------------------------
    async def start(self, path, request, metadata=None, timeout=None):
        """Send one call (the request's bytes) and return its ``Call``. It waits for the server's SETTINGS and for a
        free stream within the server's limit (the caller's deadline bounds the wait); ``timeout`` is sent as the
        call's grpc-timeout."""
        while self.usable and (not self._settings_seen or len(self._calls) >= self._peer_max_streams):
            await self._wait_change()
        if self.error is None and not self.usable:
            raise NotSent("the server is going away")
        self._check()
        call = Call(self, self._h2.get_next_available_stream_id())
        fields = [(":method", "POST"), (":scheme", "https"), (":path", path), (":authority", self.authority),
                  ("te", "trailers"), ("content-type", "application/grpc"), ("user-agent", USER_AGENT)]
        if timeout is not None:
            fields.append(("grpc-timeout", _timeout_header(timeout)))
        fields.extend(metadata or ())
        self._calls[call.id] = call
        try:
            self._h2.send_headers(call.id, fields)
            self._flush()
            await self._send(call, b"\x00" + struct.pack(">I", len(request)) + request)
        except BaseException:
            self.finish(call)
            raise
        return call

    async def call(self, path, request, metadata=None, timeout=None):
        """One call, its reply collected whole: the reply's messages (bytes), at most MAX_COLLECTED of them."""
        call = await self.start(path, request, metadata=metadata, timeout=timeout)
        try:
            replies, total = [], 0
            while True:
                message = await call.next()
                if message is None:
                    return replies
                total += 5 + len(message)
                if total > MAX_COLLECTED or len(replies) >= MAX_COLLECTED_MESSAGES:
                    raise LimitExceeded("a reply of over %d MiB or %d messages"
                                        % (MAX_COLLECTED >> 20, MAX_COLLECTED_MESSAGES))
                replies.append(message)
        finally:
            self.finish(call)

    def finish(self, call, error=None):
        """The call is over for its caller (or, with ``error``, for this client): reset its stream if the server has
        not ended it."""
        if self._calls.pop(call.id, None) is None:
            return
        if (error is not None or not call.ended and call.error is None) and self.error is None:
            try:
                self._h2.reset_stream(call.id, h2.errors.ErrorCodes.CANCEL)
                self._flush()
            except _PEER_FAULTS:
                pass  # the stream had closed meanwhile
        call.fail(error or Terminated("the call was given up"))
        self._changed.set()

    def acknowledge(self, stream_id, size):
        """Give a stream's received bytes back to the server (its window and the connection's)."""
        if self.error is None:
            self._h2.acknowledge_received_data(size, stream_id)
            self._flush()

    def _check(self):
        if self.error is not None:
            raise self.error
        if not self.usable:
            raise Terminated("the server is going away")

    async def _wait_change(self):
        self._changed.clear()
        await self._changed.wait()

    async def _send(self, call, body):
        """The body as DATA frames within the server's windows, the last with END_STREAM."""
        view = memoryview(body)
        offset = 0
        while True:
            self._check()
            if call.ended or call.error is not None:
                return  # the server answered (or reset the stream) before reading all of it
            allowed = min(len(body) - offset, self._h2.local_flow_control_window(call.id),
                          self._h2.max_outbound_frame_size, MAX_UNSENT // 4)
            if allowed <= 0 and offset < len(body):
                await self._wait_change()
                continue
            self._idle_frames = 0
            self._h2.send_data(call.id, bytes(view[offset:offset + allowed]), end_stream=offset + allowed == len(body))
            offset += allowed
            self._flush()
            await self._writer.drain()
            if offset == len(body):
                return

    def _flush(self):
        data = self._h2.data_to_send()
        if data:
            self._writer.write(data)

    # -- what the server sends ---------------------------------------------------------------
    async def _read(self, reader):
        try:
            while True:
                data = await reader.read(READ_SIZE)
                if not data:
                    raise Terminated("the server closed the connection")
                self._frames.feed(data)  # before h2 buffers a frame it judges only once all of it arrived
                try:
                    events = self._h2.receive_data(data)
                except _PEER_FAULTS as exc:
                    raise _violation(exc)
                for event in events:
                    self._event(event)
                self._flush()
                if self._writer.transport.get_write_buffer_size() > MAX_UNSENT:
                    raise LimitExceeded("the server does not read what it asks to be sent (over %d MiB unsent)"
                                        % (MAX_UNSENT >> 20))
                if self.going_away and not self._calls:
                    raise Terminated("the server closed the connection (GOAWAY)")
        except asyncio.CancelledError:
            self._fail(self.error or Terminated("the connection was closed"))
            raise
        except (ConnectionError, OSError, ssl.SSLError):
            self._fail(Terminated("the server closed the connection"))
        except (ProtocolViolation, Terminated) as exc:
            if isinstance(exc, ProtocolViolation):
                self._goaway(h2.errors.ErrorCodes.ENHANCE_YOUR_CALM if isinstance(exc, LimitExceeded)
                             else h2.errors.ErrorCodes.PROTOCOL_ERROR)
            self._fail(exc)
        self._writer.close()

    def _goaway(self, code):
        try:
            self._h2.close_connection(error_code=code)
            self._flush()
        except _PEER_FAULTS:
            pass  # h2 already sent its own

    def _fail(self, error):
        if self.error is None:
            self.error = error
        for call in list(self._calls.values()):
            call.fail(error)
        if self._changed is not None:
            self._changed.set()

    def _event(self, event):
        events = h2.events
        if not self._settings_seen:
            if not isinstance(event, events.RemoteSettingsChanged):
                raise ProtocolViolation("the server did not begin with a SETTINGS frame (its HTTP/2 preface)")
            self._settings_seen = True
        call = self._calls.get(getattr(event, "stream_id", None) or 0)
        if isinstance(event, (events.ResponseReceived, events.TrailersReceived)) or \
                isinstance(event, events.DataReceived) and event.data:
            self._idle_frames = 0
        else:
            self._idle_frames += 1
            if self._idle_frames > MAX_IDLE_FRAMES:
                raise LimitExceeded("the server sent over %d frames in a row that carry no call forward"
                                    % MAX_IDLE_FRAMES)
        if isinstance(event, events.ResponseReceived):
            if call is not None:
                call.response(event.headers, event.stream_ended is not None)
        elif isinstance(event, events.DataReceived):
            if call is None:  # a call given up on: its bytes still count for the connection's window
                self._h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            else:
                try:
                    call.received(event.data, event.flow_controlled_length)
                except ProtocolViolation as exc:  # this call's fault: the others go on
                    self.finish(call, exc)
        elif isinstance(event, events.TrailersReceived):
            if call is not None:
                call.trailers_received(event.headers)
        elif isinstance(event, events.StreamEnded):
            if call is not None:
                call.end()
        elif isinstance(event, events.StreamReset):
            if call is not None:
                call.fail(Terminated("the server reset the stream (%s)" % _error_name(event.error_code)))
        elif isinstance(event, events.RemoteSettingsChanged):
            limit = event.changed_settings.get(h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS)
            if limit is not None:
                self._peer_max_streams = limit.new_value
        elif isinstance(event, events.ConnectionTerminated):
            self.going_away = True
            last = event.last_stream_id or 0
            for waiting in list(self._calls.values()):
                if waiting.id > last:  # never processed: a new connection may carry it
                    waiting.fail(Terminated("the server is going away (%s)" % _error_name(event.error_code)))
        elif isinstance(event, events.PushedStreamReceived):
            raise ProtocolViolation("the server pushed, and push is off")
        # pings and settings are acknowledged by h2; window updates, priorities and unknown frames need nothing
        self._changed.set()


def _error_name(code):
    """The name of an HTTP/2 error code of RST_STREAM or GOAWAY."""
    name = getattr(code, "name", None)
    return name if name else "error %s" % _said(code, 12)


def _violation(exc):
    """A server's fault that h2 found, as one of ours."""
    if isinstance(exc, h2.exceptions.DenialOfServiceError) or isinstance(exc, h2.exceptions.FrameTooLargeError):
        return LimitExceeded("HTTP/2: %s" % _said(exc))
    return ProtocolViolation("HTTP/2: %s" % _said(exc))


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
        """One call, collected whole (``Connection.call``)."""
        try:
            return await (await self._usable()).call(path, request, metadata=metadata, timeout=timeout)
        except NotSent:  # it waited for a stream on a connection that went away: once more, on a new one
            return await (await self._usable()).call(path, request, metadata=metadata, timeout=timeout)

    async def start(self, path, request, metadata=None):
        """One call whose messages the caller takes as they arrive (``Call.next``), with no deadline sent."""
        try:
            return await (await self._usable()).start(path, request, metadata=metadata)
        except NotSent:
            return await (await self._usable()).start(path, request, metadata=metadata)

    def close(self):
        """Stop the connection; its reader task ends when the loop next runs."""
        if self._opening is not None:
            self._opening.cancel()
        for connection in [self._connection] + self._draining:
            if connection is not None:
                connection.close()
        self._draining = []
