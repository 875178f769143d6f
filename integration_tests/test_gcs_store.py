"""GCSStore (google-cloud-storage) against fake-gcs-server, the GCS emulator started by
scripts/test: the store contract, conformance, graph runs equal to InMemorySaver, raw
compare-and-swap races from threads and from processes (one winner every round), the saver's
thread races, listing from a key, ``setup()`` and ``doctor``. The error mapping of every answer to
a conditional write is in ``tests/stores/test_gcs_canned.py`` (a canned endpoint)."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest

from conftest import need_gcs_emulator
from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff._format import envelope, keys
from langgraph_handoff.cli import main as cli_main
from langgraph_handoff.errors import InvalidConfigError, PreconditionFailedError, StoreError, StoreNotFoundError
from langgraph_handoff.stores import GCSStore, StoreBase, store_from_url
from langgraph_handoff.stores.base import Put
from tests.support.conformance_helpers import SyncRoutedSaver, run_conformance
from tests.support.gcs_helpers import BUCKET, make_gcs_store, process_cas_racer
from tests.support.graph_scenarios import acheck_runs_match_inmemory, check_runs_match_inmemory
from tests.support.processes import process_context
from tests.support.race_helpers import check_thread_race, race_cas, race_create_only
from tests.support.store_contract import StoreContract


@pytest.fixture
def gcs_store() -> Iterator[GCSStore]:
    store = make_gcs_store(need_gcs_emulator())
    yield store
    store.close()


class TestGCSStoreContract(StoreContract):
    @pytest.fixture
    def contract_store(self, gcs_store: GCSStore) -> StoreBase:
        return gcs_store


@pytest.mark.parametrize("api", ["async", "sync"])
async def test_conformance_on_fake_gcs(api: str) -> None:
    endpoint = need_gcs_emulator()
    cls = ObjectStoreSaver if api == "async" else SyncRoutedSaver
    counts = await run_conformance(f"gcs-{api}", lambda: cls(make_gcs_store(endpoint)))
    assert sum(p for p, _ in counts.values()) == 81


def test_graph_runs_match_inmemory(gcs_store: GCSStore) -> None:
    check_runs_match_inmemory(ObjectStoreSaver(gcs_store))


async def test_async_graph_runs_match_inmemory(gcs_store: GCSStore) -> None:
    await acheck_runs_match_inmemory(ObjectStoreSaver(gcs_store))


@pytest.mark.parametrize("fresh", [False, True], ids=["existing-thread", "new-thread"])
def test_threads_racing(fresh: bool, gcs_store: GCSStore) -> None:
    check_thread_race(gcs_store, fresh=fresh)


def test_compare_and_swap_is_atomic_under_racing_threads() -> None:
    """16 threads compare-and-swap one object from the same generation: exactly one wins each
    round, the others get 412, never retried into a false loss or a false win."""
    store = make_gcs_store(need_gcs_emulator(), max_workers=16)
    try:
        tally = race_cas(store, rounds=30, racers=16)
    finally:
        store.close()
    assert tally == {"won": 30, "lost-412": 30 * 15, "unknown-5xx": 0}, tally


def test_create_only_race_has_one_winner(gcs_store: GCSStore) -> None:
    race_create_only(gcs_store, rounds=20, racers=16)


@pytest.mark.parametrize("mode", ["cas", "create-only"])
def test_processes_racing_have_one_winner_per_round(mode: str, gcs_store: GCSStore) -> None:
    """4 OS processes, each with its own client and connections, race 10 rounds behind a
    process barrier; each round exactly one wins and its body is stored."""
    racers, rounds = 4, 10
    plan: list[tuple[str, str | None]] = []
    for rnd in range(rounds):
        key = f"prace/{mode}/{rnd}"
        plan.append((key, gcs_store.put(key, b"start", if_none_match=True) if mode == "cas" else None))
    ctx = process_context()
    with ctx.Manager() as manager, ctx.Pool(racers) as pool:
        barrier = manager.Barrier(racers)
        args = [(gcs_store.endpoint_url, gcs_store.prefix, plan, barrier, i) for i in range(racers)]
        results = pool.starmap(process_cas_racer, args)
    tally = Counter(outcome for per_racer in results for outcome in per_racer)
    assert tally == {"won": rounds, "lost": rounds * (racers - 1)}, tally
    for rnd, (key, _) in enumerate(plan):
        winners = [i for i in range(racers) if results[i][rnd] == "won"]
        assert len(winners) == 1, (rnd, results)
        assert gcs_store.get(key).body == f"racer-{winners[0]}".encode()  # type: ignore[union-attr]


async def test_delete_many_deletes_every_key_even_with_missing_ones(gcs_store: GCSStore) -> None:
    keys_ = [f"bd/{i:03d}" for i in range(120)]
    gcs_store.run_many([Put(k, b"d") for k in keys_])
    gcs_store.delete_many(["bd/missing-a", *keys_[:60], "bd/missing-b", *keys_[60:100]])
    assert [o.key for o in gcs_store.list("bd/")] == keys_[100:]
    await gcs_store.adelete_many(["bd/missing-c", *keys_[100:]])
    assert list(gcs_store.list("bd/")) == []


def test_list_with_start_after_and_pages(gcs_store: GCSStore) -> None:
    """GCS's startOffset is inclusive; the store's ``start_after`` is not."""
    for i in range(12):
        gcs_store.put(f"l/{i:02d}", b"x")
    gcs_store.put("l0", b"x")
    page = gcs_store.list_page("l/", start_after="l/03", max_keys=5)
    assert [o.key for o in page.items] == [f"l/{i:02d}" for i in range(4, 9)] and page.truncated
    last = gcs_store.list_page("l/", start_after="l/06", max_keys=5)
    assert [o.key for o in last.items] == [f"l/{i:02d}" for i in range(7, 12)] and not last.truncated
    assert [o.key for o in gcs_store.list("l/", start_after="l/09", page_size=1)] == ["l/10", "l/11"]
    assert [o.key for o in gcs_store.list("l", start_after="l/10")] == ["l/11", "l0"]
    listed = {o.key: o.etag for o in gcs_store.list("l/")}
    assert listed["l/05"] == gcs_store.get("l/05").etag  # type: ignore[union-attr]  # generations, both


def test_conditional_delete_is_refused_not_ignored(gcs_store: GCSStore) -> None:
    """fake-gcs-server ignores ifGenerationMatch on DELETE: the store refuses to send one."""
    etag = gcs_store.put("cd", b"x")
    with pytest.raises(StoreError, match="conditional delete"):
        gcs_store.delete("cd", if_match=etag)
    assert gcs_store.get("cd") is not None


def test_an_etag_that_is_no_generation_loses_at_the_server(gcs_store: GCSStore) -> None:
    gcs_store.put("g", b"x", if_none_match=True)
    for etag in ("0", "0" * 32, "abc", "9" * 40):
        with pytest.raises(PreconditionFailedError):
            gcs_store.put("g", b"y", if_match=etag)
        with pytest.raises(PreconditionFailedError):
            gcs_store.put("absent", b"y", if_match=etag)  # never a create
    assert gcs_store.get("g").body == b"x" and gcs_store.get("absent") is None  # type: ignore[union-attr]


def test_setup_probes_once_and_doctor_reports(capsys: pytest.CaptureFixture[str]) -> None:
    endpoint = need_gcs_emulator()
    make_gcs_store(endpoint).close()  # the bucket exists
    prefix = f"t-{uuid.uuid4().hex}"
    url = f"gs://{BUCKET}/{prefix}?endpoint_url={endpoint}"
    try:
        with ObjectStoreSaver.from_url(url) as saver:
            saver.setup()
            obj = saver.store.get(keys.FORMAT_MARKER_KEY)
            assert obj is not None
            marker, _ = envelope.decode_msgpack(obj.body, key=obj.key, expect=envelope.Kind.MARKER)
            assert marker["probe"]["passed"] > 0
            assert [o.key for o in saver.store.list("")] == [keys.FORMAT_MARKER_KEY, "meta/index"]  # scratch keys gone
        assert cli_main(["doctor", url, "--json", "--rounds", "2"]) in (0, None)
        report = json.loads(capsys.readouterr().out)
        assert report["trusted"] is True and report["problems"] == [], report
        assert (report["create_only"], report["compare_and_swap"]) == ("enforced", "enforced")
        assert report["conditional_delete"] == "not offered"
        assert report["list_after_write"] == "yes"
    finally:
        make_gcs_store(endpoint, prefix=prefix).close()


def test_from_url_and_emulator_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint = need_gcs_emulator()
    make_gcs_store(endpoint).close()
    prefix = f"t-{uuid.uuid4().hex}"
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint.removeprefix("http://"))
    with ObjectStoreSaver.from_url(f"gs://{BUCKET}/{prefix}/nested") as saver:
        store = saver.store
        assert isinstance(store, GCSStore) and store.prefix == f"{prefix}/nested/"
        assert store.endpoint_url == endpoint
        store.put("k", b"v", if_none_match=True)
    with store_from_url(f"gs://{BUCKET}/{prefix}") as other:
        assert other.get("nested/k").body == b"v"  # type: ignore[union-attr]
        other.delete("nested/k")
    with pytest.raises(InvalidConfigError, match="bucket"):
        store_from_url("gs:///nothing")


def test_missing_bucket_is_a_typed_error_not_an_empty_store() -> None:
    """fake-gcs-server answers a GET on a missing bucket like a missing object (real GCS names the
    bucket): the store checks the bucket on its first miss. Writes and listings say so directly."""
    store = GCSStore(f"absent-{uuid.uuid4().hex[:12]}", endpoint_url=need_gcs_emulator())
    try:
        for call in (
            lambda: store.get("k"),
            lambda: store.get("k"),  # not only the first time
            lambda: store.put("k", b"x", if_none_match=True),
            lambda: store.put("k", b"x", if_match="17"),
            lambda: store.put("k", b"x"),
            lambda: store.list_page(""),
        ):
            with pytest.raises(StoreNotFoundError, match="does not exist"):
                call()
        with ObjectStoreSaver(store) as saver, pytest.raises(StoreNotFoundError):
            saver.setup()  # not "refuses conditional writes"
    finally:
        store.close()
