"""Versioned envelopes: the self-describing frame around every stored object.

A reader must be able to tell, before trusting a single byte of payload, whether an object is
ours, whether this version can read it, whether it arrived whole, and how much memory reading it
will take. So every object starts with a fixed header::

    offset size  field
    0      4     magic           b"LGHO"
    4      2     format version  big-endian u16; this module writes FORMAT_VERSION
    6      1     kind            what the body holds (Kind)
    7      1     flags           bit 0: body is zlib-compressed; bit 1: a signature follows the body
    8      4     schema version  user state-schema version (room for migrations)
    12     4     body length     bytes of body that follow the header
    16     16    digest          blake2b-128 of the body as stored
    32     4     plain length    bytes the body inflates to (format 4 on; the body length before)
    36     ...   body            msgpack (or raw bytes for blobs)
    ...    ...   signature       (flag bit 1) key id length (1 byte), key id, 32-byte MAC: see
                                 :mod:`.signing`, which alone writes and checks it

Formats 1 to 3 have the same fields up to offset 32 and no plain length (their header is 32
bytes).

The magic and the format version sit at fixed offsets in every format, so any future layout is
still recognised and refused with :class:`EnvelopeVersionError` instead of being misread. A
truncated or altered object fails the length or digest check and raises
:class:`CorruptObjectError` naming its key; decoding never returns a partial result.

**Bounded reads.** Anyone who can write into the bucket can write an envelope, with a valid
digest, whose few hundred KB inflate to gigabytes. So a reader inflates no body past
:data:`MAX_INFLATE_RATIO` times its stored size (zlib at level 1, the only level this package
writes, never exceeds about 230:1, so nothing it wrote is refused) nor past
:data:`MAX_OBJECT_BYTES`; a format 4 body must also inflate to exactly the plain length its
header states, which is checked before any memory is taken for it. Writers refuse to store an
object a reader would refuse (:class:`~langgraph_handoff.errors.ObjectTooLargeError`).
"""

from __future__ import annotations

import enum
import hashlib
import os
import struct
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from langgraph_handoff._format import deflate
from langgraph_handoff.errors import CorruptObjectError, EnvelopeVersionError, ObjectTooLargeError

__all__ = [
    "FORMAT_VERSION",
    "MAX_INFLATE_RATIO",
    "MAX_OBJECT_BYTES",
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
FORMAT_VERSION = 4
#: The oldest format this version still reads (upgrading it in memory, see upgrades.py).
OLDEST_FORMAT_VERSION = 1
_HEADER = struct.Struct(">4sHBBII16s")
_PLAIN = struct.Struct(">I")
#: header size of formats 1 to 3
HEADER_SIZE_V3 = _HEADER.size  # 32
#: header size of the format this version writes
HEADER_SIZE = HEADER_SIZE_V3 + _PLAIN.size  # 36
FLAG_ZLIB = 0x01
#: a signature trailer follows the body (:mod:`.signing`)
FLAG_SIGNED = 0x02
_KNOWN_FLAGS = FLAG_ZLIB | FLAG_SIGNED
#: Bodies at least this large are zlib-compressed when that saves space.
COMPRESS_MIN = 1024


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip().replace("_", ""))
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a whole number of bytes") from None
    if value < 1024 * 1024:
        raise ValueError(f"{name}={raw!r} is below 1 MiB; every store needs more than that")
    return value


#: The largest object, stored or inflated, a reader accepts and a writer stores (512 MiB; set
#: ``LANGGRAPH_HANDOFF_MAX_OBJECT_BYTES`` before import to change it, on readers and writers alike).
MAX_OBJECT_BYTES = _env_int("LANGGRAPH_HANDOFF_MAX_OBJECT_BYTES", 512 * 1024 * 1024)
#: A compressed body may inflate to at most this many times its stored size (above zlib level
#: 1's own ceiling of about 230:1, far below deflate's 1032:1) ...
MAX_INFLATE_RATIO = 256
#: ... or to this many bytes, whichever is more (small bodies).
INFLATE_FLOOR = 64 * 1024


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
    #: never stored: what a signing store hands a reader in place of an object no known key
    #: signed (:mod:`.signing`); decoding it raises ``CorruptObjectError`` with its reason
    REFUSED = 11
    #: a worker's liveness record (:mod:`langgraph_handoff.checkpoint.liveness`)
    WORKER = 12
    #: an audited handoff (:mod:`langgraph_handoff.handoff.audit`)
    AUDIT = 13


@dataclass(frozen=True)
class Envelope:
    kind: Kind
    schema_version: int
    body: bytes
    format_version: int = FORMAT_VERSION


def inflate_limit(stored: int) -> int:
    """The most bytes a compressed body of ``stored`` bytes may inflate to."""
    return min(MAX_OBJECT_BYTES, max(stored * MAX_INFLATE_RATIO, INFLATE_FLOOR))


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
    concatenation, with the compressed form of :class:`~.deflate.Reused` pieces remembered.

    Raises :class:`~langgraph_handoff.errors.ObjectTooLargeError` for a body larger than
    :data:`MAX_OBJECT_BYTES`, which no reader would accept."""
    flags = 0
    if isinstance(body, (bytearray, memoryview)):
        body = bytes(body)
    pieces = [body] if isinstance(body, bytes) else body
    size = deflate.raw_length(pieces)
    if size > MAX_OBJECT_BYTES:
        raise ObjectTooLargeError(kind.name.lower(), size, MAX_OBJECT_BYTES)
    stored: bytes | None = None
    if compress and size >= COMPRESS_MIN:
        packed = deflate.zlib_stream(pieces)
        if len(packed) < size and size <= inflate_limit(len(packed)):
            stored, flags = packed, FLAG_ZLIB
    if stored is None:
        stored = body if isinstance(body, bytes) else deflate.joined(pieces)
    digest = hashlib.blake2b(stored, digest_size=16).digest()
    header = _HEADER.pack(MAGIC, format_version, int(kind), flags, schema_version, len(stored), digest)
    if format_version >= 4:
        header += _PLAIN.pack(size)
    return header + stored


def header_size(format_version: int) -> int:
    return HEADER_SIZE if format_version >= 4 else HEADER_SIZE_V3


def cut_short(data: bytes) -> bool:
    """Whether ``data`` is the start of an envelope that is longer than what arrived: its magic
    (or the start of it) and fewer bytes than its header says the object holds.

    A body cut off in transit under a ``Content-Length`` that matched the cut (a proxy, a
    server bug) looks like this, and so does an object stored truncated; only reading it again
    tells them apart (``driver``). Whatever this says, :func:`decode` of such bytes raises
    ``CorruptObjectError`` (reason ``truncated``) before it reads any of the body.

    >>> whole = encode(Kind.BLOB, b"x" * 100)
    >>> cut_short(whole), cut_short(whole[:50]), cut_short(whole[:3]), cut_short(b"other")
    (False, True, True, False)
    """
    if not data:
        return False
    if len(data) < 6:
        return MAGIC.startswith(bytes(data[:4]))
    if data[:4] != MAGIC:
        return False
    (version,) = struct.unpack_from(">H", data, 4)
    if not OLDEST_FORMAT_VERSION <= version <= FORMAT_VERSION:
        return False
    size = header_size(version)
    if len(data) < size:
        return True
    length = _HEADER.unpack_from(data, 0)[5]
    return bool(len(data) < size + length)


def decode(data: bytes, *, key: str, expect: Kind | None = None) -> Envelope:
    """Check and unframe an envelope. Raises instead of returning anything partial, and only
    ever :class:`CorruptObjectError` or :class:`EnvelopeVersionError`, whatever the bytes."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CorruptObjectError(key, f"not bytes ({type(data).__name__})")
    if not data:
        raise CorruptObjectError(key, "empty object (0 bytes)", "empty")
    if len(data) < 6 and MAGIC.startswith(bytes(data[:4])):
        raise CorruptObjectError(key, f"truncated header ({len(data)} of {HEADER_SIZE} bytes)", "truncated")
    if data[:4] != MAGIC:
        raise CorruptObjectError(key, "not a langgraph-handoff object (bad magic)", "not_ours")
    (version,) = struct.unpack_from(">H", data, 4)
    if version > FORMAT_VERSION:
        raise EnvelopeVersionError(key, version, FORMAT_VERSION)
    if version < OLDEST_FORMAT_VERSION:
        raise CorruptObjectError(key, f"invalid envelope format version {version}", "malformed")
    size = header_size(version)
    if len(data) < size:
        raise CorruptObjectError(key, f"truncated header ({len(data)} of {size} bytes)", "truncated")
    _, _, kind_raw, flags, schema, length, digest = _HEADER.unpack_from(data, 0)
    plain = _PLAIN.unpack_from(data, HEADER_SIZE_V3)[0] if version >= 4 else None
    if flags & ~_KNOWN_FLAGS or (version < 4 and flags & FLAG_SIGNED):
        raise CorruptObjectError(key, f"unknown flags {flags:#x}")
    end = size + length
    if len(data) < end:
        raise CorruptObjectError(
            key, f"body is {len(data) - size} bytes, header says {length} (truncated?)", "truncated"
        )
    if len(data) > end and not flags & FLAG_SIGNED:
        raise CorruptObjectError(key, f"body is {len(data) - size} bytes, header says {length}", "malformed")
    stored = bytes(data[size:end])
    if hashlib.blake2b(stored, digest_size=16).digest() != digest:
        raise CorruptObjectError(key, "checksum mismatch", "checksum")
    try:
        kind = Kind(kind_raw)
    except ValueError:
        raise CorruptObjectError(key, f"unknown object kind {kind_raw}") from None
    if kind == Kind.REFUSED:
        reason, _, detail = stored.decode("utf-8", "replace").partition("\0")
        raise CorruptObjectError(key, detail, reason)
    if expect is not None and kind != expect:
        raise CorruptObjectError(
            key, f"expected a {expect.name.lower()} object, found {kind.name.lower()}", "misplaced"
        )
    if not flags & FLAG_ZLIB:
        if plain is not None and plain != length:
            raise CorruptObjectError(key, f"plain length {plain} of an uncompressed body of {length} bytes")
        return Envelope(kind=kind, schema_version=schema, body=stored, format_version=version)
    limit = inflate_limit(length)
    if plain is not None and plain > limit:
        raise CorruptObjectError(key, _too_big(plain, length, limit))
    if plain == 0:  # never written (bodies under COMPRESS_MIN are stored as they are), and zlib
        # takes a limit of 0 as no limit at all: a bomb stating it inflated whole
        raise CorruptObjectError(key, "compressed body says it inflates to 0 bytes")
    body = _inflate(stored, key, limit if plain is None else plain, length, measured=plain is None)
    if plain is not None and len(body) != plain:
        raise CorruptObjectError(key, f"body inflates to {len(body)} bytes, header says {plain}")
    return Envelope(kind=kind, schema_version=schema, body=body, format_version=version)


def _too_big(plain: int, stored: int, limit: int) -> str:
    return (
        f"compressed body of {stored} bytes would inflate to {plain} or more, past the {limit} this "
        f"reader allows ({MAX_INFLATE_RATIO}:1, at most {MAX_OBJECT_BYTES} bytes: "
        "LANGGRAPH_HANDOFF_MAX_OBJECT_BYTES)"
    )


#: output per step when a body's inflated size is measured before it is inflated
_MEASURE_STEP = 1 << 20


def _inflate(stored: bytes, key: str, limit: int, length: int, *, measured: bool) -> bytes:
    """``zlib.decompress(stored)``, refused as soon as it would pass ``limit`` bytes. With
    ``measured`` (the plain length is unknown: formats 1 to 3), the body is first inflated in
    steps of 1 MiB and thrown away, counting, so that a body that would pass the limit is refused
    having taken 1 MiB, not the limit; what is then inflated is known to fit."""
    try:
        if measured:
            limit = _inflated_size(stored, key, limit, length)
        inflater = zlib.decompressobj()
        body = inflater.decompress(stored, max(limit, 1))  # 0 would be no limit
        if inflater.unconsumed_tail or (not inflater.eof and inflater.decompress(b"", 1)):
            raise CorruptObjectError(key, _too_big(limit + 1, length, limit))
    except zlib.error as exc:
        raise CorruptObjectError(key, f"compressed body does not inflate: {exc}") from None
    if not inflater.eof:
        raise CorruptObjectError(key, "compressed body does not inflate: the stream is incomplete")
    if inflater.unused_data:
        raise CorruptObjectError(key, "compressed body has bytes after its end")
    return body


def _inflated_size(stored: bytes, key: str, limit: int, length: int) -> int:
    inflater = zlib.decompressobj()
    size, rest = 0, stored
    while not inflater.eof:
        out = inflater.decompress(rest, _MEASURE_STEP)
        size += len(out)
        if size > limit:
            raise CorruptObjectError(key, _too_big(size, length, limit))
        rest = inflater.unconsumed_tail
        if not out and not rest:
            break  # input used up before the stream ended: reported by the caller
    return size


def refusal(detail: str, reason: str = "unsigned") -> bytes:
    """An envelope that stands for an object this process will not read (kind ``REFUSED``):
    decoding it raises :class:`CorruptObjectError` saying ``detail``, with ``reason`` (one word
    of ``CORRUPT_REASONS``). Never stored: a signing store hands it to readers in place of an
    object no known key signed, and the driver in place of an object too large to fetch, so the
    refusal goes wherever a damaged object would (walks report it and go on)."""
    return encode(Kind.REFUSED, f"{reason}\0{detail}".encode(), compress=False)


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


def unpackb(body: bytes, *, key: str) -> Any:
    """A body's msgpack, as :func:`decode_msgpack` reads it: our own structures only, so an ext
    type (user values are ``bin``, never ext, at this level) is refused rather than handed on,
    and nesting deeper than any of our objects (a few levels) is refused before Python's stack
    is. Any failure is a :class:`CorruptObjectError` naming ``key``."""
    try:
        return msgpack.unpackb(body, raw=False, strict_map_key=False, ext_hook=_no_ext)
    except RecursionError:
        raise CorruptObjectError(key, "body is nested too deeply to be ours") from None
    except Exception as exc:  # noqa: BLE001 - msgpack raises several unrelated types
        raise CorruptObjectError(key, f"body is not valid msgpack: {type(exc).__name__}: {exc}") from None


def _no_ext(code: int, data: bytes) -> Any:
    raise ValueError(f"unexpected msgpack ext type {code}")


def decode_msgpack(data: bytes, *, key: str, expect: Kind) -> tuple[Any, Envelope]:
    """Decode an envelope holding msgpack; raises CorruptObjectError on any decoding failure."""
    env = decode(data, key=key, expect=expect)
    return unpackb(env.body, key=key), env
