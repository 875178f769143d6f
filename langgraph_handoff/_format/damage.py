"""What a walk over many objects reports about one it could not use, before it goes on.

A single read that meets a damaged object raises (:class:`~langgraph_handoff.errors.CorruptObjectError`
names the key): the caller asked about that thread and must not get half of it. A walk over the
whole store (``threads``, ``verify``, ``prune``, the TTL sweep, ``migrate``, ``list(None)``)
must not stop there: one truncated head would otherwise block every thread behind it. Such a
walk records the object as a :class:`DamagedObject`, leaves it alone, goes on with the rest, and
hands the records back in its result (the command line exits 1).

>>> from langgraph_handoff.errors import CorruptObjectError
>>> DamagedObject.from_error(CorruptObjectError("heads/chat-2/=", "checksum mismatch", "checksum")).as_dict()
{'key': 'heads/chat-2/=', 'reason': 'checksum', 'detail': 'checksum mismatch', 'thread_id': 'chat-2'}
>>> DamagedObject.foreign("heads/README.txt").reason
'not_a_head'
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from langgraph_handoff._format import keys
from langgraph_handoff.errors import CorruptObjectError, EnvelopeError, EnvelopeVersionError

__all__ = ["REASONS", "DamagedObject"]

#: every ``DamagedObject.reason``, with what it means
REASONS = {
    "empty": "the object is empty (0 bytes)",
    "truncated": "the object is shorter than its header says",
    "checksum": "the object's bytes do not match their checksum (bit rot, a partial overwrite)",
    "not_ours": "not a langgraph-handoff object",
    "malformed": "a langgraph-handoff envelope whose contents do not decode",
    "misplaced": "a valid object stored under another thread's (or kind's) key",
    "missing": "an object another one references is absent",
    "newer_format": "written by a newer langgraph-handoff (upgrade this one to read it)",
    "unsigned": "on a store with a signing key: an object no known key signed, refused unread",
    "undecodable": "a stored value the serializer cannot read (another serializer or key, or damage)",
    "not_a_head": "a key under heads/ that no langgraph-handoff writes (a stray file): left as it is",
    "not_an_item": "a key under memory/ that is not a memory item's (a stray file): left as it is",
}


@dataclass(frozen=True)
class DamagedObject:
    """One object a walk could not use. ``reason`` is one word of :data:`REASONS`, ``detail``
    the sentence the error said, ``thread_id`` the thread the key belongs to (None when the key
    does not say: a stray key, or an over-long id stored hashed)."""

    key: str
    reason: str
    detail: str
    thread_id: str | None = None

    @classmethod
    def from_error(cls, exc: EnvelopeError, key: str | None = None) -> DamagedObject:
        """The record of a decoding error (``CorruptObjectError`` or ``EnvelopeVersionError``)."""
        where = key or getattr(exc, "key", None) or "?"
        if isinstance(exc, CorruptObjectError):
            return cls(where, exc.reason, exc.detail, keys.thread_of_key(where))
        if isinstance(exc, EnvelopeVersionError):
            detail = f"envelope format {exc.found}; this version reads up to {exc.supported}"
            return cls(where, "newer_format", detail, keys.thread_of_key(where))
        return cls(where, "malformed", str(exc), keys.thread_of_key(where))

    @classmethod
    def foreign(cls, key: str) -> DamagedObject:
        """A key under ``heads/`` that is not a head key (:func:`keys.is_head_key`): never read,
        rewritten or deleted by a walk."""
        return cls(key, "not_a_head", "not a head key (langgraph-handoff never writes one like it)")

    def as_dict(self) -> dict[str, str | None]:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.key}: {self.reason} ({self.detail})"
