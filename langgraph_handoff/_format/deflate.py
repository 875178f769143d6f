"""zlib streams assembled from pieces, so that bytes carried from object to object are
compressed once.

A head is rewritten whole on every put, and most of it is what the head before held: the
latest values, a value being spilled behind the head, the older records. On a long thread with
a plain message list the latest value is hundreds of KB, and compressing every head whole (and
every spilled blob) ran zlib over the same bytes three to five times a turn: the largest share
of a turn's CPU on a long thread.

A zlib stream is a two-byte header, raw deflate data and the Adler-32 of everything it holds.
Raw deflate data flushed with ``Z_SYNC_FLUSH`` ends on a byte boundary without closing the
stream, so such pieces can be concatenated, each compressed on its own, and closed by one final
empty block. :func:`zlib_stream` builds exactly that. Pieces wrapped in :class:`Reused` (bytes
objects that live on from put to put: a value's serialised data, a record's packed bytes) have
their compressed form kept in a small memo keyed by the bytes object itself, so the next head,
and the blob the value is spilled to, reuse it. Any zlib reader inflates the result to the
concatenation of the pieces: nothing about the stored format changes.

>>> import zlib
>>> value = b"a long value carried from head to head " * 1000
>>> stream = zlib_stream([b"header ", Reused(value), b" trailer"])
>>> zlib.decompress(stream) == b"header " + value + b" trailer"
True
>>> zlib_stream([Reused(value)]) == zlib_stream([Reused(value)])  # the second from the memo
True
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections import OrderedDict
from collections.abc import Sequence

__all__ = ["REUSE_MIN", "Reused", "coalesced", "joined", "raw_length", "zlib_stream"]

#: pieces at least this large are remembered compressed. Deflate matches repeats only within a
#: 32 KiB window: smaller values sit next to their near-copies of the checkpoints before (a head
#: holds several versions of a growing value) and compress far better together, so they stay in
#: the running stream; a larger one has no near-copy within reach and loses nothing on its own.
REUSE_MIN = 32 * 1024
#: raw bytes whose compressed form the memo keeps (it holds the raw bytes alive too)
MEMO_MAX_BYTES = 32 * 1024 * 1024
_LEVEL = 1
#: zlib header for deflate with a 32 KiB window at level 1 (what ``zlib.compress(b, 1)`` writes)
_HEADER = b"\x78\x01"


class Reused:
    """A piece that will be written again: its compressed form is remembered (by the identity of
    ``data``, which the memo keeps alive, so an id is never reused while remembered)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


Piece = bytes | Reused


def _deflate(data: bytes) -> bytes:
    """Raw deflate data for ``data``, flushed to a byte boundary and not final."""
    c = zlib.compressobj(_LEVEL, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH)


_FINAL = zlib.compressobj(_LEVEL, zlib.DEFLATED, -15).flush(zlib.Z_FINISH)  # one empty final block


class _Memo:
    def __init__(self, max_bytes: int) -> None:
        self._lock = threading.Lock()
        self._max = max_bytes
        self._bytes = 0
        self._items: OrderedDict[int, tuple[bytes, bytes]] = OrderedDict()

    def deflated(self, data: bytes) -> bytes:
        key = id(data)
        with self._lock:
            hit = self._items.get(key)
            if hit is not None and hit[0] is data:
                self._items.move_to_end(key)
                return hit[1]
        out = _deflate(data)
        if len(data) <= self._max:
            with self._lock:
                old = self._items.pop(key, None)
                if old is not None:
                    self._bytes -= len(old[0])
                self._items[key] = (data, out)
                self._bytes += len(data)
                while self._bytes > self._max:
                    _, (dropped, _) = self._items.popitem(last=False)
                    self._bytes -= len(dropped)
        return out


_memo = _Memo(MEMO_MAX_BYTES)


def zlib_stream(pieces: Sequence[Piece]) -> bytes:
    """``zlib.compress(b"".join(pieces), 1)``'s equivalent: a zlib stream inflating to the
    concatenation of ``pieces``, with :class:`Reused` pieces of at least :data:`REUSE_MIN`
    bytes compressed at most once while the memo holds them. Plain pieces in a row are
    compressed together."""
    if not any(isinstance(piece, Reused) for piece in pieces):
        return zlib.compress(joined(pieces), _LEVEL)
    out = [_HEADER]
    adler = 1
    run: list[bytes] = []
    for piece in pieces:
        if isinstance(piece, Reused) and len(piece.data) >= REUSE_MIN:
            if run:
                chunk = b"".join(run)
                out.append(_deflate(chunk))
                adler = zlib.adler32(chunk, adler)
                run = []
            out.append(_memo.deflated(piece.data))
            adler = zlib.adler32(piece.data, adler)
        else:
            run.append(piece.data if isinstance(piece, Reused) else piece)
    if run:
        chunk = b"".join(run)
        out.append(_deflate(chunk))
        adler = zlib.adler32(chunk, adler)
    out.append(_FINAL)
    out.append(struct.pack(">I", adler))
    return b"".join(out)


def coalesced(pieces: Sequence[Piece]) -> list[Piece]:
    """``pieces`` with each row of plain bytes joined into one (fewer, larger pieces to walk)."""
    out: list[Piece] = []
    run: list[bytes] = []
    for piece in pieces:
        if type(piece) is bytes:
            run.append(piece)
        else:
            if run:
                out.append(b"".join(run))
                run = []
            out.append(piece)
    if run:
        out.append(b"".join(run))
    return out


def raw_length(pieces: Sequence[Piece]) -> int:
    return sum(len(p.data) if isinstance(p, Reused) else len(p) for p in pieces)


def joined(pieces: Sequence[Piece]) -> bytes:
    return b"".join(p.data if isinstance(p, Reused) else p for p in pieces)
