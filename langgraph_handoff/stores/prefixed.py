"""``PrefixedStore``: one store's keys under a prefix, seen as a store of its own.

Why: a saver lists every thread it holds from ``heads/`` and reads a thread from
``heads/{T}/`` and ``data/{T}/``, where ``T`` is any string a caller passes as a thread id. So a
thread the package keeps for itself cannot sit there: whatever id it had, a user of a graph on
the same store could pass it. A saver on a prefixed view (an agent team's members, under
``teams/{TM}/members/``) keeps its threads where a saver at the store's root never lists, reads
or writes: a root key is never under ``teams/`` unless the package put it there.

The view is a thin adapter: every key goes to the wrapped store with the prefix before it, and
comes back without it. The wrapped store's conditions, ETags, parallel batches and signing are
untouched (a signing store under the view signs each object for its full key, so a copy moved
between the root and a view is signed again for where it lands). A view of a view is a view of
the wrapped store under both prefixes.

>>> from langgraph_handoff.stores import MemoryStore
>>> root = MemoryStore()
>>> team = PrefixedStore(root, "teams/t/members/")
>>> _ = team.put("heads/t%2falice/=", b"x", if_none_match=True)
>>> [i.key for i in root.list("")], [i.key for i in team.list("heads/")]
(['teams/t/members/heads/t%2falice/='], ['heads/t%2falice/='])
>>> team.get("heads/t%2falice/=").key, root.get("heads/t%2falice/=") is None
('heads/t%2falice/=', True)
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import replace
from typing import Any

from langgraph_handoff.stores.base import (
    Delete,
    DeleteMany,
    Get,
    ListPage,
    ListResult,
    ObjectInfo,
    Op,
    Put,
    StoreBase,
    StoredObject,
    validate_prefix,
)

__all__ = ["PrefixedStore", "prefixed_op", "unprefixed", "unprefixed_result"]


class PrefixedStore(StoreBase):
    """The keys of ``inner`` under ``prefix`` (which ends in ``/``), as a store of their own."""

    inner: StoreBase
    prefix: str

    def __init__(self, inner: StoreBase, prefix: str) -> None:
        if not prefix.endswith("/"):
            raise ValueError(f"a store prefix ends in '/', got {prefix!r}")
        validate_prefix(prefix)
        if isinstance(inner, PrefixedStore):
            prefix, inner = inner.prefix + prefix, inner.inner
        self.inner = inner
        self.prefix = prefix
        # a wrapper lists and signs as what it wraps
        self.lists_in_process = inner.lists_in_process
        self.lists_scan_directories = inner.lists_scan_directories
        self.signs = inner.signs

    def __repr__(self) -> str:
        return f"{self.inner!r} under {self.prefix!r}"

    def __getattr__(self, name: str) -> Any:
        # what a particular store offers beyond the protocol (``keys`` of a signing store...)
        if name.startswith("__") or name in ("inner", "prefix"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def trust_scope(self) -> Hashable | None:
        """The wrapped store's: its conditions are the same under any prefix, and the probe
        that checks them runs at its root (:func:`unprefixed`)."""
        return self.inner.trust_scope()

    # -- keys in, keys out --------------------------------------------------------------------------
    def full_key(self, key: str) -> str:
        return self.prefix + key

    def _op(self, op: Op) -> Op:
        return prefixed_op(self.prefix, op)

    def _out(self, result: Any) -> Any:
        return unprefixed_result(self.prefix, result)

    # -- sync -------------------------------------------------------------------------------------
    def get(self, key: str) -> StoredObject | None:
        return self._out(self.inner.get(self.prefix + key))  # type: ignore[no-any-return]

    def put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        return self.inner.put(self.prefix + key, body, if_match=if_match, if_none_match=if_none_match)

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        self.inner.delete(self.prefix + key, if_match=if_match)

    def delete_many(self, keys: Sequence[str]) -> None:
        self.inner.delete_many([self.prefix + k for k in keys])

    def list_page(self, prefix: str, *, start_after: str | None = None, max_keys: int = 1000) -> ListResult:
        after = None if start_after is None else self.prefix + start_after
        return self._out(self.inner.list_page(self.prefix + prefix, start_after=after, max_keys=max_keys))  # type: ignore[no-any-return]

    def close(self) -> None:
        """Nothing of its own: the wrapped store belongs to whoever made it (the root saver)."""

    def run(self, op: Op) -> Any:
        return self._out(self.inner.run(self._op(op)))

    def run_many(self, ops: Sequence[Op], *, return_exceptions: bool = False) -> list[Any]:
        results = self.inner.run_many([self._op(op) for op in ops], return_exceptions=return_exceptions)
        return [self._out(r) for r in results]

    # -- async ------------------------------------------------------------------------------------
    async def aget(self, key: str) -> StoredObject | None:
        return self._out(await self.inner.aget(self.prefix + key))  # type: ignore[no-any-return]

    async def aput(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        return await self.inner.aput(self.prefix + key, body, if_match=if_match, if_none_match=if_none_match)

    async def adelete(self, key: str, *, if_match: str | None = None) -> None:
        await self.inner.adelete(self.prefix + key, if_match=if_match)

    async def adelete_many(self, keys: Sequence[str]) -> None:
        await self.inner.adelete_many([self.prefix + k for k in keys])

    async def alist_page(self, prefix: str, *, start_after: str | None = None, max_keys: int = 1000) -> ListResult:
        after = None if start_after is None else self.prefix + start_after
        return self._out(await self.inner.alist_page(self.prefix + prefix, start_after=after, max_keys=max_keys))  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        """Nothing of its own (see :meth:`close`)."""

    async def arun(self, op: Op) -> Any:
        return self._out(await self.inner.arun(self._op(op)))

    async def arun_many(self, ops: Sequence[Op], *, return_exceptions: bool = False) -> list[Any]:
        results = await self.inner.arun_many([self._op(op) for op in ops], return_exceptions=return_exceptions)
        return [self._out(r) for r in results]


def prefixed_op(prefix: str, op: Op) -> Op:
    """``op`` on the keys under ``prefix``.

    >>> prefixed_op("teams/t/members/", ListPage("heads/", start_after="heads/a/="))
    ListPage(prefix='teams/t/members/heads/', start_after='teams/t/members/heads/a/=', max_keys=1000)
    """
    if isinstance(op, (Get, Put, Delete)):
        return replace(op, key=prefix + op.key)
    if isinstance(op, ListPage):
        return ListPage(prefix + op.prefix, None if op.start_after is None else prefix + op.start_after, op.max_keys)
    if isinstance(op, DeleteMany):
        return DeleteMany(tuple(prefix + k for k in op.keys))
    raise TypeError(f"not a store operation: {op!r}")


def unprefixed_result(prefix: str, result: Any) -> Any:
    """The result of a :func:`prefixed_op`, with its keys as the view names them."""
    n = len(prefix)
    if isinstance(result, StoredObject):
        return StoredObject(result.key[n:], result.body, result.etag)
    if isinstance(result, ListResult):
        return ListResult([ObjectInfo(i.key[n:], i.etag, i.size) for i in result.items], result.truncated)
    return result


def unprefixed(store: StoreBase) -> StoreBase:
    """The store a view looks into (``store`` itself if it is not a view): where the store probe
    runs and the format marker lives, whatever view a first write comes through."""
    return store.inner if isinstance(store, PrefixedStore) else store
