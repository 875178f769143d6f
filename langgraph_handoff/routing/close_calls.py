"""Close routing calls, collected to be relabelled and re-scored.

The messages a router barely decided are the ones worth a person's look: they show where routes
overlap, where examples are missing, and where a threshold sits wrong. A router given a sink
(``SemanticRouter(..., close_calls=sink)``, ``HybridRouter(..., close_calls=sink)``) hands it
every *close call*: a decision the semantic scores left near a boundary (the router marked it
:attr:`~langgraph_handoff.routing.decision.RouteDecision.uncertain`), or, with a sink's
``lead_under``, one whose best route led the runner-up by less than that. A
:class:`~langgraph_handoff.routing.hybrid.HybridRouter` judges its semantic stage's decision
and records the final one (what its decider chose, say); its rule hits are never close calls.

:class:`JsonlCloseCalls` appends them to a file, one JSON object a line; add a ``"label"`` to a
line (a route name, or ``null`` for off-topic) and :func:`load_close_calls` reads the file back as
labelled messages for :func:`~langgraph_handoff.routing.evaluate.evaluate`:

>>> from langgraph_handoff.routing import Route, SemanticRouter
>>> calls = MemoryCloseCalls(lead_under=0.5)
>>> router = SemanticRouter([Route("orders", examples=["where is my order"]),
...                          Route("tech", examples=["the app crashes"])], threshold=0.1, close_calls=calls)
>>> [router.route(t).target for t in ["where is my order", "my order crashes the app"]]
['orders', 'tech']
>>> [(c.text, c.routed, c.runner_up, c.lead) for c in calls.calls]
[('my order crashes the app', 'tech', 'orders', 0.408249)]

Why the text is recorded even with content capture off (:func:`~langgraph_handoff.telemetry.content_on`):
a close call without its message cannot be relabelled or routed again, and the sink is a file of
yours that you asked for, not telemetry leaving the process. ``JsonlCloseCalls(path, text=False)``
keeps the scores alone (for counting), which :func:`load_close_calls` then skips.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from langgraph_handoff.errors import InvalidRouteError
from langgraph_handoff.routing.decision import RouteDecision

__all__ = ["CloseCall", "CloseCallSink", "JsonlCloseCalls", "MemoryCloseCalls", "load_close_calls"]

log = logging.getLogger("langgraph_handoff.routing")

#: the version of a line :class:`JsonlCloseCalls` writes
RECORD_VERSION = 1


@dataclass(frozen=True)
class CloseCall:
    """One close routing call: the message (``None`` where a sink keeps no text), where it went
    (``routed``: the matched route, ``None`` for a fallback), by which stage (``method``), every
    route's score, the runner-up and the winner's ``lead`` over it, whether the router marked it
    uncertain, the thread (inside a LangGraph run) and when (seconds since the epoch)."""

    text: str | None
    routed: str | None
    method: str
    scores: dict[str, float] = field(default_factory=dict)
    runner_up: str | None = None
    lead: float | None = None
    uncertain: bool = False
    thread: str | None = None
    at: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class CloseCallSink(Protocol):
    """Where a router puts its close calls. ``add`` must not block for long (it runs in the
    routing call; an async router awaits ``aadd`` instead when the sink has one). An exception
    it raises is logged and dropped: collecting never breaks routing. A sink may have a
    ``lead_under`` attribute: then a decision whose lead is under it is a close call too."""

    def add(self, call: CloseCall) -> None: ...


def _lead(decision: RouteDecision) -> tuple[str | None, float | None]:
    """The runner-up and the best route's lead over it (by score, accepted or not); none when
    no route scored above 0 (nothing matched at all: a confident rejection, not a close call)."""
    ranked = sorted(decision.scores.items(), key=lambda kv: (-kv[1], kv[0]))
    if len(ranked) < 2 or ranked[0][1] <= 0.0:
        return None, None
    return ranked[1][0], round(ranked[0][1] - ranked[1][1], 6)


def close_call(
    text: str, evidence: RouteDecision, decision: RouteDecision, *, lead_under: float | None = None
) -> CloseCall | None:
    """The close call of routing ``text``, or ``None`` when it was not close. ``evidence`` is the
    decision whose scores are judged (a hybrid's semantic stage), ``decision`` the final one."""
    runner_up, lead = _lead(evidence)
    close = evidence.uncertain or (lead_under is not None and lead is not None and lead < lead_under)
    if not close:
        return None
    return CloseCall(
        text=text,
        routed=decision.matched,
        method=decision.method,
        scores=dict(evidence.scores),
        runner_up=runner_up,
        lead=lead,
        uncertain=evidence.uncertain,
        thread=_thread(),
        at=time.time(),
    )


def _thread() -> str | None:
    """The thread of the LangGraph run this routing call is part of, if any."""
    try:
        from langgraph.config import get_config

        conf = get_config().get("configurable") or {}
    except Exception:  # noqa: BLE001 - outside a run (or an older LangGraph): no thread
        return None
    tid = conf.get("thread_id") if isinstance(conf, Mapping) else None
    return str(tid) if tid is not None else None


def collect(sink: CloseCallSink | None, text: str, evidence: RouteDecision | None, decision: RouteDecision) -> None:
    """Hand ``sink`` the close call of this routing, if it was one. Never raises."""
    if sink is None or evidence is None:
        return
    try:
        call = close_call(text, evidence, decision, lead_under=getattr(sink, "lead_under", None))
        if call is not None:
            sink.add(call)
    except Exception as exc:  # noqa: BLE001 - collecting never breaks routing
        log.warning("could not record a close routing call: %s: %s", type(exc).__name__, exc)


async def acollect(
    sink: CloseCallSink | None, text: str, evidence: RouteDecision | None, decision: RouteDecision
) -> None:
    """:func:`collect` for async routers: awaits the sink's ``aadd`` when it has one."""
    if sink is None or evidence is None:
        return
    aadd = getattr(sink, "aadd", None)
    if aadd is None:
        collect(sink, text, evidence, decision)
        return
    try:
        call = close_call(text, evidence, decision, lead_under=getattr(sink, "lead_under", None))
        if call is not None:
            await aadd(call)
    except Exception as exc:  # noqa: BLE001 - collecting never breaks routing
        log.warning("could not record a close routing call: %s: %s", type(exc).__name__, exc)


class MemoryCloseCalls:
    """Close calls kept in a list (:attr:`calls`), for tests and for a process that exports them
    its own way. ``limit``: how many are kept (the oldest go first)."""

    def __init__(self, *, lead_under: float | None = None, limit: int = 10_000) -> None:
        self.lead_under = lead_under
        self.limit = limit
        self.calls: list[CloseCall] = []
        self._lock = threading.Lock()

    def add(self, call: CloseCall) -> None:
        with self._lock:
            self.calls.append(call)
            del self.calls[: max(0, len(self.calls) - self.limit)]


class JsonlCloseCalls:
    """Close calls appended to ``path``, one JSON object a line (the fields of
    :class:`CloseCall` and ``"v"``), each line by one write to a file opened for appending.
    ``text=False`` writes ``null`` for the message and its length in ``"chars"`` instead."""

    def __init__(self, path: str | Path, *, lead_under: float | None = None, text: bool = True) -> None:
        self.path = Path(path)
        self.lead_under = lead_under
        self.text = text
        self._lock = threading.Lock()

    def line(self, call: CloseCall) -> str:
        record: dict[str, Any] = {"v": RECORD_VERSION, **call.as_dict()}
        if not self.text:
            record["chars"] = len(call.text or "")
            record["text"] = None
        return json.dumps(record, ensure_ascii=False) + "\n"

    def add(self, call: CloseCall) -> None:
        data = self.line(call)
        with self._lock, self.path.open("a", encoding="utf-8") as f:
            f.write(data)

    async def aadd(self, call: CloseCall) -> None:
        await asyncio.to_thread(self.add, call)


def load_close_calls(
    path: str | Path, *, unlabelled: Literal["skip", "routed"] = "skip"
) -> list[tuple[str, str | None]]:
    """The close calls in a :class:`JsonlCloseCalls` file as ``(text, label)`` pairs for
    :func:`~langgraph_handoff.routing.evaluate.evaluate`.

    A line's ``"label"`` (a route name, or ``null`` for off-topic) is what a person decided.
    Lines without one are skipped, or, with ``unlabelled="routed"``, taken with the route they
    went to (so ``evaluate`` shows where a changed router would now disagree). Lines without
    text (``text=False``) are skipped; blank lines too."""
    if unlabelled not in ("skip", "routed"):
        raise InvalidRouteError(f"unlabelled must be 'skip' or 'routed', got {unlabelled!r}")
    out: list[tuple[str, str | None]] = []
    with Path(path).open(encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except ValueError as exc:
                raise InvalidRouteError(
                    f"line {n} of {path} is not JSON ({exc}); fix or delete that line, the file holds one "
                    "close call a line"
                ) from exc
            if not isinstance(record, dict) or "routed" not in record or "text" not in record:
                raise InvalidRouteError(
                    f"line {n} of {path} is not a close call (no 'text' and 'routed'); fix or delete that line"
                )
            text = record["text"]
            if not isinstance(text, str) or not text:
                continue
            if "label" in record:
                label = record["label"]
            elif unlabelled == "routed":
                label = record["routed"]
            else:
                continue
            if label is not None and not isinstance(label, str):
                raise InvalidRouteError(
                    f"line {n} of {path}: label {label!r} is not a route name or null (off-topic); fix that line"
                )
            out.append((text, label))
    return out
