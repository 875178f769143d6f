"""zlib streams from pieces (format/deflate.py): what any zlib reader inflates is exactly the
concatenation, and bytes carried from head to head are compressed once (issue 26)."""

from __future__ import annotations

import random
import zlib

import pytest

from langgraph_handoff._format import deflate, envelope, records
from langgraph_handoff._format.records import Head, Inline, Record


def _text(rnd: random.Random, n: int) -> bytes:
    words = [bytes(rnd.choice(b"abcdefghij") for _ in range(rnd.randint(1, 8))) for _ in range(200)]
    return b" ".join(rnd.choice(words) for _ in range(n))[:n]


@pytest.mark.parametrize("seed", range(40))
def test_any_mix_of_pieces_inflates_to_their_concatenation(seed: int) -> None:
    rnd = random.Random(seed)
    pool = [_text(rnd, rnd.choice([0, 1, 100, 32_767, 32_768, 70_000])) for _ in range(6)]
    pieces: list[deflate.Piece] = [
        deflate.Reused(rnd.choice(pool)) if rnd.random() < 0.5 else rnd.choice(pool) for _ in range(rnd.randint(0, 12))
    ]
    stream = deflate.zlib_stream(pieces)
    assert zlib.decompress(stream) == deflate.joined(pieces)
    # the envelope reads it like any other, checksum and all
    framed = envelope.encode(envelope.Kind.BLOB, pieces)
    assert envelope.decode(framed, key="k").body == deflate.joined(pieces)


def test_a_value_carried_by_three_heads_and_its_blob_is_compressed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    real = deflate._deflate
    monkeypatch.setattr(deflate, "_deflate", lambda data: seen.append(len(data)) or real(data))
    value = _text(random.Random(1), 200_000)
    cid = "1f0c0001-aaaa-6bbb-8ccc-000000000001"
    rec = Record(cid, None, ("msgpack", b"c"), ("msgpack", b"m"), {"messages": (cid, 1)})
    for spill in (None, None, "d" * 32):  # the value's Inline is rebuilt when its spill starts
        head = Head("t", "", {rec.id: rec}, {rec.id: {"messages": Inline("msgpack", value, spill)}})
        body = records.encode_head(head)
        assert records.decode_head(body, key="h").payloads[rec.id]["messages"].data == value
    blob = records.encode_blob(value)
    assert records.decode_blob(blob, key="b") == value
    assert seen.count(len(value)) == 1, seen  # the 200 KB: once; the rest are the small pieces around it
    assert sum(n for n in seen if n != len(value)) < 2_000


def test_a_body_that_does_not_shrink_is_stored_as_it_is() -> None:
    noise = random.Random(2).randbytes(50_000)
    framed = envelope.encode(envelope.Kind.BLOB, [deflate.Reused(noise)])
    assert len(framed) == envelope.HEADER_SIZE + len(noise) and framed.endswith(noise)


def test_a_bytes_like_body_is_framed_as_bytes_are() -> None:
    body = b"x" * 5000
    for like in (bytearray(body), memoryview(body)):
        assert envelope.decode(envelope.encode(envelope.Kind.BLOB, like), key="k").body == body
