from __future__ import annotations

from collections.abc import Iterator

import pytest

from langgraph_handoff import telemetry
from tests.support.otel import Otel


@pytest.fixture
def otel() -> Iterator[Otel]:
    o = Otel()
    telemetry.configure(enabled=True, tracer_provider=o.tracer_provider, meter_provider=o.meter_provider)
    try:
        yield o
    finally:
        telemetry.configure(enabled=True, capture_content=False)
