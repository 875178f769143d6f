"""The fault campaign's migration: a prefix of older-format threads migrated, and one deleted,
through the fault proxy; then a clean run, and the checker.

The prefix holds the format-1 fixture (``tests/fixtures/format1_store.tar.gz``) plus copies of
one of its threads, and the saver migrates with ``stamped()`` (``tests/checkpoint/test_migrate``):
a schema step that is not idempotent, so a checkpoint migrated twice (a write whose answer was
lost, then redone) would show two stamps. Under faults, ``migrate`` runs a few times: a thread
may fail (reported in the summary with its error, which must be typed) or the whole call be
refused with a typed error, and the next run picks up what is left. After the faults stop, a
clean run must finish with no thread failed, and every thread must read back as it did before
the migration (readers apply the migrations on read, so the two views must be equal), at the
current schema, with ``verify`` finding nothing; the deleted thread must be gone.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import langgraph_handoff.errors as errors
from langgraph_handoff import Layout, ObjectStoreSaver
from langgraph_handoff.checkpoint.plans.migrate import MigrationSummary
from tests.checkpoint.test_migrate import schemas, stamped
from tests.support.fault_campaign import Report, attempt, check_store, under_faults
from tests.support.fault_proxy import FaultProxy
from tests.support.fault_stores import StoreSpec
from tests.support.migrate_helpers import fixture_into, seen

__all__ = ["run_migrate"]

DELETED = "copy-0"


def _typed(name: str) -> bool:
    cls = getattr(errors, name, None)
    return isinstance(cls, type) and issubclass(cls, errors.LangGraphHandoffError)


def run_migrate(
    proxy: FaultProxy,
    spec: StoreSpec,
    *,
    seed: int,
    copies: int = 2,
    runs: int = 3,
    rate: float = 0.1,
    partition_seconds: float = 0.3,
) -> Report:
    report = Report()
    with tempfile.TemporaryDirectory(prefix="lgh-migrate-") as tmp:
        clean = ObjectStoreSaver(fixture_into(spec(proxy.upstream), Path(tmp)), migrations=stamped())
    for n in range(copies):
        clean.copy_thread("chat-0", f"copy-{n}")
    threads = sorted(clean.thread_ids())
    expected = seen(clean, threads)
    faulty = ObjectStoreSaver(spec(proxy.url), migrations=stamped(), layout=Layout(backoff=0.005))
    summaries: list[MigrationSummary] = []

    def migrate() -> None:
        summaries.append(faulty.migrate(concurrency=4))

    def record(summary: MigrationSummary) -> None:
        for result in summary.results:
            report.figures[f"threads {result.status}"] += 1
            report.acknowledged += result.status == "migrated"
            if result.status == "failed" and result.error is not None:
                name = result.error.split(":", 1)[0]
                if _typed(name):
                    report.typed[name] += 1
                    report.samples.setdefault(name, f"migrate {result.thread_id}: {result.error}"[:400])
                else:
                    report.untyped.append(f"migrate {result.thread_id}: {result.error}"[:300])

    with under_faults(proxy, report, seed=seed, rate=rate, partition_seconds=partition_seconds):
        for _ in range(runs):
            report.invokes += 1
            if attempt(report, "migrate", migrate):
                record(summaries[-1])
                if summaries[-1].failed == 0:
                    break
        deleted = attempt(report, f"delete_thread {DELETED}", lambda: faulty.delete_thread(DELETED))
        report.maintenance[f"delete_thread {'ok' if deleted else 'refused'}"] += 1
    # the faults stopped: a clean run finishes what is left, and a refused delete is done again
    if not attempt(report, "migrate after the faults", migrate) or summaries[-1].failed:
        report.unusable.append(f"a clean migrate after the faults failed: {summaries[-1].results if summaries else ''}")
    if not deleted and not attempt(report, "delete after the faults", lambda: faulty.delete_thread(DELETED)):
        report.unusable.append(f"deleting {DELETED} after the faults failed")
    fresh = ObjectStoreSaver(spec(proxy.upstream), migrations=stamped())
    kept = [t for t in threads if t != DELETED]
    now = seen(fresh, kept)
    for t in kept:
        if now[t] != expected[t]:
            report.lost.append(f"{t}: reads back differently after the migration")
    if fresh.get_tuple({"configurable": {"thread_id": DELETED}}) is not None:
        report.unusable.append(f"{DELETED}: still there after delete_thread")
    if (found := schemas(fresh, kept)) != {3}:
        report.unusable.append(f"schemas after the migration: {found}")
    check_store(report, fresh)
    report.figures["threads"] += len(threads)
    for saver in (clean, faulty, fresh):
        saver.store.close()
    return report
