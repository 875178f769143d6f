"""The store probe (``setup()`` and ``langgraph-handoff doctor``): a store that does not enforce
conditional writes is refused before anything is written; a store that does is probed once."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.checkpoint import driver
from langgraph_handoff.cli import main
from langgraph_handoff.errors import PreconditionFailedError, UnknownOutcomeError, UnsafeStoreError
from langgraph_handoff.probe import PROBE_PREFIX, plan_report
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
    """Backblaze B2: every conditional PUT is answered 501."""

    def put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        if if_match is not None or if_none_match:
            raise UnknownOutcomeError(key, "HTTP 501 NotImplemented")
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
    # GET marker; probe: 2 create-only PUTs, GET, 2 If-Match PUTs, DELETE; PUT marker
    assert dict(store.counts) == {"GET": 2, "PUT": 5, "DELETE": 1}, store.counts
    store.reset()
    ObjectStoreSaver(store).setup()  # another worker starting later
    assert dict(store.counts) == {"GET": 1}
    assert [o.key for o in store.list(PROBE_PREFIX)] == []


def test_a_marker_from_before_the_probe_gets_probed_and_keeps_its_fields() -> None:
    from langgraph_handoff.format import envelope, keys

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
