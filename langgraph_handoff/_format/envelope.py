"""Versioned envelopes: the self-describing frame around every stored object.

A reader must be able to tell, before trusting a single byte of payload, whether an object is
ours, whether this version can read it, and whether it arrived whole. So every object starts with
a fixed 32-byte header::

    offset size  field
    0      4     magic           b"LGHO"
    4      2     format version  big-endian u16; this module writes FORMAT_VERSION
    6      1     kind            what the body holds (Kind)
    7      1     flags           bit 0: body is zlib-compressed
    8      4     schema version  user state-schema version (room for migrations)
    12     4     body length     bytes of body that follow the header
    16     16    digest          blake2b-128 of the body as stored
    32     ...   body            msgpack (or raw bytes for blobs)

The magic and the format version sit at fixed offsets in every format, so any future layout is
still recognised and refused with :class:`EnvelopeVersionError` instead of being misread. A
truncated or altered object fails the length or digest check and raises
:class:`CorruptObjectError` naming its key; decoding never returns a partial result.
"""

from __future__ import annotations

import enum
import hashlib
import struct
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from langgraph_handoff._format import deflate
from langgraph_handoff.errors import CorruptObjectError, EnvelopeVersionError

__all__ = [
    "FORMAT_VERSION",
    "Envelope",
    "Kind",
    "decode",
    "decode_msgpack",
    "encode",
    "encode_msgpack",
    "packb",
    "packb_array_header",
    "packb_map_header",
]

MAGIC = b"LGHO"
#: The envelope format this version writes and the newest it reads (history: upgrades.py).
FORMAT_VERSION = 3
#: The oldest format this version still reads (upgrading it in memory, see upgrades.py).
OLDEST_FORMAT_VERSION = 1
_HEADER = struct.Struct(">4sHBBII16s")
HEADER_SIZE = _HEADER.size  # 32
_FLAG_ZLIB = 0x01
#: Bodies at least this large are zlib-compressed when that saves space.
COMPRESS_MIN = 1024


class Kind(enum.IntEnum):
    """What an envelope's body holds. Stored as one byte; never reuse a number."""

    HEAD = 1
    SEGMENT = 2
    WRITES = 3
    BLOB = 4
    MARKER = 5
    MEMORY = 6
    TEAM_ROSTER = 7
    TEAM_MESSAGE = 8
    MEMORY_PACK = 9
    ARCHIVE = 10


@dataclass(frozen=True)
class Envelope:
    kind: Kind
    schema_version: int
    body: bytes
    format_version: int = FORMAT_VERSION


def encode(
    kind: Kind,
    body: bytes | Sequence[deflate.Piece],
    *,
    schema_version: int = 0,
    compress: bool = True,
    format_version: int = FORMAT_VERSION,
) -> bytes:
    """Frame ``body`` in an envelope. Compresses with zlib when it pays off. (``format_version``
    exists for tests that write old formats; everything else writes the current one.)

    ``body`` may also be a sequence of pieces (:mod:`.deflate`): the same envelope as for their
    concatenation, with the compressed form of :class:`~.deflate.Reused` pieces remembered."""
    flags = 0
    if isinstance(body, (bytearray, memoryview)):
        body = bytes(body)
    pieces = [body] if isinstance(body, bytes) else body
    size = deflate.raw_length(pieces)
    stored: bytes | None = None
    if compress and size >= COMPRESS_MIN:
        packed = deflate.zlib_stream(pieces)
        if len(packed) < size:
            stored, flags = packed, _FLAG_ZLIB
    if stored is None:
        stored = body if isinstance(body, bytes) else deflate.joined(pieces)
    digest = hashlib.blake2b(stored, digest_size=16).digest()
    header = _HEADER.pack(MAGIC, format_version, int(kind), flags, schema_version, len(stored), digest)
    return header + stored


def decode(data: bytes, *, key: str, expect: Kind | None = None) -> Envelope:
    """Check and unframe an envelope. Raises instead of returning anything partial."""
    if not data:
        raise CorruptObjectError(key, "empty object (0 bytes)", "empty")
    if len(data) < 6 and MAGIC.startswith(data[:4]):
        raise CorruptObjectError(key, f"truncated header ({len(data)} of {HEADER_SIZE} bytes)", "truncated")
    if data[:4] != MAGIC:
        raise CorruptObjectError(key, "not a langgraph-handoff object (bad magic)", "not_ours")
    (version,) = struct.unpack_from(">H", data, 4)
    if version > FORMAT_VERSION:
        raise EnvelopeVersionError(key, version, FORMAT_VERSION)
    if version < OLDEST_FORMAT_VERSION:
        raise CorruptObjectError(key, f"invalid envelope format version {version}", "malformed")
    if len(data) < HEADER_SIZE:
        raise CorruptObjectError(key, f"truncated header ({len(data)} of {HEADER_SIZE} bytes)", "truncated")
    _, _, kind_raw, flags, schema, length, digest = _HEADER.unpack_from(data, 0)
    stored = data[HEADER_SIZE:]
    if len(stored) != length:
        reason = "truncated" if len(stored) < length else "malformed"
        raise CorruptObjectError(key, f"body is {len(stored)} bytes, header says {length} (truncated?)", reason)
    if hashlib.blake2b(stored, digest_size=16).digest() != digest:
        raise CorruptObjectError(key, "checksum mismatch", "checksum")
    try:
        kind = Kind(kind_raw)
    except ValueError:
        raise CorruptObjectError(key, f"unknown object kind {kind_raw}") from None
    if expect is not None and kind != expect:
        raise CorruptObjectError(
            key, f"expected a {expect.name.lower()} object, found {kind.name.lower()}", "misplaced"
        )
    if flags & ~_FLAG_ZLIB:
        raise CorruptObjectError(key, f"unknown flags {flags:#x}")
    body = stored
    if flags & _FLAG_ZLIB:
        try:
            body = zlib.decompress(stored)
        except zlib.error as exc:
            raise CorruptObjectError(key, f"compressed body does not inflate: {exc}") from None
    return Envelope(kind=kind, schema_version=schema, body=body, format_version=version)


_packers = threading.local()


def _packer() -> Any:
    """This thread's ``Packer`` (one is not thread-safe). It resets itself after each call, and
    after a failed one."""
    try:
        return _packers.packer
    except AttributeError:
        _packers.packer = msgpack.Packer(use_bin_type=True)
        return _packers.packer


def packb(obj: Any) -> bytes:
    """``msgpack.packb(obj, use_bin_type=True)``, the same bytes, without building a ``Packer``
    per call (most of the cost of packing a small value)."""
    return _packer().pack(obj)  # type: ignore[no-any-return]


def packb_map_header(n: int) -> bytes:
    """The msgpack header of a map of ``n`` entries (what ``packb`` writes before them)."""
    return _packer().pack_map_header(n)  # type: ignore[no-any-return]


def packb_array_header(n: int) -> bytes:
    """The msgpack header of an array of ``n`` items."""
    return _packer().pack_array_header(n)  # type: ignore[no-any-return]


def encode_msgpack(kind: Kind, obj: Any, *, schema_version: int = 0) -> bytes:
    """Encode a msgpack-able structure in an envelope."""
    return encode(kind, packb(obj), schema_version=schema_version)


def decode_msgpack(data: bytes, *, key: str, expect: Kind) -> tuple[Any, Envelope]:
    """Decode an envelope holding msgpack; raises CorruptObjectError on any decoding failure."""
    env = decode(data, key=key, expect=expect)
    try:
        obj = msgpack.unpackb(env.body, raw=False, strict_map_key=False)
    except Exception as exc:  # noqa: BLE001 - msgpack raises several unrelated types
        raise CorruptObjectError(key, f"body is not valid msgpack: {exc}") from None
    return obj, env
