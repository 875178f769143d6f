"""Values stored as what they append to an earlier value: the byte arithmetic of tails.

A plain ``add_messages`` list grows by a message or two per step, and each checkpoint stores the
whole list again: on a thread of 1,000 turns, hundreds of KB per put for two new messages. The
serde writes a list as a msgpack array (a header that holds the count, then the items in
order), so a list that only grew serialises to the previous list's items followed by the new
ones, under a new header. Such a value is stored as a **tail**: the new items' bytes, with a
reference to an immutable **base** blob that holds an earlier value whole.

This module only compares and splices bytes, so it cannot misread a value: a tail is used
exactly when the new bytes are the base's items followed by more items, whatever the serde put
in them. A list that changed in place (a message updated or removed) is simply stored whole.

>>> import msgpack
>>> base, grown = msgpack.packb(["a", "b"]), msgpack.packb(["a", "b", "c", "d"])
>>> tail = split(base, grown)
>>> tail
(4, b'\\xa1c\\xa1d')
>>> joined(base, *tail) == grown
True
>>> split(base, msgpack.packb(["a", "x", "c"])) is None   # changed in place: stored whole
True
"""

from __future__ import annotations

import struct

__all__ = ["array_header", "header_bytes", "joined", "split"]


def array_header(data: bytes) -> tuple[int, int] | None:
    """``(count, header length)`` if ``data`` starts with a msgpack array header, else None.

    >>> array_header(bytes([0x92, 1, 2])), array_header(b"\\xdc\\x00\\x10"), array_header(b"\\xa1x")
    ((2, 1), (16, 3), None)
    """
    if not data:
        return None
    first = data[0]
    if 0x90 <= first <= 0x9F:
        return first & 0x0F, 1
    if first == 0xDC and len(data) >= 3:
        return struct.unpack_from(">H", data, 1)[0], 3
    if first == 0xDD and len(data) >= 5:
        return struct.unpack_from(">I", data, 1)[0], 5
    return None


def header_bytes(count: int) -> bytes:
    """The msgpack array header for ``count`` items, in its shortest form (as msgpack writes it).

    >>> header_bytes(3), header_bytes(16), header_bytes(70000)
    (b'\\x93', b'\\xdc\\x00\\x10', b'\\xdd\\x00\\x01\\x11p')
    """
    if count < 16:
        return bytes([0x90 | count])
    if count < 0x10000:
        return b"\xdc" + struct.pack(">H", count)
    return b"\xdd" + struct.pack(">I", count)


def split(base: bytes, new: bytes) -> tuple[int, bytes] | None:
    """``(count, tail)`` when ``new`` is the msgpack array ``base`` with items appended: ``tail``
    is the appended items' bytes and ``count`` the new array's length. None otherwise (not
    arrays, nothing appended, or the common items differ). (The base's own count is
    ``array_header(base)[0]``.)"""
    b, n = array_header(base), array_header(new)
    if b is None or n is None or n[0] <= b[0]:
        return None
    if new[: n[1]] != header_bytes(n[0]):
        return None  # a header msgpack would not write: joined() could not give these bytes back
    body = base[b[1] :]
    if not new.startswith(body, n[1]):
        return None
    return n[0], new[n[1] + len(body) :]


def joined(base: bytes, count: int, tail: bytes) -> bytes:
    """The value a tail stands for: ``count`` items, those of ``base`` followed by ``tail``."""
    b = array_header(base)
    if b is None:
        raise ValueError("the base of a tail is not a msgpack array")
    return b"".join((header_bytes(count), memoryview(base)[b[1] :], tail))
