"""Tell someone when a turn degrades: the ``notify=`` hook of a handoff graph.

A circuit breaker trip (a ping-pong, the hop limit, the time budget, the turn deadline, an agent
that ran away, an invalid handoff) sends the conversation to the fallback, often "transferring
you to a person". The person, or the admin behind them, needs to know at once: a
:class:`BreakerEvent` goes to every ``notify`` callable.

Why this shape: the call is off the run's path (a small pool of background threads), so a slow
or failing receiver never delays or breaks a user's turn (a failure is logged, never raised). The
event's ``id`` is the same if the router's step runs again (after a crash, on another worker), so
a receiver can drop a repeat: delivery is at least once (a repeat in the same process is dropped
here).

Rate limited: a breaker that trips on every turn (a model stuck in a ping-pong, a store that is
down) would page someone for each. A receiver hears of at most one trip of a kind by one agent
every ``every`` seconds (:data:`EVERY` unless :func:`rate_limited` says otherwise); the trips
held back are counted and the next event delivered for that kind and agent says how many
(``suppressed``), so nothing is lost from the count, only the noise. The decision is made on the
run's thread, in the order the trips happened; only the delivery is in the background.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from langgraph_handoff.errors import InvalidHandoffError

__all__ = ["EVERY", "BreakerEvent", "Notify", "RateLimited", "notifier", "rate_limited"]

log = logging.getLogger("langgraph_handoff.handoff")

_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="lgh-notify")


@dataclass(frozen=True)
class BreakerEvent:
    """One trip: ``kind`` (``ping_pong``, ``hop_limit``, ``time_budget``, ``deadline``,
    ``runaway``, ``invalid``, ``briefing``, ``unavailable``, ``other``), why, who asked for whom, where the
    conversation went (``fallback``, None: the turn ended), the turn's chain, and when (UTC).
    ``suppressed``: trips of the same kind by the same agent (``source``) this receiver was not
    told of since the last one it was (the rate limit)."""

    id: str
    thread_id: str | None
    kind: str
    reason: str
    source: str | None
    wanted: str | None
    fallback: str | None
    chain: list[str] = field(default_factory=list)
    at_utc: float | None = None
    suppressed: int = 0


Notify = Callable[[BreakerEvent], Any]

#: seconds between two events of one kind by one agent, to one receiver
EVERY = 60.0
#: breaker ids remembered to drop a repeat (the router's step run again in this process)
_REMEMBERED = 1024


class RateLimited:
    """A receiver told of at most one trip per (kind, agent) every ``every`` seconds (0: every
    trip; a repeat of a breaker id it was told of is dropped either way), with the count of
    those held back on the next one it is told of. ``clock``: a monotonic clock (tests move one
    by hand). Calling it decides and delivers on the caller's thread; :func:`notifier` decides
    on the run's thread and delivers in the background.

    >>> got, now = [], [0.0]
    >>> page = rate_limited(got.append, every=60, clock=lambda: now[0])
    >>> for i in range(3):
    ...     page(BreakerEvent(f"t:{i}", "chat-1", "ping_pong", "a -> b -> a", "a", "b", "human"))
    >>> now[0] = 61.0
    >>> page(BreakerEvent("t:3", "chat-1", "ping_pong", "a -> b -> a", "a", "b", "human"))
    >>> [(e.id, e.suppressed) for e in got]
    [('t:0', 0), ('t:3', 2)]
    """

    def __init__(self, receiver: Notify, *, every: float = EVERY, clock: Callable[[], float] = time.monotonic) -> None:
        if not callable(receiver):
            raise InvalidHandoffError("notify must be a callable taking a BreakerEvent, or a list of them")
        if not isinstance(every, int | float) or isinstance(every, bool) or every < 0:
            raise InvalidHandoffError(f"every must be a number of seconds >= 0, got {every!r}")
        self.receiver = receiver
        self.every = float(every)
        self._clock = clock
        self._lock = threading.Lock()
        self._last: dict[tuple[str, str | None], float] = {}
        self._held: dict[tuple[str, str | None], int] = {}
        self._seen: OrderedDict[str, None] = OrderedDict()

    def __repr__(self) -> str:
        return f"rate_limited({self.receiver!r}, every={self.every:g})"

    def admit(self, event: BreakerEvent) -> BreakerEvent | None:
        """``event`` as this receiver is to be told of it (with the count held back), or None:
        a repeat of a trip already admitted, or one inside the interval (counted)."""
        with self._lock:
            if event.id in self._seen:
                return None
            self._seen[event.id] = None
            if len(self._seen) > _REMEMBERED:
                self._seen.popitem(last=False)
            key, now = (event.kind, event.source), self._clock()
            last = self._last.get(key)
            if last is not None and now - last < self.every:
                self._held[key] = self._held.get(key, 0) + 1
                return None
            self._last[key] = now
            held = self._held.pop(key, 0)
        return replace(event, suppressed=event.suppressed + held) if held else event

    def __call__(self, event: BreakerEvent) -> None:
        admitted = self.admit(event)
        if admitted is not None:
            self.receiver(admitted)


def rate_limited(receiver: Notify, *, every: float = EVERY, clock: Callable[[], float] = time.monotonic) -> RateLimited:
    """``receiver``, told of at most one trip per (kind, agent) every ``every`` seconds: pass it
    to ``notify=`` for an interval other than :data:`EVERY` (``every=0``: every trip; a repeat
    of the same breaker id is dropped still)."""
    inner = receiver.receiver if isinstance(receiver, RateLimited) else receiver
    return RateLimited(inner, every=every, clock=clock)


def notifier(notify: Notify | Sequence[Notify] | None) -> Callable[[BreakerEvent], None] | None:
    """The graph's ``notify=`` option as one function that hands an event to each receiver in
    the background (None: no receiver). ``InvalidHandoffError`` for something not callable.

    >>> import threading
    >>> got, done = [], threading.Event()
    >>> send = notifier(lambda event: (got.append(event), done.set()))
    >>> send(BreakerEvent("t1:2", "chat-1", "ping_pong", "a -> b -> a", "b", "a", "human"))
    >>> done.wait(5), got[0].kind
    (True, 'ping_pong')
    """
    if notify is None:
        return None
    given = list(notify) if isinstance(notify, Sequence) else [notify]
    if not given or not all(callable(r) for r in given):
        raise InvalidHandoffError("notify must be a callable taking a BreakerEvent, or a list of them")
    receivers = [r if isinstance(r, RateLimited) else RateLimited(r) for r in given]

    def send(event: BreakerEvent) -> None:
        for receiver in receivers:
            admitted = receiver.admit(event)
            if admitted is None:
                continue
            try:
                _POOL.submit(_deliver, receiver.receiver, admitted)
            except RuntimeError as exc:  # the interpreter is shutting down
                log.warning("could not notify %r of breaker %s: %s", receiver.receiver, event.id, exc)

    return send


def _deliver(receiver: Notify, event: BreakerEvent) -> None:
    try:
        receiver(event)
    except Exception as exc:  # noqa: BLE001 - a receiver never breaks anything
        log.warning("notify receiver %r failed on breaker %s: %s: %s", receiver, event.id, type(exc).__name__, exc)


def event_of(thread: str | None, kind: str, record: Mapping[str, Any]) -> BreakerEvent:
    """The event of one breaker record (as the router stores it)."""
    return BreakerEvent(
        id=str(record.get("id") or f"{thread}:{record.get('at')}"),
        thread_id=thread,
        kind=kind,
        reason=str(record.get("reason") or ""),
        source=record.get("source"),
        wanted=record.get("wanted"),
        fallback=record.get("target"),
        chain=[str(x) for x in record.get("chain") or []],
        at_utc=record.get("at_utc"),
    )
