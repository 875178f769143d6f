"""One long-term memory item as stored: its key, its body, its swept marker, filters. No I/O.

An item is one object, ``memory/{namespace...}/=k/{key}`` (:func:`~langgraph_handoff._format.keys.memory_item_key`),
whose msgpack body holds the namespace and key (the key segments may be hashed), the JSON value,
its times, its TTL and, when the store has a semantic index, its vectors. The vectors live in the
item's own body so that a value and its vectors are written by one PUT: nothing can pair a value
with the vectors of another version of it.

>>> body = {"namespace": ["users"], "key": "k", "value": {"a": 1}, "created_at": "2026-01-01T00:00:00+00:00",
...         "updated_at": "2026-01-01T00:00:00+00:00", "ttl": None, "expires_at": None}
>>> entry = Entry.decode("memory/users/=k/k", "etag-1", envelope.decode(encode_item(body), key="k").body)
>>> entry.item().value, entry.expired(0.0), entry.vectors is None
({'a': 1}, False, True)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime
from typing import Any

from langgraph.store.base import Item, SearchItem, TTLConfig

from langgraph_handoff._format import envelope, keys
from langgraph_handoff._format.envelope import Kind
from langgraph_handoff.checkpoint.ttl import REFRESH_AFTER
from langgraph_handoff.errors import CorruptObjectError, InvalidConfigError, InvalidInputError

__all__ = [
    "Entry",
    "check_namespace",
    "check_ttl",
    "encode_item",
    "fresh",
    "item_key",
    "marker",
    "matches",
    "parse",
    "positive_minutes",
    "swept_size",
]


def check_namespace(namespace: tuple[str, ...]) -> tuple[str, ...]:
    if not isinstance(namespace, tuple) or not namespace or not all(isinstance(p, str) and p for p in namespace):
        raise InvalidInputError(f"a memory namespace is a non-empty tuple of non-empty strings, got {namespace!r}")
    return namespace


def item_key(namespace: tuple[str, ...], key: str) -> str:
    if not isinstance(key, str) or not key:
        raise InvalidInputError(f"a memory key is a non-empty string, got {key!r}")
    return keys.memory_item_key(check_namespace(namespace), key)


def parse(object_key: str) -> tuple[tuple[str, ...], str] | None:
    """``(namespace, key)`` from an item's object key, or None if a segment is hashed (read the object)."""
    parts = object_key[len(keys.MEMORY_ROOT) :].split("/")
    if len(parts) < 3 or parts[-2] != keys.MEMORY_ITEMS:
        return None
    decoded = [keys.decode_segment(p) for p in [*parts[:-2], parts[-1]]]
    found = [d for d in decoded if d is not None]
    if len(found) != len(decoded):
        return None
    return tuple(found[:-1]), found[-1]


def fresh(expires: float, minutes: float, now: float) -> bool:
    """Less than a tenth of the TTL used up: a refresh on read would not be worth a PUT."""
    return expires - now > (1 - REFRESH_AFTER) * minutes * 60


def encode_item(body: dict[str, Any]) -> bytes:
    """A live item's stored bytes, never the size of its key's swept marker: sweeps and
    ``search`` skip objects of exactly that size without reading them, and a compressed item
    could otherwise shrink to it and vanish from ``search``. Uncompressed, an item is always
    larger than its marker (it holds the same address plus its value and times)."""
    data = envelope.encode_msgpack(Kind.MEMORY, body)
    if len(data) == len(marker(body, 0.0)):
        data = envelope.encode(Kind.MEMORY, envelope.packb(body), compress=False)
    return data


def marker(data: dict[str, Any], now: float) -> bytes:
    """What a swept item becomes: its address and when it was swept; read as absent."""
    body = {"namespace": data.get("namespace"), "key": data.get("key"), "expired": round(float(now), 3)}
    return envelope.encode_msgpack(Kind.MEMORY, body)


def swept_size(object_key: str, size: int) -> bool:
    """Whether a listed item is exactly the size of a swept marker (not worth a GET)."""
    if size > 1024:
        return False
    parsed = parse(object_key)
    if parsed is None:
        return False
    data = {"namespace": list(parsed[0]), "key": parsed[1]}
    return bool(size == len(marker(data, 0.0)))


def positive_minutes(value: Any, name: str) -> float:
    try:
        minutes = float(value)
    except (TypeError, ValueError):
        minutes = -1.0
    if isinstance(value, bool) or not minutes > 0 or minutes == float("inf"):
        raise InvalidInputError(f"memory {name} must be a positive number of minutes (or None), got {value!r}")
    return minutes


def check_ttl(ttl: Any) -> TTLConfig | None:
    """LangGraph's ``TTLConfig``, checked now rather than at the first put."""
    if ttl is None:
        return None
    if not isinstance(ttl, dict):
        raise InvalidConfigError(f"ttl must be a TTLConfig dict, got {type(ttl).__name__}")
    unknown = sorted(set(ttl) - {"default_ttl", "refresh_on_read", "sweep_interval_minutes"})
    if unknown:
        raise InvalidConfigError(
            f"unknown TTLConfig keys {unknown}: use default_ttl, refresh_on_read, sweep_interval_minutes"
        )
    for name in ("default_ttl", "sweep_interval_minutes"):
        if ttl.get(name) is not None:
            try:
                positive_minutes(ttl[name], name)
            except InvalidInputError as exc:
                raise InvalidConfigError(str(exc)) from None
    return ttl  # type: ignore[return-value]


_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: a is not None and a > b,
    "$gte": lambda a, b: a is not None and a >= b,
    "$lt": lambda a, b: a is not None and a < b,
    "$lte": lambda a, b: a is not None and a <= b,
}


def matches(actual: Any, wanted: Any) -> bool:
    """A filter value: a literal (equality) or ``{"$gt": 3, ...}`` as LangGraph's stores take it."""
    if isinstance(wanted, dict) and wanted and all(isinstance(k, str) and k.startswith("$") for k in wanted):
        unknown = set(wanted) - set(_OPERATORS)
        if unknown:
            raise InvalidInputError(f"unsupported filter operators {sorted(unknown)}; use {sorted(_OPERATORS)}")
        try:
            return all(_OPERATORS[op](actual, v) for op, v in wanted.items())
        except TypeError:
            return False  # incomparable types never match
    return bool(actual == wanted)


class Entry:
    """One version of one item, as read from its object or from a pack: its object key, the ETag
    of that version and its msgpack body (kept as bytes: packs are written from it unchanged, and
    every caller gets its own copy of the value, decoded from it). The decoded body is kept only
    once something asked for it (a filter, a refresh): a cache of 100,000 entries as bytes and a
    few numbers is a few objects each for the garbage collector to walk, not a tree of dicts."""

    __slots__ = ("_data", "_pair", "etag", "expires", "okey", "raw", "updated", "vectors")

    def __init__(self, okey: str, etag: str, raw: bytes, data: dict[str, Any]) -> None:
        self.okey = okey
        self.etag = etag
        self.raw = raw
        self._data: dict[str, Any] | None = None
        self._pair: int | None = None
        try:
            if not isinstance(data["value"], dict):
                raise TypeError("its value is not a map")
            self.expires: float | None = expiry(okey, data)
            self.updated = datetime.fromisoformat(data["updated_at"]).timestamp()
            vectors = data.get("vectors")
            #: ``(dims, how many, float32 little-endian bytes)`` or None (not indexed)
            self.vectors: tuple[int, int, bytes | memoryview] | None = None
            if vectors:
                # taken only as written: ``bytes(n)`` of a stored integer would allocate n bytes
                dims, count, blob = vectors["dims"], len(vectors["paths"]), vectors["data"]
                if type(dims) is not int or type(blob) is not bytes:
                    raise TypeError("vectors are not a whole number of dimensions and bytes")
                if len(blob) != 4 * dims * count:
                    raise ValueError(f"{len(blob)} bytes of vectors for {count} of {dims} numbers")
                # the same bytes inside the body this entry keeps anyway: a view, not a second copy
                # (1.5 KB an item at 384 dimensions); equal bytes wherever ``find`` meets them
                at = raw.find(blob)
                self.vectors = (dims, count, memoryview(raw)[at : at + len(blob)] if at >= 0 else blob)
        except Exception as exc:  # noqa: BLE001 - whatever is wrong with a stored body, it is the item's
            raise CorruptObjectError(okey, f"malformed memory item ({type(exc).__name__}: {exc})") from None

    @classmethod
    def decode(cls, okey: str, etag: str, raw: bytes) -> Entry | None:
        """The entry of an item body; None for a swept marker."""
        data = unpack(okey, raw)
        if data.get("expired") is not None:
            return None
        return cls(okey, etag, raw, data)

    @property
    def pair(self) -> int:
        """The hash of ``(object key, ETag)`` that pack digests add up (computed once)."""
        if self._pair is None:
            from langgraph_handoff.memory.packs import pair_hash

            self._pair = pair_hash(self.okey, self.etag)
        return self._pair

    @property
    def data(self) -> dict[str, Any]:
        """The decoded body, shared: never hand it (or its value) to a caller."""
        if self._data is None:
            self._data = unpack(self.okey, self.raw)
        return self._data

    @property
    def value(self) -> dict[str, Any]:
        return self.data["value"]  # type: ignore[no-any-return]

    def expired(self, now: float) -> bool:
        return self.expires is not None and now >= self.expires

    def item(self) -> Item:
        """A new ``Item``, with a value of its own (callers may change it)."""
        data = unpack(self.okey, self.raw)
        try:
            return Item(
                value=dict(data["value"]),
                key=str(data["key"]),
                namespace=tuple(data["namespace"]),
                created_at=datetime.fromisoformat(data["created_at"]),
                updated_at=datetime.fromisoformat(data["updated_at"]),
            )
        except Exception as exc:  # noqa: BLE001 - whatever is wrong with a stored body, it is the item's
            raise CorruptObjectError(self.okey, f"malformed memory item ({type(exc).__name__}: {exc})") from None

    def search_item(self, score: float | None = None) -> SearchItem:
        i = self.item()
        return SearchItem(
            namespace=i.namespace,
            key=i.key,
            value=i.value,
            created_at=i.created_at,
            updated_at=i.updated_at,
            score=score,
        )


def expiry(okey: str, data: dict[str, Any]) -> float | None:
    """An item body's ``expires_at``, read only as the number the package writes: the sweep
    decides on it, and ``float()`` of whatever a stored body holds raised out of the sweep
    (bytes, text) or kept the item for ever (``inf``)."""
    raw = data.get("expires_at")
    if raw is None:
        return None
    try:
        return _finite(raw)
    except ValueError as exc:
        raise CorruptObjectError(okey, f"malformed memory item (expires_at: {exc})") from None


def _finite(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{value!r} is not a finite number")
    return float(value)


def unpack(okey: str, raw: bytes) -> dict[str, Any]:
    data = envelope.unpackb(raw, key=okey)
    if not isinstance(data, dict):
        raise CorruptObjectError(okey, "malformed memory item (not a map)")
    return data
