"""Tell someone when a turn degrades: the ``notify=`` hook of a handoff graph.

A circuit breaker trip (a ping-pong, the hop limit, the time budget, the turn deadline, an agent
that ran away, an invalid handoff) sends the conversation to the fallback, often "transferring
you to a person". The person, or the admin behind them, needs to know at once: a
:class:`BreakerEvent` goes to every ``notify`` callable.

Why this shape: the call is off the run's path (a small pool of background threads), so a slow
or failing receiver never delays or breaks a user's turn (a failure is logged, never raised). The
event's ``id`` is the same if the router's step runs again (after a crash, on another worker), so
a receiver can drop a repeat: delivery is at least once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from langgraph_handoff.errors import InvalidHandoffError

__all__ = ["BreakerEvent", "Notify", "notifier"]

log = logging.getLogger("langgraph_handoff.handoff")

_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="lgh-notify")


@dataclass(frozen=True)
class BreakerEvent:
    """One trip: ``kind`` (``ping_pong``, ``hop_limit``, ``time_budget``, ``deadline``,
    ``runaway``, ``invalid``, ``unavailable``, ``other``), why, who asked for whom, where the
    conversation went (``fallback``, None: the turn ended), the turn's chain, and when (UTC)."""

    id: str
    thread_id: str | None
    kind: str
    reason: str
    source: str | None
    wanted: str | None
    fallback: str | None
    chain: list[str] = field(default_factory=list)
    at_utc: float | None = None


Notify = Callable[[BreakerEvent], Any]


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
    receivers = list(notify) if isinstance(notify, Sequence) else [notify]
    if not receivers or not all(callable(r) for r in receivers):
        raise InvalidHandoffError("notify must be a callable taking a BreakerEvent, or a list of them")

    def send(event: BreakerEvent) -> None:
        for receiver in receivers:
            try:
                _POOL.submit(_deliver, receiver, event)
            except RuntimeError as exc:  # the interpreter is shutting down
                log.warning("could not notify %r of breaker %s: %s", receiver, event.id, exc)

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
