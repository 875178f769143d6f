"""``SessionWorker``: run graph invocations under session leases, with a heartbeat, takeover of
dead workers' sessions, and a planned handoff on ``SIGTERM``.

One worker process holds a set of sessions. For each it keeps a lease renewed by a heartbeat
(a background thread; an asyncio task in the async API) and gives its graph a saver bound to that
lease, so if the worker stalls long enough to lose a session, its late writes are refused. On
``SIGTERM`` (a redeploy) it stops taking work, lets the running invocation finish, and hands
every session it holds over with a note: lock, and leave the accept to whoever picks it up.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import signal
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langgraph_handoff import telemetry
from langgraph_handoff.errors import (
    ConflictError,
    InvalidInputError,
    LangGraphHandoffError,
    OwnershipLostError,
    SessionLimitError,
)
from langgraph_handoff.handoff.model import Handoff
from langgraph_handoff.ownership.lease import Lease
from langgraph_handoff.ownership.manager import SessionManager, session_note

log = logging.getLogger("langgraph_handoff.ownership")

#: builds the worker's compiled graph, given the saver to use as checkpointer (called once per
#: worker: that saver fences each write by the lease the worker holds for its thread)
GraphFactory = Callable[[Any], Any]

#: the most sessions one worker holds by default. A heartbeat costs one request whatever the
#: number (the worker's liveness record); what grows with it is taking sessions (3 requests
#: each), handing them over on ``stop`` and memory. Measured in bench/leases.py.
MAX_SESSIONS = 10_000

#: ``(worker, thread_id, epoch)`` of the run under way in this context: its writes keep the
#: epoch the run started with, even if the worker takes the session again meanwhile
_RUN: contextvars.ContextVar[tuple[object, str, int] | None] = contextvars.ContextVar("lgh_run", default=None)


def _interrupted_step(graph: Any, state: Any) -> bool:
    """Did a previous owner die in the middle of a step that must be finished before new input?

    Yes if the latest checkpoint has tasks with stored results (finished work that new input
    would discard), or tasks cut off mid-run. A step paused on purpose is left alone: a dynamic
    ``interrupt`` or a static breakpoint (``interrupt_before``/``interrupt_after``) waits for its
    human, not for us.
    """
    tasks = list(getattr(state, "tasks", ()) or ())
    if not tasks or any(t.interrupts for t in tasks):
        return False
    before = set(getattr(graph, "interrupt_before_nodes", ()) or ())
    after = set(getattr(graph, "interrupt_after_nodes", ()) or ())
    if "*" in before or any(t.name in before for t in tasks):
        return False
    finished = any(t.result is not None for t in tasks)
    return finished if after else True


class WorkerStoppingError(ConflictError):
    """The worker is shutting down (``SIGTERM``) and takes no new work."""


class SessionWorker:
    """Serve sessions under leases.

    The heartbeat renews one liveness record, whatever the number of sessions held (up to
    ``max_sessions``; past it :class:`~langgraph_handoff.errors.SessionLimitError`), and the
    graph ``build`` returns is built once, on a saver that fences each write by the lease this
    worker holds for its thread.

    >>> from langgraph_handoff import ObjectStoreSaver
    >>> from langgraph.graph import StateGraph, START, END, MessagesState
    >>> def build(checkpointer):
    ...     g = StateGraph(MessagesState)
    ...     g.add_node("echo", lambda s: {"messages": [("ai", "ok")]})
    ...     g.add_edge(START, "echo"); g.add_edge("echo", END)
    ...     return g.compile(checkpointer=checkpointer)
    >>> sessions = SessionManager(ObjectStoreSaver.from_url("memory://"))
    >>> worker = SessionWorker(sessions, "worker-a", build, ttl=30)
    >>> worker.invoke("chat-1", {"messages": [("user", "hi")]})["messages"][-1].content
    'ok'
    >>> worker.stop()                 # hands chat-1 over (lock + note); another worker accepts it
    ['chat-1']
    """

    def __init__(
        self,
        sessions: SessionManager,
        owner: str,
        build: GraphFactory,
        *,
        ttl: float = 30.0,
        heartbeat: float | None = None,
        transfer_timeout: float = 30.0,
        durability: str = "sync",
        max_sessions: int = MAX_SESSIONS,
    ):
        if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
            raise InvalidInputError(f"max_sessions must be a positive integer, got {max_sessions!r}")
        self.sessions = sessions
        self.owner = owner
        self.build = build
        self.ttl = float(ttl)
        self.heartbeat = float(heartbeat) if heartbeat is not None else self.ttl / 3
        self.transfer_timeout = transfer_timeout
        # "sync": a step's checkpoint is stored before its tasks run. With LangGraph's default
        # "async", a task's writes can land for a checkpoint that a crash then never stores; the
        # next owner resumes from the one before and runs that task again (chaos run: 1 in 40).
        self.durability = durability
        #: how many sessions :meth:`stop` hands over side by side
        self.handover_concurrency = 32
        self.leases: dict[str, Lease] = {}
        self.lost: set[str] = set()
        #: sessions whose interrupted step this worker has not finished yet (see :meth:`settle`)
        self._unsettled: set[str] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._beat: threading.Thread | None = None
        self.max_sessions = max_sessions
        #: this process's incarnation of ``owner``: its leases name it, and the heartbeat renews
        #: its one liveness record (:mod:`~langgraph_handoff.checkpoint.liveness`)
        self.incarnation = uuid.uuid4().hex
        self._alive_written = False
        self._graph: Any = None
        #: turns under way, sync and async (``stop`` waits for them before it locks)
        self._inflight = {False: 0, True: 0}
        self._drained = threading.Condition()
        #: turns this worker served per session (for the note ``stop`` leaves)
        self._served: dict[str, int] = {}

    # -- leases and the heartbeat -----------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def _hold(self, lease: Lease) -> None:
        with self._lock:
            if self.leases.get(lease.thread_id) is None or self.leases[lease.thread_id].epoch != lease.epoch:
                self._unsettled.add(lease.thread_id)
            self.leases[lease.thread_id] = lease
            self.lost.discard(lease.thread_id)
        self._start_heartbeat()

    def _start_heartbeat(self) -> None:
        if self._beat is None or not self._beat.is_alive():
            self._beat = threading.Thread(target=self._heartbeat_loop, name=f"heartbeat-{self.owner}", daemon=True)
            self._beat.start()

    def beat(self) -> None:
        """Renew every lease once (what the heartbeat does every ``heartbeat`` seconds): one
        write of this worker's liveness record renews every lease taken under it, whatever
        their number; a lease taken otherwise is renewed on its own. A failure is logged and
        left to the next beat: the heartbeat never dies."""
        with self._lock:
            held = list(self.leases.values())
        if any(lease.liveness == self.incarnation for lease in held) or self._alive_written:
            try:
                self.sessions.keep_alive(self.owner, self.incarnation, self.ttl)
            except Exception as exc:  # noqa: BLE001 - the store is down: next beat; never die
                telemetry.counter(telemetry.M_RENEW_FAILURES, 1, {telemetry.OUTCOME: "error"})
                log.warning("%s could not renew its liveness record: %s: %s", self.owner, type(exc).__name__, exc)
        for lease in held:
            if lease.liveness == self.incarnation:
                continue
            try:
                renewed = self.sessions.renew(lease, self.ttl)
            except OwnershipLostError:
                telemetry.counter(telemetry.M_RENEW_FAILURES, 1, {telemetry.OUTCOME: "lost"})
                self._lose(lease)
                continue
            except Exception as exc:  # noqa: BLE001 - the store is down, a lost race: next beat; never die
                telemetry.counter(telemetry.M_RENEW_FAILURES, 1, {telemetry.OUTCOME: "error"})
                log.warning("%s could not renew %r: %s: %s", self.owner, lease.thread_id, type(exc).__name__, exc)
                continue
            with self._lock:  # only if still held (stop() or release() may have run meanwhile)
                if lease.thread_id in self.leases and self.leases[lease.thread_id].epoch == renewed.epoch:
                    self.leases[lease.thread_id] = renewed

    def _lose(self, lease: Lease) -> None:
        log.warning("%s lost session %r (epoch %d)", self.owner, lease.thread_id, lease.epoch)
        with self._lock:
            if lease.thread_id in self.leases and self.leases[lease.thread_id].epoch == lease.epoch:
                del self.leases[lease.thread_id]
            self.lost.add(lease.thread_id)

    def _first_alive(self) -> None:
        """Write the liveness record before the first lease names it (then the heartbeat does)."""
        if not self._alive_written:
            self.sessions.keep_alive(self.owner, self.incarnation, self.ttl)
            self._alive_written = True

    async def _afirst_alive(self) -> None:
        if not self._alive_written:
            await self.sessions.akeep_alive(self.owner, self.incarnation, self.ttl)
            self._alive_written = True

    def _room(self) -> int:
        """How many more sessions this worker may take (``max_sessions`` minus those held)."""
        with self._lock:
            return max(0, self.max_sessions - len(self.leases))

    def _room_for(self, thread_id: str) -> None:
        """Refuse a new session past ``max_sessions`` (``SessionLimitError``)."""
        with self._lock:
            if thread_id in self.leases or len(self.leases) < self.max_sessions:
                return
        raise SessionLimitError(self.owner, self.max_sessions, thread_id)

    def _heartbeat_loop(self) -> None:
        while not self._stopping.wait(self.heartbeat):
            with self._lock:
                if not self.leases:
                    return
            self.beat()

    # -- running graphs --------------------------------------------------------------------------------

    def _config(self, thread_id: str, config: dict[str, Any] | None) -> dict[str, Any]:
        config = dict(config or {})
        config["configurable"] = {**(config.get("configurable") or {}), "thread_id": thread_id}
        return config

    def lease_for(self, thread_id: str) -> Lease:
        """Own ``thread_id`` (acquire, or take over if its lease expired) and keep it renewed."""
        held = self._held(thread_id)
        if held is None:
            self._first_alive()
            held = self.sessions.acquire(thread_id, self.owner, self.ttl, liveness=self.incarnation)
        self._hold(held)
        return held

    async def _alease_for(self, thread_id: str) -> Lease:
        held = self._held(thread_id)
        if held is None:
            await self._afirst_alive()
            held = await self.sessions.aacquire(thread_id, self.owner, self.ttl, liveness=self.incarnation)
        self._hold(held)
        return held

    def _held(self, thread_id: str) -> Lease | None:
        """The lease held for ``thread_id``, or None when one may be taken (refused while
        stopping, and past ``max_sessions``)."""
        if self.stopping:
            raise WorkerStoppingError(f"{self.owner} is stopping and takes no new sessions")
        with self._lock:
            held = self.leases.get(thread_id)
        if held is None:
            self._room_for(thread_id)
        return held

    def graph_for(self, lease: Lease) -> Any:
        """The worker's graph (built once, on first use): its saver writes each thread under
        the lease this worker holds for it, and refuses a thread it does not hold."""
        del lease  # one graph serves every session; kept for subclasses that build per lease
        with self._lock:
            if self._graph is None:
                self._graph = self.build(self.sessions.saver.with_lease_lookup(self._epoch_of))
            return self._graph

    def _epoch_of(self, thread_id: str) -> int:
        run = _RUN.get()
        if run is not None and run[0] is self and run[1] == thread_id:
            return run[2]
        with self._lock:
            lease = self.leases.get(thread_id)
        if lease is None:
            raise OwnershipLostError(
                thread_id, "", epoch=0, current=0, reason=f"{self.owner} does not hold the session now"
            )
        return lease.epoch

    @contextlib.contextmanager
    def _running(self, lease: Lease) -> Iterator[None]:
        """Pin ``lease``'s epoch for a run's writes, and forget a session found lost."""
        token = _RUN.set((self, lease.thread_id, lease.epoch))
        try:
            yield
        except OwnershipLostError:
            self._lose(lease)
            raise
        finally:
            _RUN.reset(token)

    def settle(self, thread_id: str, config: dict[str, Any] | None = None) -> Any:
        """Finish the step a previous owner was in when it died, before anything new happens.

        A worker killed between a task's ``put_writes`` and the next checkpoint leaves completed
        work as pending writes. ``get_state`` already shows it, but if the next call is a *new
        input*, LangGraph discards those writes (the answer the user may already have seen is
        lost). So after every acquire, takeover or accepted transfer, this resumes the latest
        checkpoint once (``invoke(None)``: completed tasks are replayed, not run again) if it has
        tasks. :meth:`invoke` calls it for you. Returns the resumed result, or ``None``.
        """
        lease = self.lease_for(thread_id)
        if not self._needs_settling(thread_id):
            return None
        graph, cfg = self.graph_for(lease), self._config(thread_id, config)
        result = None
        with self._running(lease):
            if _interrupted_step(graph, graph.get_state(cfg)):
                log.info("%s resumes %r where the previous owner stopped", self.owner, thread_id)
                result = graph.invoke(None, cfg, durability=self.durability)
        self._settled(thread_id)
        return result

    def _needs_settling(self, thread_id: str) -> bool:
        with self._lock:
            return thread_id in self._unsettled

    def _settled(self, thread_id: str) -> None:
        with self._lock:
            self._unsettled.discard(thread_id)

    async def asettle(self, thread_id: str, config: dict[str, Any] | None = None) -> Any:
        """Async twin of :meth:`settle`."""
        lease = await self._alease_for(thread_id)
        if not self._needs_settling(thread_id):
            return None
        graph, cfg = self.graph_for(lease), self._config(thread_id, config)
        result = None
        with self._running(lease):
            if _interrupted_step(graph, await graph.aget_state(cfg)):
                log.info("%s resumes %r where the previous owner stopped", self.owner, thread_id)
                result = await graph.ainvoke(None, cfg, durability=self.durability)
        self._settled(thread_id)
        return result

    def invoke(self, thread_id: str, input: Any, config: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        """Run one invocation on ``thread_id`` under this worker's lease. The first call after
        this worker got the session finishes the previous owner's interrupted step first
        (:meth:`settle`). ``input=None`` resumes the latest checkpoint."""
        lease = self.lease_for(thread_id)
        with self._session_turn(lease, asynchronous=False):
            if input is not None:
                self.settle(thread_id, config)
            else:
                self._settled(thread_id)
            kwargs.setdefault("durability", self.durability)
            with self._running(lease):
                return self.graph_for(lease).invoke(input, self._config(thread_id, config), **kwargs)

    async def ainvoke(self, thread_id: str, input: Any, config: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        """Async twin of :meth:`invoke`."""
        lease = await self._alease_for(thread_id)
        with self._session_turn(lease, asynchronous=True):
            if input is not None:
                await self.asettle(thread_id, config)
            else:
                self._settled(thread_id)
            kwargs.setdefault("durability", self.durability)
            with self._running(lease):
                return await self.graph_for(lease).ainvoke(input, self._config(thread_id, config), **kwargs)

    @contextlib.contextmanager
    def _session_turn(self, lease: Lease, *, asynchronous: bool) -> Iterator[None]:
        """One turn: counted as under way (``stop`` waits for it), traced as a ``session turn``
        span; the first turn under a lease links to the span that gave this worker the session
        (an acquire, a takeover or an accepted transfer, perhaps on another worker)."""
        first = self._needs_settling(lease.thread_id)
        with self._drained:
            self._inflight[asynchronous] += 1
        try:
            attrs = {telemetry.THREAD: lease.thread_id, telemetry.OWNER: self.owner, telemetry.EPOCH: lease.epoch}
            links = [lease.traceparent] if first else []
            with telemetry.span("session turn", attrs, links=links):
                yield
            with self._lock:
                self._served[lease.thread_id] = self._served.get(lease.thread_id, 0) + 1
        finally:
            with self._drained:
                self._inflight[asynchronous] -= 1
                self._drained.notify_all()

    def note_for(self, thread_id: str) -> Handoff | None:
        """The note of the planned transfer that brought ``thread_id`` to this worker (what the
        previous owner did, decided and left to do), or None: it came otherwise, or is not held.

        >>> from langgraph_handoff import ObjectStoreSaver
        >>> sessions = SessionManager(ObjectStoreSaver.from_url("memory://"))
        >>> a = SessionWorker(sessions, "worker-a", lambda cp: None)
        >>> b = SessionWorker(sessions, "worker-b", lambda cp: None)
        >>> _ = a.lease_for("chat-1"); a.stop(next_step="send the refund")
        ['chat-1']
        >>> _ = b.accept_transfers(); b.note_for("chat-1").payload["next_step"]
        'send the refund'
        """
        with self._lock:
            lease = self.leases.get(thread_id)
        if lease is None or lease.received is None or not lease.received.note:
            return None
        return Handoff.from_data(lease.received.note)

    def _wait_for_turns(self, timeout: float) -> int:
        """Wait up to ``timeout`` s for the turns under way; return how many are still running.
        On a thread running an event loop the async turns cannot finish while this waits (they
        run on this very loop), so only the other threads' turns are waited for: use
        :meth:`astop` there."""
        try:
            asyncio.get_running_loop()
            kinds: tuple[bool, ...] = (False,)
        except RuntimeError:
            kinds = (False, True)
        with self._drained:
            self._drained.wait_for(lambda: all(self._inflight[k] == 0 for k in kinds), timeout=timeout)
            return sum(self._inflight.values())

    def accept_transfers(self, infos: list[Any] | None = None) -> list[Lease]:
        """Accept every pending transfer addressed to this worker or to anyone (``infos``: a
        ``sessions()`` listing you already have, to save a scan)."""
        taken: list[Lease] = []
        for info in infos if infos is not None else self.sessions.sessions():
            lease = info.lease
            if info.status != "transferring" or lease is None or lease.transfer is None:
                continue
            if lease.transfer.to_owner not in (None, self.owner) or lease.owner == self.owner:
                continue
            if self._room() == 0:
                break  # full: leave the rest to other workers
            self._first_alive()
            try:
                new = self.sessions.accept(
                    info.thread_id, self.owner, self.ttl, transfer_id=lease.transfer.id, liveness=self.incarnation
                )
            except ConflictError:
                continue  # someone else accepted first, or it expired
            self._hold(new)
            taken.append(new)
        return taken

    def reclaim(self, infos: list[Any] | None = None) -> list[Lease]:
        """The health check: take over sessions whose owner stopped renewing (epoch + 1).
        Their interrupted steps are finished by the next :meth:`invoke` (or :meth:`settle`)."""
        ids = None if infos is None else [i.thread_id for i in infos if i.status in ("expired", "stuck")]
        room = self._room()
        if ids == [] or room == 0:
            return []
        self._first_alive()
        leases = self.sessions.reclaim_expired(
            self.owner, self.ttl, thread_ids=ids, limit=room, liveness=self.incarnation
        )
        for lease in leases:
            self._hold(lease)
        return leases

    def release(self, thread_id: str) -> None:
        with self._lock:
            lease = self.leases.pop(thread_id, None)
        if lease is not None:
            with contextlib.suppress(OwnershipLostError):
                self.sessions.release(lease)

    # -- stopping -----------------------------------------------------------------------------------------

    def stop(
        self,
        *,
        to_owner: str | None = None,
        next_step: str = "continue the conversation",
        drain: float | None = None,
    ) -> list[str]:
        """Stop taking work and hand every held session over (lock + note). Returns the threads.

        First the turns under way get up to ``drain`` seconds (default ``transfer_timeout``) to
        finish, so that the lock does not refuse their last writes. Each session's note says
        what this worker knows: how many turns it served there and the checkpoint the last one
        ended at (the receiver reads it with :meth:`note_for`).

        Up to :attr:`handover_concurrency` sessions are handed over side by side (2 requests
        each), so that a worker holding thousands of sessions hands them over within a
        redeploy's grace period. One that fails (the store is down) is logged and left: the
        worker's liveness record is then marked stopped, so another worker may take it at once."""
        self._stopping.set()
        still = self._wait_for_turns(self.transfer_timeout if drain is None else drain)
        if still:
            log.warning(
                "%s stops with %d turn(s) still under way; their next writes will be refused", self.owner, still
            )
        with self._lock:
            held = list(self.leases.values())
            self.leases.clear()
            served = dict(self._served)

        def note_of(lease: Lease) -> Handoff:
            known = self.sessions.saver.heads.remembered(lease.thread_id)
            latest = known.head.latest_id if known is not None and known.head is not None else None
            turns = served.get(lease.thread_id, 0)
            done = [f"{self.owner} served {turns} turn(s) of this session"]
            if latest:
                done.append(f"the last one ended at checkpoint {latest}")
            return session_note(
                source=self.owner, target=to_owner, next_step=next_step, completed_steps=done,
                briefing=f"{self.owner} is shutting down; " + ", ".join(done),
            )  # fmt: skip

        def hand(lease: Lease) -> bool:
            try:
                self.sessions.begin_transfer(
                    lease, to_owner=to_owner, note=note_of(lease), timeout=self.transfer_timeout
                )
            except OwnershipLostError:
                return False
            except LangGraphHandoffError as exc:  # the store failed: the others are still handed over
                log.warning("%s could not hand %r over: %s: %s", self.owner, lease.thread_id, type(exc).__name__, exc)
                return False
            return True

        if len(held) > 1:
            with ThreadPoolExecutor(min(self.handover_concurrency, len(held)), "handover") as pool:
                done = list(pool.map(hand, held))
        else:
            done = [hand(lease) for lease in held]
        handed = [lease.thread_id for lease, ok in zip(held, done, strict=True) if ok]
        if self._alive_written:  # what was not handed over may be taken at once, not after its TTL
            try:
                self.sessions.keep_alive(self.owner, self.incarnation, 0.0, stopped=True)
            except LangGraphHandoffError as exc:
                log.warning("%s could not mark its liveness record stopped: %s", self.owner, exc)
        log.info("%s stopped; handed over %d session(s)", self.owner, len(handed))
        return handed

    async def astop(
        self,
        *,
        to_owner: str | None = None,
        next_step: str = "continue the conversation",
        drain: float | None = None,
    ) -> list[str]:
        """:meth:`stop` for an async worker: it waits for the turns under way on this event
        loop too (in a thread, so the loop keeps running them)."""
        return await asyncio.to_thread(self.stop, to_owner=to_owner, next_step=next_step, drain=drain)

    @contextlib.contextmanager
    def handle_sigterm(self) -> Iterator[None]:
        """Within this block, ``SIGTERM`` sets the worker stopping (new work is refused); call
        :meth:`stop` when your loop sees :attr:`stopping` to hand the sessions over."""
        previous = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, lambda signum, frame: self._stopping.set())
        try:
            yield
        finally:
            signal.signal(signal.SIGTERM, previous)

    async def aheartbeat(self) -> None:
        """The heartbeat as an asyncio task, for async workers: ``asyncio.create_task(worker.aheartbeat())``."""
        while not self.stopping:
            await asyncio.sleep(self.heartbeat)
            await asyncio.to_thread(self.beat)
