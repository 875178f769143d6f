"""Embedding-similarity routing with per-route thresholds, a top-1/top-2 margin and calibration.

A route's score is the highest cosine between the message and any of the route's examples
("max-similarity"): one close example is better evidence than many loose ones, and unlike a mean
or a sum it does not favour routes that simply have more examples. ``top_k=k`` scores a route by
the mean of its ``k`` best similarities instead, which smooths out one lucky example (it helps
dense encoders such as e5; see ``bench/routing.py``).

Raw cosines are low and depend on the encoder (0.2-0.4 for a correct route is normal), so there
is no fixed 0.8 threshold. Without explicit thresholds each route calibrates its own from its
examples (leave-one-out, see :meth:`SemanticRouter.auto_thresholds`); ``fit`` then tunes
thresholds and the margin on labelled messages, including off-topic ones labelled ``None``.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph_handoff.errors import InvalidRouteError
from langgraph_handoff.routing.close_calls import CloseCallSink, acollect, collect
from langgraph_handoff.routing.decision import Method, Route, RouteDecision
from langgraph_handoff.routing.encoders import Vector, as_encoder, cosine
from langgraph_handoff.routing.text import require_text, script_of
from langgraph_handoff.telemetry import content_on

logger = logging.getLogger("langgraph_handoff.routing")

Labelled = Iterable[tuple[str, str | None]]
Table = list[tuple[dict[str, float], str, str | None]]  # (scores, script, label) per labelled message

# Calibration from the examples alone (see SemanticRouter.auto_thresholds). Each route has a
# "noise" level (how well other routes' examples score on it) and a "paraphrase" level (how well its
# own examples score on it, leave-one-out). The threshold sits this fraction of the way from noise
# to paraphrase. Being relative to the noise level, it holds for score scales as different as the
# char n-grams' (noise ~0.05) and e5's (noise ~0.8). Chosen on the first 240 messages of
# bench/routing_data.py; ``fit`` replaces it with thresholds tuned on labelled messages.
AUTO_THRESHOLD_FACTOR = 0.35
# a router warns at construction when a route whose threshold it calibrates has fewer examples than
# this. Measured with recommended_encoder() (the e5 mix) on the English routes of
# bench/routing_data.py, 6 random subsets of n examples per route (bench/routing_few_examples.py):
# in-scope accuracy / off-topic rejection 58/68 % with 2 examples, 60/76 % with 3, 66/83 % with 4,
# 69/81 % with 5, 73/85 % with 6 and 74/87 % with all 8. Below 6 a route gives up 5 points or more
# on both; the calibration spread tells nothing (0.011 with 8 examples, 0.036 with 3)
MIN_CALIBRATION_EXAMPLES = 6
# fit warns when a route has fewer labelled messages than this, or the set fewer off-topic ones
FIT_MIN_PER_ROUTE = 10
FIT_MIN_OFF_TOPIC = 10
# without any noise to measure (no other route's example scores above 0 on a route, as happens with
# a few char n-gram examples), the threshold is this fraction of the paraphrase level instead
NO_NOISE_FACTOR = 0.8
# per-script calibration (see SemanticRouter.auto_thresholds): a script gets its own bar on a route
# only when the route and the other routes both have at least this many examples written in it
SCRIPT_MIN_EXAMPLES = 3
# the automatic top-1/top-2 margin, as a fraction of the router's spread (median paraphrase - noise)
AUTO_MARGIN_FACTOR = 0.0
# a decision is *uncertain* when its best route is within this fraction of the spread of its
# threshold or of the second route (RouteDecision.uncertain; HybridRouter asks its decider then)
UNCERTAIN_BAND = 0.25


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
    in_scope_before: float = 0.0
    in_scope: float = 0.0
    off_topic_before: float | None = None
    off_topic: float | None = None
    warnings: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        th = ", ".join(f"{k}={v:.3f}" for k, v in self.thresholds.items())
        text = (
            f"fitted on {self.n} messages ({self.n_off_topic} off-topic): accuracy {self.accuracy_before:.1%} -> "
            f"{self.accuracy:.1%}, in-scope {self.in_scope_before:.1%} -> {self.in_scope:.1%}"
        )
        if self.off_topic is not None and self.off_topic_before is not None:
            text += f", off-topic rejected {self.off_topic_before:.1%} -> {self.off_topic:.1%}"
        text += f" (on these messages); thresholds {th}; margin {self.margin:.3f}"
        for w in self.warnings:
            text += f"; warning: {w}"
        return text


@dataclass(frozen=True)
class RouteCalibration:
    """What :meth:`SemanticRouter.auto_thresholds` measured for one route, from its examples alone.

    ``noise``: the median score other routes' examples get on this route; ``paraphrase``: the
    lower quartile of the scores this route's own examples get from their siblings (leave-one-out).
    ``spread`` is their difference, the route's unit of confidence.
    """

    noise: float | None
    paraphrase: float | None
    threshold: float

    @property
    def spread(self) -> float | None:
        if self.noise is None or self.paraphrase is None:
            return None
        return self.paraphrase - self.noise


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise InvalidRouteError(f"{what} must be a number, got {value!r}")
    return float(value)


def _bar(noise: float | None, paraphrase: float | None) -> float | None:
    """The automatic threshold from a route's noise and paraphrase levels (see auto_thresholds)."""
    if paraphrase is not None and noise is not None:
        return noise + AUTO_THRESHOLD_FACTOR * max(0.0, paraphrase - noise)
    if paraphrase is not None:  # nothing else scores on it at all (tiny sparse index): no noise scale
        return NO_NOISE_FACTOR * paraphrase
    return noise


def _calibration(noise: float | None, paraphrase: float | None, threshold: float) -> RouteCalibration:
    return RouteCalibration(
        noise=None if noise is None else round(noise, 6),
        paraphrase=None if paraphrase is None else round(paraphrase, 6),
        threshold=round(threshold, 6),
    )


def _top2(scores: Mapping[str, float]) -> tuple[str, float, str | None, float]:
    ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
    best, s1 = ranked[0]
    if len(ranked) > 1:
        return best, s1, ranked[1][0], ranked[1][1]
    return best, s1, None, 0.0


def _logged(text: str, decision: RouteDecision) -> None:
    """The DEBUG line of one decision: the user's text only with content capture on (its
    length and script otherwise; :mod:`langgraph_handoff.telemetry`)."""
    if not logger.isEnabledFor(logging.DEBUG):
        return
    said = repr(text[:80]) if content_on() else f"{len(text)} characters ({script_of(text)})"
    logger.debug("semantic route of %s -> %s (%s)", said, decision.target, decision.reason)


class SemanticRouter:
    """Route a message to the route whose examples it most resembles, if confident enough.

    ``encoder`` is ``None`` (TF-IDF character n-grams, offline, any language with examples), a
    :class:`~langgraph_handoff.routing.encoders.CharNgramEncoder`, or any LangChain ``Embeddings``.
    ``threshold`` is one float for every route, a ``{route: float}`` dict, or ``None`` to calibrate
    from the examples. ``margin`` is the minimum lead of the best route over the second (``None``:
    from the examples as well). ``top_k`` is how many of a route's best example similarities are
    averaged into its score (1: max-similarity; ``None``: the encoder's
    ``top_k`` attribute if it has one, else 1). ``uncertain_band`` is the width, as a fraction of
    the router's spread, of the band around each decision boundary inside which a decision is
    marked ``uncertain`` (see :attr:`RouteDecision.uncertain`). ``per_script`` calibrates each
    route's automatic threshold separately for every script its examples are written in (Latin,
    Chinese, Hebrew...), since multilingual encoders score same-language text higher; ``None``
    (the default) does so when the encoder relates most texts across scripts (e5 and its mixes,
    not the char n-grams, whose scripts rarely share an n-gram). Explicit ``threshold`` values
    turn it off for the routes they name. ``close_calls`` is a sink for the decisions that were
    close (:mod:`~langgraph_handoff.routing.close_calls`), to relabel and re-score them later.

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
        top_k: int | None = None,
        uncertain_band: float = UNCERTAIN_BAND,
        per_script: bool | None = None,
        close_calls: CloseCallSink | None = None,
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
        self.encoder = as_encoder(encoder)
        if top_k is None:  # the encoder's preferred scoring (recommended_encoder() prefers top-8), else max-sim
            top_k = getattr(self.encoder, "top_k", None) or 1
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise InvalidRouteError(f"top_k must be a positive int, got {top_k!r}")
        self.routes = list(routes)
        self.fallback = fallback
        self.top_k = top_k
        self.uncertain_band = _number(uncertain_band, "uncertain_band")
        self.per_script = per_script
        self.close_calls = close_calls
        self._index: list[tuple[str, Vector]] = []
        self._scripts: list[str] = []
        self._build_index()
        self.calibration: dict[str, RouteCalibration] = {}
        self.script_calibration: dict[str, dict[str, RouteCalibration]] = {}
        self.script_offsets: dict[str, dict[str, float]] = {}
        self.thresholds = self.auto_thresholds()
        self.margin = _number(margin, "margin") if margin is not None else round(AUTO_MARGIN_FACTOR * self.spread, 6)
        if isinstance(threshold, Mapping):
            unknown = set(threshold) - set(names)
            if unknown:
                raise InvalidRouteError(f"thresholds given for unknown routes {sorted(unknown)}; routes are {names}")
            self.thresholds.update({k: _number(v, f"threshold for {k!r}") for k, v in threshold.items()})
            for offsets in self.script_offsets.values():  # a bar the caller set is the bar, in every script
                for k in threshold:
                    offsets.pop(k, None)
        elif threshold is not None:
            self.thresholds = dict.fromkeys(names, _number(threshold, "threshold"))
            self.script_offsets = {}
        #: what the router found wrong with its own configuration (also logged, WARNING)
        self.warnings: list[str] = self._few_examples(threshold)
        for w in self.warnings:
            logger.warning("SemanticRouter: %s", w)

    def _few_examples(self, threshold: float | Mapping[str, float] | None) -> list[str]:
        """A warning when a route whose threshold is calibrated from its examples has fewer than
        :data:`MIN_CALIBRATION_EXAMPLES`: its bar then lets off-topic messages through (with 3
        examples a route, ``recommended_encoder()`` sent "tell me a joke" to one). A threshold the
        caller set is not calibrated, so it is not warned about."""
        if threshold is not None and not isinstance(threshold, Mapping):
            return []  # one bar for every route, the caller's
        given = set(threshold or ())
        few = {r.name: len(r.examples) for r in self.routes if r.name not in given}
        few = {name: n for name, n in few.items() if n < MIN_CALIBRATION_EXAMPLES}
        if not few:
            return []
        counts = ", ".join(f"{name} ({n})" for name, n in few.items())
        return [
            f"routes with fewer than {MIN_CALIBRATION_EXAMPLES} examples calibrate their thresholds from too "
            f"little: {counts}. Off-topic messages may be routed to them; give each route "
            f"{MIN_CALIBRATION_EXAMPLES} or more examples, set threshold=, or fit() the router on labelled "
            "messages (with off-topic ones)"
        ]

    # -- index ---------------------------------------------------------------------------------

    def _build_index(self) -> None:
        texts = [ex for r in self.routes for ex in r.examples]
        self.encoder.fit(texts)
        vectors = self.encoder.encode(texts)
        labels = [r.name for r in self.routes for _ in r.examples]
        self._index = list(zip(labels, vectors, strict=True))
        self._scripts = [script_of(t) for t in texts]

    def _encode_query(self, text: str) -> Vector:
        if hasattr(self.encoder, "encode_query"):
            return self.encoder.encode_query(text)
        return self.encoder.encode([text])[0]

    def _aggregate(self, sims: list[float]) -> float:
        """A route's score from its examples' similarities: the best one, or the mean of the top k."""
        if not sims:
            return 0.0
        if self.top_k == 1:
            return max(0.0, max(sims))
        top = heapq.nlargest(self.top_k, sims)
        return max(0.0, sum(top) / len(top))

    def _scores_for(self, vec: Vector) -> dict[str, float]:
        sims: dict[str, list[float]] = {r.name: [] for r in self.routes}
        for name, ex in self._index:
            sims[name].append(cosine(vec, ex))
        return {k: round(float(self._aggregate(v)), 6) for k, v in sims.items()}

    def scores(self, text: str) -> dict[str, float]:
        """Every route's score for ``text`` (max-similarity, or the top-``k`` mean)."""
        return self._scores_for(self._encode_query(require_text(text)))

    @property
    def spread(self) -> float:
        """The router's unit of confidence: the median over routes of paraphrase - noise (see
        :class:`RouteCalibration`). The automatic margin and the uncertain band are fractions of it."""
        return self._spread

    def auto_thresholds(self) -> dict[str, float]:
        """Per-route thresholds calibrated from the examples alone (no labelled messages needed).

        For each route, scoring its examples as if they were messages:

        - *noise*: the median score the other routes' examples get on this route. A message that
          matches a route no better than unrelated support requests do is not evidence for it;
        - *paraphrase*: the lower quartile of the scores the route's own examples get from their
          siblings, leaving each one out (zeros ignored: an example with no related sibling, such
          as the only one in its language, says nothing);
        - the threshold sits :data:`AUTO_THRESHOLD_FACTOR` of the way from noise to paraphrase
          (at the noise level when the paraphrases score no higher; :data:`NO_NOISE_FACTOR` ×
          paraphrase when no other route's example scores on it at all).

        Relative to the noise level, the same factor fits the char n-grams (scores 0.05-0.4) and
        e5 (0.75-0.95), and their mixes. The measurements are kept in :attr:`calibration`.

        With ``per_script``, the same is measured again per script, with only the examples
        written in it as messages (the route is still scored against all its examples, as a
        message would be). A multilingual encoder's noise differs by language, by as much as
        the whole spread: on the bench's routes under e5, other routes' English examples score
        0.85-0.87 on a route and Chinese ones 0.87-0.88, while paraphrases sit only 0.01-0.04
        above the noise. One bar for all is then too strict in English and too lax in Chinese
        (e5 alone accepted 53 % of English in-scope messages with one bar). The difference from
        the route's threshold is kept in :attr:`script_offsets` (``{script: {route: offset}}``)
        and added to the threshold for a message in that script; the per-script measurements are
        in :attr:`script_calibration`. A script needs :data:`SCRIPT_MIN_EXAMPLES` examples on the
        route and on the other routes; otherwise its messages use the route's threshold. With
        ``per_script=None`` this is skipped unless most pairs of examples in different scripts
        score above 0. With the char n-grams they score 0 (only a shared "App" or "Wi-Fi"
        relates a Chinese example to an English one): the scripts are separate already, and
        measuring each on fewer examples only adds noise (on the bench it moved Hebrew off-topic
        rejection from 51 to 36 % and English from 32 to 40 %, for no gain on average).
        """
        vectors = [vec for _, vec in self._index]
        pair = [[cosine(a, b) for b in vectors] for a in vectors]  # every example against every example
        routes_of = [name for name, _ in self._index]
        everything = range(len(vectors))
        out: dict[str, float] = {}
        cal: dict[str, tuple[float | None, float | None]] = {}
        own_of = {r.name: [i for i in everything if routes_of[i] == r.name] for r in self.routes}
        for route in self.routes:
            own = own_of[route.name]
            others = [i for i in everything if routes_of[i] != route.name]
            noise, paraphrase = self._levels(pair, own, own, others)
            cal[route.name] = (noise, paraphrase)
            bar = _bar(noise, paraphrase)
            if bar is not None:
                out[route.name] = bar
        # a route with nothing to measure borrows the typical bar of the others
        typical = statistics.median(out.values()) if out else 0.0
        thresholds = {r.name: round(out.get(r.name, typical), 6) for r in self.routes}
        self.calibration = {name: _calibration(n, p, thresholds[name]) for name, (n, p) in cal.items()}
        spreads = [c.spread for c in self.calibration.values() if c.spread is not None and c.spread > 0]
        self._spread = round(statistics.median(spreads), 6) if spreads else 0.05
        self.script_calibration, self.script_offsets = {}, {}
        scripts = sorted({sc for sc in self._scripts if sc})
        per_script = self.per_script
        if per_script is None:  # only an encoder that relates scripts can pull one language's bar off
            across = [pair[i][j] for i in everything for j in everything if self._scripts[i] != self._scripts[j]]
            per_script = bool(across) and statistics.median(across) > 0.0
        if per_script and len(scripts) > 1:
            for script in scripts:
                for route in self.routes:
                    own = own_of[route.name]
                    mine = [i for i in own if self._scripts[i] == script]
                    others = [i for i in everything if routes_of[i] != route.name and self._scripts[i] == script]
                    if min(len(mine), len(others)) < SCRIPT_MIN_EXAMPLES:
                        continue
                    noise, paraphrase = self._levels(pair, own, mine, others)
                    bar = _bar(noise, paraphrase)
                    if bar is None:
                        continue
                    self.script_calibration.setdefault(script, {})[route.name] = _calibration(noise, paraphrase, bar)
                    self.script_offsets.setdefault(script, {})[route.name] = round(bar - thresholds[route.name], 6)
        return thresholds

    def _levels(
        self, pair: list[list[float]], own: list[int], mine: list[int], others: list[int]
    ) -> tuple[float | None, float | None]:
        """A route's (noise, paraphrase), see :meth:`auto_thresholds`: ``own`` are its examples
        (indexes into the index), ``mine`` the ones scored leave-one-out, ``others`` the other
        routes' examples scored as noise; ``pair`` holds every example's cosine with every other."""
        siblings = [self._aggregate([pair[i][j] for j in own if j != i]) for i in mine]
        related = [x for x in siblings if x > 0.0]
        paraphrase = None
        if related:
            paraphrase = statistics.quantiles(related, n=4)[0] if len(related) >= 4 else min(related)
        noise_scores = [x for x in (self._aggregate([pair[o][j] for j in own]) for o in others) if x > 0.0]
        noise = statistics.median(noise_scores) if noise_scores else None
        return noise, paraphrase

    def threshold_for(self, route: str, script: str = "") -> float:
        """The bar a message in ``script`` (see :func:`~langgraph_handoff.routing.text.script_of`)
        must reach on ``route``: the route's threshold plus its offset for that script, if any."""
        return self.thresholds.get(route, 0.0) + self._offset(script, route)

    def _offset(self, script: str, route: str) -> float:
        return self.script_offsets.get(script, {}).get(route, 0.0)

    # -- deciding ------------------------------------------------------------------------------

    def decide(self, scores: Mapping[str, float], script: str = "") -> RouteDecision:
        """Apply thresholds and margin to precomputed scores of a message written in ``script``
        (``script_of(text)``; ``""``: no per-script offset). Pure; shared by sync and async."""
        return self._decide(scores, self.thresholds, self.margin, script)

    def _decide(
        self, scores: Mapping[str, float], thresholds: Mapping[str, float], margin: float, script: str = ""
    ) -> RouteDecision:
        best, s1, second, s2 = _top2(scores)
        thr = thresholds.get(best, 0.0) + self._offset(script, best)
        lead = s1 - s2
        # how far the best score is from the nearest decision boundary: the threshold, or the
        # point where the second route would come within the margin
        boundary = min(abs(s1 - thr), abs(lead - margin) if second is not None else float("inf"))
        band = self.uncertain_band * self.spread
        uncertain = s1 > 0.0 and boundary < band

        def decision(target: str | None, method: Method, reason: str) -> RouteDecision:
            return RouteDecision(
                target=target,
                method=method,
                reason=reason + (f"; uncertain: {boundary:.3f} from a boundary, band {band:.3f}" if uncertain else ""),
                scores=dict(scores),
                score=s1,
                threshold=thr,
                margin=margin,
                uncertain=uncertain,
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
        decision = self.decide(self.scores(text), script_of(text))
        _logged(text, decision)
        collect(self.close_calls, text, decision, decision)
        return decision

    async def aroute(self, text: str) -> RouteDecision:
        if hasattr(self.encoder, "aencode_query"):
            vec = await self.encoder.aencode_query(require_text(text))
        else:
            vec = self._encode_query(require_text(text))  # in-process TF-IDF: microseconds, no I/O
        decision = self.decide(self._scores_for(vec), script_of(text))
        _logged(text, decision)
        await acollect(self.close_calls, text, decision, decision)
        return decision

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

    def fit(self, labelled: Labelled, *, margins: Sequence[float] | None = None) -> FitReport:
        """Tune per-route thresholds and the margin to maximise accuracy on ``labelled``.

        ``labelled`` is ``(text, route_name)`` pairs; ``route_name`` ``None`` marks an off-topic
        message that must go to the fallback. Include some: without them nothing teaches the
        router to say no, and the thresholds drop to accept everything. ``margins`` are the
        candidates tried (default: 0 to 1 × :attr:`spread`, so they suit any score scale).

        The report gives accuracy, in-scope accuracy and off-topic rejection before and after, on
        the labelled messages themselves (optimistic: measure held-out ones with ``evaluate``). It
        warns, and logs, when the set is too small to trust: fewer than
        :data:`FIT_MIN_PER_ROUTE` messages for a route, or fewer than :data:`FIT_MIN_OFF_TOPIC`
        off-topic ones. Thresholds tuned on a handful of messages fit those messages, not traffic.

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
        warnings = [f"{len(leaked)} training messages are also route examples"] if leaked else []
        per_route = {r.name: 0 for r in self.routes}
        for _, lab in items:
            if lab is not None:
                per_route[lab] += 1
        few = sorted(name for name, n in per_route.items() if n < FIT_MIN_PER_ROUTE)
        n_off = sum(1 for _, lab in items if lab is None)
        if few:
            warnings.append(
                f"routes {few} have fewer than {FIT_MIN_PER_ROUTE} labelled messages; thresholds fitted on so few "
                "overfit them (keep the automatic ones, or label more)"
            )
        if n_off < FIT_MIN_OFF_TOPIC:
            warnings.append(
                f"only {n_off} off-topic messages (label None); with fewer than {FIT_MIN_OFF_TOPIC} the fitted "
                "thresholds learn little about saying no"
            )
        for w in warnings[1 if leaked else 0 :]:
            logger.warning("fit: %s", w)
        if margins is None:
            margins = [round(f * self.spread, 6) for f in (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)]
        table = [(self.scores(t), script_of(t), lab) for t, lab in items]
        before = self._accuracy(table, self.thresholds, self.margin)
        in_before, off_before = self._split_accuracy(table, self.thresholds, self.margin)
        best_acc, best_thr, best_margin = before, dict(self.thresholds), self.margin
        for margin in margins:
            thr = self._tune_thresholds(table, margin)
            acc = self._accuracy(table, thr, margin)
            if acc > best_acc + 1e-12:
                best_acc, best_thr, best_margin = acc, thr, margin
        self.thresholds, self.margin = best_thr, best_margin
        in_after, off_after = self._split_accuracy(table, best_thr, best_margin)
        report = FitReport(
            n=len(items),
            n_off_topic=n_off,
            accuracy_before=before,
            accuracy=best_acc,
            thresholds=dict(best_thr),
            margin=best_margin,
            leaked=leaked,
            in_scope_before=in_before,
            in_scope=in_after,
            off_topic_before=off_before,
            off_topic=off_after,
            warnings=warnings,
        )
        logger.info("semantic router %s", report)
        return report

    def _split_accuracy(self, table: Table, thr: Mapping[str, float], margin: float) -> tuple[float, float | None]:
        """In-scope accuracy and off-topic rejection on a scored, labelled table."""
        inside = [row for row in table if row[2] is not None]
        off = [row for row in table if row[2] is None]
        acc_in = self._accuracy(inside, thr, margin) if inside else 0.0
        acc_off = self._accuracy(off, thr, margin) if off else None
        return acc_in, acc_off

    def _accuracy(self, table: Table, thr: Mapping[str, float], margin: float) -> float:
        hits = sum(1 for scores, script, lab in table if self._decide(scores, thr, margin, script).matched == lab)
        return hits / len(table)

    def _tune_thresholds(self, table: Table, margin: float) -> dict[str, float]:
        """Coordinate ascent from the current thresholds. A route's threshold only matters for the
        messages whose best route it is (and whose lead passes the margin); with none of those it
        stays as it is. Between equally good thresholds we keep the one nearest the current value,
        and we never put a bar exactly on a training score. Per-script offsets stay: each score
        is compared minus its script's offset, so fit moves every script's bar on a route together."""
        thr = dict(self.thresholds)
        tops = [(_top2(scores), self.script_offsets.get(script, {}), lab) for scores, script, lab in table]
        for _ in range(2):
            for route in thr:
                mine = [
                    (s1 - offsets.get(route, 0.0), lab)
                    for (best, s1, second, s2), offsets, lab in tops
                    if best == route and s1 > 0 and (second is None or s1 - s2 >= margin)
                ]
                if not mine:
                    continue
                observed = sorted({x for x, _ in mine})
                # a threshold in (observed[k-1], observed[k]] accepts exactly the scores >= observed[k]
                # (below 0 only when a script's offset takes a score under the route's own bar)
                edges = [0.0 if observed[0] > 0 else observed[0] - self.spread, *observed]
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
