"""The store probe (``setup()`` and ``langgraph-handoff doctor``): a store that does not enforce
conditional writes is refused before anything is written; a store that does is probed once."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from typing import Any

import pytest

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.checkpoint import driver
from langgraph_handoff.cli import main
from langgraph_handoff.errors import PreconditionFailedError, StoreError, UnknownOutcomeError, UnsafeStoreError
from langgraph_handoff.probe import PROBE_PREFIX, arace, plan_report, race
from langgraph_handoff.stores import CountingStore, MemoryStore


class IgnoresConditions(MemoryStore):
    """A store that accepts the headers and ignores them, like GCS's S3 API or moto 4.2.14."""

    def __init__(self, *, create_only: bool = False, if_match: bool = False) -> None:
        super().__init__()
        self.ignore_create_only = create_only
        self.ignore_if_match = if_match

    def put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        if self.ignore_create_only:
            if_none_match = False
        if self.ignore_if_match:
            if_match = None
        return super().put(key, body, if_match=if_match, if_none_match=if_none_match)


class RefusesConditions(MemoryStore):
    """Backblaze B2: every conditional PUT is answered 501, which every store reads as a
    refusal (``StoreError``): an answer, not an unknown outcome."""

    def put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        if if_match is not None or if_none_match:
            raise StoreError(f"conditional PUT of {key!r} failed: HTTP 501 NotImplemented")
        return super().put(key, body)


@pytest.mark.parametrize(
    ("store", "problem"),
    [
        (IgnoresConditions(create_only=True), "second create-only PUT"),
        (IgnoresConditions(if_match=True), "wrong If-Match"),
        (IgnoresConditions(create_only=True, if_match=True), "second create-only PUT"),
        (RefusesConditions(), "refuses conditional writes"),
    ],
)
def test_setup_refuses_a_store_that_does_not_enforce_conditions(store: MemoryStore, problem: str) -> None:
    saver = ObjectStoreSaver(store)
    with pytest.raises(UnsafeStoreError, match=problem) as err:
        saver.setup()
    assert "Known offenders" in str(err.value) and "doctor" in str(err.value)
    assert [o.key for o in store.list("")] == []  # no marker, and the scratch key is gone


class UnsettledAnswers(MemoryStore):
    """GCS behind its one-write-per-second limit: a quick second write to a name is throttled,
    and the store reports the 412 (or success) after its retry as an unknown outcome. Whether
    the write was applied follows the real conditions, or none with ``ignore=True``."""

    def __init__(self, *, ignore: bool = False) -> None:
        super().__init__()
        self.ignore = ignore

    def put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        if self.get(key) is None:  # the first write to the name goes through
            return super().put(key, body, if_match=if_match, if_none_match=if_none_match)
        with contextlib.suppress(PreconditionFailedError):
            if self.ignore:
                super().put(key, body)
            else:
                super().put(key, body, if_match=if_match, if_none_match=if_none_match)
        raise UnknownOutcomeError(key, "HTTP 412 after 2 throttled tries")


def test_unknown_outcomes_are_settled_by_reading_back() -> None:
    """Found by review (gcs_setup_throttled.py): on a throttled GCS name the probe's second
    create-only PUT came back as an unknown outcome, and setup() failed with it."""
    report = driver.run(UnsettledAnswers(), plan_report("gcs-like", rounds=1))
    assert (report.create_only, report.compare_and_swap, report.problems) == ("enforced", "enforced", [])
    ObjectStoreSaver(UnsettledAnswers()).setup()
    with pytest.raises(UnsafeStoreError, match="second create-only PUT"):
        ObjectStoreSaver(UnsettledAnswers(ignore=True)).setup()


async def test_async_setup_refuses_too() -> None:
    with pytest.raises(UnsafeStoreError):
        await ObjectStoreSaver(IgnoresConditions(if_match=True)).asetup()


def test_the_probe_runs_once_per_deployment() -> None:
    store = CountingStore(MemoryStore())
    ObjectStoreSaver(store).setup()
    # GET marker; probe: 2 create-only PUTs, GET, 2 If-Match PUTs, DELETE; PUT marker; and the
    # metadata index: GET meta/index, LIST heads/ (no thread yet), PUT meta/index (complete)
    assert dict(store.counts) == {"GET": 3, "PUT": 6, "DELETE": 1, "LIST": 1}, store.counts
    store.reset()
    ObjectStoreSaver(store).setup()  # another worker starting later: reads the two markers
    assert dict(store.counts) == {"GET": 2}
    assert [o.key for o in store.list(PROBE_PREFIX)] == []


def test_a_marker_from_before_the_probe_gets_probed_and_keeps_its_fields() -> None:
    from langgraph_handoff._format import envelope, keys

    store = MemoryStore()
    store.put(keys.FORMAT_MARKER_KEY, envelope.encode_msgpack(envelope.Kind.MARKER, {"package": "langgraph-handoff"}))
    ObjectStoreSaver(store).setup()
    obj = store.get(keys.FORMAT_MARKER_KEY)
    marker, _ = envelope.decode_msgpack(obj.body, key=obj.key, expect=envelope.Kind.MARKER)
    assert marker["package"] == "langgraph-handoff" and marker["probe"]["passed"] > 0
    bad = IgnoresConditions(create_only=True)
    bad.put(keys.FORMAT_MARKER_KEY, envelope.encode_msgpack(envelope.Kind.MARKER, {"package": "langgraph-handoff"}))
    with pytest.raises(UnsafeStoreError):  # an old deployment on a bad store is caught too
        ObjectStoreSaver(bad).setup()


def test_report_on_a_trustworthy_store() -> None:
    report = driver.run(MemoryStore(), plan_report("m", rounds=2))
    assert report.trusted and report.problems == []
    assert (report.create_only, report.compare_and_swap, report.conditional_delete, report.list_after_write) == (
        "enforced",
        "enforced",
        "enforced",
        "yes",
    )
    assert set(report.latency_ms) == {"put_create_only", "put_if_match", "put", "get", "list", "delete"}


def test_doctor_exits_1_on_an_unsafe_store(capsys: Any, monkeypatch: Any) -> None:
    from langgraph_handoff.stores import urls

    monkeypatch.setitem(urls._NAMED_MEMORY, "unsafe-doctor", IgnoresConditions(create_only=True, if_match=True))
    assert main(["doctor", "memory://unsafe-doctor", "--json", "--rounds", "1"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["trusted"] is False
    assert (report["create_only"], report["compare_and_swap"]) == ("ignored", "ignored")
    assert main(["doctor", "memory://", "--rounds", "1"]) == 0
    assert "ok: the saver can use this store" in capsys.readouterr().out


# -- doctor --race: a compare-and-swap that is only atomic one request at a time -----------------


class CheckThenWrite(MemoryStore):
    """moto 5's put_object: the condition is checked, then the object written, with nothing held
    in between. Sent one at a time it refuses what it should; raced, several writers pass the
    check before any writes. Here a barrier between check and write makes that happen in every
    round (each racing PUT waits until all ``writers`` have passed the check), so the outcome
    does not depend on timing. Only the race's own PUTs (their bodies name a writer) wait."""

    def __init__(self, writers: int) -> None:
        super().__init__()
        self.window = threading.Barrier(writers)
        self.writers = writers
        self._arrived = 0
        self._all_in: asyncio.Event | None = None

    def _check(self, key: str, if_match: str | None, if_none_match: bool) -> None:
        current = self.get(key)
        if if_none_match and current is not None:
            raise PreconditionFailedError(key)
        if if_match is not None and (current is None or current.etag != if_match):
            raise PreconditionFailedError(key)

    def put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        if if_match is None and not if_none_match:
            return super().put(key, body)
        self._check(key, if_match, if_none_match)
        if b"writer" in body:
            self.window.wait(timeout=30)
        return super().put(key, body)

    async def aput(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        if if_match is None and not if_none_match:
            return super().put(key, body)
        self._check(key, if_match, if_none_match)
        if b"writer" in body:
            if self._all_in is None:
                self._all_in = asyncio.Event()
            all_in = self._all_in
            self._arrived += 1
            if self._arrived == self.writers:
                self._arrived, self._all_in = 0, None
                all_in.set()
            await all_in.wait()
        return super().put(key, body)


@pytest.mark.parametrize("api", ["sync", "async"])
def test_the_race_fails_a_store_whose_checks_are_not_atomic(api: str) -> None:
    store = CheckThenWrite(writers=4)
    assert driver.run(store, plan_report("moto-5-like", rounds=1)).trusted  # one at a time: it passes
    if api == "sync":
        report = race(store, writers=4, rounds=3, store_name="moto-5-like")
    else:
        report = asyncio.run(arace(store, writers=4, rounds=3, store_name="moto-5-like"))
    assert not report.trusted
    for tally in (report.compare_and_swap, report.create_only):
        assert (tally.rounds, tally.double_wins, tally.most_winners) == (3, 3, 4)
    assert report.problems == [
        "compare-and-swap PUT raced by 4 writers: NOT ATOMIC: two or more of 4 writers won in 3 of 3 rounds "
        "(up to 4 in one round)",
        "create-only PUT raced by 4 writers: NOT ATOMIC: two or more of 4 writers won in 3 of 3 rounds "
        "(up to 4 in one round)",
    ]
    assert [o.key for o in store.list("")] == []  # scratch keys deleted


@pytest.mark.parametrize("api", ["sync", "async"])
def test_the_race_passes_an_atomic_store(api: str, tmp_path: Any) -> None:
    from langgraph_handoff.stores import LocalStore

    for store in (MemoryStore(), LocalStore(tmp_path / api)):
        report = race(store, writers=8, rounds=5) if api == "sync" else asyncio.run(arace(store, writers=8, rounds=5))
        assert report.trusted and report.problems == []
        for tally in (report.compare_and_swap, report.create_only):
            assert (tally.rounds, tally.double_wins, tally.most_winners, tally.errors) == (5, 0, 1, 0)
        assert [o.key for o in store.list("")] == []


class UnknownLosers(MemoryStore):
    """Ceph RGW: most race losers are answered 500 (an unknown outcome) although nothing was
    written. With ``landed``, a loser's write is applied after all (a store that lost its mind):
    two writers then hold the key, one after the other."""

    def __init__(self, *, landed: bool = False) -> None:
        super().__init__()
        self.landed = landed

    def put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        try:
            return super().put(key, body, if_match=if_match, if_none_match=if_none_match)
        except PreconditionFailedError:
            if self.landed:
                super().put(key, body)
            raise UnknownOutcomeError(key, "HTTP 500 UnknownError") from None


def test_unknown_answers_are_read_back_to_find_the_winners() -> None:
    fine = race(UnknownLosers(), writers=4, rounds=2)
    assert fine.trusted and fine.compare_and_swap.unknown == 2 * 3 and fine.compare_and_swap.double_wins == 0
    landed = race(UnknownLosers(landed=True), writers=4, rounds=2)
    assert not landed.trusted and landed.compare_and_swap.double_wins == 2


def test_doctor_race_exits_1_on_a_store_that_lets_two_writers_win(capsys: Any, monkeypatch: Any) -> None:
    from langgraph_handoff.stores import urls

    monkeypatch.setitem(urls._NAMED_MEMORY, "check-then-write", CheckThenWrite(writers=3))
    args = ["doctor", "memory://check-then-write", "--rounds", "1"]
    assert main([*args, "--json"]) == 0  # without --race it passes: one request at a time
    assert "race" not in json.loads(capsys.readouterr().out)
    assert main([*args, "--race", "--race-writers", "3", "--race-rounds", "2", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["trusted"] is True  # the one-at-a-time probe's verdict, as before
    assert (report["race"]["trusted"], report["race"]["compare_and_swap"]["double_wins"]) == (False, 2)
    assert main([*args, "--race", "--race-writers", "3", "--race-rounds", "2"]) == 1
    text = capsys.readouterr().out
    assert "concurrent compare-and-swap PUT:    NOT ATOMIC: two or more of 3 writers won in 2 of 2 rounds" in text
    assert text.rstrip().splitlines()[-1].startswith("UNSAFE: compare-and-swap PUT raced by 3 writers")


def test_doctor_without_race_prints_what_it_printed(capsys: Any) -> None:
    assert main(["doctor", "memory://", "--rounds", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0].strip() for line in lines[1:]] == [
        "create-only PUT (If-None-Match",
        "compare-and-swap PUT (If-Match)",
        "ETag quoting in If-Match",
        "conditional DELETE",
        "list after write",
        "median latency",
        "serializer",
        "ok",
    ]
