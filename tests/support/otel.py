"""The OpenTelemetry SDK's in-memory exporter and metric reader, standing in for a backend in
the telemetry tests (given to ``telemetry.configure``: the global providers can be set once per
process only), and a store that loses a race on demand."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from langgraph_handoff.errors import PreconditionFailedError
from langgraph_handoff.stores import MemoryStore


class Otel:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def names(self) -> list[str]:
        return [s.name for s in self.finished()]

    def metric(self, name: str) -> dict[tuple[tuple[str, Any], ...], Any]:
        """Data points of metric ``name``: attributes -> value (a sum) or count (a histogram)."""
        out: dict[tuple[tuple[str, Any], ...], Any] = {}
        data = self.reader.get_metrics_data()
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == name:
                        for p in m.data.data_points:
                            out[tuple(sorted(p.attributes.items()))] = getattr(p, "value", None) or p.count
        return out


class LosesFirstRace(MemoryStore):
    """Answers the first conditional PUT of each key with 412, as a store does when another
    writer got there first, without changing the object (the loop reads it back and retries)."""

    def __init__(self) -> None:
        super().__init__()
        self.lost: set[str] = set()

    def put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        if (if_match is not None or if_none_match) and key not in self.lost:
            self.lost.add(key)
            raise PreconditionFailedError(key, "HTTP 412")
        return super().put(key, body, if_match=if_match, if_none_match=if_none_match)
