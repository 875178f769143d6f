"""Telemetry into real backends, both started by scripts/test: the story of one conversation
(examples/telemetry_story.py: a handoff chain, a planned transfer, a takeover, a ping-pong
breaker and a team delegation) sends its traces over OTLP/HTTP to Arize Phoenix and serves its
metrics on the OpenTelemetry Prometheus exporter, which a real Prometheus scrapes.

Phoenix keeps no span links (its span model has none), so the links are checked on the same
spans as they left the process (an in-memory exporter beside the OTLP one), and against Phoenix
only that every span they name arrived there."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import start_http_server

from conftest import need_phoenix, need_prometheus
from langgraph_handoff import telemetry
from tests.support.telemetry_story import ROOT, StorySpans, load_story

T = TypeVar("T")
#: how long a backend may take to show what it was sent (Phoenix inserts in batches, Prometheus
#: scrapes every second): a bound on the polls below, not a wait
DEADLINE = 60.0


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def poll(what: str, fetch: Callable[[], T], done: Callable[[T], bool]) -> T:
    """``fetch()`` until ``done`` says it is complete, or fail at the deadline with the last answer."""
    deadline = time.monotonic() + DEADLINE
    while True:
        got = fetch()
        if done(got):
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not there after {DEADLINE:.0f} s; the last answer: {got!r}")
        time.sleep(0.25)


def phoenix_spans(phoenix: str, project: str) -> list[dict[str, Any]]:
    """Every span of ``project`` in Phoenix (its REST API, paged)."""
    out: list[dict[str, Any]] = []
    cursor = None
    while True:
        query = {"limit": "1000", **({"cursor": cursor} if cursor else {})}
        url = f"{phoenix}/v1/projects/{project}/spans?{urllib.parse.urlencode(query)}"
        try:
            page = get_json(url)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:  # the project appears with its first span
                return []
            raise
        out += page["data"]
        cursor = page.get("next_cursor")
        if not cursor:
            return out


def prometheus_values(prometheus: str, promql: str) -> dict[tuple[str, ...], float]:
    """An instant query's series: the values of the labels the query names -> value."""
    answer = get_json(f"{prometheus}/api/v1/query?{urllib.parse.urlencode({'query': promql})}")
    assert answer["status"] == "success", answer
    out = {}
    for series in answer["data"]["result"]:
        labels = series["metric"]
        key = tuple(v for k, v in sorted(labels.items()) if k.startswith(("langgraph_handoff_", "gen_ai_")))
        out[key] = float(series["value"][1])
    return out


def test_the_story_reaches_phoenix_and_prometheus() -> None:
    phoenix = need_phoenix()
    prometheus, scrape_port = need_prometheus()
    project = f"lgh-test-{uuid.uuid4().hex[:8]}"  # Phoenix's project: the resource names it
    resource = Resource.create({"service.name": "support-desk", "openinference.project.name": project})
    sent = InMemorySpanExporter()
    tracer = TracerProvider(resource=resource)
    tracer.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{phoenix}/v1/traces")))
    tracer.add_span_processor(SimpleSpanProcessor(sent))
    meter = MeterProvider(resource=resource, metric_readers=[PrometheusMetricReader()])
    server, thread = start_http_server(scrape_port, addr="127.0.0.1")
    telemetry.configure(enabled=True, tracer_provider=tracer, meter_provider=meter)
    try:
        story = load_story().run()
        assert tracer.force_flush(30_000), "the OTLP exporter did not send every span"
        assert story.clerk_turns == 1

        # -- traces: every span arrived in Phoenix, one trace, in the shape the story has
        finished = list(sent.get_finished_spans())
        received = poll(
            f"{len(finished)} spans in Phoenix project {project}",
            lambda: phoenix_spans(phoenix, project),
            lambda got: len(got) >= len(finished),
        )
        told = StorySpans(
            [
                (s["name"], s["context"]["span_id"], s["parent_id"], s["context"]["trace_id"], s["attributes"])
                for s in received
            ]
        )
        assert sorted(s[0] for s in told.spans) == sorted(s.name for s in finished)
        told.check_shape("customer-42")
        # Phoenix reads gen_ai.conversation.id as its session: the conversation is one session there
        assert told.find("session takeover")[4]["session.id"] == "customer-42"
        linked = {format(link.context.span_id, "016x") for s in finished for link in s.links}
        assert len(linked) >= 4 and linked <= set(told.by_id)  # every span a link names is in Phoenix

        # -- metrics: Prometheus scraped the exporter; the counts are the story's. A scrape is
        # one moment: wait for one taken after the story's last event (the clerk's ingest)
        queries = {
            "handoffs": "langgraph_handoff_handoffs_total",  # source, target, trigger
            "trips": "langgraph_handoff_breaker_trips_total",  # kind, outcome
            "puts": 'langgraph_handoff_checkpoint_operation_duration_seconds_count{gen_ai_operation_name="put"}',
            "changes": "langgraph_handoff_session_changes_total",  # via
            "team": "langgraph_handoff_team_messages_total",  # event
        }
        got = poll(
            "the story's metrics in Prometheus",
            lambda: {name: prometheus_values(prometheus, promql) for name, promql in queries.items()},
            lambda got: got["team"].get(("ingested",)) == 1.0,
        )
        assert got["handoffs"] == {
            ("tech", "after_sales", "tool"): 1.0,
            ("after_sales", "billing", "tool"): 1.0,
            ("billing", "after_sales", "tool"): 1.0,
            ("after_sales", "back_office", "breaker"): 1.0,
        }
        assert got["trips"] == {("ping_pong", "fallback"): 1.0}
        assert len(got["puts"]) == 1 and next(iter(got["puts"].values())) > 0
        assert got["changes"][("takeover",)] == 1.0 and got["changes"][("accept",)] == 1.0
        assert got["team"] == {("ingested",): 1.0, ("sent",): 1.0}
    finally:
        telemetry.configure(enabled=True, capture_content=False)
        server.shutdown()
        thread.join(10)
        meter.shutdown()  # unregisters the reader from prometheus_client's registry
        tracer.shutdown()


def test_the_example_the_docs_run_sends_the_story_to_phoenix() -> None:
    """docs/observability.md, "Try it yourself": the command as written, to a real Phoenix. It
    leaves the checkpoint spans out (``--all-spans`` keeps them), the rest arrives as one trace."""
    phoenix = need_phoenix()
    project = f"lgh-example-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    story = [str(ROOT / "examples" / "telemetry_story.py"), "--otlp", f"{phoenix}/v1/traces", "--project", project]
    run = subprocess.run([sys.executable, *story], capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "desk: A back-office clerk is finishing your refund today." in run.stdout
    said = re.search(r"^(\d+) spans sent to ", run.stdout, re.M)
    assert said, run.stdout
    sent = int(said.group(1))
    received = poll(
        f"{sent} spans in Phoenix project {project}",
        lambda: phoenix_spans(phoenix, project),
        lambda got: len(got) >= sent,
    )
    assert len(received) == sent and not [s for s in received if s["name"].startswith("checkpoint ")]
    told = StorySpans(
        [
            (s["name"], s["context"]["span_id"], s["parent_id"], s["context"]["trace_id"], s["attributes"])
            for s in received
        ]
    )
    told.check_shape("customer-42")
