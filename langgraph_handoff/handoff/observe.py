"""What a handoff graph tells an operator: log records, spans and metrics for each agent turn,
routing decision, handoff, refused handoff and breaker trip.

The router's policy (:mod:`.policy`) is pure and returns its events; the graph's nodes hand them
here with the run's config, which knows the thread. So every record names the thread and, for a
handoff, its id and whole chain (``handoff 8c5a… on customer-42: tech -> after_sales (hop 1,
chain tech -> after_sales)``), and carries the same facts as ``extra=`` fields under the
attribute names of the spans (:mod:`langgraph_handoff.telemetry`), which OpenTelemetry's logging
handler exports as attributes.

User text (a briefing, a reason a model wrote, payload values) is in neither a log record nor a
span unless content capture is on (``telemetry.configure(capture_content=True)``): by default
their lengths and the payload's keys are.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END

from langgraph_handoff import telemetry as T
from langgraph_handoff.handoff.notify import BreakerEvent, event_of

if TYPE_CHECKING:
    from langgraph_handoff.handoff.policy import Plan

__all__ = ["agent_turn", "record", "turn_step"]

log = logging.getLogger("langgraph_handoff.handoff")

Event = tuple[str, dict[str, Any]]


def thread_of(config: RunnableConfig | None) -> str | None:
    conf = (config or {}).get("configurable") or {}
    tid = conf.get("thread_id") if isinstance(conf, Mapping) else None
    return str(tid) if tid is not None else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _said(what: str, text: str) -> str:
    """A piece of user text for a log line: itself with content capture on, else its length."""
    if T.content_on():
        return f"{what}: {text[:200]}"
    return f"{what}: {len(text)} characters"


def _lead(scores: Mapping[str, Any], target: str | None) -> tuple[str | None, float | None]:
    """The runner-up, and the winner's lead over it."""
    ranked = sorted(((float(v), k) for k, v in scores.items() if isinstance(v, int | float)), reverse=True)
    if not ranked or target is None:
        return None, None
    won = scores.get(target)
    best = float(won) if isinstance(won, int | float) else ranked[0][0]
    others = [(v, k) for v, k in ranked if k != target]
    if not others:
        return None, None
    return others[0][1], best - others[0][0]


def _route(thread: str | None, d: Mapping[str, Any]) -> None:
    target, method, scores = d.get("target"), d.get("method"), d.get("scores") or {}
    runner_up, lead = _lead(scores, target)
    shown = ", ".join(f"{k}={float(v):.3f}" for k, v in sorted(scores.items(), key=lambda kv: -float(kv[1])))
    attrs = {
        T.EVENT: "route", T.THREAD: thread, T.TARGET: target, T.METHOD: method, T.RUNNER_UP: runner_up,
        T.LEAD: lead, T.UNCERTAIN: bool(d.get("uncertain")), "langgraph_handoff.routing.threshold": d.get("threshold"),
        "langgraph_handoff.routing.margin": d.get("margin"), T.DECIDER: bool(d.get("decider")),
        T.ENCODER: d.get("encoder"),
    }  # fmt: skip
    log.info(
        "route on %s -> %s via %s (%s) scores: %s",
        thread,
        target,
        method,
        d.get("reason") if T.content_on() or method != "llm" else "reason hidden",
        shown or "none",
        extra={**attrs, T.SCORES: shown},
    )
    if not T.is_on():
        return
    with T.span(f"route {target}", {**attrs, T.SCORES: [f"{k}={v}" for k, v in scores.items()]}):
        pass
    T.counter(T.M_ROUTING, 1, {T.METHOD: method, T.TARGET: target, T.UNCERTAIN: bool(d.get("uncertain"))})
    if lead is not None:
        T.histogram(T.M_ROUTING_LEAD, lead, {T.TARGET: target})


def _handoff(thread: str | None, h: Mapping[str, Any]) -> None:
    chain = [str(x) for x in h.get("chain") or []]
    briefing = _text(h.get("briefing"))
    payload = h.get("payload") if isinstance(h.get("payload"), Mapping) else None
    attrs = {
        T.EVENT: "handoff", T.THREAD: thread, T.HANDOFF_ID: h.get("id"), T.SOURCE: h.get("source"),
        T.TARGET: h.get("target"), T.TRIGGER: h.get("trigger"), T.HOP: h.get("hop"), T.CHAIN: " -> ".join(chain),
        T.BRIEFING_LENGTH: len(briefing), T.PAYLOAD_KEYS: sorted(payload) if payload else None,
        T.AUDIT_SAMPLED: bool(h.get("audit")), T.BRIEFING_CHECK: check_label(h.get("check")),
    }  # fmt: skip
    if T.content_on():
        attrs[T.BRIEFING] = briefing
    check = h.get("check")
    if isinstance(check, Mapping) and check.get("ok") is False:
        log.warning(
            "handoff %s on %s to %r went ahead with a briefing the check flagged (%s); it is audited",
            h.get("id"), thread, h.get("target"), check.get("reason"), extra=attrs,
        )  # fmt: skip
    log.info(
        "handoff %s on %s: %s -> %s (hop %s, chain %s; %s)",
        h.get("id"),
        thread,
        h.get("source"),
        h.get("target"),
        h.get("hop"),
        " -> ".join(chain),
        _said("briefing", briefing),
        extra=attrs,
    )
    if not T.is_on():
        return
    with T.span(f"handoff {h.get('target')}", attrs):
        pass
    T.counter(
        T.M_HANDOFFS, 1, {T.SOURCE: h.get("source") or "", T.TARGET: h.get("target"), T.TRIGGER: h.get("trigger")}
    )


def _breaker(thread: str | None, b: Mapping[str, Any], notify: Callable[[BreakerEvent], None] | None) -> None:
    reason = _text(b.get("reason"))
    kind = _kind(reason)
    if notify is not None:
        notify(event_of(thread, kind, b))
    attrs = {
        T.EVENT: "breaker", T.THREAD: thread, T.BREAKER_KIND: kind, T.SOURCE: b.get("source"),
        "langgraph_handoff.breaker.wanted": b.get("wanted"), T.TARGET: b.get("target"), T.REASON: reason,
    }  # fmt: skip
    if b.get("target") is None:
        log.warning("circuit breaker on %s: %s; %r's turn ended", thread, reason, b.get("source"), extra=attrs)
    else:
        log.warning(
            "circuit breaker on %s: %s; %r -> fallback %r",
            thread,
            reason,
            b.get("source"),
            b.get("target"),
            extra=attrs,
        )
    if not T.is_on():
        return
    with T.span("breaker", attrs) as span:
        span.event("breaker.trip", attrs)
    outcome = "fallback" if b.get("target") is not None else "ended"
    T.counter(T.M_BREAKER_TRIPS, 1, {T.BREAKER_KIND: kind, T.OUTCOME: outcome})


def _kind(reason: str) -> str:
    """The breaker's kind, from the reason the policy wrote (low cardinality, for metrics)."""
    for marker, kind in (
        ("the briefing ", "briefing"),
        ("turn deadline", "deadline"),
        ("time budget", "time_budget"),
        ("handoffs this turn", "hop_limit"),
        ("ping-pong", "ping_pong"),
        ("recursion limit", "runaway"),
        ("invalid handoff", "invalid"),
        ("disabled", "unavailable"),
    ):
        if marker in reason:
            return kind
    return "other"


def _retry(thread: str | None, r: Mapping[str, Any]) -> None:
    errors = [str(e) for e in r.get("errors") or []]
    attrs = {T.EVENT: "retry", T.THREAD: thread, T.SOURCE: r.get("source"), T.REASON: "; ".join(errors)}
    log.info(
        "handoff by %r on %s refused (%s); the agent gets the error and another go",
        r.get("source"),
        thread,
        "; ".join(errors),
        extra=attrs,
    )
    if T.is_on():
        with T.span("handoff refused", attrs):
            pass


def check_label(check: Any) -> str | None:
    """The briefing check's verdict as one low-cardinality word: the step that passed it
    (``keyword``, ``semantic``, ``unchecked``) or ``fail_{step}``."""
    if not isinstance(check, Mapping):
        return None
    by = str(check.get("by") or "unchecked")
    return by if check.get("ok") else f"fail_{by}"


def _check(thread: str | None, c: Mapping[str, Any]) -> None:
    label = check_label(c)
    attrs = {T.EVENT: "briefing_check", T.THREAD: thread, T.SOURCE: c.get("source"), T.TARGET: c.get("target"),
             T.BRIEFING_CHECK: label, T.REASON: c.get("reason") or None}  # fmt: skip
    log.log(
        logging.DEBUG if c.get("ok") else logging.INFO,
        "briefing check on %s, %r -> %r: %s%s",
        thread, c.get("source"), c.get("target"), label, f" ({c.get('reason')})" if c.get("reason") else "",
        extra=attrs,
    )  # fmt: skip
    T.counter(T.M_BRIEFING_CHECKS, 1, {T.TARGET: c.get("target"), T.BRIEFING_CHECK: label})


_RECORDERS = {"route": _route, "handoff": _handoff, "retry": _retry, "check": _check}


def record(
    config: RunnableConfig | None, events: list[Event], notify: Callable[[BreakerEvent], None] | None = None
) -> None:
    """Log (and trace, and count) what one router step did, and notify of a breaker trip.
    Never raises into the run."""
    thread = thread_of(config)
    for kind, data in events:
        try:
            if kind == "breaker":
                _breaker(thread, data, notify)
            elif kind in _RECORDERS:
                _RECORDERS[kind](thread, data)
        except Exception as exc:  # noqa: BLE001 - observing a run never breaks it
            log.debug("could not record a %s event: %s: %s", kind, type(exc).__name__, exc)


@contextlib.contextmanager
def agent_turn(agent: str, config: RunnableConfig | None, state: Mapping[str, Any]) -> Iterator[None]:
    """The ``invoke_agent {agent}`` span around one agent's turn, and its duration."""
    if not T.is_on():
        yield
        return
    last = (state.get("handoffs") or [None])[-1]
    attrs = {
        T.OPERATION: "invoke_agent",
        T.AGENT: agent,
        T.THREAD: thread_of(config),
        T.HOP: int(state.get("turn_hops") or 0),
        T.CHAIN: " -> ".join(str(x) for x in state.get("turn_chain") or []),
        T.HANDOFF_ID: last.get("id") if isinstance(last, Mapping) else None,
    }
    started = T.now()
    outcome = "ok"
    try:
        with T.span(f"invoke_agent {agent}", attrs):
            yield
    except BaseException:
        outcome = "error"
        raise
    finally:
        T.histogram(T.M_AGENT_DURATION, T.now() - started, {T.AGENT: agent, T.OUTCOME: outcome})


# -- the user turn's duration ----------------------------------------------------------------------
#: turns started in this process and not ended yet: ``turn_id -> (start on the policy's clock,
#: entry agent)``, the oldest dropped past :data:`_TURNS_KEPT` (a turn that waits at an
#: interrupt for ever, or ends on another worker, must not grow it without bound)
_TURNS: OrderedDict[str, tuple[float, str]] = OrderedDict()
_TURNS_KEPT = 10_000
_turns_lock = threading.Lock()


def turn_step(state: Mapping[str, Any], plan: Plan, clock: Callable[[], float]) -> None:
    """Time user turns: called by the graph's router nodes (the entry, and after each agent)
    with the plan each one made. An entry's plan starts a turn (its ``turn_id``); a plan that
    goes to ``END`` ends it, and its duration on the graph's ``clock`` goes to the
    ``langgraph_handoff.turn.duration`` histogram with the entry agent and whether a breaker
    tripped during it: low-cardinality, no thread. Measured where the turn started: a turn that
    ends on another worker (a takeover mid-turn) is not recorded; waiting at an ``interrupt``
    counts. Never raises into the run; nothing at all when telemetry is off."""
    if not T.is_on():
        return
    try:
        started = plan.update.get("turn_id")
        if started:
            with _turns_lock:
                _TURNS[str(started)] = (clock(), plan.goto)
                while len(_TURNS) > _TURNS_KEPT:
                    _TURNS.popitem(last=False)
        if plan.goto != END:
            return
        turn_id = str(started or state.get("turn_id") or "")
        with _turns_lock:
            begun = _TURNS.pop(turn_id, None)
        if begun is None:  # started elsewhere (or before this process), or a replay of the end
            return
        at, entry = begun
        earlier = any(str(b.get("id") or "").startswith(f"{turn_id}:") for b in state.get("breakers") or [])
        tripped = earlier or bool(plan.update.get("breakers"))
        T.histogram(T.M_TURN_DURATION, max(0.0, clock() - at), {T.AGENT: entry, T.TRIPPED: tripped})
    except Exception as exc:  # noqa: BLE001 - observing a run never breaks it
        log.debug("could not time a turn: %s: %s", type(exc).__name__, exc)
