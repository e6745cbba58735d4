# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""HPACK (RFC 7541), the header compression of HTTP/2, as much as a gRPC client needs.

Decoding is whole, since the server chooses how it encodes: indexed fields, the dynamic table and its size
updates, Huffman-coded strings. Encoding sends every field as a literal without indexing and without Huffman
coding, which every decoder accepts, so the server's table never holds what we send.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class HpackError(Exception):
    """A header block that cannot be decoded (a COMPRESSION_ERROR of the connection)."""


# RFC 7541 Appendix A, a field a line ("name value"); index 1 is the first. Data as one string literal: each
# module process compiles this file from source, and a literal is one token where a tuple of tuples is hundreds.
STATIC_TABLE = tuple(tuple(line.partition(" ")[::2]) for line in """\
:authority
:method GET
:method POST
:path /
:path /index.html
:scheme http
:scheme https
:status 200
:status 204
:status 206
:status 304
:status 400
:status 404
:status 500
accept-charset
accept-encoding gzip, deflate
accept-language
accept-ranges
accept
access-control-allow-origin
age
allow
authorization
cache-control
content-disposition
content-encoding
content-language
content-length
content-location
content-range
content-type
cookie
date
etag
expect
expires
from
host
if-match
if-modified-since
if-none-match
if-range
if-unmodified-since
last-modified
link
location
max-forwards
proxy-authenticate
proxy-authorization
range
referer
refresh
retry-after
server
set-cookie
strict-transport-security
transfer-encoding
user-agent
vary
via
www-authenticate""".splitlines())

# The Huffman code of RFC 7541 Appendix B is canonical: codes go up in order of (length, symbol), so the code
# lengths define it. The length of each symbol 0..256 (256 is EOS), as chr(ord("A") + length - 5).
_CODE_LENGTHS = ("ISXXXXXXXTZXXZXXXXXXXXZXXXXXXXXXBFFHIBDGFFDGDBBBAAABBBBBBBCDKBHFIBCCCCCCCCCCCCCCCCCCCCCCDCDIOIJBKABABABBBA"
                 "CCBBBABCBAABCCCCCKGJIXPRPPRRRSRSSSSSTSTTRSTSSSSQRSRSSTRQPRRSSQSRRTQRSSQQRQSRSSPRRRSRRSVVPORSRUVVVWWVTUOQVWWV"
                 "WTQQVVXWWWPTPQRQQSRRUUTTVSVWVVWWWWWXWWWWWVZ")
EOS = 256


def _huffman_codes():
    """{(length, code): symbol}, assigned canonically."""
    codes = {}
    code = 0
    previous = None
    for length, symbol in sorted((ord(c) - ord("A") + 5, symbol) for symbol, c in enumerate(_CODE_LENGTHS)):
        if previous is not None:
            code = (code + 1) << (length - previous)
        codes[(length, code)] = symbol
        previous = length
    return codes


_HUFFMAN = None  # built on the first Huffman-coded string


def huffman_decode(data):
    global _HUFFMAN  # pylint: disable=global-statement
    if _HUFFMAN is None:
        _HUFFMAN = _huffman_codes()
    table = _HUFFMAN
    out = bytearray()
    code = 0
    length = 0
    for byte in data:
        for shift in range(7, -1, -1):
            code = (code << 1) | ((byte >> shift) & 1)
            length += 1
            symbol = table.get((length, code))
            if symbol is not None:
                if symbol == EOS:
                    raise HpackError("a Huffman-coded string holds EOS")
                out.append(symbol)
                code = 0
                length = 0
            elif length > 30:
                raise HpackError("a Huffman-coded string holds no valid code")
    # what is left is padding: fewer than 8 bits, all ones (the start of EOS)
    if length > 7 or code != (1 << length) - 1:
        raise HpackError("a Huffman-coded string is padded wrongly")
    return bytes(out)


def _integer(data, pos, prefix):
    """(value, next position) of an integer with an N-bit prefix starting at data[pos]."""
    mask = (1 << prefix) - 1
    value = data[pos] & mask
    pos += 1
    if value < mask:
        return value, pos
    shift = 0
    while True:
        if pos >= len(data):
            raise HpackError("a header block ends inside an integer")
        byte = data[pos]
        pos += 1
        value += (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos
        if shift > 28:
            raise HpackError("an integer of a header block is too large")


def _string(data, pos, limit):
    if pos >= len(data):
        raise HpackError("a header block ends before a string")
    huffman = data[pos] & 0x80
    length, pos = _integer(data, pos, 7)
    end = pos + length
    if end > len(data):
        raise HpackError("a header block ends inside a string")
    if length > limit:  # refused before decoding: Huffman decoding is slow in Python
        raise HpackError("a header list is larger than %d bytes" % limit)
    raw = bytes(data[pos:end])
    return (huffman_decode(raw) if huffman else raw), end


def _text(raw):
    return raw.decode("utf-8", "replace")


def _entry_size(name, value):
    return len(name.encode("utf-8")) + len(value.encode("utf-8")) + 32


class Decoder:
    """One connection's decoder: its dynamic table lives as long as the connection."""

    def __init__(self, max_table_size=4096, max_list_size=1 << 20):
        self.max_allowed = max_table_size  # what we advertised (SETTINGS_HEADER_TABLE_SIZE)
        self.max_size = max_table_size
        self.max_list_size = max_list_size
        self._table = []  # newest first
        self._size = 0

    def _field(self, index):
        if index <= 0:
            raise HpackError("a header block refers to index 0")
        if index <= len(STATIC_TABLE):
            return STATIC_TABLE[index - 1]
        dynamic = index - len(STATIC_TABLE) - 1
        if dynamic >= len(self._table):
            raise HpackError("a header block refers to index %d, beyond the table" % index)
        return self._table[dynamic]

    def _evict(self):
        while self._size > self.max_size and self._table:
            name, value = self._table.pop()
            self._size -= _entry_size(name, value)

    def _add(self, name, value):
        self._table.insert(0, (name, value))
        self._size += _entry_size(name, value)
        self._evict()  # an entry larger than the table empties it (RFC 7541 4.4)

    def decode(self, block):
        """The header list of one header block, as [(name, value)] of str."""
        data = memoryview(block)
        fields = []
        pos = 0
        total = 0
        while pos < len(data):
            byte = data[pos]
            if byte & 0x80:  # indexed field
                index, pos = _integer(data, pos, 7)
                name, value = self._field(index)
            elif byte & 0xE0 == 0x20:  # dynamic table size update
                size, pos = _integer(data, pos, 5)
                if size > self.max_allowed:
                    raise HpackError("a header block sets the table size above what was allowed")
                self.max_size = size
                self._evict()
                continue
            else:
                # literal: with incremental indexing (01), without indexing (0000), never indexed (0001)
                indexing = byte & 0xC0 == 0x40
                index, pos = _integer(data, pos, 6 if indexing else 4)
                if index:
                    name = self._field(index)[0]
                else:
                    raw_name, pos = _string(data, pos, self.max_list_size)
                    name = _text(raw_name)
                raw_value, pos = _string(data, pos, self.max_list_size)
                value = _text(raw_value)
                if indexing:
                    self._add(name, value)
            total += _entry_size(name, value)
            if total > self.max_list_size:
                raise HpackError("a header list is larger than %d bytes" % self.max_list_size)
            fields.append((name, value))
        return fields


def _encode_integer(value, prefix, first=0):
    mask = (1 << prefix) - 1
    if value < mask:
        return bytes((first | value,))
    out = bytearray((first | mask,))
    value -= mask
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _encode_string(text):
    raw = text.encode("utf-8")
    return _encode_integer(len(raw), 7) + raw


def encode(fields):
    """A header block of [(name, value)]: each a literal without indexing, new name, no Huffman coding."""
    return b"".join(b"\x00" + _encode_string(name) + _encode_string(value) for name, value in fields)
