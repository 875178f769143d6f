"""Measure a router on labelled messages: accuracy, off-topic rejection, per-route precision and
recall, and a confusion matrix. Use held-out messages, not the routes' own examples.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from langgraph_handoff.errors import InvalidRouteError
from langgraph_handoff.routing.decision import RouteDecision

OFF_TOPIC = "(none)"


@dataclass(frozen=True)
class RouteStats:
    precision: float
    recall: float
    f1: float
    support: int


@dataclass(frozen=True)
class SweepPoint:
    """One point of a threshold sweep: every semantic threshold moved by ``offset``."""

    offset: float
    in_scope_accuracy: float
    off_topic_rejection: float | None
    accuracy: float


@dataclass(frozen=True)
class EvalReport:
    """Result of :func:`evaluate`. ``confusion[true][predicted]`` counts messages; off-topic
    (label ``None``, or a fallback decision) is the ``"(none)"`` row/column.

    ``sweep`` is the trade-off between in-scope accuracy and off-topic rejection as every semantic
    threshold moves up or down by the same offset (offset 0 is the router as it is), recomputed
    from the decisions' scores without routing again. It is empty for routers without semantic
    scores. :meth:`plot` draws it when matplotlib is installed.
    """

    n: int
    accuracy: float
    in_scope_accuracy: float
    off_topic_rejection: float | None
    false_rejection: float
    per_route: dict[str, RouteStats]
    confusion: dict[str, dict[str, int]]
    errors: list[tuple[str, str | None, str | None]] = field(default_factory=list)
    sweep: list[SweepPoint] = field(default_factory=list)

    def plot(self, path: str | None = None, *, title: str = "routing: threshold sweep") -> Any:
        """Draw the threshold sweep (off-topic rejection against in-scope accuracy), mark the
        current thresholds, and save it to ``path`` if given. Returns the matplotlib figure.
        Needs matplotlib, which langgraph-handoff does not depend on."""
        try:
            import matplotlib

            matplotlib.use("Agg", force=False)
            import matplotlib.pyplot as plt
        except ImportError as exc:
            raise ImportError("EvalReport.plot needs matplotlib: pip install matplotlib") from exc
        if not self.sweep:
            raise InvalidRouteError("this report has no threshold sweep (the router gave no semantic scores)")
        fig, ax = plt.subplots(figsize=(5.5, 4.5))
        xs = [p.off_topic_rejection or 0.0 for p in self.sweep]
        ys = [p.in_scope_accuracy for p in self.sweep]
        ax.plot(xs, ys, marker=".", label="thresholds + offset")
        here = min(self.sweep, key=lambda p: abs(p.offset))
        ax.scatter([here.off_topic_rejection or 0.0], [here.in_scope_accuracy], color="red", zorder=3, label="current")
        ax.set_xlabel("off-topic rejected")
        ax.set_ylabel("in-scope routed right")
        ax.set_xlim(0, 1.02)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower left")
        ax.set_title(title)
        if path is not None:
            fig.savefig(path, dpi=110, bbox_inches="tight")
        return fig

    def __str__(self) -> str:
        lines = [
            f"{self.n} messages: accuracy {self.accuracy:.1%}, in-scope {self.in_scope_accuracy:.1%}, "
            + (f"off-topic rejected {self.off_topic_rejection:.1%}, " if self.off_topic_rejection is not None else "")
            + f"in-scope wrongly rejected {self.false_rejection:.1%}",
            f"{'route':<16}{'precision':>10}{'recall':>8}{'f1':>7}{'n':>5}",
        ]
        for name, st in self.per_route.items():
            lines.append(f"{name:<16}{st.precision:>10.2f}{st.recall:>8.2f}{st.f1:>7.2f}{st.support:>5}")
        cols = list(self.confusion)
        lines.append("confusion (rows true, columns predicted): " + " ".join(cols))
        for row in cols:
            lines.append(f"  {row:<14}" + " ".join(f"{self.confusion[row].get(c, 0):>{len(c)}}" for c in cols))
        return "\n".join(lines)


def _report(items: list[tuple[str, str | None]], decisions: list[RouteDecision], routes: list[str]) -> EvalReport:
    pairs = [(lab, d.matched) for (_, lab), d in zip(items, decisions, strict=True)]

    def key(x: str | None) -> str:
        return OFF_TOPIC if x is None else x

    labels = list(
        dict.fromkeys([*routes, *(lab for lab, _ in pairs if lab is not None), *(p for _, p in pairs if p is not None)])
    )
    confusion = {k: dict.fromkeys([*labels, OFF_TOPIC], 0) for k in [*labels, OFF_TOPIC]}
    for lab, pred in pairs:
        confusion[key(lab)][key(pred)] += 1
    per_route: dict[str, RouteStats] = {}
    for name in labels:
        tp = confusion[name][name]
        predicted = sum(confusion[r][name] for r in confusion)
        support = sum(confusion[name].values())
        p = tp / predicted if predicted else 0.0
        r = tp / support if support else 0.0
        per_route[name] = RouteStats(round(p, 4), round(r, 4), round(2 * p * r / (p + r), 4) if p + r else 0.0, support)
    in_scope = [(lab, pred) for lab, pred in pairs if lab is not None]
    off = [(lab, pred) for lab, pred in pairs if lab is None]
    return EvalReport(
        sweep=_sweep([lab for _, lab in items], decisions),
        n=len(pairs),
        accuracy=sum(lab == pred for lab, pred in pairs) / len(pairs),
        in_scope_accuracy=sum(lab == pred for lab, pred in in_scope) / len(in_scope) if in_scope else 0.0,
        off_topic_rejection=sum(pred is None for _, pred in off) / len(off) if off else None,
        false_rejection=sum(pred is None for _, pred in in_scope) / len(in_scope) if in_scope else 0.0,
        per_route=per_route,
        confusion=confusion,
        errors=[(t, lab, pred) for (t, lab), (_, pred) in zip(items, pairs, strict=True) if lab != pred],
    )


def _moved(d: RouteDecision, offset: float) -> str | None:
    """What a semantic decision would have matched with its threshold moved by ``offset``."""
    if d.method not in ("semantic", "fallback") or not d.scores or d.threshold is None:
        return d.matched
    ranked = sorted(d.scores.items(), key=lambda kv: (-kv[1], kv[0]))
    best, s1 = ranked[0]
    s2 = ranked[1][1] if len(ranked) > 1 else 0.0
    if s1 <= 0.0 or s1 < d.threshold + offset or (len(ranked) > 1 and s1 - s2 < (d.margin or 0.0)):
        return None
    return best


def _sweep(labels: list[str | None], decisions: list[RouteDecision], points: int = 41) -> list[SweepPoint]:
    gaps = [
        max(d.scores.values()) - d.threshold
        for d in decisions
        if d.method in ("semantic", "fallback") and d.scores and d.threshold is not None
    ]
    if not gaps:
        return []
    low, high = min(gaps) - 1e-6, max(gaps) + 1e-6
    offsets = sorted({0.0, *(round(low + (high - low) * i / (points - 1), 6) for i in range(points))})
    out = []
    for off in offsets:
        preds = [_moved(d, off) for d in decisions]
        inside = [(lab, p) for lab, p in zip(labels, preds, strict=True) if lab is not None]
        outside = [p for lab, p in zip(labels, preds, strict=True) if lab is None]
        out.append(
            SweepPoint(
                offset=off,
                in_scope_accuracy=sum(lab == p for lab, p in inside) / len(inside) if inside else 0.0,
                off_topic_rejection=sum(p is None for p in outside) / len(outside) if outside else None,
                accuracy=sum(lab == p for lab, p in zip(labels, preds, strict=True)) / len(labels),
            )
        )
    return out


def _items(labelled: Iterable[tuple[str, str | None]], router: Any) -> list[tuple[str, str | None]]:
    items = [(t, lab) for t, lab in labelled]
    if not items:
        raise InvalidRouteError("evaluate needs at least one labelled message")
    known = set(_route_names(router))
    bad = sorted({str(lab) for _, lab in items if lab is not None and known and lab not in known})
    if bad:
        raise InvalidRouteError(f"labels {bad} name no route; routes are {sorted(known)} (use None for off-topic)")
    return items


def _route_names(router: Any) -> list[str]:
    """Every target a router can return: its routes, rule targets (incl. a hybrid's rules)."""
    names = [r.name for r in getattr(router, "routes", None) or []]
    names += list(getattr(router, "targets", None) or [])
    rules = getattr(router, "rules", None)
    names += list(getattr(rules, "targets", None) or [])
    return list(dict.fromkeys(names))


def evaluate(router: Any, labelled: Iterable[tuple[str, str | None]]) -> EvalReport:
    """Route every ``(text, expected_route_or_None)`` pair and score the decisions.

    >>> from langgraph_handoff.routing import Rule, RuleRouter
    >>> report = evaluate(RuleRouter([Rule("human", keywords=["human"])]), [("a human please", "human"), ("hi", None)])
    >>> report.accuracy, report.off_topic_rejection
    (1.0, 1.0)
    """
    items = _items(labelled, router)
    return _report(items, [router.route(t) for t, _ in items], _route_names(router))


async def aevaluate(router: Any, labelled: Iterable[tuple[str, str | None]]) -> EvalReport:
    """Async twin of :func:`evaluate`; routes the messages concurrently."""
    items = _items(labelled, router)
    decisions = await asyncio.gather(*(router.aroute(t) for t, _ in items))
    return _report(items, list(decisions), _route_names(router))
