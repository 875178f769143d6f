"""The threads a store's blocking calls run in, with a cheaper bridge to asyncio.

A network store's async API runs its sync calls in a thread pool (see :mod:`.obstore_base` for
why not obstore's own coroutines). ``loop.run_in_executor`` on a ``ThreadPoolExecutor`` costs
about 45 µs of CPU per call on top of the call itself: a ``concurrent.futures.Future``, its
condition variable, a wrapping asyncio future and two chained callbacks. A 5-node graph makes 15
store calls per invoke, so that bridge alone was about a tenth of our client CPU per invoke.

:class:`IoThreads` is the same pool without that: a worker takes ``(function, argument, loop,
future)`` from a queue, runs it and hands the outcome straight to the event loop with one
``call_soon_threadsafe``. It is still an ordinary :class:`concurrent.futures.Executor`
(``submit`` for the sync ``run_many``), so stores and tests treat it as one.

What it keeps from ``ThreadPoolExecutor``:

* threads start on demand, up to ``max_workers``, and an idle one is reused first;
* a call that has started always runs to its end, even when the awaiting task is cancelled
  (a conditional PUT is never abandoned half-way by us);
* at interpreter exit the pool drains and its threads are joined before Python finalizes, so
  no blocking call (obstore's Rust code) is still running while the interpreter shuts down.

>>> import asyncio
>>> pool = IoThreads(max_workers=2, thread_name_prefix="doc")
>>> pool.submit(pow, 2, 10).result()
1024
>>> async def main() -> int:
...     return await pool.run_async(len, b"four")
>>> asyncio.run(main())
4
>>> pool.shutdown()
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import os
import queue
import threading
import weakref
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

__all__ = ["IoThreads", "LoopThread"]

T = TypeVar("T")

_counter = itertools.count()
_live: weakref.WeakSet[IoThreads] = weakref.WeakSet()


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    """Runs in the event loop: deliver one outcome unless the awaiting side gave up."""
    if future.cancelled():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class IoThreads(Executor):
    """A pool of up to ``max_workers`` threads for blocking store calls (see the module docstring)."""

    def __init__(self, max_workers: int, thread_name_prefix: str = "iothreads") -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self._max_workers = max_workers
        self._prefix = f"{thread_name_prefix}-{next(_counter)}"
        self._queue: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False
        _live.add(self)

    # -- submitting ------------------------------------------------------------------------------
    def run_async(self, fn: Callable[..., T], /, *args: Any) -> asyncio.Future[T]:
        """Run ``fn(*args)`` in a pool thread; await the returned future for its outcome. Call
        from a running event loop."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._put((fn, args, {}, loop, future))
        return future

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        self._put((fn, args, kwargs, None, future))
        return future

    def _put(self, item: tuple[Any, ...]) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new calls after the store was closed")
            self._queue.put(item)
            if not self._idle.acquire(blocking=False) and len(self._threads) < self._max_workers:
                thread = threading.Thread(target=self._work, name=f"{self._prefix}_{len(self._threads)}", daemon=True)
                thread.start()
                self._threads.append(thread)

    # -- the workers -----------------------------------------------------------------------------
    def _work(self) -> None:
        get, idle = self._queue.get, self._idle
        while True:
            item = get()
            if item is None:
                return
            fn, args, kwargs, loop, future = item
            if loop is None and not future.set_running_or_notify_cancel():
                idle.release()
                continue
            try:
                value, ok = fn(*args, **kwargs), True
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits
                value, ok = exc, False
            if loop is None:
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)
            else:
                with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
                    loop.call_soon_threadsafe(_settle, future, ok, value)
            del item, fn, args, kwargs, loop, future, value
            idle.release()

    # -- shutting down ---------------------------------------------------------------------------
    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking calls; the queued ones still run. With ``wait``, return when all are done."""
        with self._lock:
            if not self._closed:
                self._closed = True
                for _ in self._threads:
                    self._queue.put(None)
            threads = list(self._threads)
        if wait:
            for thread in threads:
                if thread is not threading.current_thread():
                    thread.join()


def _drain_all() -> None:
    """At interpreter exit, before finalization: let every pool finish what it started."""
    for pool in list(_live):
        pool.shutdown(wait=True)


# ``threading._register_atexit`` runs before non-daemon threads are joined, as concurrent.futures
# uses it; ``atexit`` is the fallback (it still runs before the interpreter finalizes).
getattr(threading, "_register_atexit", atexit.register)(_drain_all)


class LoopThread:
    """An event loop in a thread of its own, for sync callers of a coroutine client.

    Why: the sync API's S3 LISTs go through the loop client, which asks for a page size where
    obstore cannot (:meth:`~langgraph_handoff.stores.obstore_s3.ObstoreS3Store.list_page` has
    the figures). That client's connections belong to one event loop, and a sync caller has none
    that lives on (LangGraph starts new threads for every invoke), so the loop lives here,
    started on the first call and kept with its keep-alive connections until :meth:`close`.

    A child process after ``fork`` has no such thread: it starts its own on its first call.

    >>> async def twice(x: int) -> int:
    ...     return 2 * x
    >>> thread = LoopThread("doc")
    >>> thread.run(twice(21))
    42
    >>> thread.close()
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the thread's loop and return (or raise) its outcome."""
        return asyncio.run_coroutine_threadsafe(coro, self._running()).result()

    def _running(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=_serve, args=(loop,), name=self._name, daemon=True)
                thread.start()
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
                # a store dropped without close() must not leave its thread behind
                weakref.finalize(self, _stop_soon, loop)
            return self._loop

    def close(self, before: Callable[[], Coroutine[Any, Any, Any]] | None = None) -> None:
        """Run ``before()`` on the loop (closing its connections), then stop the thread.

        Idempotent; in a forked child whose parent started the thread, only forgets it."""
        with self._lock:
            loop, thread, pid = self._loop, self._thread, self._pid
            self._loop = self._thread = None
        if loop is None or thread is None or pid != os.getpid():
            return

        if before is not None:  # on the loop's own thread: close() may be called from a running loop
            with contextlib.suppress(Exception):  # best effort: the loop is going away anyway
                asyncio.run_coroutine_threadsafe(before(), loop).result(timeout=5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join()  # _serve closes the loop


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    """A :class:`LoopThread`'s thread: run the loop until stopped, then close it here, whoever
    stopped it (``close()``, or the finalizer of a thread object that was dropped unclosed)."""
    try:
        loop.run_forever()
    finally:
        with contextlib.suppress(Exception):  # its connections close through their shutdown hook
            loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def _stop_soon(loop: asyncio.AbstractEventLoop) -> None:
    with contextlib.suppress(RuntimeError):  # closed already (close() ran)
        loop.call_soon_threadsafe(loop.stop)
