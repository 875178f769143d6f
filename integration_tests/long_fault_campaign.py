"""The fault campaign's long run (``scripts/faults [--minutes N] [--seed S]``): seeded rounds
on every store and S3 transport in turn, for ``LGH_FAULT_MINUTES`` minutes, each round a new
seed and a higher fault rate, then the figures. Not collected by the test command (its name
does not start with ``test_``); ``scripts/faults`` names it."""

from __future__ import annotations

import itertools
import os
import time

from integration_tests.test_fault_campaign import SEED, _maker
from tests.support.fault_campaign import Report, table
from tests.support.fault_campaign import run_round as round_on
from tests.support.fault_proxy import fault_proxy

STORES = ("s3-boto3", "s3-obstore", "s3-loop", "azure", "gcs")
RATES = (0.05, 0.1, 0.2, 0.3)


def test_the_long_campaign() -> None:
    minutes = float(os.environ.get("LGH_FAULT_MINUTES", "20"))
    seed = int(os.environ.get("LGH_FAULT_SEED", str(SEED)))
    until = time.monotonic() + minutes * 60
    reports = {name: Report() for name in STORES}
    rounds = 0
    for n in itertools.count():
        if time.monotonic() > until:
            break
        name, rate = STORES[n % len(STORES)], RATES[(n // len(STORES)) % len(RATES)]
        upstream, make = _maker(name)
        with fault_proxy(upstream) as proxy:
            report = round_on(proxy, make, seed=seed + n, rate=rate, threads=4, turns=6, use_async=name == "s3-loop")
        reports[name].add(report)
        rounds += 1
        for failure in report.failures:
            print(f"round {n} ({name}, seed {seed + n}, rate {rate}): {failure}")
    total = Report()
    for r in reports.values():
        total.add(r)
    print(f"\nfault campaign: {rounds} rounds in {minutes:g} min, seeds {seed}..{seed + rounds - 1}")
    print(table(reports))
    print("faults injected:", dict(total.injected.most_common()))
    print("typed errors seen by callers:", dict(total.typed.most_common()))
    print("maintenance:", dict(total.maintenance.most_common()))
    for name, text in total.samples.items():
        print(f"  {name}, e.g. {text}")
    assert total.failures == [], total.failures[:20]
