"""Keys of the metadata index: which threads carry a metadata value, found by listing a prefix.

Layout (relative to the store's own prefix, beside ``heads/`` and ``data/``)::

    index/{K}/{D}/{T}/{N}/{nonce}               the namespace (T, N) holds a checkpoint whose
                                                metadata[key] has digest D (one "entry")
    index/=t/{T}/{N}/{nonce}.{K}.{D}[.{K}.{D}]  the same memberships by thread: what
                                                ``delete_thread`` and ``copy_thread`` list
    meta/index                                  the keys whose index is complete (a marker)

``K``, ``T`` and ``N`` are :func:`~langgraph_handoff._format.keys.encode_segment` of the
metadata key, thread id and namespace; ``D`` is :func:`value_digest` of the value, so a user's
text never appears in a key name. ``=t`` cannot be an encoded metadata key (``=`` alone stands
for the empty string), and ``.`` never occurs in an encoded segment, so the by-thread names
split back unambiguously.

Why a nonce: an entry is written before the head compare-and-swap that commits a checkpoint
carrying its value, and a writer that finds a head lacking the value writes a fresh entry
rather than trusting one that may already be there (a ``delete_thread`` in progress may be
about to remove that one). Several entries for one membership are harmless: a listing
collapses them.

Why a digest of a canonical form: the filter is Python equality (as InMemorySaver filters), so
``1``, ``1.0`` and ``True`` must land on one digest, and ``"1"`` on another. Only values that
equality can meet this way (text, numbers, booleans) are indexed; a filter on anything else
(``None``, a dict, a list) reads every thread, as before.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from langgraph_handoff._format import keys

__all__ = [
    "INDEX_MARKER_KEY",
    "INDEX_ROOT",
    "by_thread_name",
    "by_thread_prefix",
    "entry_key",
    "parse_by_thread_name",
    "parse_entry_key",
    "value_digest",
    "value_prefix",
]

INDEX_ROOT = "index/"
INDEX_MARKER_KEY = "meta/index"
_BY_THREAD = INDEX_ROOT + "=t/"
#: hex digits of sha256 kept: 128 bits, collisions only cost a read (results are re-checked)
_DIGEST_LEN = 32
#: at most this many (key, digest) pairs per by-thread name: keys stay far below S3's 1,024 bytes
BY_THREAD_PAIRS = 4


def value_digest(value: Any) -> str | None:
    """The digest of a metadata value under Python equality, or None if it is not indexed.

    >>> value_digest(1) == value_digest(1.0) == value_digest(True), value_digest("1") == value_digest(1)
    (True, False)
    >>> value_digest(None), value_digest({"a": 1}), value_digest(float("nan"))
    (None, None, None)
    """
    if isinstance(value, str):
        canonical = "s:" + value
    elif isinstance(value, (bool, int)):
        canonical = f"i:{int(value)}"
    elif isinstance(value, float):
        if math.isnan(value):
            return None  # equal to nothing, itself included
        canonical = f"i:{int(value)}" if value.is_integer() else f"f:{value!r}"
    else:
        return None
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_LEN]


def value_prefix(key: str, digest: str) -> str:
    """``index/{K}/{D}/``: every namespace that holds ``key == value``.

    >>> value_prefix("user_id", "ab" * 16)
    'index/user_id/abababababababababababababababab/'
    """
    return f"{INDEX_ROOT}{keys.encode_segment(key)}/{digest}/"


def entry_key(key: str, digest: str, thread_id: str, ns: str, nonce: str) -> str:
    return f"{value_prefix(key, digest)}{keys.encode_segment(thread_id)}/{keys.encode_segment(ns)}/{nonce}"


def parse_entry_key(object_key: str, prefix: str) -> str | None:
    """The head key an entry under ``prefix`` (:func:`value_prefix`) names, or None if it is not
    an entry as this package writes them (never read, never trusted).

    >>> parse_entry_key("index/u/d/chat-1/=/0a1b", "index/u/d/"), parse_entry_key("index/u/d/x", "index/u/d/")
    ('heads/chat-1/=', None)
    """
    parts = object_key[len(prefix) :].split("/")
    if len(parts) != 3 or not all(keys.is_canonical_segment(p) for p in parts[:2]) or not parts[2]:
        return None
    return f"heads/{parts[0]}/{parts[1]}"


def by_thread_prefix(thread_id: str | None = None, ns: str | None = None) -> str:
    """``index/=t/``, ``index/=t/{T}/`` or ``index/=t/{T}/{N}/``."""
    if thread_id is None:
        return _BY_THREAD
    base = f"{_BY_THREAD}{keys.encode_segment(thread_id)}/"
    return base if ns is None else f"{base}{keys.encode_segment(ns)}/"


def by_thread_name(thread_id: str, ns: str, nonce: str, pairs: list[tuple[str, str]]) -> str:
    """The by-thread record of entries ``pairs`` (``(metadata key, digest)``) of one namespace."""
    named = "".join(f".{keys.encode_segment(k)}.{d}" for k, d in pairs)
    return f"{by_thread_prefix(thread_id, ns)}{nonce}{named}"


def parse_by_thread_name(object_key: str) -> tuple[str, str, list[tuple[str, str]]] | None:
    """``(T, N, [(K, D), ...])`` of a by-thread name, segments still encoded (None: not one).

    >>> parse_by_thread_name("index/=t/chat-1/=/0a1b.user_id." + "ab" * 16)
    ('chat-1', '=', [('user_id', 'abababababababababababababababab')])
    """
    if not object_key.startswith(_BY_THREAD):
        return None
    parts = object_key[len(_BY_THREAD) :].split("/")
    if len(parts) != 3 or not all(keys.is_canonical_segment(p) for p in parts[:2]):
        return None
    fields = parts[2].split(".")
    if len(fields) < 3 or len(fields) % 2 == 0:
        return None
    pairs = list(zip(fields[1::2], fields[2::2], strict=True))
    if not all(keys.is_canonical_segment(k) and len(d) == _DIGEST_LEN for k, d in pairs):
        return None
    return parts[0], parts[1], pairs
