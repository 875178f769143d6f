"""Our saver and store as extra variants of LangGraph's own test suite.

LangGraph's ``tests/conftest.py`` parametrizes ``sync_checkpointer``, ``async_checkpointer``,
``sync_store`` and ``async_store`` over named variants. ``scripts/langgraph_suite/run.py``
appends one import of this module's fixtures to that conftest, so the same names then yield
our saver (and store) instead, and loads this module as a plugin (``-p lgh_suite``) for its
hooks: which variant runs which file, what is left out and why, and a count per variant.

Variants (``LGH_SUITE_VARIANTS``, comma-separated):

* ``memory``: LangGraph's own ``InMemorySaver`` (its immutability-asserting subclass) and
  ``InMemoryStore``, the reference the rule is stated against;
* ``handoff_memory``: ``ObjectStoreSaver`` / ``ObjectStoreMemory`` on ``memory://``;
* ``handoff_file``: on ``file://``, a fresh directory on tmpfs per test (LangGraph's tests time
  100 ms streaming windows; an fsync on a loaded disk is not what they test), with a layout
  that stores every value that only appended as a tail and spills every value of an older
  checkpoint, so every ``DeltaChannel`` snapshot goes to blobs and, when it only appended, to
  pieces (``Layout(tail_min_base=1, spill_threshold=1)``): LangGraph's tests judge tails,
  spills and pieces too, not only the default layout's whole values;
* ``handoff_s3``: on the real S3 server ``scripts/test`` starts (``S3_ENDPOINT_URL``), a fresh
  prefix per test, for the files in :data:`S3_FILES` only (the time budget).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from langgraph_handoff import Layout, ObjectStoreSaver
from langgraph_handoff.memory import ObjectStoreMemory

OURS = ("handoff_memory", "handoff_file", "handoff_s3")
VARIANTS = tuple(v for v in os.environ.get("LGH_SUITE_VARIANTS", ",".join(OURS)).split(",") if v)

#: the files whose checkpointer tests also run on S3: time travel, delta channels, subgraph
#: persistence and interrupts, where the write rule and the stored format meet LangGraph most
S3_FILES = (
    "test_time_travel.py",
    "test_time_travel_async.py",
    "test_delta_channel_",
    "test_subgraph_persistence.py",
    "test_subgraph_persistence_async.py",
    "test_interrupt_state.py",
    "test_interruption.py",
)

#: Tests left out, each with its reason (a node id prefix, as pytest prints it, without the
#: parameters: every variant of it is left out). Nothing else may fail.
LEFT_OUT: dict[str, str] = {}

#: Tests that time stream chunks against wall-clock windows 100 ms wide. ``run.py`` runs them
#: alone after the rest, one process and no other test beside them: next to a second busy
#: worker on two cores, LangGraph's own ``InMemorySaver`` misses those windows too (1 run in 20
#: with three CPU-bound processes beside it, measured 2026-12-08), so a miss there says nothing
#: about a saver. ``LGH_SUITE_PHASE``: ``shared`` runs all but these, ``alone`` only these,
#: ``all`` (the default) both.
WALL_CLOCK = (
    "tests/test_pregel.py::test_stream_subgraphs_during_execution",
    "tests/test_pregel.py::test_stream_buffering_single_node",
    "tests/test_pregel_async.py::test_stream_subgraphs_during_execution",
    "tests/test_pregel_async.py::test_stream_buffering_single_node",
)
PHASE = os.environ.get("LGH_SUITE_PHASE", "all")


_BUCKET_READY: list[bool] = []


def _s3_url() -> str:
    endpoint = os.environ.get("S3_ENDPOINT_URL")
    if not endpoint:
        pytest.fail("handoff_s3 needs S3_ENDPOINT_URL (scripts/test starts Ceph RGW and sets it)")
    bucket = os.environ.get("LGH_TEST_BUCKET", "lgh-tests")
    return f"s3://{bucket}/lgsuite-{uuid.uuid4().hex}?endpoint_url={endpoint}"


@contextlib.contextmanager
def _tmpfs_dir() -> Iterator[Path]:
    base = "/dev/shm" if Path("/dev/shm").is_dir() else None
    path = Path(tempfile.mkdtemp(prefix="lgsuite-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def _our_saver(variant: str) -> Iterator[ObjectStoreSaver]:
    if variant == "handoff_memory":
        with ObjectStoreSaver.from_url("memory://") as saver:
            yield saver
    elif variant == "handoff_file":
        tails = Layout(tail_min_base=1, spill_threshold=1)
        with _tmpfs_dir() as path, ObjectStoreSaver.from_url(f"file://{path}", layout=tails) as saver:
            yield saver
    elif variant == "handoff_s3":
        # the first test of each worker makes sure the bucket exists (about 0.15 s a call)
        with ObjectStoreSaver.from_url(_s3_url(), create_bucket=not _BUCKET_READY) as saver:
            _BUCKET_READY.append(True)
            yield saver
    else:
        raise NotImplementedError(f"unknown variant {variant!r}")


def _reference_saver() -> Any:
    from tests.conftest_checkpointer import _checkpointer_memory  # LangGraph's own

    return _checkpointer_memory()


@pytest.fixture(params=VARIANTS)
def sync_checkpointer(request: pytest.FixtureRequest) -> Iterator[Any]:
    with _reference_saver() if request.param == "memory" else _our_saver(request.param) as saver:
        yield saver


@pytest.fixture(params=VARIANTS)
async def async_checkpointer(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    with _reference_saver() if request.param == "memory" else _our_saver(request.param) as saver:
        yield saver


STORE_VARIANTS = tuple(v for v in VARIANTS if v in ("memory", "handoff_memory"))


@contextlib.contextmanager
def _store(variant: str) -> Iterator[Any]:
    if variant == "memory":
        from langgraph.store.memory import InMemoryStore

        yield InMemoryStore()
    else:
        yield ObjectStoreMemory.from_url("memory://")


@pytest.fixture(params=STORE_VARIANTS)
def sync_store(request: pytest.FixtureRequest) -> Iterator[Any]:
    with _store(request.param) as store:
        yield store


@pytest.fixture(params=STORE_VARIANTS)
async def async_store(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    with _store(request.param) as store:
        yield store


# -- hooks (this module is also loaded as a plugin: -p lgh_suite) -------------------------------


SAVER_FIXTURES = ("sync_checkpointer", "async_checkpointer")
STORE_FIXTURES = ("sync_store", "async_store")


def variants_of(item: pytest.Item) -> tuple[str | None, str | None]:
    """(saver variant, store variant) a collected test runs on."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    saver = next((params[f] for f in SAVER_FIXTURES if f in params), None)
    store = next((params[f] for f in STORE_FIXTURES if f in params), None)
    return saver, store


def _left_out_reason(nodeid: str) -> str | None:
    bare = nodeid.split("[", 1)[0]
    for prefix, reason in LEFT_OUT.items():
        if bare == prefix or bare.startswith(prefix + "::"):
            return reason
    return None


def _wall_clock(nodeid: str) -> bool:
    return nodeid.split("[", 1)[0] in WALL_CLOCK


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep, drop = [], []
    for item in items:
        saver, store = variants_of(item)
        filename = item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
        if (
            (saver is None and store is None)  # takes neither a saver nor a store: not ours to run
            or (saver == "handoff_s3" and not filename.startswith(S3_FILES))
            or _left_out_reason(item.nodeid) is not None
            or (PHASE == "shared" and _wall_clock(item.nodeid))
            or (PHASE == "alone" and not _wall_clock(item.nodeid))
        ):
            drop.append(item)
        else:
            # travels with the test's reports to the pytest-xdist controller, which counts them
            item.user_properties.append(("lgh_variant", _label(saver, store)))
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _label(saver: str | None, store: str | None) -> str:
    if store is None:
        return f"saver {saver}"
    return f"store {store}" + (f", saver {saver}" if saver else "")


#: (variant, outcome) -> tests; filled on the controller when pytest-xdist runs the workers
_OUTCOMES: Counter[tuple[str, str]] = Counter()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    variant = dict(report.user_properties).get("lgh_variant", "?")
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        _OUTCOMES[(str(variant), report.outcome)] += 1
    elif report.when == "teardown" and report.outcome == "failed":
        _OUTCOMES[(str(variant), "failed in teardown")] += 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    tr = terminalreporter
    tr.section("langgraph-handoff: LangGraph's suite per variant")
    for variant in sorted({v for v, _ in _OUTCOMES}):
        counts = {o: n for (v, o), n in _OUTCOMES.items() if v == variant}
        tr.write_line(f"{variant:40} " + ", ".join(f"{n} {o}" for o, n in sorted(counts.items())))
    if LEFT_OUT:
        tr.write_line("left out on purpose, every variant:")
        for bare, reason in sorted(LEFT_OUT.items()):
            tr.write_line(f"  {bare}: {reason}")
