"""Embedding-similarity routing with per-route thresholds, a top-1/top-2 margin and calibration.

A route's score is the highest cosine between the message and any of the route's examples
("max-similarity"): one close example is better evidence than many loose ones, and unlike a mean
or a sum it does not favour routes that simply have more examples.

Raw cosines are low and depend on the encoder (0.2-0.4 for a correct route is normal), so there
is no fixed 0.8 threshold. Without explicit thresholds each route calibrates its own from its
examples (leave-one-out, see :meth:`SemanticRouter.auto_thresholds`); ``fit`` then tunes
thresholds and the margin on labelled messages, including off-topic ones labelled ``None``.
"""

from __future__ import annotations

import itertools
import logging
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph_handoff.errors import InvalidRouteError
from langgraph_handoff.routing.decision import Method, Route, RouteDecision
from langgraph_handoff.routing.encoders import Vector, as_encoder, cosine
from langgraph_handoff.routing.text import require_text

logger = logging.getLogger("langgraph_handoff.routing")

Labelled = Iterable[tuple[str, str | None]]

# Leave-one-out calibration: a route accepts a message scoring at least this fraction of the
# similarity its own examples have to each other (their lower quartile). Chosen on bench/routing.py
# data for the default encoder; ``fit`` replaces it with thresholds tuned on labelled messages.
AUTO_THRESHOLD_FACTOR = 0.8


@dataclass(frozen=True)
class FitReport:
    """What :meth:`SemanticRouter.fit` did. Accuracies are on the messages it was fitted on, so
    they are optimistic: measure on held-out messages with :func:`evaluate`."""

    n: int
    n_off_topic: int
    accuracy_before: float
    accuracy: float
    thresholds: dict[str, float]
    margin: float
    leaked: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        th = ", ".join(f"{k}={v:.3f}" for k, v in self.thresholds.items())
        text = (
            f"fitted on {self.n} messages ({self.n_off_topic} off-topic): accuracy {self.accuracy_before:.1%} -> "
            f"{self.accuracy:.1%}; thresholds {th}; margin {self.margin:.3f}"
        )
        if self.leaked:
            text += f"; warning: {len(self.leaked)} training messages are also route examples"
        return text


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise InvalidRouteError(f"{what} must be a number, got {value!r}")
    return float(value)


def _top2(scores: Mapping[str, float]) -> tuple[str, float, str | None, float]:
    ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
    best, s1 = ranked[0]
    if len(ranked) > 1:
        return best, s1, ranked[1][0], ranked[1][1]
    return best, s1, None, 0.0


class SemanticRouter:
    """Route a message to the route whose examples it most resembles, if confident enough.

    ``encoder`` is ``None`` (TF-IDF character n-grams, offline, any language with examples), a
    :class:`~langgraph_handoff.routing.encoders.CharNgramEncoder`, or any LangChain ``Embeddings``.
    ``threshold`` is one float for every route, a ``{route: float}`` dict, or ``None`` to calibrate
    from the examples. ``margin`` is the minimum lead of the best route over the second.

    >>> router = SemanticRouter([
    ...     Route("orders", examples=["where is my order", "track my parcel", "change delivery address"]),
    ...     Route("tech", examples=["the app crashes", "cannot connect to wifi", "reset my password"]),
    ... ], threshold=0.2, fallback="human")
    >>> router.route("where's my parcel?").target
    'orders'
    >>> d = router.route("what a lovely sunny afternoon")
    >>> d.target, d.method
    ('human', 'fallback')
    """

    def __init__(
        self,
        routes: Sequence[Route],
        *,
        encoder: Any = None,
        threshold: float | Mapping[str, float] | None = None,
        margin: float | None = None,
        fallback: str | None = None,
    ):
        names = [r.name for r in routes]
        if not routes:
            raise InvalidRouteError("a SemanticRouter needs at least one route")
        if len(set(names)) != len(names):
            raise InvalidRouteError(f"route names must be unique, got {names}")
        empty = [r.name for r in routes if not r.examples]
        if empty:
            raise InvalidRouteError(f"routes {empty} have no examples; a semantic route needs at least one")
        if fallback is not None and not isinstance(fallback, str):
            raise InvalidRouteError(f"fallback must be a route name (str) or None, got {type(fallback).__name__}")
        self.routes = list(routes)
        self.fallback = fallback
        self.encoder = as_encoder(encoder)
        self._index: list[tuple[str, Vector]] = []
        self._build_index()
        self.margin = _number(margin, "margin") if margin is not None else 0.0
        self.thresholds = self.auto_thresholds()
        if isinstance(threshold, Mapping):
            unknown = set(threshold) - set(names)
            if unknown:
                raise InvalidRouteError(f"thresholds given for unknown routes {sorted(unknown)}; routes are {names}")
            self.thresholds.update({k: _number(v, f"threshold for {k!r}") for k, v in threshold.items()})
        elif threshold is not None:
            self.thresholds = dict.fromkeys(names, _number(threshold, "threshold"))

    # -- index ---------------------------------------------------------------------------------

    def _build_index(self) -> None:
        texts = [ex for r in self.routes for ex in r.examples]
        self.encoder.fit(texts)
        vectors = self.encoder.encode(texts)
        labels = [r.name for r in self.routes for _ in r.examples]
        self._index = list(zip(labels, vectors, strict=True))

    def _encode_query(self, text: str) -> Vector:
        if hasattr(self.encoder, "encode_query"):
            return self.encoder.encode_query(text)
        return self.encoder.encode([text])[0]

    def _scores_for(self, vec: Vector) -> dict[str, float]:
        scores = {r.name: 0.0 for r in self.routes}
        for name, ex in self._index:
            sim = cosine(vec, ex)
            if sim > scores[name]:
                scores[name] = sim
        return {k: round(v, 6) for k, v in scores.items()}

    def scores(self, text: str) -> dict[str, float]:
        """Every route's max-similarity score for ``text``."""
        return self._scores_for(self._encode_query(require_text(text)))

    def auto_thresholds(self) -> dict[str, float]:
        """Per-route thresholds calibrated from the examples alone (no labelled messages needed).

        Two bars, and a route takes the higher:

        - *paraphrase bar*: each example's best similarity to the other examples of its route
          (zeros ignored: an example with no related sibling, e.g. the only one in its language,
          says nothing); :data:`AUTO_THRESHOLD_FACTOR` × their lower quartile;
        - *noise bar*: how well other routes' examples match this route (their median best
          similarity). A message that matches a route no better than unrelated support requests
          do is not evidence for it.

        On ``bench/routing.py`` the pair rejected more off-topic messages than either bar alone
        at a similar in-scope accuracy.
        """
        out: dict[str, float] = {}
        for route in self.routes:
            own = [v for n, v in self._index if n == route.name]
            others = [v for n, v in self._index if n != route.name]
            bars = []
            siblings = [
                max((cosine(v, w) for j, w in enumerate(own) if j != i), default=0.0) for i, v in enumerate(own)
            ]
            related = [x for x in siblings if x > 0.0]
            if related:
                q1 = statistics.quantiles(related, n=4)[0] if len(related) >= 4 else min(related)
                bars.append(AUTO_THRESHOLD_FACTOR * q1)
            noise = [x for x in (max(cosine(o, w) for w in own) for o in others) if x > 0.0]
            if noise:
                bars.append(statistics.median(noise))
            if bars:
                out[route.name] = round(max(bars), 6)
        # a route with nothing to measure borrows the typical bar of the others
        typical = statistics.median(out.values()) if out else 0.0
        return {r.name: out.get(r.name, typical) for r in self.routes}

    # -- deciding ------------------------------------------------------------------------------

    def decide(self, scores: Mapping[str, float]) -> RouteDecision:
        """Apply thresholds and margin to precomputed scores (pure; shared by sync and async)."""
        return self._decide(scores, self.thresholds, self.margin)

    def _decide(self, scores: Mapping[str, float], thresholds: Mapping[str, float], margin: float) -> RouteDecision:
        best, s1, second, s2 = _top2(scores)
        thr = thresholds.get(best, 0.0)
        lead = s1 - s2

        def decision(target: str | None, method: Method, reason: str) -> RouteDecision:
            return RouteDecision(
                target=target, method=method, reason=reason, scores=dict(scores), score=s1, threshold=thr, margin=margin
            )

        if s1 < thr or s1 <= 0.0:
            return decision(
                self.fallback, "fallback", f"best route {best!r} scored {s1:.3f}, below its threshold {thr:.3f}"
            )
        if second is not None and lead < margin:
            return decision(
                self.fallback,
                "fallback",
                f"{best!r} {s1:.3f} leads {second!r} {s2:.3f} by {lead:.3f}, less than the margin {margin:.3f}",
            )
        return decision(
            best, "semantic", f"{best!r} scored {s1:.3f} (threshold {thr:.3f}), {lead:.3f} ahead of {second!r}"
        )

    def route(self, text: str) -> RouteDecision:
        decision = self.decide(self.scores(text))
        logger.debug("semantic route %r -> %s (%s)", text[:80], decision.target, decision.reason)
        return decision

    async def aroute(self, text: str) -> RouteDecision:
        if hasattr(self.encoder, "aencode_query"):
            vec = await self.encoder.aencode_query(require_text(text))
        else:
            vec = self._encode_query(require_text(text))  # in-process TF-IDF: microseconds, no I/O
        return self.decide(self._scores_for(vec))

    # -- calibration ---------------------------------------------------------------------------

    def _check_labels(self, labelled: Labelled) -> list[tuple[str, str | None]]:
        names = {r.name for r in self.routes}
        items = list(labelled)
        bad = sorted({str(lab) for _, lab in items if lab is not None and lab not in names})
        if bad:
            raise InvalidRouteError(f"labels {bad} name no route; routes are {sorted(names)} (use None for off-topic)")
        if not items:
            raise InvalidRouteError("fit needs at least one labelled message")
        return items

    def fit(
        self, labelled: Labelled, *, margins: Sequence[float] = (0.0, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1)
    ) -> FitReport:
        """Tune per-route thresholds and the margin to maximise accuracy on ``labelled``.

        ``labelled`` is ``(text, route_name)`` pairs; ``route_name`` ``None`` marks an off-topic
        message that must go to the fallback. Include some: without them nothing teaches the
        router to say no, and the thresholds drop to accept everything.

        >>> router = SemanticRouter([Route("a", examples=["apple pie", "apple tart"]),
        ...                          Route("b", examples=["bicycle tyre", "bicycle chain"])])
        >>> report = router.fit([("apple cake", "a"), ("bicycle bell", "b"), ("stock market", None)])
        >>> report.accuracy
        1.0
        """
        items = self._check_labels(labelled)
        examples = {ex for r in self.routes for ex in r.examples}
        leaked = [t for t, _ in items if t in examples]
        if leaked:
            logger.warning(
                "fit: %d of %d labelled messages are also route examples; accuracy will look better than it is",
                len(leaked),
                len(items),
            )
        table = [(self.scores(t), lab) for t, lab in items]
        before = self._accuracy(table, self.thresholds, self.margin)
        best_acc, best_thr, best_margin = before, dict(self.thresholds), self.margin
        for margin in margins:
            thr = self._tune_thresholds(table, margin)
            acc = self._accuracy(table, thr, margin)
            if acc > best_acc + 1e-12:
                best_acc, best_thr, best_margin = acc, thr, margin
        self.thresholds, self.margin = best_thr, best_margin
        report = FitReport(
            n=len(items),
            n_off_topic=sum(1 for _, lab in items if lab is None),
            accuracy_before=before,
            accuracy=best_acc,
            thresholds=dict(best_thr),
            margin=best_margin,
            leaked=leaked,
        )
        logger.info("semantic router %s", report)
        return report

    def _accuracy(
        self, table: list[tuple[dict[str, float], str | None]], thr: Mapping[str, float], margin: float
    ) -> float:
        hits = sum(1 for scores, lab in table if self._decide(scores, thr, margin).matched == lab)
        return hits / len(table)

    def _tune_thresholds(self, table: list[tuple[dict[str, float], str | None]], margin: float) -> dict[str, float]:
        """Coordinate ascent from the current thresholds. A route's threshold only matters for the
        messages whose best route it is (and whose lead passes the margin); with none of those it
        stays as it is. Between equally good thresholds we keep the one nearest the current value,
        and we never put a bar exactly on a training score."""
        thr = dict(self.thresholds)
        tops = [(_top2(scores), lab) for scores, lab in table]
        for _ in range(2):
            for route in thr:
                mine = [
                    (s1, lab)
                    for (best, s1, second, s2), lab in tops
                    if best == route and s1 > 0 and (second is None or s1 - s2 >= margin)
                ]
                if not mine:
                    continue
                observed = sorted({x for x, _ in mine})
                # a threshold in (observed[k-1], observed[k]] accepts exactly the scores >= observed[k]
                edges = [0.0, *observed]
                intervals = [*itertools.pairwise(edges), (observed[-1], max(1.0, observed[-1]) + 1e-6)]
                best_count, best_pick = -1, thr[route]
                for low, high in intervals:
                    pick = thr[route] if low < thr[route] <= high else (low + high) / 2
                    count = sum(1 for x, lab in mine if (route if x >= pick else None) == lab)
                    closer = abs(pick - thr[route]) < abs(best_pick - thr[route])
                    if count > best_count or (count == best_count and closer):
                        best_count, best_pick = count, pick
                thr[route] = round(best_pick, 6)
        return thr
