"""The briefing check: does a handoff's briefing say enough, and about the target's work?

A model hands off with a briefing the receiver reads first. A briefing of one character, or one
about a topic the target does not handle, costs the receiver a turn of guessing (or sends the
customer to the wrong team). So before the router executes a handoff an agent asked for:

1. **Length.** The briefing has at least ``min_chars`` characters (default 50: about one
   sentence of what is known and what to do next).
2. **Keywords.** The briefing and reason mention one of the target's own terms: words (and
   Chinese character pairs, Hebrew words without their one-letter prefixes) from its
   description, its routes' examples and any ``keywords`` given, minus every term another
   agent's texts also use. A term all desks share ("order", "customer") says nothing about
   which desk is meant.
3. **Meaning, only when no keyword matched.** The router's semantic scores for the briefing:
   it passes unless another route clearly scores higher (by more than ``slack`` times the
   router's spread). This passes paraphrases the keyword list cannot know, and catches a
   briefing that reads like another desk's work. Without a semantic router, this step is skipped and a keyword miss fails.

A target with no terms at all (no description, no examples, no keywords) is not checked past
the length: there is nothing to check against.

What happens on failure is ``on_fail``: ``"retry"`` (the default) gives the model the refusal
and another go, like any refused handoff, and sends the conversation to the fallback when the
retries are used up; ``"warn"`` hands off anyway, logs a WARNING and forces an audit of the
handoff; ``"fallback"`` trips the breaker at once.

Measured on the support-desk data (``bench/briefing_check.py``): see docs/handoffs.md.

>>> from langgraph_handoff.handoff.agents import HandoffAgent
>>> check = BriefingCheck(min_chars=20).bind(
...     [HandoffAgent("orders", None, description="order tracking, delivery, invoices"),
...      HandoffAgent("returns", None, description="refunds, returns and damaged items")], router=None)
>>> check.verdict("orders", "x", "").ok
False
>>> v = check.verdict("returns", "Customer wants a refund for the damaged lamp", "")
>>> v.ok, v.by, v.matched
(True, 'keyword', ('damaged', 'refund'))
>>> check.verdict("orders", "Customer wants a refund for the damaged lamp", "").reason
"the briefing mentions nothing 'orders' handles (no keyword matched, and there is no semantic router to ask)"
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langgraph_handoff.errors import InvalidHandoffError
from langgraph_handoff.routing.text import normalize

__all__ = ["BriefingCheck", "BriefingVerdict"]

OnFail = Literal["retry", "warn", "fallback"]

_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+")
_WORD = re.compile(r"[^\W\d_]+")
_HEBREW_PREFIX = "ובכלמשה"
_SUFFIXES = ("ing", "ed", "es", "s")


def _variants(word: str) -> Iterable[str]:
    """A word and the forms it is matched under: without a plural or tense ending (Latin
    script), without up to two one-letter prefixes (Hebrew)."""
    if "\u05d0" <= word[0] <= "\u05ea":
        yield word
        for cut in (1, 2):
            if len(word) - cut >= 2 and all(c in _HEBREW_PREFIX for c in word[:cut]):
                yield word[cut:]
        return
    if len(word) < 3:
        return
    yield word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            yield word[: -len(suffix)]
            break


def weighed_length(text: str) -> int:
    """The length of ``text`` in Latin-script characters: a Chinese or Japanese character counts
    three, a Korean syllable two (about the letters of the word or syllable it stands for), so a
    minimum length asks as much of a briefing in every language.

    >>> weighed_length("refund"), weighed_length("退货")
    (6, 6)
    """
    size = 0
    for ch in text.strip():
        if "\uac00" <= ch <= "\ud7af":
            size += 2
        elif _CJK_RUN.match(ch):
            size += 3
        else:
            size += 1
    return size


def _units(text: str) -> Iterable[tuple[str, Iterable[str]]]:
    """Each word (or CJK character pair) of ``text`` with the terms it is matched under."""
    norm = normalize(text)
    for run in _CJK_RUN.findall(norm):
        for i in range(max(1, len(run) - 1)):
            yield run[i : i + 2], (run[i : i + 2],)
    for word in _WORD.findall(_CJK_RUN.sub(" ", norm)):
        yield word, tuple(_variants(word))


def terms(text: str) -> set[str]:
    """The terms of ``text`` a keyword check compares: normalised words of three letters or more
    (and their stems), Hebrew words with and without their prefixes, and Chinese, Japanese or
    Korean character pairs (those scripts write no spaces, and a pair is about a word).

    >>> sorted(terms("Refunds for 退货 לנציג"))
    ['for', 'refund', 'refunds', 'לנציג', 'נציג', '退货']
    """
    return {t for _, forms in _units(text) for t in forms}


def matches(text: str, wanted: frozenset[str]) -> tuple[str, ...]:
    """The words of ``text`` (as written, normalised) that are among ``wanted``'s terms."""
    return tuple(sorted({unit for unit, forms in _units(text) if any(f in wanted for f in forms)}))


@dataclass(frozen=True)
class BriefingVerdict:
    """What the check said of one handoff's briefing: ``ok``, ``by`` which step
    (``length``, ``keyword``, ``semantic`` or ``unchecked``), why, the target's terms the
    briefing used, and the semantic scores when they were asked for."""

    ok: bool
    by: Literal["length", "keyword", "semantic", "unchecked"]
    reason: str = ""
    matched: tuple[str, ...] = ()
    scores: Mapping[str, float] | None = None

    def as_record(self) -> dict[str, Any]:
        """JSON-ready, as it is kept on the handoff record and in an audit record."""
        out: dict[str, Any] = {"ok": self.ok, "by": self.by, "reason": self.reason, "matched": list(self.matched)}
        if self.scores is not None:
            out["scores"] = dict(self.scores)
        return out


@dataclass(frozen=True)
class BriefingCheck:
    """Check the briefing of every handoff an agent asks for, before the router executes it.

    ``min_chars``: the shortest briefing accepted. ``keywords``: more terms per target
    (``{"orders": ["parcel", "包裹"]}``), kept even when another target uses them too.
    ``semantic``: ask the router's semantic scores when no keyword matched; the briefing passes
    when the target scores within ``slack`` times the router's spread (its unit of confidence,
    :attr:`~langgraph_handoff.routing.SemanticRouter.spread`) of the best route. Less slack
    catches more wrong handoffs and refuses more good ones (the table in docs/handoffs.md).
    ``on_fail``:
    ``"retry"``, ``"warn"`` or ``"fallback"`` (see the module docs). Pass it as
    ``create_handoff_graph(..., briefing_check=BriefingCheck())``.
    """

    min_chars: int = 50
    keywords: Mapping[str, Sequence[str]] | None = None
    semantic: bool = True
    slack: float = 2.0
    on_fail: OnFail = "retry"

    def __post_init__(self) -> None:
        if isinstance(self.min_chars, bool) or not isinstance(self.min_chars, int) or self.min_chars < 0:
            raise InvalidHandoffError(f"BriefingCheck min_chars must be an int >= 0, got {self.min_chars!r}")
        if self.on_fail not in ("retry", "warn", "fallback"):
            raise InvalidHandoffError(
                f"BriefingCheck on_fail must be 'retry', 'warn' or 'fallback', got {self.on_fail!r}"
            )
        if isinstance(self.slack, bool) or not isinstance(self.slack, int | float) or self.slack < 0:
            raise InvalidHandoffError(f"BriefingCheck slack must be a number >= 0, got {self.slack!r}")
        if self.keywords is not None and not isinstance(self.keywords, Mapping):
            raise InvalidHandoffError("BriefingCheck keywords must be a {target: [terms]} mapping")

    def bind(self, agents: Sequence[Any], router: Any) -> BoundCheck:
        """The check for one graph: each agent's terms, and the semantic router to ask."""
        described = {a.name: terms(a.description or "") for a in agents}
        texts: dict[str, set[str]] = {a.name: set() for a in agents}
        for route in _routes_of(router):
            if route.name in texts:
                texts[route.name].update(t for t in (route.description, *route.examples) if t)
        examples = {
            name: [terms(t) for t in sorted(ts - {a.description for a in agents if a.name == name})]
            for name, ts in texts.items()
        }
        unknown = sorted(set(self.keywords or {}) - set(described))
        if unknown:
            raise InvalidHandoffError(
                f"BriefingCheck keywords name unknown agents {unknown}; agents are {sorted(described)}"
            )
        own: dict[str, set[str]] = {}
        for name, docs in examples.items():
            seen = Counter(t for doc in [described[name], *docs] for t in doc)
            # a term of one text only ("this" in one example) is as likely chance as topic
            own[name] = {t for t, n in seen.items() if n >= 2} if docs else set(described[name])
        everywhere = {name: described[name].union(*examples[name]) for name in described}
        keywords = {}
        for name, mine in own.items():
            others = set().union(*(t for n, t in everywhere.items() if n != name))
            given = set().union(*(terms(k) for k in (self.keywords or {}).get(name, ())))
            keywords[name] = frozenset((mine - others) | given)
        return BoundCheck(self, keywords, _semantic_of(router) if self.semantic else None)


def _routes_of(router: Any) -> list[Any]:
    routes = getattr(router, "routes", None)
    return list(routes) if isinstance(routes, list | tuple) else []


def _semantic_of(router: Any) -> Any:
    """The semantic router inside ``router`` (itself, or a hybrid's semantic stage), if any."""
    for candidate in (router, getattr(router, "semantic", None)):
        if candidate is not None and hasattr(candidate, "scores") and hasattr(candidate, "_scores_for"):
            return candidate
    return None


@dataclass(frozen=True)
class BoundCheck:
    """A :class:`BriefingCheck` bound to one graph's agents and router (built once)."""

    check: BriefingCheck
    keywords: Mapping[str, frozenset[str]]
    semantic: Any = field(default=None)

    def _first(self, target: str, briefing: str, reason: str) -> BriefingVerdict | None:
        """The verdict of the steps that need no encoder, or None when meaning must decide."""
        size = weighed_length(briefing)
        if size < self.check.min_chars:
            return BriefingVerdict(
                False,
                "length",
                f"the briefing is too short ({size} of {self.check.min_chars} characters); write "
                "what the customer needs, what is known and what the receiver should do next",
            )
        wanted = self.keywords.get(target) or frozenset()
        if not wanted:
            return BriefingVerdict(True, "unchecked", f"{target!r} has no description or examples to check against")
        hits = matches(f"{briefing} {reason}", wanted)
        if hits:
            return BriefingVerdict(True, "keyword", matched=hits)
        if self.semantic is None:
            return BriefingVerdict(
                False,
                "keyword",
                f"the briefing mentions nothing {target!r} handles (no keyword matched, and there is no semantic "
                "router to ask)",
            )
        return None

    def _judge(self, target: str, scores: Mapping[str, float]) -> BriefingVerdict:
        shown = {k: round(float(v), 4) for k, v in scores.items()}
        if not scores:
            return BriefingVerdict(True, "unchecked", "the semantic router gave no scores", scores=shown)
        best = max(scores, key=lambda k: scores[k])
        mine = float(scores.get(target, 0.0))
        behind = float(scores[best]) - mine
        allowed = self.check.slack * float(getattr(self.semantic, "spread", 0.0) or 0.0)
        if behind <= allowed:
            return BriefingVerdict(
                True, "semantic", f"{target!r} scores {mine:.3f}, {behind:.3f} behind the best ({allowed:.3f} allowed)",
                scores=shown,
            )  # fmt: skip
        return BriefingVerdict(
            False,
            "semantic",
            f"the briefing mentions nothing {target!r} handles and reads like work for {best!r} ({best} {scores[best]:.3f}, "
            f"{target} {mine:.3f})",
            scores=shown,
        )

    def verdict(self, target: str, briefing: str, reason: str = "") -> BriefingVerdict:
        """The check of one handoff to ``target`` (the semantic step runs its encoder here)."""
        first = self._first(target, briefing, reason)
        if first is not None:
            return first
        return self._judge(target, self.semantic.scores(f"{briefing} {reason}".strip()))

    async def averdict(self, target: str, briefing: str, reason: str = "") -> BriefingVerdict:
        """:meth:`verdict` for the async path: an encoder that calls a service is awaited."""
        first = self._first(target, briefing, reason)
        if first is not None:
            return first
        text = f"{briefing} {reason}".strip()
        encoder = self.semantic.encoder
        if hasattr(encoder, "aencode_query"):
            return self._judge(target, self.semantic._scores_for(await encoder.aencode_query(text)))
        return self._judge(target, self.semantic.scores(text))
