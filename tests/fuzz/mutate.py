"""Mutations of one stored object, chosen by a ``random.Random`` so that a case is reproducible.

Most mutations are **structural**: the object's envelope and msgpack body are decoded, its
structure is changed (a field's type, an integer made huge, negative or not finite, a list
repeated, a key dropped or added, a value nested deeper than any stack, a string with ``../``,
NUL or a megabyte of text, a field copied from elsewhere, a value's own msgpack changed), and it
is framed again in a **valid** envelope (correct checksum; signed with the campaign's key in a
signed run) so that the mutation reaches the decoders behind the checks that a random byte flip
never passes. The rest mutate the **envelope's bytes**: header fields (with the digest made to
match again), lengths, flags, truncation, and compressed bodies, bombs among them.

In a signed run a few cases are left unsigned, signed with a key the readers do not hold, or
signed for another key: those must be refused as ``unsigned`` by every reader, whatever they hold.
"""

from __future__ import annotations

import hashlib
import math
import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack

from langgraph_handoff._format import envelope, signing
from langgraph_handoff._format.envelope import Kind
from tests.fuzz.seeds import Seed, foreign_key, signing_keys

#: the label of each stored kind in the coverage table (``pieces`` and ``tail`` are values inside
#: heads and segments, mutated there)
LABELS = {
    Kind.HEAD: "head",
    Kind.SEGMENT: "segment",
    Kind.ARCHIVE: "archive",
    Kind.BLOB: "blob",
    Kind.WRITES: "writes",
    Kind.MEMORY: "memory item",
    Kind.MEMORY_PACK: "memory pack",
    Kind.TEAM_ROSTER: "team roster",
    Kind.TEAM_MESSAGE: "team message",
    Kind.MARKER: "format marker",
    Kind.WORKER: "worker liveness",
    Kind.AUDIT: "audit record",
}
PAYLOAD_LABELS = ("pieces", "tail")
#: the largest body a structural mutation packs (a list repeated past it is cut)
PACKED_MAX = 6 << 20


@dataclass(frozen=True)
class Case:
    """One mutated object: ``data`` stored under ``key`` in place of the seed's object."""

    index: int
    key: str
    label: str
    how: str
    data: bytes
    #: "signed" (with the readers' key), "none" (an unsigned run), or, in a signed run, a
    #: refusal every reader must make: "unsigned", "foreign key", "moved"
    signature: str

    @property
    def refused(self) -> bool:
        """Whether every reader must refuse the object as not signed by a key it holds."""
        return self.signature in ("unsigned", "foreign key", "moved")


class Raw:
    """Bytes spliced into a packed body as they are (invalid or deeper msgpack than ``packb``
    writes): packed as a unique placeholder string, replaced after packing."""

    def __init__(self, data: bytes, label: str) -> None:
        self.data, self.label = data, label


def _pack(obj: Any) -> bytes:
    raws: list[Raw] = []

    def swap(value: Any) -> Any:
        if isinstance(value, Raw):
            raws.append(value)
            return f"\x00raw-splice-{len(raws) - 1:06d}\x00"
        if isinstance(value, dict):
            return {swap(k): swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    packed = msgpack.packb(swap(obj), use_bin_type=True)
    for i, raw in enumerate(raws):
        packed = packed.replace(msgpack.packb(f"\x00raw-splice-{i:06d}\x00"), raw.data, 1)
    return packed


def _deep(depth: int, inner: bytes = b"\xc0") -> Raw:
    return Raw(b"\x91" * depth + inner, f"nested {depth} deep")


def _hostile(rng: random.Random, like: Any) -> tuple[Any, str]:
    """A value to put where ``like`` was."""
    pick = rng.randrange(12)
    if pick == 0:  # ints at every boundary
        v = rng.choice(
            [0, -1, 1, 2**7, 2**15, 2**31 - 1, 2**31, 2**32, 2**53 + 1, 2**62, 2**63 - 1, -(2**63), 2**64 - 1]
        )
        return v, f"int {v}"
    if pick == 1:
        v = rng.choice([math.inf, -math.inf, math.nan, 1e308, -0.0, 0.5, -1.5])
        return v, f"float {v}"
    if pick == 2:
        v = rng.choice(["", "../../x", "s/../../x", "m/../x", "..", "/", "a\x00b", "%2e%2e", "\u202e", "x/y", " ", "é"])
        return v, f"string {v!r}"
    if pick == 3:
        n = rng.choice([200, 4096, 70_000, 1 << 20])
        return "x" * n, f"string of {n}"
    if pick == 4:
        v = rng.choice([b"", b"\x00", b"\xc1", b"\x92\x01", b"\xdd\xff\xff\xff\xff", b"\xc6\x7f\xff\xff\xff"])
        return v, f"bytes {v!r}"
    if pick == 5:
        n = rng.choice([1, 63, 64, 4096, 1 << 20])
        return rng.randbytes(min(n, 256)) * max(1, n // 256), f"bytes of {n}"
    if pick == 6:
        v = rng.choice([None, True, False, [], {}, [None], {"": None}, {0: 0}, {None: 1}])
        return v, f"{v!r}"
    if pick == 7:  # the same type, another value
        if isinstance(like, bool):
            return not like, "bool flipped"
        if isinstance(like, int):
            v = like + rng.choice([-1, 1, 2**31, -(2**31), 10**6])
            return v, f"int {like}{'+' if v >= like else ''}{v - like}"
        if isinstance(like, str) and like:
            i = rng.randrange(len(like))
            return like[:i] + rng.choice(["", "/", "../", "\x00", "=", "%", like[i] * 3]) + like[
                i + 1 :
            ], "string edited"
        if isinstance(like, bytes) and like:
            i = rng.randrange(len(like))
            return like[:i] + bytes([rng.randrange(256)]) + like[i + 1 :], "a byte changed"
        return None, "None"
    if pick == 8:  # another type, same content
        if isinstance(like, str):
            return like.encode(), "string as bytes"
        if isinstance(like, bytes):
            return like.decode("latin-1"), "bytes as string"
        if isinstance(like, (int, float)) and not isinstance(like, bool):
            return rng.choice([str(like), float(like), [like]]), "number retyped"
        if isinstance(like, list):
            return {i: v for i, v in enumerate(like)}, "list as map"
        if isinstance(like, dict):
            return list(like.values()), "map as list"
        return 0, "0"
    if pick == 9:
        depth = rng.choice([8, 64, 600, 5_000, 200_000])
        return _deep(depth), f"nested {depth} deep"
    if pick == 10:
        return msgpack.ExtType(rng.randrange(128), rng.randbytes(rng.randrange(16))), "an ext type"
    raw = rng.choice(
        [
            b"\xc1",
            b"\xd9\xff",
            b"\xc6\xff\xff\xff\xff",
            b"\xdf\xff\xff\xff\xff",
            b"\xcb\x7f\xf0\x00\x00\x00\x00\x00\x00",
        ]
    )
    return Raw(raw, "raw msgpack"), f"raw msgpack {raw!r}"


Path = tuple[Any, ...]


def _paths(obj: Any, inside: tuple[Any, ...] = ()) -> list[Path]:
    """Every position in a body (a map value, a map key as ``("key", k)``, a list item)."""
    out: list[Path] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.append((*inside, k))
            out.append((*inside, ("key", k)))
            out += _paths(v, (*inside, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.append((*inside, i))
            out += _paths(v, (*inside, i))
    return out


def _get(obj: Any, path: Path) -> Any:
    for step in path:
        obj = obj[step]
    return obj


def _payload_paths(obj: Any, which: str) -> list[Path]:
    """Paths into the payloads of type ``which`` ("pieces" or "tail") of a records body."""
    table = obj.get("x") if isinstance(obj, dict) else None
    if not isinstance(table, dict):
        return []
    mark = "p" if which == "pieces" else "a"
    out: list[Path] = []
    for origin, chs in table.items():
        for ch, p in chs.items() if isinstance(chs, dict) else ():
            if isinstance(p, dict) and mark in p:
                out.append(("x", origin, ch))
                out += _paths(p, ("x", origin, ch))
    return out


def _mutate_at(obj: Any, path: Path, rng: random.Random, donors: list[Any]) -> tuple[Any, str]:
    """``obj`` with the position ``path`` changed; returns (new root, what was done)."""
    if not path:
        value, how = _hostile(rng, obj)
        return value, how
    parent = _get(obj, path[:-1])
    last = path[-1]
    if isinstance(last, tuple):  # a map key
        k = last[1]
        new_key, how = rng.choice(
            [
                (None, "None"),
                (0, "0"),
                ("", "''"),
                (b"k", "bytes"),
                (str(k) + "\x00", "NUL added"),
                ("../" + str(k), "../"),
            ]
        )
        if isinstance(new_key, (dict, list)):
            new_key = str(new_key)
        parent[new_key] = parent.pop(k)
        return obj, f"key {k!r} renamed ({how})"
    here = parent[last]
    op = rng.randrange(10)
    if op <= 3:
        parent[last], how = _hostile(rng, here)
    elif op == 4 and isinstance(parent, dict):
        del parent[last]
        how = "dropped"
    elif op == 5 and isinstance(here, list) and here:
        n = rng.choice([2, 16, 17, 100, 10_000, 1_000_000])
        size = max(1, len(msgpack.packb(here[0], use_bin_type=True, default=lambda _: 0)))
        n = max(2, min(n, PACKED_MAX // size))
        parent[last] = here[:1] * n + here[1:]
        how = f"first item repeated {n} times"
    elif op == 6 and isinstance(here, (list, dict)) and here:
        if isinstance(here, list):
            here.pop(rng.randrange(len(here)))
        else:
            here.pop(rng.choice(list(here)))
        how = "one item removed"
    elif op == 7 and isinstance(here, dict):
        here[rng.choice(["zz", "a", "p", "b", "i", "t", "x", 7])] = _hostile(rng, None)[0]
        how = "a field added"
    elif op == 8 and donors:
        donor = rng.choice(donors)
        candidates = [p for p in _paths(donor) if not isinstance(p[-1], tuple)]
        if candidates:
            parent[last] = _copy(_get(donor, rng.choice(candidates)))
            how = "a value from elsewhere"
        else:
            parent[last], how = _hostile(rng, here)
    elif op == 9 and isinstance(here, bytes) and here:
        inner = _unpack(here)
        if inner is not None and isinstance(inner, (list, dict)) and _paths(inner):
            mutated, how = _mutate_at(inner, rng.choice(_paths(inner)), rng, [])
            parent[last] = _pack(mutated)
            how = f"its msgpack: {how}"
        else:
            parent[last], how = _hostile(rng, here)
    else:
        parent[last], how = _hostile(rng, here)
    return obj, f"{'/'.join(str(p) for p in path[-3:])}: {how}"


def _copy(value: Any) -> Any:
    return msgpack.unpackb(msgpack.packb(value, use_bin_type=True), raw=False, strict_map_key=False)


def _unpack(data: bytes) -> Any:
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=lambda c, d: msgpack.ExtType(c, d))
    except Exception:  # noqa: BLE001 - not msgpack: mutated as bytes instead
        return None


def _unframe(seed: Seed, key: str) -> envelope.Envelope:
    return envelope.decode(signing.strip(seed.objects[key]), key=key)


def structural(seed: Seed, key: str, label: str, rng: random.Random) -> tuple[bytes, str]:
    """A structural mutation of ``key``'s body, framed in a valid (unsigned) envelope."""
    env = _unframe(seed, key)
    body = _unpack(env.body) if env.kind != Kind.BLOB or rng.random() < 0.8 else None
    if body is None or not isinstance(body, (list, dict)):
        data = bytearray(env.body)
        for _ in range(rng.randint(1, 4)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        hows, packed = ["bytes changed"], bytes(data)
    else:
        # the object itself among them: a parent set to its own child's id, an origin to a
        # record that does not hold the value
        donors = [_copy(body)] + [_unpack(_unframe(seed, k).body) for k in rng.sample(_same_kind(seed, env.kind), 2)]
        hows = []
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            paths = _payload_paths(body, label) if label in PAYLOAD_LABELS else _paths(body)
            if not paths:
                paths = [()]
            body, how = _mutate_at(body, rng.choice(paths), rng, [d for d in donors if d is not None])
            hows.append(how)
        packed = _pack(body)
    version = 3 if rng.random() < 0.1 else envelope.FORMAT_VERSION
    framed = envelope.encode(env.kind, packed, schema_version=env.schema_version, format_version=version)
    return framed, "; ".join(hows) + (" (format 3)" if version == 3 else "")


def _same_kind(seed: Seed, kind: Kind) -> list[str]:
    found = [k for k in seed.objects if seed.kind_of(k) == kind]
    return found if len(found) >= 2 else found * 2


def _digest_fixed(data: bytearray) -> bytes:
    """``data`` (an envelope) with its digest recomputed over the body its header delimits."""
    if len(data) >= envelope.HEADER_SIZE_V3 and data[:4] == envelope.MAGIC:
        version = int.from_bytes(data[4:6], "big")
        start = envelope.header_size(version) if 1 <= version <= envelope.FORMAT_VERSION else envelope.HEADER_SIZE
        length = int.from_bytes(data[12:16], "big")
        data[16:32] = hashlib.blake2b(bytes(data[start : start + length]), digest_size=16).digest()
    return bytes(data)


_BOMBS: dict[int, bytes] = {}


def bomb(inflated: int) -> bytes:
    """A zlib stream of ``inflated`` zero bytes (level 9, about 1030:1), memoised."""
    if inflated not in _BOMBS:
        deflater = zlib.compressobj(9)
        chunk = bytes(1 << 20)
        parts = [deflater.compress(chunk) for _ in range(inflated >> 20)]
        _BOMBS[inflated] = b"".join([*parts, deflater.compress(bytes(inflated & ((1 << 20) - 1))), deflater.flush()])
    return _BOMBS[inflated]


def _framed(kind: int, stored: bytes, flags: int, plain: int, schema: int = 0) -> bytes:
    digest = hashlib.blake2b(stored, digest_size=16).digest()
    header = envelope._HEADER.pack(envelope.MAGIC, 4, kind, flags, schema, len(stored), digest)
    return header + plain.to_bytes(4, "big") + stored


def byte_level(seed: Seed, key: str, rng: random.Random) -> tuple[bytes, str]:
    """A mutation of the envelope's bytes (unsigned; digest made to match where it says so)."""
    env = _unframe(seed, key)
    data = bytearray(signing.strip(seed.objects[key]))
    op = rng.randrange(11)
    if op == 0:
        v = rng.choice([0, 1, 2, 3, 5, 255, 65535])
        data[4:6] = v.to_bytes(2, "big")
        return _digest_fixed(data), f"format version {v}"
    if op == 1:
        v = rng.choice([0, *range(1, 12), 12, 255])
        data[6] = v
        return bytes(data), f"kind byte {v}"
    if op == 2:
        v = rng.randrange(256)
        data[7] = v
        return bytes(data), f"flags {v:#x}"
    if op == 3:
        v = rng.choice([1, 2**31, 2**32 - 1])
        data[8:12] = v.to_bytes(4, "big")
        return bytes(data), f"schema version {v}"
    if op == 4:
        length = int.from_bytes(data[12:16], "big")
        v = rng.choice([0, max(0, length - 1), length + 1, 2**31, 2**32 - 1])
        data[12:16] = v.to_bytes(4, "big")
        return _digest_fixed(data) if rng.random() < 0.5 else bytes(data), f"body length {v} (of {length})"
    if op == 5:
        plain = int.from_bytes(data[32:36], "big")
        v = rng.choice([0, max(0, plain - 1), plain + 1, 2**31, 2**32 - 1])
        data[32:36] = v.to_bytes(4, "big")
        return bytes(data), f"plain length {v} (of {plain})"
    if op == 6:
        cut = rng.randrange(len(data))
        return bytes(data[:cut]), f"cut at {cut} of {len(data)}"
    if op == 7:
        extra = rng.randbytes(rng.choice([1, 16, 70]))
        return bytes(data) + extra, f"{len(extra)} bytes appended"
    if op == 8:  # the body compressed otherwise
        how = rng.choice(["level 9", "raw deflate", "gzip", "trailing bytes", "cut short", "stored as compressed"])
        if how == "level 9":
            stored = zlib.compress(env.body, 9)
        elif how in ("raw deflate", "gzip"):
            c = zlib.compressobj(6, zlib.DEFLATED, -15 if how == "raw deflate" else 31)
            stored = c.compress(env.body) + c.flush()
        elif how == "trailing bytes":
            stored = zlib.compress(env.body) + b"\x00junk"
        elif how == "cut short":
            stored = zlib.compress(env.body)[:-3]
        else:
            stored = env.body
        return _framed(env.kind, stored, envelope.FLAG_ZLIB, len(env.body), env.schema_version), f"body: {how}"
    if op == 9:  # bombs, past the ratio bound and past the object limit
        size = rng.choice([envelope.INFLATE_FLOOR + 1, 8 << 20, envelope.MAX_OBJECT_BYTES + 1, 600 << 20])
        stored = bomb(size)
        plain = rng.choice([size, 100, 0, len(stored) * envelope.MAX_INFLATE_RATIO])
        version = rng.choice([3, 4])
        if version == 3:
            digest = hashlib.blake2b(stored, digest_size=16).digest()
            framed = envelope._HEADER.pack(envelope.MAGIC, 3, env.kind, envelope.FLAG_ZLIB, 0, len(stored), digest)
            return framed + stored, f"zlib bomb of {size} bytes (format 3)"
        return _framed(env.kind, stored, envelope.FLAG_ZLIB, plain), f"zlib bomb of {size} bytes, plain length {plain}"
    # a msgpack body that is one bin as large as the bounds allow, compressed (a legal object)
    n = rng.choice([1 << 20, 8 << 20, 30 << 20])
    body = b"\xc6" + n.to_bytes(4, "big") + bytes(n)
    return envelope.encode(env.kind, body), f"a bin of {n} zero bytes"


#: how often each mutation family is chosen
STRUCTURAL_SHARE = 0.75


def make_case(seed: Seed, index: int, campaign_seed: int) -> Case:
    """Case ``index`` of the campaign ``campaign_seed``: the same case in every process."""
    rng = random.Random(f"{campaign_seed}:{index}:{seed.signed}")
    by_label: dict[str, list[str]] = {}
    for key in sorted(seed.objects):
        kind = seed.kind_of(key)
        if kind is None:
            continue
        by_label.setdefault(LABELS[kind], []).append(key)
        if kind in (Kind.HEAD, Kind.SEGMENT):
            body = _unpack(_unframe(seed, key).body)
            for which in PAYLOAD_LABELS:
                if _payload_paths(body, which):
                    by_label.setdefault(which, []).append(key)
    label = rng.choice(sorted(by_label))
    key = rng.choice(by_label[label])
    if label in PAYLOAD_LABELS or rng.random() < STRUCTURAL_SHARE:
        data, how = structural(seed, key, label, rng)
    else:
        data, how = byte_level(seed, key, rng)
    signature = "none"
    if seed.signed:
        signature = rng.choices(["signed", "unsigned", "foreign key", "moved"], [80, 7, 7, 6])[0]
        sign: dict[str, Callable[[bytes], bytes]] = {
            "signed": lambda d: signing.sign(d, signing_keys().signing, key),
            "unsigned": lambda d: d,
            "foreign key": lambda d: signing.sign(d, foreign_key().signing, key),
            "moved": lambda d: signing.sign(d, signing_keys().signing, key + "x"),
        }
        data = sign[signature](data)
        if signature == "signed" and not signing.is_signed(data):
            signature = "unsigned"  # not an envelope that can be signed (format 3, bad magic)
    return Case(index, key, label, how, data, signature)
