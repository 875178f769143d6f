"""How many examples a route needs before its automatic threshold can be trusted.

Routers built from ``n`` English examples per route of bench/routing_data.py (6 random subsets
for each ``n`` below 8; all 8 examples once), thresholds calibrated from the examples alone, scored
on the 150 English test messages (120 in scope, 30 off-topic). Reports the mean in-scope accuracy
and off-topic rejection, the worst subset's rejection, the router's calibration spread, and how
many of three off-topic requests ("tell me a joke", ...) were routed to an agent.

The result set ``semantic.MIN_CALIBRATION_EXAMPLES`` (a router warns below it).

Run: nice -n 10 .venv/bin/python bench/routing_few_examples.py [--encoder recommended|char] [--subsets 6]
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from routing_data import EXAMPLES, ROUTES, TESTS

from langgraph_handoff.routing import CharNgramEncoder, Route, SemanticRouter, evaluate, recommended_encoder

OFF_TOPIC = ["tell me a joke", "what's the weather tomorrow", "write me a poem about cats"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encoder", choices=["recommended", "char"], default="recommended")
    parser.add_argument("--subsets", type=int, default=6)
    args = parser.parse_args()
    logging.getLogger("langgraph_handoff.routing").setLevel(logging.ERROR)  # the few-examples warning, measured here
    english = [(text, label) for lang, label, text in TESTS if lang == "en"]
    print("n  in-scope  off-topic  (worst)  spread  jokes routed")
    for n in (2, 3, 4, 5, 6, 8):
        rows = []
        for subset in range(args.subsets if n < 8 else 1):
            rng = random.Random(1000 * n + subset)
            routes = [
                Route(r, examples=rng.sample(EXAMPLES["en"][r], n) if n < 8 else EXAMPLES["en"][r]) for r in ROUTES
            ]
            encoder = recommended_encoder() if args.encoder == "recommended" else CharNgramEncoder()
            router = SemanticRouter(routes, encoder=encoder, fallback="fallback")
            report = evaluate(router, english)
            routed = sum(router.route(text).target != "fallback" for text in OFF_TOPIC)
            rows.append((report.in_scope_accuracy, report.off_topic_rejection or 0.0, router.spread, routed))
        mean = [statistics.mean(r[i] for r in rows) for i in range(4)]
        worst = min(r[1] for r in rows)
        print(f"{n}  {mean[0]:7.1%}  {mean[1]:8.1%}  ({worst:5.1%})  {mean[2]:.4f}  {mean[3]:.2f} of 3")


if __name__ == "__main__":
    main()
