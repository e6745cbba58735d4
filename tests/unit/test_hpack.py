"""Our HPACK (talos/hpack.py) held to another implementation, the ``hpack`` package that h2 and grpclib use (the
lab's machines answer through it): its tables, what its encoder writes (Huffman coding, the dynamic table and its
size updates, over many blocks of one connection) decoded by ours, and what ours writes decoded by it. And no input
makes the decoder raise anything but HpackError. Seeded and bounded (tests/unit/conftest.py)."""

import hpack as peer
import pytest
from hpack import huffman_constants

from ansible_collections.maesh.ichor.plugins.module_utils.talos import hpack
from tests.unit.conftest import mutate_bytes


def _text(rng, alphabet=None):
    size = rng.choice([0, 1, 2, 5, 17, 64, 300])
    if alphabet is None:
        # mostly what headers hold, sometimes any code point (values are UTF-8 on the wire)
        if rng.random() < 0.8:
            return "".join(chr(rng.randint(0x20, 0x7E)) for _index in range(size))
        return "".join(chr(rng.choice([rng.randint(0, 0xFF), rng.randint(0x100, 0xD7FF)])) for _index in range(size))
    return "".join(rng.choice(alphabet) for _index in range(size))


def _fields(rng):
    fields = []
    for _index in range(rng.randint(0, 12)):
        if rng.random() < 0.4:
            fields.append(rng.choice(hpack.STATIC_TABLE))  # indexed, or a static name with a value of its own
            if rng.random() < 0.5:
                fields[-1] = (fields[-1][0], _text(rng))
        else:
            name = _text(rng, "abcdefghijklmnopqrstuvwxyz-0123456789") or "x"
            fields.append((name, _text(rng)))
    return fields


def test_the_static_table_is_rfc_7541s():
    assert hpack.STATIC_TABLE == tuple((n.decode(), v.decode()) for n, v in peer.table.HeaderTable.STATIC_TABLE)


def test_the_canonical_huffman_code_is_rfc_7541s():
    codes = hpack._huffman_codes()  # pylint: disable=protected-access
    expected = dict(((length, code), symbol) for symbol, (code, length) in enumerate(
        zip(huffman_constants.REQUEST_CODES, huffman_constants.REQUEST_CODES_LENGTH)))
    assert codes == expected and len(codes) == 257


def test_huffman_strings_the_peer_encodes_decode(fuzz):
    encoder = peer.huffman.HuffmanEncoder(huffman_constants.REQUEST_CODES, huffman_constants.REQUEST_CODES_LENGTH)
    run = fuzz("hpack-huffman")
    for index, rng in run.cases():
        data = bytes(rng.randint(0, 255) for _index in range(rng.choice([0, 1, 3, 20, 200])))
        run.check(lambda: _equal(hpack.huffman_decode(encoder.encode(data)), data), index, data, [])


def _equal(got, want):
    assert got == want, (got, want)


def test_header_blocks_the_peer_encodes_decode_over_one_connection(fuzz):
    run = fuzz("hpack-blocks")
    for index, rng in run.cases():
        encoder = peer.Encoder()
        decoder = hpack.Decoder()
        blocks = []
        for _index in range(rng.randint(1, 6)):
            if rng.random() < 0.2:
                encoder.header_table_size = rng.choice([0, 64, 256, 4096])  # a size update at the next block
            fields = _fields(rng)
            block = encoder.encode(list(fields), huffman=rng.random() < 0.7)
            blocks.append((fields, block))
        run.check(lambda: [_equal(decoder.decode(block), fields) for fields, block in blocks], index, blocks, [])


def test_what_we_encode_the_peer_decodes(fuzz):
    run = fuzz("hpack-encode")
    for index, rng in run.cases():
        fields = _fields(rng)
        run.check(lambda: _equal(peer.Decoder().decode(hpack.encode(fields), raw=False), fields), index, fields, [])


def test_the_decoder_raises_only_hpack_error_on_any_input(fuzz):
    run = fuzz("hpack-hostile")
    for index, rng in run.cases():
        block = peer.Encoder().encode(_fields(rng), huffman=rng.random() < 0.5)
        for _round in range(rng.randint(1, 4)):
            block = mutate_bytes(block, rng)

        def decode():
            try:
                hpack.Decoder(max_list_size=1 << 16).decode(block)
            except hpack.HpackError:
                pass

        run.check(decode, index, block, [])


@pytest.mark.parametrize("block, why", [
    (b"\x80", "index 0"),
    (b"\xff\x80\x80\x80\x80\x80\x01", "too large"),
    (b"\xbf", "beyond the table"),  # index 62: the dynamic table is empty
    (b"\x3f\xe2\x1f", "above what was allowed"),  # a size update to 4097
    (b"\x00\x81\xff", "padded wrongly"),  # eight bits of padding
    (b"\x00\x84\xff\xff\xff\xff", "EOS"),
    (b"\x00\x05abc", "inside a string"),
])
def test_a_bad_block_is_one_hpack_error(block, why):
    with pytest.raises(hpack.HpackError, match=why):
        hpack.Decoder().decode(block)


def test_an_entry_larger_than_the_table_empties_it():
    decoder = hpack.Decoder(max_table_size=64)
    decoder.decode(b"\x40\x01a\x01b")  # (a, b): 34 bytes, kept
    assert decoder.decode(b"\xbe") == [("a", "b")]
    decoder.decode(b"\x40\x01c\x20" + b"x" * 32)  # 65 bytes: evicts all, is not kept
    with pytest.raises(hpack.HpackError):
        decoder.decode(b"\xbe")


def test_a_header_list_beyond_the_limit_is_refused():
    block = peer.Encoder().encode([("x", "y" * 2000)])
    with pytest.raises(hpack.HpackError, match="larger than"):
        hpack.Decoder(max_list_size=1024).decode(block)
