"""A cascade: rules, then embeddings, then (optionally) a model that decides what is left.

Each stage only sees what the cheaper, more certain stage before it could not decide. The
decision records which stage answered (``method``) and keeps the semantic scores even when a
later stage decided, so the audit trail shows how close the call was.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage

from langgraph_handoff.errors import InvalidRouteError
from langgraph_handoff.routing.close_calls import CloseCallSink, acollect, collect
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
    (a classifier, a model wrapped in a function, a function that asks the customer a
    clarifying question, ...). Which semantic decisions it sees is ``ask``:

    - ``"uncertain"`` (the default): only those the semantic router marked
      :attr:`~RouteDecision.uncertain`, accepted or rejected, i.e. near a threshold or with two
      routes neck and neck. Confident acceptances and confident rejections never cost a model call.
    - ``"unmatched"``: every message the semantic router did not accept (also confident rejections,
      such as most off-topic ones), and the uncertain acceptances.

    ``close_calls``: a sink for the messages whose semantic scores were close
    (:mod:`~langgraph_handoff.routing.close_calls`), recorded with the final decision (the
    decider's choice, say); give it to this router, not also to its semantic stage.

    Without a semantic stage the decider sees everything the rules did not match. :attr:`counts`
    records how many messages each stage decided and how many went to the decider
    (:attr:`decider_share`), so you see what the band costs in model calls.

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
        ask: Literal["uncertain", "unmatched"] = "uncertain",
        close_calls: CloseCallSink | None = None,
    ):
        if rules is None and semantic is None and decider is None:
            raise InvalidRouteError("a HybridRouter needs at least one of rules, semantic or decider")
        if fallback is not None and not isinstance(fallback, str):
            raise InvalidRouteError(f"fallback must be a route name (str) or None, got {type(fallback).__name__}")
        if ask not in ("uncertain", "unmatched"):
            raise InvalidRouteError(f"ask must be 'uncertain' or 'unmatched', got {ask!r}")
        self.rules = rules if isinstance(rules, RuleRouter) or rules is None else RuleRouter(rules)
        self.semantic = semantic
        self.decider = decider
        self.ask = ask
        self.close_calls = close_calls
        self.fallback = fallback if fallback is not None else (semantic.fallback if semantic else None)
        self.counts: Counter[str] = Counter()
        self._counts_lock = threading.Lock()

    def _count(self, *keys: str) -> None:
        with self._counts_lock:
            self.counts.update(keys)

    @property
    def decider_share(self) -> float:
        """The fraction of routed messages that went to the decider (0.0 before any).

        >>> r = HybridRouter(rules=[Rule("human", commands=["human"])], decider=lambda text, routes: None)
        >>> [r.route(t).method for t in ["human", "hello"]], r.decider_share, dict(r.counts)
        (['rule', 'fallback'], 0.5, {'messages': 2, 'rule': 1, 'decider': 1, 'fallback': 1})
        """
        with self._counts_lock:
            return self.counts["decider"] / self.counts["messages"] if self.counts["messages"] else 0.0

    def reset_counts(self) -> None:
        with self._counts_lock:
            self.counts.clear()

    @property
    def routes(self) -> list[Route]:
        return (
            list(self.semantic.routes)
            if self.semantic
            else [Route(t) for t in (self.rules.targets if self.rules else [])]
        )

    def _after_semantic(self, decision: RouteDecision | None) -> tuple[RouteDecision | None, bool]:
        """``(final decision or None, ask the decider?)`` for a semantic decision."""
        if decision is None:
            return None, self.decider is not None
        if self.decider is None:
            return (None if decision.is_fallback else decision), False
        if decision.uncertain:
            return None, True
        if decision.is_fallback:
            return (None, True) if self.ask == "unmatched" else (None, False)
        return decision, False

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
                decider=True,
            )
        return self._fallback(semantic, f"decider answered {choice!r}", asked=True)

    def _fallback(self, semantic: RouteDecision | None, why: str, *, asked: bool = False) -> RouteDecision:
        reason = "; ".join(x for x in ["no rule matched", semantic.reason if semantic else "", why] if x)
        return RouteDecision(
            target=self.fallback,
            score=semantic.score if semantic else 0.0,
            scores=semantic.scores if semantic else {},
            method="fallback",
            reason=reason,
            threshold=semantic.threshold if semantic else None,
            margin=semantic.margin if semantic else None,
            decider=asked,
        )

    def route(self, text: str) -> RouteDecision:
        require_text(text)
        if self.rules and (hit := self.rules.match(text)):
            self._count("messages", "rule")
            return hit
        semantic = self.semantic.route(text) if self.semantic else None
        accepted, ask = self._after_semantic(semantic)
        if accepted is not None:
            self._count("messages", "semantic")
            collect(self.close_calls, text, semantic, accepted)
            return accepted
        if ask and self.decider is not None:
            self._count("messages", "decider")
            decision = self._from_decider(self.decider(text, self.routes), semantic)
        else:
            self._count("messages")
            decision = self._fallback(semantic, "confident: not asking the decider" if self.decider else "")
        self._count(decision.method)
        collect(self.close_calls, text, semantic, decision)
        return decision

    async def aroute(self, text: str) -> RouteDecision:
        require_text(text)
        if self.rules and (hit := self.rules.match(text)):
            self._count("messages", "rule")
            return hit
        semantic = await self.semantic.aroute(text) if self.semantic else None
        accepted, ask = self._after_semantic(semantic)
        if accepted is not None:
            self._count("messages", "semantic")
            await acollect(self.close_calls, text, semantic, accepted)
            return accepted
        if ask and self.decider is not None:
            self._count("messages", "decider")
            acall: Callable[[str, Sequence[Route]], Awaitable[str | None]] | None = getattr(self.decider, "acall", None)
            if acall is not None:
                choice = await acall(text, self.routes)
            else:
                choice = await asyncio.to_thread(self.decider, text, self.routes)
            decision = self._from_decider(choice, semantic)
        else:
            self._count("messages")
            decision = self._fallback(semantic, "confident: not asking the decider" if self.decider else "")
        self._count(decision.method)
        await acollect(self.close_calls, text, semantic, decision)
        return decision
