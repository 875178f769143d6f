"""Packs: snapshots of a namespace's items, so that a search need not read every item. No I/O.

A search must know every item of the namespaces it covers, with its value and vectors. One GET
per item is what that costs without packs: 100,000 items took 86 s on Ceph RGW (100,613
requests), against 11 s (613 requests) with packs (``bench/memory_search.py``, 2026-12-02). A
pack holds many items' bodies in one object: a cold search lists the namespace and reads its
packs, then only the items written since.

Packs are a cache, never the truth: the listing is. Each entry of a pack is ``(key segment, ETag,
body)`` and is used only while the listing shows that item with that same ETag, so an item
written, deleted or swept since the pack was made is read from its own object (or is gone), and
a pack can never pair a value with vectors of another version. That is what keeps packs correct
under any number of writers without making a put pay for them: a put writes its item and nothing
else, and packs are rebuilt by searches.

A namespace's items are split into ``2**level`` buckets by a hash of their key, so a pack stays
between :data:`PACK_TARGET` / 4 and :data:`PACK_MAX` items and rebuilding one after a write costs
one bucket, not the namespace. A pack is immutable and named by its level, bucket, item count and
the digest of the ``(key, ETag)`` pairs it holds: comparing that name with the listing says
whether it is current, without reading it. Two searches that rebuild the same bucket at once just
leave two packs (the next search keeps the current one), and deleting a pack unconditionally is
safe because nobody rewrites it in place (and losing one loses nothing but time).

>>> h = pair_hash("memory/u/=k/a", "e1") + pair_hash("memory/u/=k/b", "e2")
>>> digest(h) == digest(pair_hash("memory/u/=k/b", "e2") + pair_hash("memory/u/=k/a", "e1"))
True
>>> target_level(100, None), target_level(3000, None), target_level(3000, 4), target_level(60, 3)
(0, 4, 4, 0)
"""

from __future__ import annotations

import hashlib
from typing import Any

from langgraph_handoff._format import envelope
from langgraph_handoff._format.envelope import Kind
from langgraph_handoff.errors import CorruptObjectError

__all__ = [
    "PACK_MAX",
    "PACK_READ_MIN",
    "PACK_TARGET",
    "bucket_of",
    "decode_pack",
    "digest",
    "encode_pack",
    "key_hash",
    "pair_hash",
    "target_level",
]

#: items a pack is aimed at when a namespace is split: a 384-dimensional item is about 1.8 KB,
#: so 200-400 KB a pack (after one write, a search of 1,000 items rebuilding its bucket's pack
#: took 4.0 ms of CPU against 2.6 ms for one with nothing to rebuild), and a cold reader of
#: 100,000 items reads 512 packs (8 rounds of 64 GETs)
PACK_TARGET = 128
#: a bucket is split (the level goes up) when its pack would hold more
PACK_MAX = 2 * PACK_TARGET
#: a pack is read when at least this many of its bucket's items are unknown to this process
#: (or all of them, when it holds fewer): fewer are cheaper read one by one
PACK_READ_MIN = 8
_MAX_LEVEL = 16
_MASK = (1 << 128) - 1


def key_hash(segment: str) -> int:
    """64 bits of an item's key segment: its bucket at every level is a prefix of them."""
    return int.from_bytes(hashlib.blake2b(segment.encode(), digest_size=8).digest(), "big")


def bucket_of(khash: int, level: int) -> int:
    return khash >> (64 - level) if level else 0


def pair_hash(okey: str, etag: str) -> int:
    """One ``(item, version)``; a pack's digest is the sum of its pairs' (order does not matter)."""
    return int.from_bytes(hashlib.blake2b(f"{okey}\n{etag}".encode(), digest_size=16).digest(), "big")


def digest(total: int) -> str:
    return f"{total & _MASK:032x}"


def target_level(count: int, current: int | None) -> int:
    """How many times to split a namespace of ``count`` items: the current level while its
    packs stay between a quarter of :data:`PACK_TARGET` and :data:`PACK_MAX` (no rebuild of every
    pack for an item more or less), else the fewest splits that fit :data:`PACK_MAX`."""
    if current is not None and 0 <= current <= _MAX_LEVEL:
        per = count / (1 << current)
        if per <= PACK_MAX and (current == 0 or per >= PACK_TARGET / 4):
            return current
    level = 0
    while count > PACK_MAX * (1 << level) and level < _MAX_LEVEL:
        level += 1
    return level


def encode_pack(entries: list[tuple[str, str, bytes]]) -> bytes:
    """``[(key segment, ETag, item body)]`` in an envelope, not compressed: float32 vectors do not
    compress (zlib saved about a tenth of a 1,000-item pack of 384-dimensional items and took
    most of the time of rebuilding it)."""
    return envelope.encode(Kind.MEMORY_PACK, envelope.packb({"e": [list(e) for e in entries]}), compress=False)


def decode_pack(data: bytes, key: str) -> list[tuple[str, str, bytes]]:
    body: Any
    body, _ = envelope.decode_msgpack(data, key=key, expect=Kind.MEMORY_PACK)
    try:
        entries = [(s, t, b) for s, t, b in body["e"]]
    except Exception as exc:  # noqa: BLE001 - whatever is wrong with a stored body, it is the pack's
        raise CorruptObjectError(key, f"malformed memory pack ({type(exc).__name__}: {exc})") from None
    if not all(type(s) is str and type(t) is str and type(b) is bytes for s, t, b in entries):
        raise CorruptObjectError(key, "malformed memory pack (an entry is not a key segment, an ETag and bytes)")
    return entries
