"""``SigningStore``: any store, with every object signed on the way in and checked on the way out.

The signature itself is the format's (:mod:`langgraph_handoff._format.signing`); this adapter
only applies it, so that every layer above (the saver, teams, long-term memory, the command
line) gets it without knowing: a ``Put`` of an envelope is signed for its key, and a ``Get``
hands back the envelope as it was before signing, or, for an object no held key signed, an
envelope that stands for the refusal. Decoding that raises ``CorruptObjectError`` (reason
``unsigned``) naming the key, before anything of the object is decoded, and every walk reports
it as it reports damage. The wrapped store's requests, conditions and ETags are untouched.

**Signing a store written before it had a key.** Readers with a key refuse every unsigned
object, so a store's existing objects must be signed first: run the workers with
``accept_unsigned`` (``LANGGRAPH_HANDOFF_ACCEPT_UNSIGNED=true``: they sign what they write and
read unsigned objects as they are), then ``langgraph-handoff migrate`` with the key, which signs
every object and, once none is left, records in the store's format marker that a key is
required. From then on a reader with ``accept_unsigned`` refuses unsigned objects as well: it
checks the marker when it first meets an unsigned object, and again at most every
:data:`MARKER_RECHECK` seconds, and once it has seen the requirement it keeps it.

>>> from langgraph_handoff._format import envelope
>>> from langgraph_handoff.stores import MemoryStore
>>> keys = SigningKeys.parse("k1:" + "s" * 43)
>>> inner = MemoryStore()
>>> store = SigningStore(inner, keys)
>>> _ = store.put("data/t/=/b/x", envelope.encode(envelope.Kind.BLOB, b"value"))
>>> envelope.decode(store.get("data/t/=/b/x").body, key="k").body
b'value'
>>> _ = inner.put("data/t/=/b/y", envelope.encode(envelope.Kind.BLOB, b"planted"))  # not signed
>>> envelope.decode(store.get("data/t/=/b/y").body, key="data/t/=/b/y")
Traceback (most recent call last):
...
langgraph_handoff.errors.CorruptObjectError: object 'data/t/=/b/y' is corrupt: it is not signed, ...
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from langgraph_handoff._format import envelope, keys, signing
from langgraph_handoff._format.signing import SigningKey, SigningKeys
from langgraph_handoff.errors import LangGraphHandoffError
from langgraph_handoff.stores.base import Get, ListResult, Op, Put, StoreBase, StoredObject

__all__ = ["FROM_ENVIRONMENT", "MARKER_RECHECK", "SigningStore", "signed_store"]

#: how often a reader that accepts unsigned objects reads the format marker again, at most
MARKER_RECHECK = 30.0


class SigningStore(StoreBase):
    """``inner`` with every envelope signed by ``keys.signing`` as it is written, and checked
    against ``keys`` as it is read (see the module docstring)."""

    signs = True

    def __init__(self, inner: StoreBase, keys: SigningKeys, *, clock: Callable[[], float] = time.monotonic) -> None:
        while isinstance(inner, SigningStore):
            inner = inner.inner  # (signed once, with these keys)
        self.inner: StoreBase = inner
        self.keys = keys
        # a wrapper lists as what it wraps
        self.lists_in_process = inner.lists_in_process
        self.lists_scan_directories = inner.lists_scan_directories
        self._clock = clock
        self._lock = threading.Lock()
        #: the marker said a key is required (sticky); when it was last read (accept_unsigned)
        self._required = not keys.accept_unsigned
        self._checked: float | None = None

    def __repr__(self) -> str:
        return f"{self.inner!r} signed by {self.keys.signing.key_id!r}"

    def __getattr__(self, name: str) -> Any:
        # what a particular store offers beyond the protocol (``quoting``, ``root``...)
        if name.startswith("__") or name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def trust_scope(self) -> Hashable | None:
        """The inner store's: signing changes nothing about its conditions."""
        return self.inner.trust_scope()

    # -- what is written and what is read ---------------------------------------------------------
    def _signed(self, op: Op) -> Op:
        if isinstance(op, Put):
            return replace(op, body=signing.sign(op.body, self.keys.signing, op.key))
        return op

    def _checked_object(self, obj: StoredObject | None, accept_unsigned: bool) -> StoredObject | None:
        if obj is None:
            return None
        if envelope.cut_short(obj.body):
            # cut off in transit (read again by the driver) or stored so: decoding it fails as
            # truncated before any of it is read, so it needs no MAC to be refused safely
            return obj
        body = signing.verify(obj.body, self.keys, obj.key, accept_unsigned=accept_unsigned)
        if body is obj.body:
            body = signing.strip(body)
        return StoredObject(obj.key, body, obj.etag)

    def _settled(self, ops: Sequence[Op], results: list[Any], accept_unsigned: bool) -> list[Any]:
        return [
            self._checked_object(r, accept_unsigned) if isinstance(op, Get) and not isinstance(r, BaseException) else r
            for op, r in zip(ops, results, strict=True)
        ]

    def _needs_marker(self, ops: Sequence[Op], results: list[Any]) -> bool:
        """Whether an unsigned object was read while the marker's word is unknown or stale."""
        if self._required:
            return False
        if not any(
            isinstance(op, Get) and isinstance(r, StoredObject) and _unsigned_envelope(r.body)
            for op, r in zip(ops, results, strict=True)
        ):
            return False
        return self._checked is None or self._clock() - self._checked >= MARKER_RECHECK

    def _note_marker(self, obj: StoredObject | None) -> None:
        """Keep what a (signed) format marker says: once a key is required, always."""
        required = False
        if obj is not None:
            body = signing.verify(obj.body, self.keys, obj.key)
            try:
                marker, _env = envelope.decode_msgpack(body, key=obj.key, expect=envelope.Kind.MARKER)
            except LangGraphHandoffError:
                marker = None  # unsigned or damaged: it cannot say a key is required
            required = signing.required_by(marker)
        with self._lock:
            self._checked = self._clock()
            self._required = self._required or required

    # -- sync -------------------------------------------------------------------------------------
    def _run_checked(self, ops: Sequence[Op], results: list[Any]) -> list[Any]:
        if self._needs_marker(ops, results):
            self._note_marker(self.inner.get(keys.FORMAT_MARKER_KEY))
        return self._settled(ops, results, not self._required)

    def get(self, key: str) -> StoredObject | None:
        return self._run_checked([Get(key)], [self.inner.get(key)])[0]  # type: ignore[no-any-return]

    def put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        return self.inner.put(
            key, signing.sign(body, self.keys.signing, key), if_match=if_match, if_none_match=if_none_match
        )

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        self.inner.delete(key, if_match=if_match)

    def delete_many(self, keys: Sequence[str]) -> None:
        self.inner.delete_many(keys)

    def list_page(self, prefix: str, *, start_after: str | None = None, max_keys: int = 1000) -> ListResult:
        return self.inner.list_page(prefix, start_after=start_after, max_keys=max_keys)

    def close(self) -> None:
        self.inner.close()

    def run(self, op: Op) -> Any:
        return self._run_checked([op], [self.inner.run(self._signed(op))])[0]

    def run_many(self, ops: Sequence[Op], *, return_exceptions: bool = False) -> list[Any]:
        results = self.inner.run_many([self._signed(op) for op in ops], return_exceptions=return_exceptions)
        return self._run_checked(ops, results)

    # -- async ------------------------------------------------------------------------------------
    async def _arun_checked(self, ops: Sequence[Op], results: list[Any]) -> list[Any]:
        if self._needs_marker(ops, results):
            self._note_marker(await self.inner.aget(keys.FORMAT_MARKER_KEY))
        return self._settled(ops, results, not self._required)

    async def aget(self, key: str) -> StoredObject | None:
        return (await self._arun_checked([Get(key)], [await self.inner.aget(key)]))[0]  # type: ignore[no-any-return]

    async def aput(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        return await self.inner.aput(
            key, signing.sign(body, self.keys.signing, key), if_match=if_match, if_none_match=if_none_match
        )

    async def adelete(self, key: str, *, if_match: str | None = None) -> None:
        await self.inner.adelete(key, if_match=if_match)

    async def adelete_many(self, keys: Sequence[str]) -> None:
        await self.inner.adelete_many(keys)

    async def alist_page(self, prefix: str, *, start_after: str | None = None, max_keys: int = 1000) -> ListResult:
        return await self.inner.alist_page(prefix, start_after=start_after, max_keys=max_keys)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def arun(self, op: Op) -> Any:
        return (await self._arun_checked([op], [await self.inner.arun(self._signed(op))]))[0]

    async def arun_many(self, ops: Sequence[Op], *, return_exceptions: bool = False) -> list[Any]:
        results = await self.inner.arun_many([self._signed(op) for op in ops], return_exceptions=return_exceptions)
        return await self._arun_checked(ops, results)


class _FromEnvironment:
    def __repr__(self) -> str:
        return "FROM_ENVIRONMENT"


#: ``signing_key=`` of ``from_url``: the keys in ``LANGGRAPH_HANDOFF_SIGNING_KEYS``, if set
FROM_ENVIRONMENT: Any = _FromEnvironment()

SigningKeyArg = SigningKeys | SigningKey | str | Iterable[SigningKey] | None


def signed_store(store: StoreBase, signing_key: SigningKeyArg | _FromEnvironment) -> StoreBase:
    """``store`` signing with ``signing_key`` (:meth:`SigningKeys.of` reads it), or as it is for
    None; :data:`FROM_ENVIRONMENT` takes the keys from ``LANGGRAPH_HANDOFF_SIGNING_KEYS`` (and
    ``LANGGRAPH_HANDOFF_ACCEPT_UNSIGNED``), none when it is unset.

    >>> from langgraph_handoff.stores import MemoryStore
    >>> signed_store(MemoryStore(), None)
    MemoryStore(0 objects)
    >>> signed_store(MemoryStore(), "k1:" + "s" * 43)
    MemoryStore(0 objects) signed by 'k1'
    """
    keys = SigningKeys.from_env() if isinstance(signing_key, _FromEnvironment) else signing_key
    if keys is None:
        return store
    return SigningStore(store, SigningKeys.of(keys))


def _unsigned_envelope(body: bytes) -> bool:
    return len(body) >= 6 and body[:4] == envelope.MAGIC and not signing.is_signed(body)
