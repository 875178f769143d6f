"""A head's segment manifest: every sealed segment of its namespace, rewritten on every put.
References with the usual key are stored as 40 bytes each (issue 26: on a long conversation
the msgpack strings were half of a head's bytes); any other key keeps the list form, which is
also what earlier heads hold. Both read back the same."""

from __future__ import annotations

import msgpack
import pytest

from langgraph_handoff._format import envelope, keys, records
from langgraph_handoff._format.head_meta import HeadMeta
from langgraph_handoff._format.records import Head, SegmentRef
from langgraph_handoff.errors import CorruptObjectError


def _ref(i: int, nonce: str = "0a1b2c3d") -> SegmentRef:
    first = f"1f0c{i:04x}-aaaa-6bbb-8ccc-{i:012x}"
    last = f"1f0c{i:04x}-aaaa-6bbb-8ccc-{i + 7:012x}"
    return SegmentRef(keys.segment_suffix(first, nonce), first, last, 8 + i)


def _head(refs: tuple[SegmentRef, ...]) -> Head:
    return Head("thread", "ns", {}, {}, refs, HeadMeta())


def _wire(data: bytes) -> object:
    body = envelope.decode(data, key="h", expect=envelope.Kind.HEAD).body
    return msgpack.unpackb(body, raw=False, strict_map_key=False)["s"]


def test_usual_references_are_40_bytes_each_and_read_back() -> None:
    refs = tuple(_ref(i) for i in range(300))
    data = records.encode_head(_head(refs))
    wire = _wire(data)
    assert isinstance(wire, bytes) and len(wire) == 40 * 300
    assert records.decode_head(data, key="h").segments == refs
    assert records.manifest_size(refs) == len(wire)


@pytest.mark.parametrize(
    "odd",
    [
        SegmentRef("s/custom-name", _ref(4).first_id, _ref(4).last_id, 3),  # a key this package never writes
        _ref(5, nonce="abcdef0"),  # a 7-digit nonce: not what segment_suffix is given
        SegmentRef("s/elsewhere-0a1b2c3d", _ref(6).first_id, _ref(6).last_id, 1),
    ],
)
def test_any_other_key_keeps_the_list_form(odd: SegmentRef) -> None:
    refs = (_ref(1), odd, _ref(2))
    data = records.encode_head(_head(refs))
    assert isinstance(_wire(data), list)
    assert records.decode_head(data, key="h").segments == refs


def test_heads_written_with_the_list_form_still_read() -> None:
    refs = tuple(_ref(i) for i in range(3))
    obj = {"t": "thread", "n": "ns", "r": [], "x": {}, "s": [[r.key, r.first_id, r.last_id, r.count] for r in refs]}
    obj["u"] = b"12345678"
    data = envelope.encode(envelope.Kind.HEAD, msgpack.packb(obj, use_bin_type=True))
    assert records.decode_head(data, key="h").segments == refs
    assert records.decode_head(records.encode_head(_head(())), key="h").segments == ()


def test_a_manifest_cut_short_is_a_corrupt_object() -> None:
    obj = {"t": "thread", "n": "ns", "r": [], "x": {}, "s": b"\x00" * 41, "u": b"12345678"}
    data = envelope.encode(envelope.Kind.HEAD, msgpack.packb(obj, use_bin_type=True))
    with pytest.raises(CorruptObjectError) as err:
        records.decode_head(data, key="heads/t/=")
    assert "heads/t/=" in str(err.value)
