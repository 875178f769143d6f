"""Pure core: key encoding and versioned envelopes."""

from __future__ import annotations

import struct

import msgpack
import pytest

from langgraph_handoff._format import envelope, keys
from langgraph_handoff._format.envelope import Kind
from langgraph_handoff.errors import (
    CorruptObjectError,
    EnvelopeVersionError,
    InvalidCheckpointIdError,
    InvalidThreadIdError,
)
from langgraph_handoff.stores.base import validate_key

HOSTILE = [
    "plain-uuid-like",
    "a/b",
    "/leading/slash",
    "..",
    ".",
    "../../etc/passwd",
    "nul\x00byte",
    "new\nline",
    "x" * 5000,
    "héllo wörld",
    "中文线程",
    "עברית",
    "emoji 🙂",
    "UPPER lower",
    "%41",  # looks like an escape
    "=",
    "~abc",
    "a:1|b:2",  # nested subgraph namespace
    " ",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_segments_are_safe_and_reversible(value: str) -> None:
    seg = keys.encode_segment(value)
    validate_key(seg)  # portable alphabet, never '/', '.', '..', NUL
    assert "/" not in seg and seg not in (".", "..")
    assert len(seg) <= keys.MAX_SEGMENT_LEN + 1
    decoded = keys.decode_segment(seg)
    assert decoded == value or (decoded is None and seg.startswith("~"))


def test_segment_encoding_is_injective_and_case_safe() -> None:
    values = [*HOSTILE, "A", "a", "%61", "", "~", "-"]
    segs = [keys.encode_segment(v) for v in values]
    assert len(set(segs)) == len(set(values))
    # "A" and "a" must differ even on a case-insensitive file system
    assert keys.encode_segment("A").lower() != keys.encode_segment("a").lower()


def test_long_ids_are_hashed_not_truncated() -> None:
    a, b = "x" * 500 + "1", "x" * 500 + "2"
    assert keys.encode_segment(a) != keys.encode_segment(b)
    assert len(keys.head_key(a, a)) < 200


def test_thread_id_validation() -> None:
    assert keys.validate_thread_id(42) == "42"
    for bad in ("", None):
        with pytest.raises(InvalidThreadIdError):
            keys.validate_thread_id(bad)
    with pytest.raises(InvalidThreadIdError, match="not valid Unicode"):
        keys.validate_thread_id("lone \ud800 surrogate")


def test_inverted_ids_sort_newest_first() -> None:
    from langgraph.checkpoint.base.id import uuid6

    ids = [str(uuid6(clock_seq=i)) for i in range(50)]
    assert ids == sorted(ids)
    inverted = [keys.invert_checkpoint_id(i) for i in ids]
    assert inverted == sorted(inverted, reverse=True)
    assert [keys.checkpoint_id_from_inverted(i) for i in inverted] == ids
    with pytest.raises(InvalidCheckpointIdError):
        keys.invert_checkpoint_id("not-a-uuid")


def test_writes_key_roundtrip() -> None:
    cid = "1f0c0a2e-3b4d-6e5f-8a9b-0c1d2e3f4a5b"
    key = keys.writes_key("t/1", "sub:abc", cid, "task-1")
    assert keys.parse_writes_key(key) == (cid, "task-1")
    assert keys.parse_writes_key("heads/x/y") is None


# ------------------------------------------------------------------------------------- envelopes


def test_envelope_roundtrip_small_and_compressed() -> None:
    for body in (b"", b"small", b"z" * 100_000):
        data = envelope.encode(Kind.HEAD, body, schema_version=7)
        env = envelope.decode(data, key="k", expect=Kind.HEAD)
        assert env.body == body and env.schema_version == 7 and env.format_version == envelope.FORMAT_VERSION
    assert len(envelope.encode(Kind.HEAD, b"z" * 100_000)) < 2_000  # compressed


def test_future_format_is_refused_with_both_versions() -> None:
    data = bytearray(envelope.encode(Kind.HEAD, b"x"))
    struct.pack_into(">H", data, 4, 9)
    with pytest.raises(EnvelopeVersionError) as info:
        envelope.decode(bytes(data), key="heads/t/=")
    assert info.value.found == 9 and info.value.supported == envelope.FORMAT_VERSION
    assert "heads/t/=" in str(info.value) and "Upgrade" in str(info.value)


@pytest.mark.parametrize(
    "mutate, detail, reason",
    [
        (lambda d: d[:-1], "truncated", "truncated"),
        (lambda d: d[:20], "truncated header", "truncated"),
        (lambda d: d[:3], "truncated header", "truncated"),
        (lambda d: d[:40] + bytes([d[40] ^ 1]) + d[41:], "checksum", "checksum"),
        (lambda d: b"", "empty object", "empty"),
        (lambda d: b"PK\x03\x04" + d[4:], "bad magic", "not_ours"),
        (lambda d: b"hello\n", "bad magic", "not_ours"),
        (lambda d: d + b"trailing", "header says", "malformed"),
    ],
)
def test_damaged_envelopes_raise_corrupt_naming_the_key(mutate, detail, reason) -> None:  # type: ignore[no-untyped-def]
    """Each kind of damage is named in a word (``reason``) as well as in the message: a walk
    over many threads reports it as a record (``DamagedObject``) and goes on."""
    data = envelope.encode(Kind.WRITES, b"0123456789" * 10, schema_version=1)
    with pytest.raises(CorruptObjectError, match=detail) as info:
        envelope.decode(mutate(data), key="data/t/=/w/x/y")
    assert info.value.key == "data/t/=/w/x/y" and info.value.reason == reason


def test_kind_mismatch_is_corrupt() -> None:
    data = envelope.encode(Kind.BLOB, b"x")
    with pytest.raises(CorruptObjectError, match="expected a head object, found blob"):
        envelope.decode(data, key="k", expect=Kind.HEAD)


def test_valid_frame_with_garbage_msgpack_is_corrupt() -> None:
    data = envelope.encode(Kind.HEAD, b"\xc1\xc1\xc1")
    with pytest.raises(CorruptObjectError, match="msgpack"):
        envelope.decode_msgpack(data, key="k", expect=Kind.HEAD)


def test_valid_msgpack_with_wrong_shape_is_corrupt() -> None:
    from langgraph_handoff._format import records

    data = envelope.encode(Kind.HEAD, msgpack.packb({"t": "x"}))
    with pytest.raises(CorruptObjectError, match="malformed head"):
        records.decode_head(data, key="heads/x/=")
