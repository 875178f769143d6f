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

A list may also come wrapped in a msgpack *ext* object: a ``DeltaChannel`` snapshot is an ext
(type 7) whose data is the list. Splitting and joining see through that frame, and rebuild it
around the joined list (its length changes with the list).

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

__all__ = ["array_header", "framing", "header_bytes", "joined", "split"]


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


def _ext_header(ext_type: int, size: int) -> bytes:
    """The msgpack ext header for ``size`` bytes of data, in the form msgpack writes it."""
    fixed = {1: 0xD4, 2: 0xD5, 4: 0xD6, 8: 0xD7, 16: 0xD8}.get(size)
    if fixed is not None:
        return bytes([fixed, ext_type])
    if size < 0x100:
        return bytes([0xC7, size, ext_type])
    if size < 0x10000:
        return b"\xc8" + struct.pack(">H", size) + bytes([ext_type])
    return b"\xc9" + struct.pack(">I", size) + bytes([ext_type])


def _ext_frame(data: bytes) -> tuple[int, int, int] | None:
    """``(ext type, data length, header length)`` if ``data`` starts with a msgpack ext header."""
    if len(data) < 2:
        return None
    first = data[0]
    if 0xD4 <= first <= 0xD8:
        return data[1], 1 << (first - 0xD4), 2
    if first == 0xC7 and len(data) >= 3:
        return data[2], data[1], 3
    if first == 0xC8 and len(data) >= 4:
        return data[3], struct.unpack_from(">H", data, 1)[0], 4
    if first == 0xC9 and len(data) >= 6:
        return data[5], struct.unpack_from(">I", data, 1)[0], 6
    return None


def framing(data: bytes) -> tuple[int | None, int, int] | None:
    """``(ext type or None, item count, offset of the first item)`` of a msgpack array, bare or
    as the whole data of an ext object; None for anything else.

    >>> import msgpack
    >>> framing(msgpack.packb([1, 2])), framing(msgpack.packb(msgpack.ExtType(7, msgpack.packb([1]))))
    ((None, 2, 1), (7, 1, 3))
    """
    ext = _ext_frame(data)
    start, ext_type = 0, None
    if ext is not None:
        ext_type, size, start = ext
        if start + size != len(data):
            return None  # not one ext object holding the rest
    found = array_header(data[start : start + 5])
    if found is None:
        return None
    return ext_type, found[0], start + found[1]


def _frame(ext_type: int | None, count: int, items_size: int) -> bytes:
    """The headers msgpack writes before ``count`` items of ``items_size`` bytes, in the frame
    ``ext_type`` says (None: a bare array)."""
    header = header_bytes(count)
    if ext_type is None:
        return header
    return _ext_header(ext_type, len(header) + items_size) + header


def split(base: bytes, new: bytes) -> tuple[int, bytes] | None:
    """``(count, tail)`` when ``new`` is the list ``base`` with items appended (both bare arrays,
    or both the data of ext objects of one type): ``tail`` is the appended items' bytes and
    ``count`` the new list's length. None otherwise (not lists, nothing appended, the common
    items differ, or a frame :func:`joined` would not write back byte for byte).

    >>> import msgpack
    >>> snap = lambda items: msgpack.packb(msgpack.ExtType(7, msgpack.packb(items)))
    >>> split(snap(["a"]), snap(["a", "b"]))
    (2, b'\\xa1b')
    """
    b, n = framing(base), framing(new)
    if b is None or n is None or b[0] != n[0] or n[1] <= b[1]:
        return None
    if new[: n[2]] != _frame(n[0], n[1], len(new) - n[2]):
        return None  # a header msgpack would not write: joined() could not give these bytes back
    body = memoryview(base)[b[2] :]
    if not new.startswith(body, n[2]):
        return None
    return n[1], new[n[2] + len(body) :]


def joined(base: bytes, count: int, *added: bytes) -> bytes:
    """The value a tail (or pieces) stands for: ``count`` items, those of ``base`` followed by
    the ``added`` bytes, in the base's frame."""
    b = framing(base)
    if b is None:
        raise ValueError("the base of a tail is not a msgpack list")
    items = memoryview(base)[b[2] :]
    size = len(items) + sum(len(a) for a in added)
    return b"".join((_frame(b[0], count, size), items, *added))
