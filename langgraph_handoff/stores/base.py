"""The object-store protocol: the only storage surface the saver uses.

Four operations, each in a sync and an async form on the same object:

* ``get(key)`` -> :class:`StoredObject` (body + ETag) or ``None``;
* ``put(key, body, *, if_match=None, if_none_match=False)`` -> new ETag. Unconditional, create-only
  (``If-None-Match: *``) or compare-and-swap (``If-Match: etag``). A lost condition raises
  :class:`~langgraph_handoff.errors.PreconditionFailedError`; a conditional write whose outcome is
  unknown raises :class:`~langgraph_handoff.errors.UnknownOutcomeError`;
* ``delete(key, *, if_match=None)``. Missing keys are not an error. Some S3 servers (Ceph RGW)
  ignore ``If-Match`` on delete, so nothing in this package relies on a conditional delete;
* ``list_page(prefix, *, start_after=None, max_keys=1000)`` -> keys in ascending byte order.

ETags are opaque strings compared for equality, always without surrounding quotes. Equal content
may produce equal ETags (S3 uses MD5): callers must not assume an ETag changes on every write.

Stores are thin adapters. Everything about checkpoints lives in the saver's pure core, which talks
to a store through :class:`Op` values so that the same logic drives sync and async callers.
"""

from __future__ import annotations

import asyncio
import functools
import re
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Hashable, Iterator, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langgraph_handoff._frozen import fast_init
from langgraph_handoff.errors import InvalidKeyError, ResponseTooLargeError
from langgraph_handoff.stores.iothreads import IoThreads

__all__ = [
    "MAX_OBJECT_BYTES",
    "BoundedSink",
    "Delete",
    "DeleteMany",
    "Get",
    "ListPage",
    "ListResult",
    "ObjectInfo",
    "Op",
    "Put",
    "StoreBase",
    "StoredObject",
    "checked_page",
    "read_bounded",
    "too_large",
    "validate_key",
    "validate_start_after",
]

T = TypeVar("T")

#: Keys are lowercase-only so they behave the same on case-insensitive file systems.
_KEY_SEGMENT = r"[a-z0-9_%~=-][a-z0-9_.%~=-]*"
_KEY_RE = re.compile(rf"^{_KEY_SEGMENT}(/{_KEY_SEGMENT})*$")
MAX_KEY_LEN = 900


def validate_key(key: str) -> str:
    """Refuse keys outside the portable alphabet (see :mod:`langgraph_handoff._format.keys`)."""
    if len(key) > MAX_KEY_LEN or not _KEY_RE.match(key):
        raise InvalidKeyError(
            f"object key {key!r} is not portable: use '/'-separated segments of [a-z0-9_.%~=-] "
            f"(not starting with '.'), at most {MAX_KEY_LEN} characters"
        )
    return key


_LISTED_RE = re.compile(r"^[^\x00-\x1f\x7f]{1,1024}$")


def validate_start_after(key: str) -> str:
    """A listing's ``start_after``: the last key of the page before, which may be a key this
    package never writes (a README someone copied into ``heads/``), so only what no listing
    returns is refused (empty, control characters, over 1024 characters). Walks report such a
    key and never read it, but must be able to list past it."""
    if not _LISTED_RE.match(key):
        raise InvalidKeyError(f"start_after {key!r} is not a key a listing returns")
    return key


def validate_prefix(prefix: str) -> str:
    if prefix == "":
        return prefix
    body = prefix[:-1] if prefix.endswith("/") else prefix
    validate_key(body)
    return prefix


@dataclass(frozen=True)
class StoredObject:
    """What ``get`` returns: the key, the body and the ETag a conditional write compares."""

    key: str
    body: bytes
    etag: str


@fast_init  # built once per listed key
@dataclass(frozen=True, slots=True)  # a LocalStore's memo keeps one per file: 56 bytes, not 240
class ObjectInfo:
    """One listed object: its key, ETag and size in bytes (``list`` and ``list_page`` yield these)."""

    key: str
    etag: str
    size: int


@dataclass(frozen=True)
class ListResult:
    items: list[ObjectInfo]
    #: True when more keys may follow the last item (ask again with ``start_after``).
    truncated: bool


def checked_page(page: ListResult, max_keys: int, where: str) -> ListResult:
    """``page``, if it holds at most the ``max_keys`` entries the request asked for.

    A server that answers a LIST with more keys than ``max-keys`` is not one to keep reading
    from: a proxy or an emulator that ignores the limit, or a hostile endpoint (2,000,000 keys
    for ``max-keys=1000`` were accepted before). Truncating would hide that, and the entries cut
    off would be listed again by the next page only if the server's order can be trusted; so the
    page is refused with :class:`~langgraph_handoff.errors.ResponseTooLargeError`.

    >>> checked_page(ListResult(items=[ObjectInfo("a", "e", 1)] * 3, truncated=False), 2, "S3 LIST p/")
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.ResponseTooLargeError: S3 LIST p/ answered 3 keys for a page of at most 2: ...
    """
    if len(page.items) > max_keys:
        raise ResponseTooLargeError(
            f"{where} answered {len(page.items)} keys for a page of at most {max_keys}: the server ignores "
            "max-keys, so its listings cannot be trusted. Check that the endpoint is the store's own server, "
            "not a proxy or an emulator that drops the page size"
        )
    return page


#: the largest object a GET reads unless the store says otherwise (``max_object_bytes``). The
#: package writes each object in one PUT and holds a value whole in memory to decode it; a
#: state value past a gigabyte is not one a checkpoint can carry anyway (SQLite's and
#: Postgres's largest value is a gigabyte too). Without a limit, an object someone else put in
#: the bucket (or a server streaming a body without end) is read into memory whole.
MAX_OBJECT_BYTES = 1024 * 1024 * 1024


def too_large(what: str, limit: int, size: int | None = None) -> ResponseTooLargeError:
    """The error for a GET whose body is over ``limit``: refused, never truncated.

    >>> str(too_large("S3 GET p/k", 10, 11)).split(":")[0]
    'S3 GET p/k'
    """
    told = f"{size} bytes" if size is not None else f"more than {limit} bytes"
    return ResponseTooLargeError(
        f"{what}: the object is {told}, past max_object_bytes={limit}. Not read. If objects this large "
        "are expected, raise the store's max_object_bytes; an object the package did not write is "
        "better deleted"
    )


def read_bounded(read: Callable[[int], bytes], limit: int, what: str, size: int | None = None) -> bytes:
    """Read a body through ``read(n)`` (a file-like ``read``), refusing one over ``limit`` bytes.

    ``size`` is what the answer's headers say (``Content-Length``), checked before a byte is
    read; the read itself asks for one byte past the limit, so a body longer than its header
    said is refused too, having cost at most ``limit + 1`` bytes.

    >>> import io
    >>> read_bounded(io.BytesIO(b"abc").read, 3, "GET k")
    b'abc'
    >>> read_bounded(io.BytesIO(b"abcd").read, 3, "GET k")
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.ResponseTooLargeError: GET k: the object is more than 3 bytes, past max_object_bytes=3. ...
    """
    if size is not None and size > limit:
        raise too_large(what, limit, size)
    body = read(limit + 1)
    if len(body) > limit:
        raise too_large(what, limit)
    return body


class BoundedSink:
    """A writable that keeps at most ``limit`` bytes: for clients that download into a file
    (google-cloud-storage's ``download_to_file``), so a body over the limit stops the download
    with :class:`~langgraph_handoff.errors.ResponseTooLargeError` instead of filling memory."""

    def __init__(self, limit: int, what: str) -> None:
        self._parts: list[bytes] = []
        self._size = 0
        self._limit = limit
        self._what = what

    def write(self, data: bytes) -> int:
        self._size += len(data)
        if self._size > self._limit:
            self._parts.clear()
            raise too_large(self._what, self._limit)
        self._parts.append(bytes(data))
        return len(data)

    def getvalue(self) -> bytes:
        return b"".join(self._parts)


# --------------------------------------------------------------------------------------------------
# Operations as values: the saver's core yields these and a driver performs them.
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Get:
    key: str


@dataclass(frozen=True)
class Put:
    key: str
    body: bytes = field(repr=False)
    if_match: str | None = None
    if_none_match: bool = False


@dataclass(frozen=True)
class Delete:
    key: str
    if_match: str | None = None


@dataclass(frozen=True)
class DeleteMany:
    """Unconditional delete of many keys (S3 DeleteObjects: 1 request per 1000 keys)."""

    keys: tuple[str, ...]


@dataclass(frozen=True)
class ListPage:
    """The operation "list one page of keys under ``prefix``, after ``start_after``", as a value
    that :meth:`StoreBase.run` and :meth:`StoreBase.run_many` perform like any other."""

    prefix: str
    start_after: str | None = None
    max_keys: int = 1000


Op = Get | Put | Delete | DeleteMany | ListPage


def settle(outcomes: list[Any], return_exceptions: bool) -> list[Any]:
    """Results of a batch: as they are, or raising the first exception among them."""
    if not return_exceptions:
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
    return outcomes


class StoreBase(ABC):
    """Shared conveniences on top of the four primitives, written once for every store.

    Subclasses implement the sync primitives. The async primitives default to running the sync
    ones in a worker thread: in :attr:`_executor` when the store has one (the S3 stores size
    theirs to their connection pool), else in asyncio's default executor. Stores with no blocking
    I/O (memory) override them. ``run_many``/``arun_many`` perform a batch of independent
    operations; the default runs them one after another, S3 runs them in parallel.
    """

    #: where the async primitives run the sync ones (None: asyncio's default executor)
    _executor: Executor | None = None
    #: a LIST is a walk in this process (memory, a local directory), not a round trip: paging on
    #: costs no latency, and every key listed costs CPU, so readers ask for short pages
    lists_in_process: bool = False
    #: a LIST walks a file system's directories (a local directory): every directory it enters
    #: costs a scan and every key a ``stat``, so a read that wants one checkpoint's writes reads
    #: the head first and then lists that checkpoint's directory alone, rather than a page of
    #: the namespace beside the head GET (``plans.reading``)
    lists_scan_directories: bool = False
    #: every object written is signed and every object read checked (``SigningStore``)
    signs: bool = False
    #: the largest body a GET of a remote store reads: past it the GET raises
    #: :class:`~langgraph_handoff.errors.ResponseTooLargeError`, which a read reports as damage
    #: to that key (set it on the instance, or ``?max_object_bytes=`` on an obstore URL)
    max_object_bytes: int = MAX_OBJECT_BYTES

    @property
    def _ops_in_threads(self) -> bool:
        """Whether ``arun``/``arun_many`` hand whole operations to :attr:`_executor` (one hop
        per operation) rather than awaiting the async primitives; False for a store whose async
        primitives are natively async although it has an executor for its sync batches."""
        return self._executor is not None

    # -- sync primitives (subclasses implement) --------------------------------------------------
    @abstractmethod
    def get(self, key: str) -> StoredObject | None:
        """The object at ``key`` with its ETag, or None."""

    @abstractmethod
    def put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        """Store ``body``; returns the new ETag."""

    @abstractmethod
    def delete(self, key: str, *, if_match: str | None = None) -> None:
        """Remove ``key`` (no error if missing)."""

    @abstractmethod
    def list_page(self, prefix: str, *, start_after: str | None = None, max_keys: int = 1000) -> ListResult:
        """One page of keys under ``prefix``, ascending, strictly after ``start_after``."""

    def trust_scope(self) -> Hashable | None:
        """What a store probe's verdict covers (:mod:`langgraph_handoff.checkpoint.trust`): the
        saver probes each scope once per process before its first write to it. ``None`` for a
        store whose conditional writes this package implements itself (memory, a local
        directory): nothing to probe. The default is this store object alone; the network
        stores name their server, bucket and prefix, so every saver on them shares one verdict."""
        return self

    def delete_many(self, keys: Sequence[str]) -> None:
        """Unconditionally delete ``keys``; stores with a batch API override this."""
        for key in keys:
            self.delete(key)

    def close(self) -> None:  # noqa: B027 - optional hook: stores without resources keep it empty
        """Release resources (thread pools, clients). Safe to call twice."""

    # -- async primitives ------------------------------------------------------------------------
    def _threaded(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """``fn(*args)`` in :attr:`_executor` (asyncio's default one when None), as a future."""
        executor = self._executor
        if isinstance(executor, IoThreads):
            return executor.run_async(fn, *args)
        return asyncio.get_running_loop().run_in_executor(executor, fn, *args)

    async def _in_thread(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await self._threaded(functools.partial(fn, *args, **kwargs))

    async def aget(self, key: str) -> StoredObject | None:
        return await self._in_thread(self.get, key)

    async def aput(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        return await self._in_thread(self.put, key, body, if_match=if_match, if_none_match=if_none_match)

    async def adelete(self, key: str, *, if_match: str | None = None) -> None:
        await self._in_thread(self.delete, key, if_match=if_match)

    async def alist_page(self, prefix: str, *, start_after: str | None = None, max_keys: int = 1000) -> ListResult:
        return await self._in_thread(self.list_page, prefix, start_after=start_after, max_keys=max_keys)

    async def adelete_many(self, keys: Sequence[str]) -> None:
        await self._in_thread(self.delete_many, keys)

    async def aclose(self) -> None:
        self.close()

    # -- operations as values --------------------------------------------------------------------
    def run(self, op: Op) -> Any:
        """Perform one :data:`Op` synchronously."""
        if isinstance(op, Get):
            return self.get(op.key)
        if isinstance(op, Put):
            return self.put(op.key, op.body, if_match=op.if_match, if_none_match=op.if_none_match)
        if isinstance(op, Delete):
            return self.delete(op.key, if_match=op.if_match)
        if isinstance(op, ListPage):
            return self.list_page(op.prefix, start_after=op.start_after, max_keys=op.max_keys)
        if isinstance(op, DeleteMany):
            return self.delete_many(op.keys)
        raise TypeError(f"not a store operation: {op!r}")

    async def arun(self, op: Op) -> Any:
        """Perform one :data:`Op` asynchronously. A store with an :attr:`_executor` runs the sync
        operation there directly: one hop, no coroutine or task per operation in between."""
        if self._ops_in_threads:
            return await self._threaded(self.run, op)
        if isinstance(op, Get):
            return await self.aget(op.key)
        if isinstance(op, Put):
            return await self.aput(op.key, op.body, if_match=op.if_match, if_none_match=op.if_none_match)
        if isinstance(op, Delete):
            return await self.adelete(op.key, if_match=op.if_match)
        if isinstance(op, ListPage):
            return await self.alist_page(op.prefix, start_after=op.start_after, max_keys=op.max_keys)
        if isinstance(op, DeleteMany):
            return await self.adelete_many(op.keys)
        raise TypeError(f"not a store operation: {op!r}")

    def run_many(self, ops: Sequence[Op], *, return_exceptions: bool = False) -> list[Any]:
        """Perform independent operations; results in order. A store with an :attr:`_executor`
        overlaps them there (its sync calls release the GIL: boto3, obstore); others run them one
        after another. All operations finish before this returns, so no write is left running in
        the background. Then the first failure is raised, or, with ``return_exceptions``, each
        failure takes its operation's place in the list."""
        if self._executor is not None and len(ops) > 1:
            calls: list[Callable[[], Any]] = [self._executor.submit(self.run, op).result for op in ops]
        else:
            calls = [functools.partial(self.run, op) for op in ops]
        outcomes: list[Any] = []
        for call in calls:
            try:
                outcomes.append(call())
            except Exception as exc:  # noqa: BLE001 - returned or re-raised by settle()
                outcomes.append(exc)
        return settle(outcomes, return_exceptions)

    async def arun_many(self, ops: Sequence[Op], *, return_exceptions: bool = False) -> list[Any]:
        if self._ops_in_threads:  # executor futures, not a task per operation
            runs = [self._threaded(self.run, op) for op in ops]
            outcomes = await asyncio.gather(*runs, return_exceptions=True)
        else:
            outcomes = await asyncio.gather(*(self.arun(op) for op in ops), return_exceptions=True)
        return settle(list(outcomes), return_exceptions)

    # -- listings --------------------------------------------------------------------------------
    def list(self, prefix: str, *, start_after: str | None = None, page_size: int = 1000) -> Iterator[ObjectInfo]:
        """Every key under ``prefix`` in ascending order, fetching pages lazily."""
        cursor = start_after
        while True:
            page = self.list_page(prefix, start_after=cursor, max_keys=page_size)
            yield from page.items
            if not page.truncated or not page.items:
                return
            cursor = page.items[-1].key

    async def alist(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> AsyncIterator[ObjectInfo]:
        cursor = start_after
        while True:
            page = await self.alist_page(prefix, start_after=cursor, max_keys=page_size)
            for item in page.items:
                yield item
            if not page.truncated or not page.items:
                return
            cursor = page.items[-1].key

    # -- context management ----------------------------------------------------------------------
    def __enter__(self) -> StoreBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> StoreBase:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
