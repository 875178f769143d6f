"""Signing a store that was written without a key, or re-signing it with a new one.

``migrate`` on a saver with signing keys runs :func:`plan_sign_store` first: every object of the
store (every thread, team and long-term memory, and the format marker) that is not signed with
the current key is checked and signed with it, by compare-and-swap on the version read, so a
worker's write in between is never overwritten (it is read again: a worker with the key signed
it already). What is signed:

* an object signed by another key the reader holds (rotation), or not signed at all (a store
  written before it had a key). Only an object that reads as what its kind promises is signed:
  the pass must not bless a damaged or planted one. Objects of formats 1 and 2 whose body
  changed since (heads, segments, writes documents) are left to the thread pass that follows,
  which rewrites them;
* never an object signed by a key the reader does not hold, nor one whose signature does not
  match: it is reported, as damage, and left as it is;
* never an unsigned object once the store's marker (signed) says a key is required: a signing
  ``migrate`` finished before, so it was written since by someone without the key.

The pass reads and writes the wrapped store's raw bytes (``SigningStore.inner``), signing
explicitly: it must see which key signed what. After a full pass that left nothing unsigned,
``migrate`` records in the format marker that a key is required (:mod:`langgraph_handoff.checkpoint.signed_store`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langgraph_handoff._format import envelope, keys, signing
from langgraph_handoff._format import records as rec_io
from langgraph_handoff._format.damage import DamagedObject
from langgraph_handoff._format.envelope import Kind
from langgraph_handoff._format.signing import SigningKeys
from langgraph_handoff.checkpoint.driver import PAUSE, Batch, Plan
from langgraph_handoff.errors import (
    CorruptObjectError,
    EnvelopeVersionError,
    PreconditionFailedError,
    UnknownOutcomeError,
)
from langgraph_handoff.probe import PROBE_PREFIX
from langgraph_handoff.stores.base import Get, ListPage, Put, StoredObject

__all__ = ["SigningPass", "plan_sign_store"]

_CHUNK = 64
_ATTEMPTS = 8
#: what a body must decode to before it is signed, by kind (what the package's own readers read)
_CHECKS: dict[Kind, Callable[[bytes, str], Any]] = {
    Kind.HEAD: lambda data, key: rec_io.decode_head(data, key=key),
    Kind.SEGMENT: lambda data, key: rec_io.decode_segment(data, key=key),
    Kind.WRITES: lambda data, key: rec_io.decode_writes(data, key=key),
    Kind.ARCHIVE: lambda data, key: rec_io.decode_archive(data, key=key),
    Kind.BLOB: lambda data, key: rec_io.decode_blob(data, key=key),
}
#: kinds whose body a format 1 or 2 envelope lays out otherwise (upgrades.py): rewritten by the
#: thread pass, not re-framed here
_BODY_CHANGED_BEFORE_3 = (Kind.HEAD, Kind.SEGMENT, Kind.WRITES)


@dataclass
class SigningPass:
    """What :func:`plan_sign_store` did (or, with ``dry_run``, would do)."""

    dry_run: bool = False
    #: objects signed with the current key (or, dry run, that would be)
    signed: int = 0
    #: objects already signed with it
    current: int = 0
    #: objects of an older format the thread pass rewrites (signed then)
    left: list[str] = field(default_factory=list)
    #: objects not signed: unreadable, or signed with a key this reader does not hold
    damaged: list[DamagedObject] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "signed": self.signed,
            "current": self.current,
            "left": len(self.left),
            "damaged": len(self.damaged),
            "dry_run": self.dry_run,
        }


def plan_sign_store(keys_held: SigningKeys, dry_run: bool) -> Plan[SigningPass]:
    """Sign every object of the store not signed with ``keys.signing`` (see the module
    docstring). Run it on the *wrapped* store: it reads raw bytes and signs them itself."""
    result = SigningPass(dry_run=dry_run)
    # once a signing migrate has finished (the marker, signed, says a key is required), an
    # unsigned object was written since by someone without the key: never signed
    marker = yield Get(keys.FORMAT_MARKER_KEY)
    unsigned_ok = marker is None or not _requires(keys_held, marker)
    found = yield from _every_key()
    for start in range(0, len(found), _CHUNK):
        chunk = found[start : start + _CHUNK]
        objs = yield Batch(tuple(Get(k) for k in chunk))
        for key, obj in zip(chunk, objs, strict=True):
            yield PAUSE
            yield from _sign_one(keys_held, key, obj, result, unsigned_ok)
    return result


def _every_key() -> Plan[list[str]]:
    out: list[str] = []
    after = None
    while True:
        page = yield ListPage("", start_after=after, max_keys=1000)
        out += [i.key for i in page.items if not i.key.startswith(PROBE_PREFIX)]
        if not page.truncated or not page.items:
            return out
        after = page.items[-1].key


def _requires(keys_held: SigningKeys, marker: StoredObject) -> bool:
    body = signing.verify(marker.body, keys_held, marker.key)
    try:
        record, _env = envelope.decode_msgpack(body, key=marker.key, expect=Kind.MARKER)
    except (CorruptObjectError, EnvelopeVersionError):
        return False
    return signing.required_by(record)


def _sign_one(
    keys_held: SigningKeys, key: str, obj: StoredObject | None, result: SigningPass, unsigned_ok: bool
) -> Plan[None]:
    for _ in range(_ATTEMPTS):
        if obj is None:
            return None  # deleted since the listing
        decided = _decide(keys_held, key, obj.body, unsigned_ok)
        if isinstance(decided, DamagedObject):
            result.damaged.append(decided)
            return None
        if decided == _CURRENT:
            result.current += 1
            return None
        if isinstance(decided, _Verdict):  # _LEFT
            result.left.append(key)
            return None
        if result.dry_run:
            result.signed += 1
            return None
        body = signing.sign(decided, keys_held.signing, key)
        try:
            yield Put(key, body, if_match=obj.etag)
        except (PreconditionFailedError, UnknownOutcomeError):
            obj = yield Get(key)  # a writer moved it (signing it, if it holds the key): decide again
            continue
        result.signed += 1
        return None
    result.damaged.append(DamagedObject(key, "malformed", "kept changing while it was being signed; run migrate again"))
    return None


class _Verdict(enum.Enum):
    CURRENT = "signed with the current key"
    LEFT = "an older format the thread pass rewrites"


_CURRENT, _LEFT = _Verdict.CURRENT, _Verdict.LEFT


def _decide(keys: SigningKeys, key: str, raw: bytes, unsigned_ok: bool) -> bytes | DamagedObject | _Verdict:
    """A :class:`_Verdict`, a damage record, or the unsigned envelope (current format) to sign."""
    if signing.is_signed(raw) and signing.signer(raw) == keys.signing.key_id:
        checked = signing.verify(raw, keys, key)
        if checked is raw:
            return _CURRENT
    checked = signing.verify(raw, keys, key, accept_unsigned=unsigned_ok)
    try:
        if checked is not raw:
            envelope.decode(checked, key=key)  # the refusal: raises with its reason
        plain = signing.strip(raw)
        env = envelope.decode(plain, key=key)
        if env.format_version < 3 and env.kind in _BODY_CHANGED_BEFORE_3:
            return _LEFT
        check = _CHECKS.get(env.kind)
        if check is not None:
            check(plain, key)
        elif env.kind != Kind.BLOB:
            envelope.unpackb(env.body, key=key)
    except (CorruptObjectError, EnvelopeVersionError) as exc:
        return DamagedObject.from_error(exc, key)
    if env.format_version == envelope.FORMAT_VERSION:
        return plain
    return envelope.encode(env.kind, env.body, schema_version=env.schema_version)
