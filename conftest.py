"""Shared pytest fixtures: stores to test against, and the real S3 server when it is there.

The S3 server is Ceph RGW started by ``scripts/test`` (S3_ENDPOINT_URL and AWS_* in the
environment). Under ``scripts/test`` (LGH_REQUIRE_S3=1) a missing server fails the S3 tests
instead of skipping them, so skipped tests are never counted as passes in CI.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from langgraph_handoff.stores import LocalStore, MemoryStore, S3Store, StoreBase
from langgraph_handoff.stores.obstore_s3 import ObstoreS3Store

S3_ENDPOINT = os.environ.get("S3_ENDPOINT_URL")
S3_BUCKET = os.environ.get("LGH_TEST_BUCKET", "lgh-tests")
#: moto 4.2.14's S3 server, started by scripts/test: it accepts conditional PUTs and ignores them
MOTO_ENDPOINT = os.environ.get("MOTO_ENDPOINT_URL")
#: Azurite's Blob service (account in the path), started by scripts/test
AZURITE_ENDPOINT = os.environ.get("AZURITE_ENDPOINT_URL")
#: fake-gcs-server's JSON API (plain HTTP, in memory), started by scripts/test
GCS_EMULATOR_ENDPOINT = os.environ.get("GCS_EMULATOR_ENDPOINT")
#: Arize Phoenix (OTLP/HTTP traces at /v1/traces, REST API at /v1), started by scripts/test
PHOENIX_ENDPOINT = os.environ.get("PHOENIX_ENDPOINT_URL")
#: Prometheus's HTTP API, and the loopback port it scrapes (the test serves its metrics there)
PROMETHEUS_URL = os.environ.get("PROMETHEUS_URL")
PROMETHEUS_SCRAPE_PORT = os.environ.get("PROMETHEUS_SCRAPE_PORT")


@pytest.hookimpl(trylast=True)  # after pytest-random-order's shuffle, which it keeps within each group
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``heavy`` (3 s or more: real processes, kills, RGW chaos) go first.

    Longest first is the classic schedule for a few long jobs among many short ones: under
    ``scripts/test`` (pytest-xdist, one test at a time) the short tests then fill the gaps, where
    a 45 s test started last would leave the other worker idle for most of it."""
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)


#: why a test marked ``obstore`` is skipped on Python 3.10
OBSTORE_SKIP_REASON = (
    "obstore needs Python 3.11+ (pyproject: obstore; python_version >= '3.11'), so the obstore "
    "transports cannot run on Python 3.10; boto3's S3Store is the S3 store there"
)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked ``obstore`` skip where obstore cannot be installed (Python 3.10) and fail,
    rather than skip, where it can but is missing: the test extra installs it on 3.11+."""
    if item.get_closest_marker("obstore") is None or importlib.util.find_spec("obstore") is not None:
        return
    if sys.version_info < (3, 11):
        pytest.skip(OBSTORE_SKIP_REASON)
    pytest.fail("obstore is not installed, but the test extra installs it on Python 3.11+: pip install -e '.[test]'")


@pytest.fixture
def fast_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory on tmpfs when the machine has one, for the kill-point tests: each of their
    100-odd runs unpacks or copies a local store and writes it with fsync, which on tmpfs costs
    nothing (durability is not what they test; the kills are)."""
    if not Path("/dev/shm").is_dir():
        yield tmp_path
        return
    path = Path(tempfile.mkdtemp(prefix="lgh-kills-", dir="/dev/shm"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _need_s3() -> None:
    if S3_ENDPOINT:
        return
    if os.environ.get("LGH_REQUIRE_S3") == "1":
        pytest.fail("S3_ENDPOINT_URL is not set but LGH_REQUIRE_S3=1: the S3 server did not start")
    pytest.skip("no S3 server (run scripts/test, which starts Ceph RGW)")


def need_moto() -> str:
    if MOTO_ENDPOINT:
        return MOTO_ENDPOINT
    if os.environ.get("LGH_REQUIRE_S3") == "1":
        pytest.fail("MOTO_ENDPOINT_URL is not set but LGH_REQUIRE_S3=1: the moto server did not start")
    pytest.skip("no moto server (run scripts/test, which starts one)")


def need_azurite() -> str:
    if AZURITE_ENDPOINT:
        return AZURITE_ENDPOINT
    if os.environ.get("LGH_REQUIRE_S3") == "1":
        pytest.fail("AZURITE_ENDPOINT_URL is not set but LGH_REQUIRE_S3=1: Azurite did not start")
    pytest.skip("no Azurite (run scripts/test, which installs and starts it)")


def need_gcs_emulator() -> str:
    if GCS_EMULATOR_ENDPOINT:
        return GCS_EMULATOR_ENDPOINT
    if os.environ.get("LGH_REQUIRE_S3") == "1":
        pytest.fail("GCS_EMULATOR_ENDPOINT is not set but LGH_REQUIRE_S3=1: fake-gcs-server did not start")
    pytest.skip("no fake-gcs-server (run scripts/test, which starts it)")


def need_phoenix(deadline: float = 120.0) -> str:
    """Phoenix's URL, once it answers: scripts/test starts it without waiting (it takes about
    11 s to come up, while the first tests run)."""
    if PHOENIX_ENDPOINT:
        give_up = time.monotonic() + deadline
        while True:
            try:
                with urllib.request.urlopen(f"{PHOENIX_ENDPOINT}/healthz", timeout=2):
                    return PHOENIX_ENDPOINT
            except OSError as exc:
                if time.monotonic() > give_up:
                    log = os.environ.get("PHOENIX_LOG", "its log")
                    pytest.fail(
                        f"Arize Phoenix did not answer on {PHOENIX_ENDPOINT} in {deadline:.0f} s ({exc}); see {log}"
                    )
            time.sleep(0.2)
    if os.environ.get("LGH_REQUIRE_S3") == "1":
        pytest.fail("PHOENIX_ENDPOINT_URL is not set but LGH_REQUIRE_S3=1: Arize Phoenix did not start")
    pytest.skip("no Arize Phoenix (run scripts/test, which installs and starts it)")


def need_prometheus() -> tuple[str, int]:
    """Prometheus's URL and the port it scrapes."""
    if PROMETHEUS_URL and PROMETHEUS_SCRAPE_PORT:
        return PROMETHEUS_URL, int(PROMETHEUS_SCRAPE_PORT)
    if os.environ.get("LGH_REQUIRE_S3") == "1":
        pytest.fail("PROMETHEUS_URL is not set but LGH_REQUIRE_S3=1: Prometheus did not start")
    pytest.skip("no Prometheus (run scripts/test, which installs and starts it)")


def make_s3_store(prefix: str | None = None, **kwargs: object) -> S3Store:
    _need_s3()
    return S3Store(
        S3_BUCKET,
        prefix=prefix or f"t-{uuid.uuid4().hex}",
        endpoint_url=S3_ENDPOINT,
        create_bucket=True,
        **kwargs,  # type: ignore[arg-type]
    )


def make_obstore_s3_store(prefix: str | None = None, **kwargs: object) -> ObstoreS3Store:
    """The same server through the obstore transport (installed by the test extra)."""
    _need_s3()
    return ObstoreS3Store(
        S3_BUCKET,
        prefix=prefix or f"t-{uuid.uuid4().hex}",
        endpoint_url=S3_ENDPOINT,
        create_bucket=True,
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.fixture(scope="session", autouse=True)
def _shared_s3_bucket() -> None:
    """The shared test bucket exists before the first test, whatever the order.

    Tests that hand a bucket name to other processes (a URL, a worker's store spec, a script)
    never create it themselves. Found by the flake hunt: in a random order that put
    ``test_processes_exit_cleanly_right_after_async_use`` first on a fresh RGW, all six of its
    processes got ``StoreNotFoundError``; it passed whenever another test had made the bucket."""
    if S3_ENDPOINT:
        make_s3_store().close()


@pytest.fixture
def memory_store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def local_store(tmp_path) -> LocalStore:  # type: ignore[no-untyped-def]
    return LocalStore(tmp_path / "store")


@pytest.fixture
def s3_store():  # type: ignore[no-untyped-def]
    store = make_s3_store()
    yield store
    store.close()


@pytest.fixture
def obstore_s3_store():  # type: ignore[no-untyped-def]
    store = make_obstore_s3_store()
    yield store
    store.close()


@pytest.fixture(params=["boto3", "obstore"])
def any_s3_store(request):  # type: ignore[no-untyped-def]
    """The S3 server through each transport: a test that takes it runs once per transport."""
    store = make_s3_store() if request.param == "boto3" else make_obstore_s3_store()
    yield store
    store.close()


@pytest.fixture(params=["memory", "local"])
def store(request, tmp_path) -> StoreBase:  # type: ignore[no-untyped-def]
    """The offline stores: every unit test that takes ``store`` runs on both."""
    if request.param == "memory":
        return MemoryStore()
    return LocalStore(tmp_path / "store")
