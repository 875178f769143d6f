"""A cascade: rules, then embeddings, then (optionally) a model that decides what is left.

Each stage only sees what the cheaper, more certain stage before it could not decide. The
decision records which stage answered (``method``) and keeps the semantic scores even when a
later stage decided, so the audit trail shows how close the call was.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage

from langgraph_handoff.errors import InvalidRouteError
from langgraph_handoff.routing.decision import Route, RouteDecision
from langgraph_handoff.routing.rules import Rule, RuleRouter
from langgraph_handoff.routing.semantic import SemanticRouter
from langgraph_handoff.routing.text import require_text

Decider = Callable[[str, Sequence[Route]], "str | None"]


class LLMDecider:
    """Ask a chat model to pick a route by name, or ``none``. Used as :class:`HybridRouter`'s last stage.

    The model sees each route's name and description and must answer with one name; anything else
    counts as "none" (so a chatty or confused model falls back instead of misrouting).

    >>> from langgraph_handoff.testing import ScriptedChatModel
    >>> decider = LLMDecider(ScriptedChatModel(["orders"]))
    >>> decider("I never got my parcel", [Route("orders", "order status"), Route("tech", "broken devices")])
    'orders'
    """

    def __init__(self, model: BaseChatModel, *, instructions: str | None = None):
        self.model = model
        self.instructions = instructions or (
            "You route customer messages. Answer with exactly one route name from the list, "
            "or 'none' if no route fits. Answer with the name only."
        )

    def _messages(self, text: str, routes: Sequence[Route]) -> list[Any]:
        listing = "\n".join(f"- {r.name}: {r.description or ', '.join(r.examples[:3])}" for r in routes)
        return [SystemMessage(f"{self.instructions}\n\nRoutes:\n{listing}"), HumanMessage(text)]

    @staticmethod
    def _parse(answer: Any, routes: Sequence[Route]) -> str | None:
        content = answer.content if hasattr(answer, "content") else answer
        names = {r.name.casefold(): r.name for r in routes}
        whole = str(content).strip().strip("\"'`.!*").strip().casefold()
        if whole in names:  # names may hold spaces or dots ("after sales")
            return names[whole]
        words = re.findall(r"[\w-]+", whole)
        if len(words) == 1 and words[0] in names:
            return names[words[0]]
        return None

    def __call__(self, text: str, routes: Sequence[Route]) -> str | None:
        return self._parse(self.model.invoke(self._messages(text, routes)), routes)

    async def acall(self, text: str, routes: Sequence[Route]) -> str | None:
        return self._parse(await self.model.ainvoke(self._messages(text, routes)), routes)


class HybridRouter:
    """Rules first, then the semantic router, then an optional ``decider`` for what is still open.

    ``decider`` is an :class:`LLMDecider`, or any callable ``(text, routes) -> route name | None``
    (a classifier, a ``langchain_core.decisions`` model wrapped in a function, ...).

    >>> semantic = SemanticRouter([Route("orders", examples=["where is my order", "track my parcel"]),
    ...                            Route("tech", examples=["app keeps crashing", "wifi will not connect"])],
    ...                           threshold=0.2)
    >>> router = HybridRouter(rules=[Rule("human", commands=["human"])], semantic=semantic, fallback="human")
    >>> [router.route(t).method for t in ["human please, where is my order", "track my order", "what a lovely sunny afternoon"]]
    ['rule', 'semantic', 'fallback']
    """

    def __init__(
        self,
        *,
        rules: RuleRouter | Sequence[Rule] | None = None,
        semantic: SemanticRouter | None = None,
        decider: Decider | LLMDecider | None = None,
        fallback: str | None = None,
    ):
        if rules is None and semantic is None and decider is None:
            raise InvalidRouteError("a HybridRouter needs at least one of rules, semantic or decider")
        if fallback is not None and not isinstance(fallback, str):
            raise InvalidRouteError(f"fallback must be a route name (str) or None, got {type(fallback).__name__}")
        self.rules = rules if isinstance(rules, RuleRouter) or rules is None else RuleRouter(rules)
        self.semantic = semantic
        self.decider = decider
        self.fallback = fallback if fallback is not None else (semantic.fallback if semantic else None)

    @property
    def routes(self) -> list[Route]:
        return (
            list(self.semantic.routes)
            if self.semantic
            else [Route(t) for t in (self.rules.targets if self.rules else [])]
        )

    def _after_semantic(self, decision: RouteDecision | None) -> RouteDecision | None:
        if decision is None or decision.is_fallback:
            return None
        return decision

    def _from_decider(self, choice: str | None, semantic: RouteDecision | None) -> RouteDecision:
        names = {r.name for r in self.routes}
        scores = semantic.scores if semantic else {}
        if choice is not None and choice in names:
            return RouteDecision(
                target=choice,
                score=scores.get(choice, 0.0),
                scores=scores,
                method="llm",
                reason=f"decider chose {choice!r}" + (f" after: {semantic.reason}" if semantic else ""),
            )
        return self._fallback(semantic, f"decider answered {choice!r}")

    def _fallback(self, semantic: RouteDecision | None, why: str) -> RouteDecision:
        reason = "; ".join(x for x in ["no rule matched", semantic.reason if semantic else "", why] if x)
        return RouteDecision(
            target=self.fallback,
            score=semantic.score if semantic else 0.0,
            scores=semantic.scores if semantic else {},
            method="fallback",
            reason=reason,
            threshold=semantic.threshold if semantic else None,
            margin=semantic.margin if semantic else None,
        )

    def route(self, text: str) -> RouteDecision:
        require_text(text)
        if self.rules and (hit := self.rules.match(text)):
            return hit
        semantic = self.semantic.route(text) if self.semantic else None
        if (accepted := self._after_semantic(semantic)) is not None:
            return accepted
        if self.decider is not None:
            return self._from_decider(self.decider(text, self.routes), semantic)
        return self._fallback(semantic, "")

    async def aroute(self, text: str) -> RouteDecision:
        require_text(text)
        if self.rules and (hit := self.rules.match(text)):
            return hit
        semantic = await self.semantic.aroute(text) if self.semantic else None
        if (accepted := self._after_semantic(semantic)) is not None:
            return accepted
        if self.decider is not None:
            acall: Callable[[str, Sequence[Route]], Awaitable[str | None]] | None = getattr(self.decider, "acall", None)
            if acall is not None:
                choice = await acall(text, self.routes)
            else:
                choice = await asyncio.to_thread(self.decider, text, self.routes)
            return self._from_decider(choice, semantic)
        return self._fallback(semantic, "")
