"""GCSStore against a canned GCS endpoint (tests/support/canned_gcs.py), where every answer is chosen:

* each answer to a conditional write maps to one typed error, in both APIs, and the SDK never
  sends a conditional write twice (its default retries would turn our own landed write into a
  412, a false lost race);
* a 429 (GCS's per-object rate limit; refused, so not applied) is retried after a back-off and is
  never reported as a lost race; if it lasts, the error says nothing was written;
* idempotent requests are retried, then fail as unavailable;
* the precondition sent: ``ifGenerationMatch=0`` for create-only, the generation for
  compare-and-swap, and generation 1 (which no object has) for an ETag that is no generation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from langgraph_handoff.errors import (
    PreconditionFailedError,
    StoreError,
    StoreNotFoundError,
    StoreUnavailableError,
    UnknownOutcomeError,
)
from langgraph_handoff.stores.gcs import GCSStore
from tests.support.canned_gcs import GENERATION, canned_gcs

Seen = list[tuple[str, str, dict[str, str]]]


@pytest.fixture
def canned(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, dict[str, list[str]], Seen]]:
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    answers: dict[str, list[str]] = {}
    with canned_gcs(answers) as (endpoint, seen):
        yield endpoint, answers, seen


def _store(endpoint: str, bucket: str, **kwargs: Any) -> GCSStore:
    """A store on the canned endpoint. The budgets leave room for a slow first request on a
    loaded machine; a test that waits one out sets a shorter one."""
    kwargs.setdefault("retry_timeout", 0.3)
    kwargs.setdefault("throttle_timeout", 5.0)
    return GCSStore(bucket, "p", endpoint_url=endpoint, **kwargs)


def _uploads(seen: Seen) -> list[dict[str, str]]:
    return [query for method, path, query in seen if method == "POST" and path.startswith("/upload/")]


@pytest.mark.parametrize(
    ("answer", "if_match", "expected"),
    [
        ("412", None, PreconditionFailedError),  # create-only: the object exists
        ("412", "17", PreconditionFailedError),  # compare-and-swap: another generation, or missing
        ("409", None, PreconditionFailedError),  # a conflicting concurrent request
        ("409", "17", PreconditionFailedError),
        ("500", None, UnknownOutcomeError),
        ("503", "17", UnknownOutcomeError),
        ("drop", "17", UnknownOutcomeError),  # the write may or may not have landed
        ("drop", None, UnknownOutcomeError),
        ("403", "17", StoreError),
        ("400", None, StoreError),
        ("404", "17", StoreNotFoundError),  # a missing object gives 412: a 404 is the bucket
    ],
)
async def test_conditional_put_outcomes(
    canned: tuple[str, dict[str, list[str]], Seen], answer: str, if_match: str | None, expected: type[Exception]
) -> None:
    endpoint, answers, seen = canned
    answers["bkt"] = [answer]
    store = _store(endpoint, "bkt")
    kwargs: dict[str, Any] = {"if_match": if_match} if if_match else {"if_none_match": True}
    try:
        with pytest.raises(expected) as sync_err:
            store.put("k", b"x", **kwargs)
        with pytest.raises(expected) as async_err:
            await store.aput("k", b"x", **kwargs)
    finally:
        store.close()
    assert type(sync_err.value) is type(async_err.value)
    if expected is StoreError:
        assert not isinstance(
            sync_err.value, UnknownOutcomeError | PreconditionFailedError | StoreUnavailableError | StoreNotFoundError
        )
    assert len(_uploads(seen)) == 2, seen  # one request per call: never retried


def test_the_precondition_sent(canned: tuple[str, dict[str, list[str]], Seen]) -> None:
    endpoint, _, seen = canned
    with _store(endpoint, "bkt") as store:
        assert store.put("k", b"x", if_none_match=True) == GENERATION
        assert store.put("k", b"x", if_match="1700000000000001") == GENERATION
        store.put("k", b"x", if_match="0" * 32)  # names no generation: sent as 1, never as 0
        store.put("k", b"x")
    assert [q.get("ifGenerationMatch") for q in _uploads(seen)] == ["0", "1700000000000001", "1", None]


def test_a_page_after_start_after_is_one_request_of_max_keys(canned: tuple[str, dict[str, list[str]], Seen]) -> None:
    """Found by review (gcs_list_pages.py): startOffset is inclusive, so the store asked for one
    key more than a page and GCS's 1,000-key page cap split every later page into 2 requests.
    Now the offset itself is exclusive: ``start_after + "!"`` sorts before every key that
    extends it (keys use characters from "%" up)."""
    endpoint, _, seen = canned
    with _store(endpoint, "bkt") as store:
        store.list_page("a/", start_after="a/0999", max_keys=1000)
    lists = [q for method, path, q in seen if method == "GET" and path.endswith("/o")]
    assert len(lists) == 1 and lists[0]["maxResults"] == "1000", lists
    assert lists[0]["startOffset"].endswith("a/0999!"), lists


async def test_429_is_retried_after_a_backoff_and_is_not_a_lost_race(
    canned: tuple[str, dict[str, list[str]], Seen],
) -> None:
    endpoint, answers, seen = canned
    answers["once"] = ["429", "200"]
    answers["then-lost"] = ["429", "412"]
    answers["async"] = ["429", "429", "200"]
    with _store(endpoint, "once") as store:
        assert store.put("k", b"x", if_match="1700000000000001") == GENERATION
    assert [q.get("ifGenerationMatch") for q in _uploads(seen)] == ["1700000000000001"] * 2
    with _store(endpoint, "then-lost") as store, pytest.raises(UnknownOutcomeError, match="after 1 throttled"):
        store.put("k", b"x", if_none_match=True)  # a 412 after a 429: re-read, do not trust it as lost
    with _store(endpoint, "async") as store:
        assert await store.aput("k", b"x", if_none_match=True) == GENERATION
    assert len(_uploads(seen)) == 2 + 2 + 3


def test_lasting_429_says_nothing_was_written(canned: tuple[str, dict[str, list[str]], Seen]) -> None:
    endpoint, answers, seen = canned
    answers["bkt"] = ["429"]
    # the first back-off is at most 0.5 s: a second try fits in 2 s even after a slow first request
    with (
        _store(endpoint, "bkt", throttle_timeout=2.0) as store,
        pytest.raises(StoreUnavailableError, match="nothing was written"),
    ):
        store.put("k", b"x", if_match="1700000000000001")
    assert len(_uploads(seen)) >= 2


@pytest.mark.parametrize("answer", ["503", "429", "drop"])
async def test_idempotent_requests_are_retried_then_unavailable(
    canned: tuple[str, dict[str, list[str]], Seen], answer: str
) -> None:
    endpoint, answers, seen = canned
    answers["bkt"] = [answer]
    with (
        _store(endpoint, "bkt", retry_timeout=1.0) as store,
        pytest.raises(StoreUnavailableError, match="kept failing"),
    ):
        store.get("k")  # the first back-off is 50 ms: retried within 1 s even after a slow first try
    assert len(seen) >= 2, "retried"
    with _store(endpoint, "bkt") as store:
        for call in (lambda: store.list_page(""), lambda: store.delete("k")):
            with pytest.raises(StoreUnavailableError, match="kept failing"):
                call()
        with pytest.raises(StoreUnavailableError):
            await store.aget("k")


def test_idempotent_answers(canned: tuple[str, dict[str, list[str]], Seen]) -> None:
    endpoint, answers, seen = canned
    answers["ok"] = ["200"]
    answers["gone"] = ["404", "200", "404"]  # a missing object, then the one bucket check, then 404s
    answers["denied"] = ["403"]
    with _store(endpoint, "ok") as store:
        obj = store.get("k")
        assert obj is not None and (obj.body, obj.etag) == (b"x", GENERATION)
        assert store.list_page("").items == []
    answers["no-bucket"] = ["404"]
    with _store(endpoint, "gone") as store:
        assert store.get("k") is None
        assert store.get("k") is None  # the bucket is checked once per store
        store.delete("k")  # already gone: not an error
    assert [path for _, path, _ in seen].count("/storage/v1/b/gone") == 1
    with _store(endpoint, "no-bucket") as store, pytest.raises(StoreNotFoundError, match="does not exist"):
        store.get("k")
    with _store(endpoint, "denied") as store:
        with pytest.raises(StoreError, match="refused") as err:
            store.get("k")
        assert not isinstance(err.value, StoreUnavailableError)
