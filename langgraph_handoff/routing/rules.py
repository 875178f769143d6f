"""Deterministic routing: keywords, regular expressions and explicit commands.

Rules run before anything statistical because some requests must never be second-guessed:
"transfer me to a human" goes to a human even if it also mentions a refund. The first rule that
matches wins, in the order given.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from langgraph_handoff.errors import InvalidRouteError
from langgraph_handoff.routing.decision import RouteDecision
from langgraph_handoff.routing.text import has_cjk, has_hebrew, normalize, require_strings, require_text

# Hebrew attaches one-letter words to the next word: "לנציג" is "to a representative".
_HEBREW_PREFIXES = "[ובכלמשה]{0,3}"


def _keyword_pattern(keyword: str) -> re.Pattern[str]:
    kw = normalize(keyword)
    if not kw:
        raise InvalidRouteError("rule keywords and commands must not be empty")
    escaped = re.escape(kw).replace(r"\ ", r"\s+")
    if has_cjk(kw):
        return re.compile(escaped)  # no spaces between words: substring match
    prefix = _HEBREW_PREFIXES if has_hebrew(kw[0]) else ""
    return re.compile(rf"(?<!\w){prefix}{escaped}(?!\w)")


@dataclass(frozen=True)
class Rule:
    """Send a message to ``target`` when it contains one of ``keywords`` (whole words, any case,
    accents ignored; substrings for Chinese/Japanese/Korean), matches one of ``patterns`` (regular
    expressions on the normalised text), or contains one of ``commands`` (whole phrases).

    >>> Rule("human", commands=["talk to a human"]).matches("Please let me TALK to a  human!")
    'command: talk to a human'
    """

    target: str
    keywords: Sequence[str] = ()
    patterns: Sequence[str] = ()
    commands: Sequence[str] = ()
    _compiled: tuple[tuple[str, re.Pattern[str]], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.target, str) or not self.target:
            raise InvalidRouteError("a rule needs a target (an agent or route name)")
        for what in ("keywords", "patterns", "commands"):
            object.__setattr__(self, what, require_strings(getattr(self, what), f"rule {what}"))
        compiled: list[tuple[str, re.Pattern[str]]] = []
        for cmd in self.commands:
            compiled.append((f"command: {cmd}", _keyword_pattern(cmd)))
        for kw in self.keywords:
            compiled.append((f"keyword: {kw}", _keyword_pattern(kw)))
        for pat in self.patterns:
            try:
                compiled.append((f"pattern: {pat}", re.compile(pat, re.IGNORECASE)))
            except re.error as exc:
                raise InvalidRouteError(f"rule for {self.target!r}: bad regular expression {pat!r}: {exc}") from exc
        if not compiled:
            raise InvalidRouteError(f"rule for {self.target!r} has no keywords, patterns or commands")
        object.__setattr__(self, "_compiled", tuple(compiled))

    def matches(self, text: str) -> str | None:
        """What matched (for the decision's ``reason``), or ``None``."""
        norm = normalize(require_text(text))
        for label, pattern in self._compiled:
            if pattern.search(norm):
                return label
        return None


class RuleRouter:
    """Route by the first matching :class:`Rule`; otherwise return the ``fallback``.

    >>> router = RuleRouter([Rule("human", commands=["human", "representative", "人工", "נציג"])], fallback="triage")
    >>> router.route("I want a human").target, router.route("我要转人工").target, router.route("תעביר אותי לנציג").target
    ('human', 'human', 'human')
    >>> d = router.route("where is my order")
    >>> d.target, d.method
    ('triage', 'fallback')
    """

    def __init__(self, rules: Sequence[Rule], *, fallback: str | None = None):
        self.rules = list(rules)
        if fallback is not None and not isinstance(fallback, str):
            raise InvalidRouteError(f"fallback must be a route name (str) or None, got {type(fallback).__name__}")
        self.fallback = fallback

    @property
    def targets(self) -> list[str]:
        return list(dict.fromkeys(r.target for r in self.rules))

    def match(self, text: str) -> RouteDecision | None:
        """The decision of the first matching rule, or ``None`` (used by :class:`HybridRouter`)."""
        for rule in self.rules:
            hit = rule.matches(text)
            if hit is not None:
                return RouteDecision(
                    target=rule.target, score=1.0, scores={rule.target: 1.0}, method="rule", reason=hit
                )
        return None

    def route(self, text: str) -> RouteDecision:
        return self.match(text) or RouteDecision(
            target=self.fallback, score=0.0, method="fallback", reason="no rule matched"
        )

    async def aroute(self, text: str) -> RouteDecision:
        # regex matching is short and CPU-only: no thread hop needed
        return self.route(text)
