"""IoThreads: the stores' thread pool with the lean asyncio bridge, and LoopThread: an event loop
for sync callers of a coroutine client (stores/iothreads.py).

Every test controls its timing with events; none sleeps to wait for another thread."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from langgraph_handoff.stores.iothreads import IoThreads, LoopThread


def boom(message: str) -> None:
    raise ValueError(message)


def test_results_and_exceptions_reach_sync_and_async_callers() -> None:
    pool = IoThreads(max_workers=2, thread_name_prefix="t")
    try:
        assert pool.submit(pow, 3, 4).result() == 81
        with pytest.raises(ValueError, match="sync"):
            pool.submit(boom, "sync").result()

        async def main() -> None:
            assert await pool.run_async(pow, 2, 5) == 32
            with pytest.raises(ValueError, match="async"):
                await pool.run_async(boom, "async")

        asyncio.run(main())
    finally:
        pool.shutdown()


def test_threads_start_on_demand_up_to_max_workers_and_idle_ones_are_reused() -> None:
    pool = IoThreads(max_workers=2, thread_name_prefix="t")
    try:
        for _ in range(20):  # one call at a time: the idle thread takes the next one
            pool.submit(len, b"x").result()
        assert len(pool._threads) == 1

        release = threading.Event()
        started = threading.Semaphore(0)

        def hold() -> str:
            started.release()
            release.wait(30)
            return threading.current_thread().name

        futures = [pool.submit(hold) for _ in range(5)]
        assert started.acquire(timeout=30) and started.acquire(timeout=30)
        assert len(pool._threads) == 2  # never more than max_workers, however many are queued
        assert not any(f.done() for f in futures)
        release.set()
        names = {f.result(timeout=30) for f in futures}
        assert len(names) == 2
    finally:
        pool.shutdown()


def test_a_started_call_runs_to_its_end_when_the_awaiting_task_is_cancelled() -> None:
    pool = IoThreads(max_workers=1, thread_name_prefix="t")
    entered, release, finished = threading.Event(), threading.Event(), threading.Event()

    def write() -> str:
        entered.set()
        release.wait(30)
        finished.set()
        return "written"

    async def main() -> None:
        task = asyncio.ensure_future(pool.run_async(write))
        await asyncio.get_running_loop().run_in_executor(None, entered.wait, 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()
        # the next call is queued behind the cancelled one on the single thread
        assert await pool.run_async(len, b"abc") == 3
        assert finished.is_set()

    try:
        asyncio.run(main())
    finally:
        pool.shutdown()


def test_an_outcome_for_a_closed_event_loop_is_dropped_and_the_thread_lives_on() -> None:
    pool = IoThreads(max_workers=1, thread_name_prefix="t")
    entered, release = threading.Event(), threading.Event()

    def slow() -> int:
        entered.set()
        release.wait(30)
        return 1

    loop = asyncio.new_event_loop()

    async def start() -> asyncio.Future[int]:
        return pool.run_async(slow)

    try:
        pending = loop.run_until_complete(start())
        assert entered.wait(30)
        loop.close()  # the caller's loop is gone before the call ends
        release.set()
        assert pool.submit(len, b"ab").result(timeout=30) == 2  # same thread, still serving
        assert not pending.done()
    finally:
        pool.shutdown()


def test_shutdown_runs_what_was_queued_then_refuses_new_calls() -> None:
    pool = IoThreads(max_workers=1, thread_name_prefix="t")
    release = threading.Event()
    first = pool.submit(release.wait, 30)
    queued = [pool.submit(pow, 2, n) for n in range(5)]
    release.set()
    pool.shutdown(wait=True)
    assert first.result() is True
    assert [f.result() for f in queued] == [1, 2, 4, 8, 16]
    with pytest.raises(RuntimeError, match="closed"):
        pool.submit(len, b"")
    assert not any(t.is_alive() for t in pool._threads)


def test_the_interpreter_waits_for_a_started_call_before_it_exits(tmp_path: Path) -> None:
    """A store call still running when the main thread returns (obstore's Rust code, say) must
    finish before Python finalizes, as with ThreadPoolExecutor: the workers are daemon threads
    only so that an idle pool never holds the process open."""
    marker = tmp_path / "done"
    script = textwrap.dedent(
        f"""
        import threading
        from langgraph_handoff.stores.iothreads import IoThreads

        pool = IoThreads(max_workers=1, thread_name_prefix="exit")
        entered = threading.Event()

        def work():
            entered.set()
            threading.Event().wait(0.3)  # the call's own duration, not a synchronisation
            open({str(marker)!r}, "w").write("finished")

        pool.submit(work)
        entered.wait(30)
        # the main thread ends here with the call still running and the pool never shut down
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert marker.read_text() == "finished"


async def _where(fail: bool = False) -> tuple[str, asyncio.AbstractEventLoop]:
    if fail:
        raise ValueError("from the loop")
    return threading.current_thread().name, asyncio.get_running_loop()


def test_a_loop_thread_runs_every_call_on_one_loop_that_outlives_the_callers() -> None:
    """Its keep-alive connections belong to one loop: calls from threads that come and go (as
    LangGraph's do) must all land on it, and an exception reaches the caller as it was raised."""
    thread = LoopThread("lt-test")
    try:
        seen: list[tuple[str, asyncio.AbstractEventLoop]] = []
        callers = [threading.Thread(target=lambda: seen.append(thread.run(_where()))) for _ in range(4)]
        for t in callers:
            t.start()
        for t in callers:
            t.join()
        seen.append(thread.run(_where()))
        assert {name for name, _ in seen} == {"lt-test"} and len({id(loop) for _, loop in seen}) == 1
        with pytest.raises(ValueError, match="from the loop"):
            thread.run(_where(fail=True))
    finally:
        thread.close()


def test_closing_a_loop_thread_runs_the_last_call_on_it_then_stops_it() -> None:
    thread = LoopThread("lt-close")
    _, loop = thread.run(_where())
    closed_on: list[str] = []

    async def last() -> None:
        closed_on.append(threading.current_thread().name)

    running = [t for t in threading.enumerate() if t.name == "lt-close"]
    thread.close(last)
    assert closed_on == ["lt-close"] and loop.is_closed()
    assert not any(t.is_alive() for t in running)
    thread.close(last)  # idempotent
    assert closed_on == ["lt-close"]
    assert thread.run(_where())[0] == "lt-close"  # used again: a new loop starts
    thread.close()


def test_a_loop_thread_dropped_without_close_stops_its_thread() -> None:
    import gc

    thread = LoopThread("lt-dropped")
    thread.run(_where())
    running = [t for t in threading.enumerate() if t.name == "lt-dropped"]
    assert len(running) == 1
    del thread
    gc.collect()
    running[0].join(timeout=30)  # a bound, not a sleep: it returns as soon as the thread ends
    assert not running[0].is_alive()


def test_a_loop_thread_closes_from_inside_a_running_event_loop() -> None:
    """A saver's sync ``close()`` is often called from async code (LangGraph's conformance suite
    does): the loop thread must not try to run its loop from the caller's thread."""
    thread = LoopThread("lt-async-close")
    _, loop = thread.run(_where())

    async def main() -> None:
        thread.close()

    asyncio.run(main())
    assert loop.is_closed()


def test_a_forked_child_starts_its_own_loop_thread(tmp_path: Path) -> None:
    """A prefork server creates the store, then forks workers: the parent's loop thread does not
    exist in a child, and a call queued to its loop would wait for ever."""
    script = textwrap.dedent(
        """
        import asyncio, os, signal, sys, threading, warnings
        from langgraph_handoff.stores.iothreads import LoopThread

        async def where():
            return threading.current_thread().name, os.getpid()

        thread = LoopThread("lt-fork")
        parent = thread.run(where())
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads: the point here
        pid = os.fork()
        if pid == 0:
            signal.alarm(20)  # a call that never ends must not outlive the test
            name, child = thread.run(where())
            thread.close()
            os._exit(0 if (name, child) == ("lt-fork", os.getpid()) and child != parent[1] else 3)
        _, status = os.waitpid(pid, 0)
        thread.close()
        sys.exit(os.waitstatus_to_exitcode(status))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
