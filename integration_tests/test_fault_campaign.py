"""The fault campaign's short run, in the test command: seeded rounds through the fault proxy in
front of Ceph RGW, Azurite and fake-gcs-server. Graph turns and maintenance on every store and
S3 transport (``tests/support/fault_campaign.py`` says what a round does and what the checker
fails on); racing processes, session ownership, a team with SIGKILLs and a migration on one store each
(:data:`SHORT`: the two process-heavy ones on S3, the others on Azure and GCS), to keep the
short run short; the long run, ``scripts/faults --minutes N``, runs every scenario on every
store."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from conftest import S3_BUCKET, S3_ENDPOINT, _need_s3, need_azurite, need_gcs_emulator
from tests.support.fault_campaign import Report, run_round, summary
from tests.support.fault_migrate import run_migrate
from tests.support.fault_proxy import FaultProxy, fault_proxy
from tests.support.fault_racers import run_racers
from tests.support.fault_sessions import run_sessions
from tests.support.fault_stores import STORES, StoreSpec
from tests.support.fault_team import run_team

pytestmark = [pytest.mark.s3, pytest.mark.heavy]
SEED = 20261207

#: every scenario: ``run(proxy, spec, seed=..., rate=...) -> Report``
SCENARIOS: dict[str, Callable[..., Report]] = {
    "turns": lambda proxy, spec, **kw: run_round(proxy, spec, use_async=spec.use_async, **kw),
    "racers": run_racers,
    "sessions": run_sessions,
    "team": run_team,
    "migrate": run_migrate,
}


def spec_for(kind: str) -> StoreSpec:
    """A fresh prefix on the server of ``kind`` (failing, not skipping, when ``scripts/test``
    should have started it)."""
    prefix = f"t-{uuid.uuid4().hex}"
    if kind.startswith("s3-"):
        _need_s3()
        assert S3_ENDPOINT is not None
        return StoreSpec(kind, prefix, S3_ENDPOINT, container=S3_BUCKET)
    if kind == "azure":
        base, account = need_azurite().rsplit("/", 1)
        return StoreSpec(kind, prefix, base, account=account)
    return StoreSpec(kind, prefix, need_gcs_emulator())


def run(scenario: str, kind: str, *, seed: int, **kw: object) -> Report:
    spec = spec_for(kind)
    proxy: FaultProxy
    with fault_proxy(spec.upstream) as proxy:
        return SCENARIOS[scenario](proxy, spec, seed=seed, **kw)


@pytest.mark.parametrize("kind", STORES)
def test_a_short_seeded_round_loses_and_forks_nothing(kind: str) -> None:
    report = run("turns", kind, seed=SEED)
    assert sum(report.injected.values()) > 0 and report.acknowledged > 0
    assert report.failures == [], report.failures


#: the store each scenario runs on in the short run (the long run runs each on every store)
SHORT = {"racers": "s3-obstore", "team": "s3-boto3", "sessions": "azure", "migrate": "gcs"}


@pytest.mark.parametrize("scenario", list(SHORT))
def test_a_short_seeded_scenario_loses_and_forks_nothing(scenario: str) -> None:
    report = run(scenario, SHORT[scenario], seed=SEED)
    print(scenario, SHORT[scenario], summary(report))  # what it did, in the test's output
    # it ran, under faults (else the failures say why it could not)
    assert sum(report.injected.values()) > 0 and report.invokes > 0, report.failures[:3]
    assert report.failures == [], report.failures
