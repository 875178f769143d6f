"""Routing quality on bench/routing_data.py: English, Chinese and Hebrew, with in-language examples.

Every encoder and scoring is measured the same way, over 20 random splits of the 450 labelled
messages, each split stratified by (language, label) into two halves:

- "auto": thresholds from the route examples only (no labelled messages), measured on the test half;
- "fit": thresholds and margin fitted (``SemanticRouter.fit``) on the other half, measured on the test half.

Cells are mean ± sd over the 20 splits of in-scope accuracy (the right agent) / off-topic rejection
(sent to the fallback). The data has two batches: the router's built-in parameters were chosen on
the first (``TESTS_V1``); ``--batch v2`` measures on the second only, which no choice has seen.

It also reports, for the decider stage: a ``HybridRouter`` whose decider is an oracle (it always
knows the answer) and is asked only about the decisions the semantic router marks uncertain.
Widening the uncertain band buys in-scope accuracy with decider calls; the table shows how many.
Then ms per message (uncached, one thread) and the process's memory.

Run: nice -n 10 .venv/bin/python bench/routing.py [--splits 20] [--batch all|v1|v2] [--plot DIR]
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from routing_data import DESCRIPTIONS, EXAMPLES, ROUTES, TESTS, TESTS_V1, TESTS_V2

from langgraph_handoff.routing import (
    CharNgramEncoder,
    CombinedEncoder,
    E5Encoder,
    HybridRouter,
    Route,
    Rule,
    SemanticRouter,
    e5_available,
    evaluate,
    recommended_encoder,
)
from langgraph_handoff.routing import semantic as semantic_module
from langgraph_handoff.routing.text import script_of

LANGS = ["en", "zh", "he"]
Test = tuple[str, "str | None", str]

HUMAN_RULE = Rule(
    "human",
    commands=[
        "talk to a human",
        "speak to a human",
        "real person",
        "representative",
        "human agent",
        "转人工",
        "人工客服",
        "真人",
        "נציג אנושי",
        "בן אדם אמיתי",
    ],
    keywords=["human", "人工", "נציג"],
)

# the uncertain band widths tried for the decider trade-off (fractions of the router's spread)
BANDS = [0.0, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0]


def routes() -> list[Route]:
    return [Route(r, DESCRIPTIONS[r], [ex for lang in LANGS for ex in EXAMPLES[lang][r]]) for r in ROUTES]


def rss_mb() -> float:
    """Resident memory of this process (Linux), MB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def configs(e5: Any) -> dict[str, Callable[[], SemanticRouter]]:
    """name -> a factory of a fresh router (the e5 encoder is shared: one model, one cache)."""

    def make(encoder_factory: Callable[[], Any], top_k: int | None = None, **kw: Any) -> Callable[[], SemanticRouter]:
        return lambda: SemanticRouter(routes(), encoder=encoder_factory(), fallback="fallback_desk", top_k=top_k, **kw)

    def mix(wc: float, we: float) -> Callable[[], Any]:
        return lambda: CombinedEncoder([CharNgramEncoder(), e5], [wc, we])

    out = {
        "char n-grams (default)": make(lambda: None, 1),
        "char n-grams, top-3": make(lambda: None, 3),
    }
    if e5 is not None:
        out |= {
            "e5": make(lambda: e5, 1),
            "e5, one bar for all scripts": make(lambda: e5, 1, per_script=False),
            "e5, top-3": make(lambda: e5, 3),
            "0.2 char + 0.8 e5": make(mix(0.2, 0.8), 1),
            "0.35 char + 0.65 e5, top-3": make(mix(0.35, 0.65), 3),
            "0.35 char + 0.65 e5, top-5": make(mix(0.35, 0.65), 5),
            "0.35 char + 0.65 e5, top-8 (recommended)": make(lambda: _recommended(e5)),
            "recommended, one bar for all scripts": make(lambda: _recommended(e5), per_script=False),
            "0.2 char + 0.8 e5, top-8": make(mix(0.2, 0.8), 8),
            "0.5 char + 0.5 e5, top-3": make(mix(0.5, 0.5), 3),
        }
    return out


def _recommended(e5: E5Encoder) -> Any:
    enc = recommended_encoder()
    if isinstance(enc, CombinedEncoder):  # share the bench's e5 (its cache) instead of a second instance
        enc.parts[1] = e5
    return enc


def stratified_split(tests: list[Test], seed: int) -> tuple[list[Test], list[Test]]:
    """Two halves, stratified by (language, label), shuffled with ``seed``."""
    rng = random.Random(seed)
    groups: dict[tuple[str, str | None], list[Test]] = defaultdict(list)
    for t in tests:
        groups[(t[0], t[1])].append(t)
    a: list[Test] = []
    b: list[Test] = []
    for key in sorted(groups, key=str):
        items = groups[key][:]
        rng.shuffle(items)
        for i, t in enumerate(items):
            (a if i % 2 == 0 else b).append(t)
    return a, b


class Cached:
    """A router whose scores for the bench messages are computed once (the index never changes;
    only thresholds and margin do), so 20 splits cost 20 threshold passes, not 20 encodings."""

    def __init__(self, router: SemanticRouter, texts: list[str]):
        self.router = router
        self.table = {t: router.scores(t) for t in dict.fromkeys(texts)}
        router.scores = self.table.__getitem__  # type: ignore[method-assign]  # fit() reads scores from here
        self.routes = router.routes
        self.fallback = router.fallback
        self.auto = (dict(router.thresholds), router.margin)

    def reset(self) -> None:
        self.router.thresholds, self.router.margin = dict(self.auto[0]), self.auto[1]

    def route(self, text: str) -> Any:
        return self.router.decide(self.table[text], script_of(text))


def per_lang(router: Any, tests: list[Test]) -> dict[str, tuple[float, float]]:
    out = {}
    for lang in LANGS:
        rep = evaluate(router, [(text, label) for lg, label, text in tests if lg == lang])
        out[lang] = (rep.in_scope_accuracy, rep.off_topic_rejection or 0.0)
    return out


def mean_sd(xs: list[float]) -> str:
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{100 * statistics.mean(xs):.1f} ± {100 * sd:.1f}"


Curve = dict[float, dict[str, list[tuple[float, float, float]]]]


def oracle_curve(cached: Cached, splits: list[tuple[list[Test], list[Test]]]) -> Curve:
    """For each band, per language, per split (test half, auto thresholds): in-scope accuracy,
    off-topic rejection and decider share of a HybridRouter whose decider is an oracle."""
    out: Curve = {}
    for band in BANDS:
        cached.router.uncertain_band = band
        res: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
        for _, test in splits:
            truth = {text: label for _, label, text in test}
            for lang in LANGS:
                hybrid = HybridRouter(semantic=cached, decider=lambda text, _routes, t=truth: t[text])  # type: ignore[arg-type, misc]
                rep = evaluate(hybrid, [(text, label) for lg, label, text in test if lg == lang])
                res[lang].append((rep.in_scope_accuracy, rep.off_topic_rejection or 0.0, hybrid.decider_share))
        out[band] = res
    cached.router.uncertain_band = semantic_module.UNCERTAIN_BAND
    return out


def timing(make: Callable[[], SemanticRouter], tests: list[Test], e5_uncached: Any, n: int) -> float:
    """ms per message for route(), encoding each message afresh (no cache)."""
    router = make()
    if e5_uncached is not None:
        enc = router.encoder
        if isinstance(enc, E5Encoder):
            router.encoder = e5_uncached
        elif isinstance(enc, CombinedEncoder):
            enc.parts = [e5_uncached if isinstance(p, E5Encoder) else p for p in enc.parts]
    sample = [text for i, (_, _, text) in enumerate(tests) if i % max(1, len(tests) // n) == 0][:n]
    t0 = time.perf_counter()
    for text in sample:
        router.route(text)
    return (time.perf_counter() - t0) / len(sample) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--splits", type=int, default=20)
    parser.add_argument("--batch", choices=["all", "v1", "v2"], default="all")
    parser.add_argument("--only", help="run only the configs whose name contains this")
    parser.add_argument("--factor", type=float, help="override AUTO_THRESHOLD_FACTOR (exploration)")
    parser.add_argument("--timing", type=int, default=45, help="messages timed per config (0: skip)")
    parser.add_argument("--plot", type=Path, help="write threshold-sweep plots here (needs matplotlib)")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    if args.factor is not None:
        semantic_module.AUTO_THRESHOLD_FACTOR = args.factor
    tests = {"all": TESTS, "v1": TESTS_V1, "v2": TESTS_V2}[args.batch]
    texts = [text for _, _, text in tests]
    print(
        f"{len(tests)} labelled messages ({sum(t[1] is None for t in tests)} off-topic), batch {args.batch}; "
        f"{sum(len(r.examples) for r in routes())} route examples; {args.splits} splits; "
        f"AUTO_THRESHOLD_FACTOR {semantic_module.AUTO_THRESHOLD_FACTOR}"
    )
    memory = [("after imports", rss_mb())]
    e5 = None
    e5_uncached = None
    if e5_available():
        t0 = time.perf_counter()
        e5 = E5Encoder()
        e5.encode(["warm up"])
        memory.append((f"e5 loaded ({(time.perf_counter() - t0) * 1000:.0f} ms)", rss_mb()))
        t0 = time.perf_counter()
        e5.encode([*texts, *(ex for r in routes() for ex in r.examples)])
        memory.append(
            (
                f"e5 encoded {len(texts) + 96} texts ({(time.perf_counter() - t0) / (len(texts) + 96) * 1000:.1f} ms each)",
                rss_mb(),
            )
        )
        e5_uncached = E5Encoder(cache_size=0)
    else:
        print("(the [e5] extra is not installed: char n-grams only)")

    splits = [stratified_split(tests, seed) for seed in range(args.splits)]
    rows = []
    curves = {}
    for name, make in configs(e5).items():
        if args.only and args.only not in name:
            continue
        cached = Cached(make(), texts)
        auto: dict[str, list[tuple[float, float]]] = defaultdict(list)
        fit: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for train, test in splits:
            cached.reset()
            for lang, v in per_lang(cached, test).items():
                auto[lang].append(v)
            cached.router.fit([(text, label) for _, label, text in train])
            for lang, v in per_lang(cached, test).items():
                fit[lang].append(v)
        cached.reset()
        ms = timing(make, tests, e5_uncached, args.timing) if args.timing else float("nan")
        rows.append((name, auto, fit, ms))
        curves[name] = oracle_curve(cached, splits)
        if args.plot:
            args.plot.mkdir(parents=True, exist_ok=True)
            for lang in LANGS:
                rep = evaluate(cached, [(text, label) for lg, label, text in tests if lg == lang])
                try:
                    safe = "".join(c if c.isalnum() else "_" for c in name)
                    rep.plot(str(args.plot / f"sweep-{safe}-{lang}.png"), title=f"{name} ({lang})")
                except ImportError as exc:
                    print(f"(no plot: {exc})")
                    args.plot = None
                    break
        print(f"  measured {name}", file=sys.stderr, flush=True)
    memory.append(("after all routers", rss_mb()))

    print("\n### In-scope accuracy / off-topic rejected, %, mean ± sd over the splits (test halves)\n")
    print("| encoder, scoring | calibration | " + " | ".join(LANGS) + " | mean | ms/message |")
    print("|---|---|" + "---|" * len(LANGS) + "---|---|")
    for name, auto, fit, ms in rows:
        for cal, res in (("auto", auto), ("fit", fit)):
            cells = " | ".join(
                f"{mean_sd([v[0] for v in res[lg]])} / {mean_sd([v[1] for v in res[lg]])}" for lg in LANGS
            )
            mi = statistics.mean(v[0] for lg in LANGS for v in res[lg])
            mo = statistics.mean(v[1] for lg in LANGS for v in res[lg])
            print(f"| {name} | {cal} | {cells} | {100 * mi:.1f} / {100 * mo:.1f} | {ms:.1f} |")

    print("\n### Oracle decider on the uncertain band (auto thresholds, test halves, mean over the splits)\n")
    print("band = width of the uncertain band, in units of the router's spread; share = messages sent to the decider")
    for name, curve in curves.items():
        if not name.endswith(("(recommended)", "(default)")) and name != "e5":
            continue
        print(f"\n{name}:\n")
        print("| band | " + " | ".join(f"{lg} in-scope / off-topic / share" for lg in LANGS) + " |")
        print("|---|" + "---|" * len(LANGS))
        for band, res in curve.items():
            cells = " | ".join(
                " / ".join(f"{100 * statistics.mean(v[i] for v in res[lg]):.1f}" for i in range(3)) for lg in LANGS
            )
            print(f"| {band} | {cells} |")
        need = []
        for lg in LANGS:
            hit = next((res[lg] for _, res in curve.items() if statistics.mean(v[0] for v in res[lg]) >= 0.95), None)
            need.append(f"{lg} {mean_sd([v[2] for v in hit])} %" if hit else f"{lg} not reached")
        print("\ndecider share needed for 95 % in-scope (mean ± sd): " + ", ".join(need))

    print("\n### Memory (resident set of this process)\n")
    for what, mb in memory:
        print(f"- {what}: {mb:.0f} MB")


if __name__ == "__main__":
    main()
