"""OpenTelemetry traces and metrics, optional and safe.

Why this shape:

* **Optional.** Only ``opentelemetry-api`` is used (the ``otel`` extra); the application brings
  the SDK and its exporters, as OpenTelemetry asks of libraries. Without the API installed, or
  with ``LANGGRAPH_HANDOFF_TELEMETRY=off`` in the environment, or after
  ``configure(enabled=False)``, every function here returns at once: one boolean test.
* **Safe.** Telemetry never raises into a run: every call into OpenTelemetry is guarded, and a
  failure is logged once at DEBUG and forgotten.
* **One vocabulary.** Spans, metrics and log records share the attribute names below:
  ``gen_ai.*`` where OpenTelemetry's GenAI conventions define a name (the thread is the
  conversation), ``langgraph_handoff.*`` for the rest. Thread ids, handoff ids and checkpoint
  ids go on spans and log records, never on metrics (their cardinality would sink a metrics
  backend).
* **No user text by default.** Briefings, reasons written by a model, payload values and user
  messages are recorded only with ``capture_content=True`` (or the environment variable
  ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``, the GenAI conventions' own switch);
  otherwise their lengths and payload keys are.
* **Store requests as spans only when asked.** A turn makes a dozen requests; a ``store {method}``
  client span for each is what finds the slow one, and too many spans for every day. They are
  made with ``configure(store_spans=True)`` or ``LANGGRAPH_HANDOFF_TELEMETRY_STORE_SPANS=on``;
  off, they cost one boolean test per operation.

>>> from langgraph_handoff import telemetry
>>> with telemetry.span("example", {telemetry.THREAD: "t-1"}) as s:  # a no-op without a provider
...     pass
>>> telemetry.counter(telemetry.M_HANDOFFS, 1, {telemetry.SOURCE: "a"})  # never raises
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from langgraph_handoff._version import __version__

log = logging.getLogger("langgraph_handoff.telemetry")

try:  # the otel extra
    from opentelemetry import context as _context
    from opentelemetry import metrics as _metrics
    from opentelemetry import trace as _trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    _PROPAGATOR = TraceContextTextMapPropagator()
    _HAVE_OTEL = True
except ImportError:  # pragma: no cover - exercised by tests that hide the package
    _context = _metrics = _trace = None  # type: ignore[assignment]
    _HAVE_OTEL = False

__all__ = ["configure", "content_on", "is_on", "store_spans_on"]

# -- the vocabulary --------------------------------------------------------------------------------
#: the thread (GenAI: the conversation)
THREAD = "gen_ai.conversation.id"
#: the agent whose turn it is
AGENT = "gen_ai.agent.name"
#: what a span does, in GenAI terms (``invoke_agent``) or ours (``checkpoint.put``)
OPERATION = "gen_ai.operation.name"
HANDOFF_ID = "langgraph_handoff.handoff.id"
SOURCE = "langgraph_handoff.handoff.source"
TARGET = "langgraph_handoff.handoff.target"
TRIGGER = "langgraph_handoff.handoff.trigger"
HOP = "langgraph_handoff.handoff.hop"
CHAIN = "langgraph_handoff.handoff.chain"
REASON = "langgraph_handoff.reason"
BRIEFING_LENGTH = "langgraph_handoff.handoff.briefing.length"
BRIEFING = "langgraph_handoff.handoff.briefing"
PAYLOAD_KEYS = "langgraph_handoff.handoff.payload.keys"
METHOD = "langgraph_handoff.routing.method"
SCORES = "langgraph_handoff.routing.scores"
LEAD = "langgraph_handoff.routing.lead"
RUNNER_UP = "langgraph_handoff.routing.runner_up"
UNCERTAIN = "langgraph_handoff.routing.uncertain"
#: a hybrid router asked its decider (an LLM call, say) for this decision
DECIDER = "langgraph_handoff.routing.decider"
#: the class of the encoder behind the router's semantic scores
ENCODER = "langgraph_handoff.routing.encoder"
BREAKER_KIND = "langgraph_handoff.breaker.kind"
#: whether a circuit breaker tripped during a user turn
TRIPPED = "langgraph_handoff.breaker.tripped"
STORE = "langgraph_handoff.store"
OUTCOME = "langgraph_handoff.outcome"
REQUESTS = "langgraph_handoff.store.requests"
CAS_ATTEMPTS = "langgraph_handoff.cas.attempts"
REQUEST_METHOD = "langgraph_handoff.store.method"
#: the kind of object a key holds (``head``, ``writes``, ...: ``_format.keys.key_kind``)
KEY_KIND = "langgraph_handoff.store.key.kind"
#: which attempt of a compare-and-swap loop (1 for the first)
CAS_ATTEMPT = "langgraph_handoff.cas.attempt"
#: the object key of a store request (it names the thread: spans only, never metrics)
STORE_KEY = "langgraph_handoff.store.key"
#: the body's size of a store request: sent (PUT) or received (GET)
STORE_BYTES = "langgraph_handoff.store.bytes"
#: how many keys a LIST returned or a batch DELETE named
STORE_KEYS = "langgraph_handoff.store.keys"
#: a PUT's condition: ``if_match`` (compare-and-swap) or ``if_none_match`` (create-only)
CONDITION = "langgraph_handoff.store.condition"
NAMESPACE = "langgraph_handoff.checkpoint.ns"
#: how many threads an operation over several touches (``checkpoint prune``)
THREADS = "langgraph_handoff.checkpoint.threads"
CHECKPOINT_ID = "langgraph_handoff.checkpoint.id"
#: the state-schema version a checkpoint was written in, the one this code reads, and the
#: required fields an upgraded checkpoint still lacks (a schema gap)
SCHEMA_VERSION = "langgraph_handoff.schema.version"
SCHEMA_CURRENT = "langgraph_handoff.schema.current"
SCHEMA_MISSING = "langgraph_handoff.schema.missing"
OWNER = "langgraph_handoff.session.owner"
EPOCH = "langgraph_handoff.session.epoch"
VIA = "langgraph_handoff.session.via"
TRANSFER_ID = "langgraph_handoff.session.transfer.id"
EVENT = "langgraph_handoff.event"
TEAM = "langgraph_handoff.team.id"
MEMBER = "langgraph_handoff.team.member"
ROLE = "langgraph_handoff.team.role"
MESSAGES = "langgraph_handoff.team.messages"
#: the handoff is audited (a collector's tail sampler keeps these traces), and why
AUDIT_SAMPLED = "langgraph_handoff.audit.sampled"
AUDIT_WHY = "langgraph_handoff.audit.why"
#: the briefing check's verdict: ``keyword``, ``semantic``, ``unchecked`` when it passed, else ``fail_{step}``
BRIEFING_CHECK = "langgraph_handoff.briefing.check"

# -- the metrics -----------------------------------------------------------------------------------
M_OPERATION_DURATION = "langgraph_handoff.checkpoint.operation.duration"
M_STORE_REQUESTS = "langgraph_handoff.store.requests"
M_CAS_RETRIES = "langgraph_handoff.checkpoint.cas.retries"
M_REFUSALS = "langgraph_handoff.checkpoint.refusals"
M_HANDOFFS = "langgraph_handoff.handoffs"
M_ROUTING = "langgraph_handoff.routing.decisions"
M_ROUTING_LEAD = "langgraph_handoff.routing.lead"
M_BREAKER_TRIPS = "langgraph_handoff.breaker.trips"
M_AGENT_DURATION = "langgraph_handoff.agent.duration"
M_TURN_DURATION = "langgraph_handoff.turn.duration"
M_SESSION_CHANGES = "langgraph_handoff.session.changes"
M_SESSION_UNOWNED = "langgraph_handoff.session.unowned.duration"
M_RENEW_FAILURES = "langgraph_handoff.session.renew.failures"
M_TEAM_MESSAGES = "langgraph_handoff.team.messages"
#: the handoff is audited (a collector's tail sampler keeps these traces), and why
AUDIT_SAMPLED = "langgraph_handoff.audit.sampled"
AUDIT_WHY = "langgraph_handoff.audit.why"
#: the briefing check's verdict: ``keyword``, ``semantic``, ``unchecked`` when it passed, else ``fail_{step}``
BRIEFING_CHECK = "langgraph_handoff.briefing.check"
M_TEAM_DELIVERY = "langgraph_handoff.team.delivery.latency"
M_BRIEFING_CHECKS = "langgraph_handoff.briefing.checks"
M_AUDITS = "langgraph_handoff.audit.records"

_HISTOGRAMS = {
    M_OPERATION_DURATION: ("s", "time of one checkpoint operation, store requests included"),
    M_ROUTING_LEAD: ("1", "the winning route's score lead over the runner-up"),
    M_AGENT_DURATION: ("s", "time of one agent's turn"),
    M_TURN_DURATION: ("s", "time of one user turn of a handoff graph, from its entry to its end"),
    M_SESSION_UNOWNED: ("s", "time a session had no working owner, at a takeover or an accept"),
    M_TEAM_DELIVERY: ("s", "from a team message's send to the committed turn that ingested it"),
}
_COUNTERS = {
    M_STORE_REQUESTS: "requests sent to the object store, by method and outcome",
    M_CAS_RETRIES: "compare-and-swap attempts lost to another writer (412) or left unsettled",
    M_REFUSALS: "writes refused to keep the data right, by reason",
    M_HANDOFFS: "handoffs, by source, target and trigger",
    M_ROUTING: "routing decisions, by method and target",
    M_BREAKER_TRIPS: "circuit breaker trips, by kind",
    M_SESSION_CHANGES: "session ownership changes, by kind",
    M_RENEW_FAILURES: "heartbeats that could not renew a lease or liveness record",
    M_TEAM_MESSAGES: "team messages, by event (sent, ingested, dead_letter, hop_cut)",
    M_BRIEFING_CHECKS: "briefing checks, by verdict (keyword, semantic, unchecked, fail_length, ...) and outcome",
    M_AUDITS: "handoffs audited, by reason (sampled, breaker, briefing_flagged)",
}


def _env_on(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    return raw.strip().lower() not in ("0", "false", "off", "no", "none")


class _State:
    """What ``configure`` set: read on every call, so one boolean decides the cost when off."""

    def __init__(self) -> None:
        self.on = _HAVE_OTEL and _env_on("LANGGRAPH_HANDOFF_TELEMETRY", True)
        self.content = _env_on("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", False)
        self.store_spans = _env_on("LANGGRAPH_HANDOFF_TELEMETRY_STORE_SPANS", False)
        self.tracer_provider: Any = None
        self.meter_provider: Any = None
        self.tracer: Any = None
        self.instruments: dict[str, Any] = {}
        self.lock = threading.Lock()
        self.warned = False


_state = _State()


def configure(
    *,
    enabled: bool | None = None,
    tracer_provider: Any = None,
    meter_provider: Any = None,
    capture_content: bool | None = None,
    store_spans: bool | None = None,
) -> None:
    """Switch telemetry on or off, or send it to given providers instead of the global ones
    (tests, or an application with several). ``capture_content``: record user text (briefings,
    reasons written by a model, payload values) on spans and in log records. ``store_spans``:
    a ``store {method}`` client span for each object store request of a checkpoint operation
    (off by default: a dozen per turn).

    >>> configure(enabled=False); is_on()
    False
    >>> configure(enabled=True); is_on()  # on, and no provider set up to record anything
    False
    """
    with _state.lock:
        if enabled is not None:
            _state.on = bool(enabled) and _HAVE_OTEL
        if capture_content is not None:
            _state.content = bool(capture_content)
        if store_spans is not None:
            _state.store_spans = bool(store_spans)
        if tracer_provider is not None or meter_provider is not None or enabled is not None:
            _state.tracer_provider = tracer_provider
            _state.meter_provider = meter_provider
            _state.tracer = None
            _state.instruments = {}


_NO_OP = frozenset({"ProxyTracerProvider", "NoOpTracerProvider", "_ProxyMeterProvider", "NoOpMeterProvider"})


def is_on() -> bool:
    """Is telemetry being emitted: the API is installed, nothing switched it off, and some
    provider (an SDK the application set up, or one given to :func:`configure`) would record
    it? Without one, every span and metric would be a no-op, so none is made at all."""
    if not _state.on:
        return False
    if _state.tracer_provider is not None or _state.meter_provider is not None:
        return True
    try:
        tracing = type(_trace.get_tracer_provider()).__name__ not in _NO_OP
        return tracing or type(_metrics.get_meter_provider()).__name__ not in _NO_OP
    except Exception as exc:  # noqa: BLE001
        _failed(exc)
        return False


def content_on() -> bool:
    """May user text go on spans and into log records?"""
    return _state.content


def store_spans_on() -> bool:
    """Is each store request of a checkpoint operation a span of its own?

    >>> configure(store_spans=True); store_spans_on()
    True
    >>> configure(store_spans=False); store_spans_on()
    False
    """
    return _state.store_spans


def _failed(exc: BaseException) -> None:
    if not _state.warned:
        _state.warned = True
        log.debug("telemetry failed and is skipped: %s: %s", type(exc).__name__, exc)


def _tracer() -> Any:
    tracer = _state.tracer
    if tracer is None:
        provider = _state.tracer_provider
        tracer = (provider or _trace.get_tracer_provider()).get_tracer("langgraph_handoff", __version__)
        if provider is not None:  # the global provider may be set later: ask it each time
            _state.tracer = tracer
    return tracer


def _instrument(name: str) -> Any:
    inst = _state.instruments.get(name)
    if inst is None:
        meter = (_state.meter_provider or _metrics.get_meter_provider()).get_meter("langgraph_handoff", __version__)
        if name in _HISTOGRAMS:
            unit, description = _HISTOGRAMS[name]
            inst = meter.create_histogram(name, unit=unit, description=description)
        else:
            inst = meter.create_counter(name, description=_COUNTERS[name])
        _state.instruments[name] = inst
    return inst


def counter(name: str, value: int = 1, attributes: Mapping[str, Any] | None = None) -> None:
    """Add ``value`` to counter ``name`` (one of the ``M_*`` names)."""
    if not is_on():
        return
    try:
        _instrument(name).add(value, attributes=dict(attributes or {}))
    except Exception as exc:  # noqa: BLE001 - telemetry never breaks a run
        _failed(exc)


def histogram(name: str, value: float, attributes: Mapping[str, Any] | None = None) -> None:
    """Record ``value`` in histogram ``name`` (one of the ``M_*`` names)."""
    if not is_on():
        return
    try:
        _instrument(name).record(value, attributes=dict(attributes or {}))
    except Exception as exc:  # noqa: BLE001
        _failed(exc)


class Span:
    """What :func:`span` yields: set attributes and add events without ever raising, whether
    a real span is recording or not."""

    __slots__ = ("_span",)

    def __init__(self, span: Any) -> None:
        self._span = span

    @property
    def recording(self) -> bool:
        try:
            return self._span is not None and bool(self._span.is_recording())
        except Exception:  # noqa: BLE001
            return False

    def set(self, attributes: Mapping[str, Any]) -> None:
        if self._span is None:
            return
        try:
            self._span.set_attributes({k: _value(v) for k, v in attributes.items() if v is not None})
        except Exception as exc:  # noqa: BLE001
            _failed(exc)

    def event(self, name: str, attributes: Mapping[str, Any] | None = None) -> None:
        if self._span is None:
            return
        try:
            self._span.add_event(name, {k: _value(v) for k, v in (attributes or {}).items() if v is not None})
        except Exception as exc:  # noqa: BLE001
            _failed(exc)

    def rename(self, name: str) -> None:
        if self._span is None:
            return
        try:
            self._span.update_name(name)
        except Exception as exc:  # noqa: BLE001
            _failed(exc)

    def link(self, traceparent: str | None) -> None:
        """Link this span to a span elsewhere (another worker's), given as its ``traceparent``."""
        if self._span is None or not traceparent:
            return
        try:
            for link in _links([traceparent]):
                self._span.add_link(link.context)
        except Exception as exc:  # noqa: BLE001
            _failed(exc)

    @property
    def traceparent(self) -> str | None:
        """This span as a W3C ``traceparent``, to carry to another worker (None when off)."""
        if self._span is None:
            return None
        try:
            carrier: dict[str, str] = {}
            _PROPAGATOR.inject(carrier, context=_trace.set_span_in_context(self._span))
            return carrier.get("traceparent")
        except Exception as exc:  # noqa: BLE001
            _failed(exc)
            return None

    def error(self, exc: BaseException) -> None:
        if self._span is None:
            return
        try:
            self._span.set_status(_trace.Status(_trace.StatusCode.ERROR, f"{type(exc).__name__}"))
            self._span.set_attribute("error.type", type(exc).__name__)
        except Exception as e:  # noqa: BLE001
            _failed(e)


#: the span of a block that is not traced
OFF = Span(None)


def _value(v: Any) -> Any:
    """An attribute value OpenTelemetry takes: str, bool, int, float or a sequence of one."""
    if isinstance(v, str | bool | int | float):
        return v
    if isinstance(v, Sequence):
        return [x if isinstance(x, str | bool | int | float) else str(x) for x in v]
    return str(v)


@contextlib.contextmanager
def span(
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    kind: str = "internal",
    current: bool = True,
    links: Sequence[str | None] = (),
) -> Iterator[Span]:
    """A span named ``name`` around the block, the current one inside it (``current=False``:
    not current, for a span around a plan that yields to other tasks). ``links``: W3C
    ``traceparent`` values of spans elsewhere (another worker) this one follows from. An
    exception in the block marks the span as an error and goes on unchanged."""
    if not is_on():
        yield OFF
        return
    try:
        otel_kind = _trace.SpanKind.CLIENT if kind == "client" else _trace.SpanKind.INTERNAL
        attrs = {k: _value(v) for k, v in (attributes or {}).items() if v is not None}
        raw = _tracer().start_span(name, kind=otel_kind, attributes=attrs, links=_links(links))
    except Exception as exc:  # noqa: BLE001
        _failed(exc)
        yield OFF
        return
    handle = Span(raw)
    token = None
    if current:
        try:
            token = _context.attach(_trace.set_span_in_context(raw))
        except Exception as exc:  # noqa: BLE001
            _failed(exc)
    try:
        yield handle
    except BaseException as exc:
        handle.error(exc)
        raise
    finally:
        if token is not None:
            try:
                _context.detach(token)
            except Exception as exc:  # noqa: BLE001
                _failed(exc)
        try:
            raw.end()
        except Exception as exc:  # noqa: BLE001
            _failed(exc)


def finished_span(
    name: str,
    attributes: Mapping[str, Any],
    *,
    parent: Span,
    start_ns: int,
    end_ns: int,
    error: BaseException | None = None,
) -> None:
    """A client span that already happened, from ``start_ns`` to ``end_ns`` (``time_ns()``
    readings), a child of ``parent``: a store request seen from around a plan's ``yield``, where
    a span cannot be current (the plan's frame is suspended while other tasks run)."""
    if parent._span is None:
        return
    try:
        context = _trace.set_span_in_context(parent._span)
        attrs = {k: _value(v) for k, v in attributes.items() if v is not None}
        raw = _tracer().start_span(
            name, context=context, kind=_trace.SpanKind.CLIENT, attributes=attrs, start_time=start_ns
        )
        if error is not None:
            Span(raw).error(error)
        raw.end(end_time=end_ns)
    except Exception as exc:  # noqa: BLE001
        _failed(exc)


def current_traceparent() -> str | None:
    """The current span as a W3C ``traceparent`` (None when off or outside any span): what a
    record written now carries, for the worker that reads it to link to."""
    if not is_on():
        return None
    try:
        span = _trace.get_current_span()
        return Span(span).traceparent if span.get_span_context().is_valid else None
    except Exception as exc:  # noqa: BLE001
        _failed(exc)
        return None


def _links(traceparents: Sequence[str | None]) -> list[Any]:
    out = []
    for tp in traceparents:
        if not tp:
            continue
        ctx = _trace.get_current_span(_PROPAGATOR.extract({"traceparent": tp})).get_span_context()
        if ctx.is_valid:
            out.append(_trace.Link(ctx))
    return out


def now() -> float:
    """A monotonic clock for durations."""
    return time.perf_counter()


def now_ns() -> int:
    """The wall clock in nanoseconds, as OpenTelemetry timestamps a span."""
    return time.time_ns()
