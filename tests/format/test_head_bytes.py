"""A head's body is assembled from memoised msgpack pieces (``records._pack_body``); it must be
byte for byte what packing the plain structure gives, whatever the sizes (msgpack's one-byte
headers stop at 15 entries) and whichever memos are already set."""

from __future__ import annotations

import msgpack

from langgraph_handoff._format import envelope, records
from langgraph_handoff._format.head_meta import HeadMeta
from langgraph_handoff._format.records import BlobRef, Folded, Head, Inline, Record, SegmentRef, WriteItem


def _plain_body(head: Head, nonce: bytes) -> bytes:
    obj = head.meta.wire()
    obj.update(
        {
            "t": head.thread_id,
            "n": head.checkpoint_ns,
            "r": [
                {
                    "i": r.id,
                    "p": r.parent,
                    "c": list(r.checkpoint),
                    "m": list(r.metadata),
                    "v": {ch: [o, v] for ch, (o, v) in r.values.items()},
                    **(
                        {"w": {t: [f.etag, f.task_path, records._items_out(f.items)] for t, f in r.writes.items()}}
                        if r.writes
                        else {}
                    ),
                    **({"z": r.schema} if r.schema else {}),
                }
                for _, r in sorted(head.records.items())
            ],
            "x": records._table_out(head.payloads),
        }
    )
    obj["s"] = [[s.key, s.first_id, s.last_id, s.count] for s in head.segments]
    obj["u"] = nonce
    return msgpack.packb(obj, use_bin_type=True)  # type: ignore[no-any-return]


def _head(n_records: int, n_channels: int) -> Head:
    recs: dict[str, Record] = {}
    table: dict[str, dict[str, records.Payload]] = {}
    for i in range(n_records):
        cid = f"{i:08x}-0000-0000-0000-000000000000"
        values = {f"ch{c}": (cid, i * 100 + c) for c in range(n_channels)}
        values["float"] = (cid, 1.5)
        values["str"] = (cid, f"{i:032}.0.1")
        writes = {f"task{t}": Folded(f"etag{t}", "", (WriteItem(t, "messages", "msgpack", b"w" * t, t or None),))
                  for t in range(i % 3)}  # fmt: skip
        recs[cid] = Record(cid, None, ("msgpack", b"c" * (i + 1)), ("json", b"{}"), values, writes, schema=i % 2)
        chs: dict[str, records.Payload] = {ch: Inline("msgpack", bytes([i]) * (c + 1)) for c, ch in enumerate(values)}
        chs["str"] = Inline("msgpack", b"s" * 40, "a" * 32) if i % 2 else BlobRef("msgpack", "d" * 64, 99_999)
        table[cid] = chs
    return Head(
        "thread",
        "ns",
        recs,
        table,
        (SegmentRef("s/seg", "00000000-0000-0000-0000-00000000000a", "00000000-0000-0000-0000-00000000000b", 3),),
        HeadMeta(newer={"e": {"k": 1}}),
    )


def test_head_body_is_the_plain_msgpack_of_its_structure() -> None:
    for n_records, n_channels in [(0, 0), (1, 1), (7, 2), (15, 13), (16, 14), (17, 20), (40, 3)]:
        head = _head(n_records, n_channels)
        for _ in range(2):  # the second encode reuses every memo the first one set
            body = envelope.decode(records.encode_head(head), key="k", expect=envelope.Kind.HEAD).body
            nonce = msgpack.unpackb(body, raw=False, strict_map_key=False)["u"]
            assert body == _plain_body(head, nonce), (n_records, n_channels)
            assert records.decode_head(records.encode_head(head), key="k") == head
