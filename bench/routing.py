"""Routing quality on bench/routing_data.py: English, Chinese and Hebrew, with in-language examples.

For each encoder it reports, per language: in-scope accuracy (the right agent), off-topic rejection
(sent to the fallback), in-scope messages wrongly rejected, and overall accuracy.

Two calibrations are measured:
- "auto": thresholds derived from the route examples only (no labelled messages);
- "fit (2-fold)": thresholds and margin fitted on half of the labelled test messages and measured on
  the other half, then the halves swapped (so every number is on messages the fit never saw).

Run: .venv/bin/python bench/routing.py   (add --markdown for the README table)
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from routing_data import DESCRIPTIONS, EXAMPLES, ROUTES, TESTS

from langgraph_handoff.routing import (
    CharNgramEncoder,
    CombinedEncoder,
    HybridRouter,
    Route,
    Rule,
    SemanticRouter,
    evaluate,
)

LANGS = ["en", "zh", "he"]

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


def routes() -> list[Route]:
    return [Route(r, DESCRIPTIONS[r], [ex for lang in LANGS for ex in EXAMPLES[lang][r]]) for r in ROUTES]


def encoders() -> dict[str, object]:
    out: dict[str, object] = {
        "char 3-5 + CJK 1-2 (default)": None,
        "same, unseen n-grams ignored": CharNgramEncoder(unknown="ignore"),
        "char 2-4 + CJK 1-2": CharNgramEncoder((2, 4)),
        "char 2-4, CJK as words (first try)": CharNgramEncoder((2, 4), cjk_range=(2, 4)),
    }
    try:
        from langgraph_handoff.routing import WordLlamaEmbeddings

        wl = WordLlamaEmbeddings()
        out["wordllama 256-d"] = wl
        out["0.5 char + 0.5 wordllama"] = CombinedEncoder([CharNgramEncoder(), wl], [0.5, 0.5])
        out["0.7 char + 0.3 wordllama"] = CombinedEncoder([CharNgramEncoder(), wl], [0.7, 0.3])
    except Exception as exc:  # noqa: BLE001 - optional dependency; say why it is missing
        print(f"(wordllama skipped: {exc})", file=sys.stderr)
    return out


def folds(tests: list[tuple[str, str | None, str]]) -> tuple[list, list]:
    """Two halves, stratified by (language, label)."""
    groups: dict[tuple[str, str | None], list] = defaultdict(list)
    for t in tests:
        groups[(t[0], t[1])].append(t)
    a, b = [], []
    for items in groups.values():
        for i, t in enumerate(items):
            (a if i % 2 == 0 else b).append(t)
    return a, b


def per_lang(router, tests) -> dict[str, dict[str, float]]:
    out = {}
    for lang in LANGS:
        rep = evaluate(router, [(text, label) for lg, label, text in tests if lg == lang])
        out[lang] = {
            "in_scope": rep.in_scope_accuracy,
            "off_topic": rep.off_topic_rejection or 0.0,
            "false_reject": rep.false_rejection,
            "acc": rep.accuracy,
            "n": rep.n,
        }
    return out


def merge(a: dict, b: dict) -> dict:
    return {
        lang: {
            k: (a[lang][k] * a[lang]["n"] + b[lang][k] * b[lang]["n"]) / (a[lang]["n"] + b[lang]["n"])
            for k in a[lang]
            if k != "n"
        }
        | {"n": a[lang]["n"] + b[lang]["n"]}
        for lang in a
    }


def run(markdown: bool) -> None:
    logging.disable(logging.INFO)
    tests = [(lg, label, text) for lg, label, text in TESTS]
    rows = []
    for name, enc in encoders().items():
        t0 = time.perf_counter()
        router = SemanticRouter(routes(), encoder=enc, fallback="fallback_desk")
        build = time.perf_counter() - t0
        t0 = time.perf_counter()
        auto = per_lang(router, tests)
        per_msg_ms = (time.perf_counter() - t0) / len(tests) * 1000
        rows.append((name, "auto", auto, build, per_msg_ms))
        half_a, half_b = folds(tests)
        results = []
        for train, test in ((half_a, half_b), (half_b, half_a)):
            r = SemanticRouter(routes(), encoder=enc, fallback="fallback_desk")
            r.fit([(text, label) for _, label, text in train])
            results.append(per_lang(r, test))
        rows.append((name, "fit (2-fold)", merge(*results), build, per_msg_ms))
        # the cascade: multilingual "human" rules first, then the fitted semantic router
        results = []
        for train, test in ((half_a, half_b), (half_b, half_a)):
            r = SemanticRouter(routes(), encoder=enc, fallback="fallback_desk")
            r.fit([(text, label) for _, label, text in train])
            hybrid = HybridRouter(rules=[HUMAN_RULE], semantic=r)
            results.append(per_lang(hybrid, test))
        rows.append((name, "rules + fit (2-fold)", merge(*results), build, per_msg_ms))

    if markdown:
        print(
            "| encoder | calibration | "
            + " | ".join(f"{lg} in-scope / off-topic rejected" for lg in LANGS)
            + " | ms per message |"
        )
        print("|---|---|" + "---|" * len(LANGS) + "---|")
        for name, cal, res, _build, ms in rows:
            cells = " | ".join(f"{res[lg]['in_scope']:.1%} / {res[lg]['off_topic']:.1%}" for lg in LANGS)
            print(f"| {name} | {cal} | {cells} | {ms:.2f} |")
    else:
        for name, cal, res, build, ms in rows:
            print(f"{name:<36} {cal:<22} build {build * 1000:6.1f} ms, {ms:.2f} ms/message")
            for lg in LANGS:
                r = res[lg]
                print(
                    f"    {lg}: in-scope {r['in_scope']:6.1%}  off-topic rejected {r['off_topic']:6.1%}  "
                    f"in-scope rejected {r['false_reject']:6.1%}  overall {r['acc']:6.1%}"
                )
    print(
        f"\n{len(TESTS)} labelled messages ({sum(1 for t in TESTS if t[1] is None)} off-topic); "
        f"{sum(len(v) for lang in EXAMPLES.values() for v in lang.values())} route examples",
        file=sys.stderr,
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    run(parser.parse_args().markdown)
