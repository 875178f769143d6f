"""How the briefing check does on the support-desk data (bench/routing_data.py).

Every held-out message of the data (English, Chinese, Hebrew) becomes a briefing, written the way a
model writes one ("The customer says: ... Please take it from here."), and is handed to every
agent of the desk: to its own label, a **good** handoff; to any other agent, or any off-topic
message to any agent, a **wrong** one. The check should pass the good and catch the wrong ones.

It prints, per language and overall, the share of good handoffs refused and of wrong ones caught,
and which step decided (keyword or semantic), for the char n-gram encoder (offline, the default)
and, when the ``[e5]`` extra is installed, the recommended mix.

Run: nice -n 10 .venv/bin/python bench/briefing_check.py
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from routing_data import DESCRIPTIONS, EXAMPLES, ROUTES, TESTS

from langgraph_handoff.handoff import BriefingCheck, HandoffAgent
from langgraph_handoff.routing import Route, SemanticRouter, e5_available, recommended_encoder

TEMPLATES = {
    "en": "The customer says: {q} Please take it from here and help them with this.",
    "zh": "客户说：{q} 请您接手处理，帮客户解决这个问题。",
    "he": "הלקוח כותב: {q} בבקשה תמשיך מכאן ותעזור לו עם זה.",
}


def routes() -> list[Route]:
    return [
        Route(name, description=DESCRIPTIONS[name], examples=[ex for lang in EXAMPLES for ex in EXAMPLES[lang][name]])
        for name in ROUTES
    ]


def measure(label: str, encoder: object, slack: float) -> None:
    router = SemanticRouter(routes(), encoder=encoder)
    agents = [HandoffAgent(name, None, description=DESCRIPTIONS[name]) for name in ROUTES]
    check = BriefingCheck(slack=slack).bind(agents, router)
    tally: dict[str, Counter[str]] = defaultdict(Counter)
    for lang, truth, text in TESTS:
        briefing = TEMPLATES[lang].format(q=text)
        for target in ROUTES:
            v = check.verdict(target, briefing)
            good = target == truth
            kind = "good" if good else "wrong"
            for key in (lang, "all"):
                tally[key][kind] += 1
                tally[key][f"{kind}_{'pass' if v.ok else 'fail'}"] += 1
                tally[key][f"{kind}_{'pass' if v.ok else 'fail'}_{v.by}"] += 1
    print(f"\n{label}, slack {slack:g}")
    print("| language | good handoffs | refused | wrong handoffs | caught | wrong passed on a keyword / on meaning |")
    print("|---|---|---|---|---|---|")
    for key in ("en", "zh", "he", "all"):
        t = tally[key]
        refused = t["good_fail"] / t["good"]
        caught = t["wrong_fail"] / t["wrong"]
        kw, sem = t["wrong_pass_keyword"], t["wrong_pass_semantic"]
        print(f"| {key} | {t['good']} | {refused:.1%} | {t['wrong']} | {caught:.1%} | {kw} / {sem} |")


def main() -> None:
    for slack in (2.0, 1.0):
        measure("char n-grams (offline default)", None, slack)
        if e5_available():
            measure("recommended (char n-grams + e5)", recommended_encoder(), slack)


if __name__ == "__main__":
    main()
