"""examples/telemetry_story.py, loaded for the tests, and what to check of its spans.

The story lives in the example (the docs run it against a real backend); the unit test checks it
against the SDK's in-memory exporter and the integration test against Arize Phoenix, each with
the same checks of the spans' shape below."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def load_story() -> ModuleType:
    """The example as a module (examples/ is not a package)."""
    name = "lgh_telemetry_story"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / "telemetry_story.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while the class is made
        spec.loader.exec_module(module)
    return sys.modules[name]


class StorySpans:
    """The spans of one run of the story, as (name, span id, parent id, attributes) however a
    backend gave them, with the questions the tests ask: who is whose ancestor, on which worker."""

    def __init__(self, spans: list[tuple[str, str, str | None, str, Mapping[str, Any]]]) -> None:
        #: (name, span id, parent span id, trace id, attributes)
        self.spans = spans
        self.by_id = {s[1]: s for s in spans}

    def find(self, name: str, owner: str | None = None) -> tuple[str, str, str | None, str, Mapping[str, Any]]:
        found = [
            s
            for s in self.spans
            if s[0] == name and (owner is None or s[4].get("langgraph_handoff.session.owner") == owner)
        ]
        assert len(found) == 1, f"{len(found)} spans named {name!r} (owner {owner}): {sorted(s[0] for s in self.spans)}"
        return found[0]

    def under(self, span_id: str, ancestor_id: str) -> bool:
        """Is span ``span_id`` inside span ``ancestor_id`` (a descendant of it)?"""
        parent = self.by_id[span_id][2]
        while parent is not None and parent in self.by_id:
            if parent == ancestor_id:
                return True
            parent = self.by_id[parent][2]
        return False

    def turn_of(self, owner: str) -> str:
        return self.find("session turn", owner)[1]

    def check_shape(self, thread: str) -> None:
        """One trace; the handoff chain in worker A's turn, the ping-pong breaker and the
        delegation in worker C's; every span of the desk names the conversation."""
        root = self.find(f"conversation {thread}")
        assert {s[3] for s in self.spans} == {root[3]}, "the story is not one trace"
        a_turn, c_turn = self.turn_of("worker-a"), self.turn_of("worker-c")
        chain = [s for s in self.spans if s[0].startswith("handoff ") and self.under(s[1], a_turn)]
        assert sorted(s[4]["langgraph_handoff.handoff.chain"] for s in chain) == [
            "tech -> after_sales",
            "tech -> after_sales -> billing",
        ]
        breaker = self.find("breaker")
        assert self.under(breaker[1], c_turn) and breaker[4]["langgraph_handoff.breaker.kind"] == "ping_pong"
        assert self.under(self.find("invoke_agent back_office")[1], c_turn)
        desk = [s for s in self.spans if s[0].startswith(("session", "invoke_agent", "handoff", "route", "breaker"))]
        desk = [s for s in desk if s[4].get("langgraph_handoff.session.owner") != "worker-d"]
        assert desk and all(s[4].get("gen_ai.conversation.id") == thread for s in desk)
        clerk = self.find("team.turn clerk")
        assert (
            clerk[4]["langgraph_handoff.team.id"] == "back-office" and clerk[4]["langgraph_handoff.team.messages"] == 1
        )
