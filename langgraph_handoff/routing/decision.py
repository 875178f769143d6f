"""The data a router works on: ``Route`` (what it can choose) and ``RouteDecision`` (what it chose).

Both are pydantic models so a decision can be stored in graph state, survive LangGraph's
serializer, be logged as JSON and be compared in tests.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator

from langgraph_handoff._model import Model
from langgraph_handoff.errors import InvalidRouteError
from langgraph_handoff.routing.text import require_strings

Method = Literal["rule", "semantic", "llm", "fallback", "sticky"]


class Route(Model):
    """One destination a router can pick, usually an agent.

    ``examples`` are in-language sample requests (the semantic router's index); ``description``
    is what an LLM stage and a handoff tool show the model.

    >>> Route(name="orders", examples=["where is my parcel"]).name
    'orders'
    """

    model_config = ConfigDict(frozen=True)
    invalid_error = InvalidRouteError

    name: str
    description: str = ""
    examples: tuple[str, ...] = ()

    def __init__(
        self, name: str | None = None, description: str = "", examples: tuple[str, ...] | list[str] = (), **kw: Any
    ) -> None:
        # positional ``Route("orders", "desc", [...])`` as well as keywords
        if name is not None:
            kw["name"] = name
        super().__init__(description=description, examples=require_strings(examples, "route examples"), **kw)

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        if not v or not v.strip():
            raise ValueError("a route needs a non-empty name")
        return v


class RouteDecision(Model):
    """Where a router sends a message, and the evidence.

    - ``target``: the chosen route, or the router's fallback when nothing was confident enough
      (then ``method == "fallback"`` and ``reason`` says which test failed). It is ``None`` only
      when the router has no fallback configured.
    - ``score``: the winning route's score (1.0 for a rule hit).
    - ``scores``: every route's score, so a rejected decision still shows how close it was.
    - ``method``: which stage decided: ``rule``, ``semantic``, ``llm``, ``fallback`` or ``sticky``
      (the conversation stayed with its active agent).
    - ``uncertain``: the semantic scores were close to a decision boundary (the threshold, or the
      second route within the margin), so this decision, accepted or not, is a coin toss.
      :class:`~langgraph_handoff.routing.hybrid.HybridRouter` asks its decider about exactly these.
    - ``decider``: a hybrid router asked its decider (an LLM call, say) for this decision,
      whatever it answered.

    >>> d = RouteDecision(target="orders", score=0.42, scores={"orders": 0.42, "tech": 0.1}, method="semantic")
    >>> d.matched
    'orders'
    """

    model_config = ConfigDict(frozen=True)
    invalid_error = InvalidRouteError

    target: str | None
    score: float = 0.0
    scores: dict[str, float] = Field(default_factory=dict)
    method: Method
    reason: str = ""
    threshold: float | None = None
    margin: float | None = None
    uncertain: bool = False
    decider: bool = False

    @property
    def is_fallback(self) -> bool:
        """True when no route was confident enough and ``target`` is the fallback."""
        return self.method == "fallback"

    @property
    def matched(self) -> str | None:
        """The route that matched, or ``None`` for a fallback decision (what ``evaluate`` scores)."""
        return None if self.is_fallback else self.target

    def best(self) -> tuple[str | None, float]:
        """The highest-scoring route and its score, whether or not it was accepted."""
        if not self.scores:
            return None, 0.0
        name = max(self.scores, key=lambda k: self.scores[k])
        return name, self.scores[name]
