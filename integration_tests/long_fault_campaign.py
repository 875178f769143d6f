"""The fault campaign's long run (``scripts/faults [--minutes N] [--seed S]``): seeded rounds of
every scenario (graph turns and maintenance, racing processes, session ownership, a team with
SIGKILLs, a migration) on every store and S3 transport in turn, for ``LGH_FAULT_MINUTES``
minutes, each round a new seed and the next fault rate of :data:`RATES` (4 rates, 25 pairs: every
cycle has every rate, and every pair meets every rate in 4 cycles); then the figures per store
and scenario. Not collected by the test command (its name does not start with ``test_``);
``scripts/faults`` names it."""

from __future__ import annotations

import itertools
import os
import time

from integration_tests.test_fault_campaign import SCENARIOS, SEED, run
from tests.support.fault_campaign import Report, table
from tests.support.fault_stores import STORES

RATES = (0.05, 0.1, 0.2, 0.3)
#: every (scenario, store) pair once per cycle, the scenarios of one store back to back
PAIRS = [(scenario, store) for store in STORES for scenario in SCENARIOS]


def test_the_long_campaign() -> None:
    minutes = float(os.environ.get("LGH_FAULT_MINUTES", "20"))
    seed = int(os.environ.get("LGH_FAULT_SEED", str(SEED)))
    until = time.monotonic() + minutes * 60
    reports = {f"{store} {scenario}": Report() for scenario, store in PAIRS}
    rounds = 0
    for n in itertools.count():
        if time.monotonic() > until:
            break
        (scenario, store), rate = PAIRS[n % len(PAIRS)], RATES[n % len(RATES)]
        report = run(scenario, store, seed=seed + n, rate=rate)
        reports[f"{store} {scenario}"].add(report)
        rounds += 1
        for failure in report.failures:
            print(f"round {n} ({store} {scenario}, seed {seed + n}, rate {rate}): {failure}")
    total = Report()
    for r in reports.values():
        total.add(r)
    print(f"\nfault campaign: {rounds} rounds in {minutes:g} min, seeds {seed}..{seed + rounds - 1}")
    print(table(reports))
    print("faults injected:", dict(total.injected.most_common()))
    print("typed errors seen by callers:", dict(total.typed.most_common()))
    print("maintenance:", dict(total.maintenance.most_common()))
    print("scenarios:", dict(total.figures.most_common()))
    for name, text in total.samples.items():
        print(f"  {name}, e.g. {text}")
    assert total.failures == [], total.failures[:20]
