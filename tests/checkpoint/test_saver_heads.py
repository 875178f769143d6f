"""``saver.heads`` (``checkpoint/heads.py``): the heads API the package's other layers use.

Request counts are pinned with ``CountingStore``; the head cache rule (a compare-and-swap made
outside a put must record the head it wrote, or this process's next put loses a race against
its own write) is shown by the cost of the put that follows."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from langgraph_handoff import MemoryStore, ObjectStoreSaver
from langgraph_handoff._format import keys
from langgraph_handoff._format import records as rec_io
from langgraph_handoff._format.head_meta import HeadMeta, ResumeCount
from langgraph_handoff._format.records import Head
from langgraph_handoff.checkpoint import driver
from langgraph_handoff.checkpoint.plans import Layout
from langgraph_handoff.errors import ConflictError, CorruptObjectError, UnknownOutcomeError
from langgraph_handoff.stores import CountingStore
from tests.checkpoint.test_trust import Remote

CP = {"v": 4, "ts": "2024-01-01T00:00:00+00:00", "channel_values": {"x": 1}, "channel_versions": {"x": 1},
      "versions_seen": {}}  # fmt: skip
IDS = [f"1ef4f797-8335-6428-800{i}-8a1503f9b875" for i in range(1, 6)]


def put(saver: ObjectStoreSaver, thread: str, cid: str, ns: str = "") -> None:
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
    saver.put(config, {**CP, "id": cid}, {"source": "update", "step": 1}, {"x": 1})


def counts(store: CountingStore) -> dict[str, int]:
    return {k: v for k, v in store.snapshot().items() if k != "requests"}


def count_resume(checkpoint: str) -> Any:
    def change(head: Head | None) -> Head | None:
        if head is None:
            return None
        seen = head.meta.team_resumes
        n = seen.count + 1 if seen is not None and seen.checkpoint == checkpoint else 1
        return Head(head.thread_id, head.checkpoint_ns, head.records, head.payloads, head.segments,
                    head.meta.replace(team_resumes=ResumeCount(checkpoint, n)))  # fmt: skip

    return change


@pytest.fixture
def counted() -> tuple[ObjectStoreSaver, CountingStore]:
    store = CountingStore(MemoryStore())
    return ObjectStoreSaver(store), store


def test_a_swap_is_a_get_and_a_put_and_the_next_put_needs_no_read(counted) -> None:  # type: ignore[no-untyped-def]
    saver, store = counted
    put(saver, "t", IDS[0])
    store.reset()
    done = driver.run(store, saver.heads.cas("t", "", count_resume("c1"), contention="busy"))
    assert counts(store) == {"GET": 1, "PUT": 1, "round_trips": 2}
    assert done.head is not None and done.head.meta.team_resumes == ResumeCount("c1", 1)
    assert saver.heads.remembered("t") == done  # recorded: the cache holds what was written
    store.reset()
    put(saver, "t", IDS[1])  # one conditional PUT on the remembered ETag: no read, no lost race
    assert counts(store) == {"PUT": 1, "round_trips": 1}
    assert saver.get_tuple({"configurable": {"thread_id": "t"}}).config["configurable"]["checkpoint_id"] == IDS[1]


def test_a_swap_made_behind_the_caches_back_costs_the_next_put_a_lost_race(counted) -> None:  # type: ignore[no-untyped-def]
    """What the API exists to prevent: the same write without recording it in the cache."""
    saver, store = counted
    put(saver, "t", IDS[0])
    head, etag = driver.run(store, saver.heads.read("t"))
    assert head is not None
    store.put(keys.head_key("t", ""), rec_io.encode_head(count_resume("c1")(head)), if_match=etag)
    store.reset()
    put(saver, "t", IDS[1])
    assert counts(store) == {"GET": 1, "PUT": 2, "round_trips": 3}  # 412, read again, swap


def test_a_change_that_writes_nothing_costs_one_get(counted) -> None:  # type: ignore[no-untyped-def]
    saver, store = counted
    done = driver.run(store, saver.heads.cas("t", "", count_resume("c1"), contention="busy"))
    assert done == (None, None) and counts(store) == {"GET": 1, "round_trips": 1}
    assert saver.heads.remembered("t") is None  # reads are never recorded


def test_a_lost_race_is_decided_again_on_a_fresh_head(counted) -> None:  # type: ignore[no-untyped-def]
    saver, store = counted
    put(saver, "t", IDS[0])
    other = ObjectStoreSaver(store)
    calls = []

    def change(head: Head | None) -> Head | None:
        calls.append(head.latest_id if head is not None else None)
        if len(calls) == 1:
            put(other, "t", IDS[1])  # another writer moves the head between our read and our swap
        return count_resume("c1")(head)

    store.reset()
    done = driver.run(store, saver.heads.cas("t", "", change, contention="busy"))
    assert calls == [IDS[0], IDS[1]] and done.head is not None and done.head.latest_id == IDS[1]
    assert counts(store)["PUT"] == 3  # ours (412), the other writer's, ours again


class LandsThenFails(MemoryStore):
    """Stores the next head PUT, then reports an unknown outcome (RGW's 500 after success)."""

    armed = False

    def put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        etag = super().put(key, body, if_match=if_match, if_none_match=if_none_match)
        if self.armed and key.startswith("heads/"):
            self.armed = False
            raise UnknownOutcomeError(key, "500 after the write")
        return etag


def test_a_swap_that_landed_unseen_is_found_and_recorded() -> None:
    store = LandsThenFails()
    saver = ObjectStoreSaver(store)
    put(saver, "t", IDS[0])
    store.armed = True

    def landed(head: Head | None) -> bool:
        return head is not None and head.meta.team_resumes == ResumeCount("c1", 1)

    done = driver.run(store, saver.heads.cas("t", "", count_resume("c1"), landed=landed, contention="busy"))
    assert done.head is not None and done.head.meta.team_resumes == ResumeCount("c1", 1)
    assert saver.heads.remembered("t") == done  # not counted twice, and recorded


def test_a_head_that_keeps_moving_gives_up_with_the_callers_message() -> None:
    saver = ObjectStoreSaver(MemoryStore(), layout=Layout(max_attempts=3, backoff=0.0))
    put(saver, "t", IDS[0])
    other = ObjectStoreSaver(saver.store)
    moves = iter(IDS[1:])

    def change(head: Head | None) -> Head | None:
        put(other, "t", next(moves))
        return count_resume("c1")(head)

    with pytest.raises(ConflictError, match="the head of 't' kept changing"):
        driver.run(saver.store, saver.heads.cas("t", "", change, contention="the head of 't' kept changing"))


def test_reads_and_walks_cost_what_they_say(counted) -> None:  # type: ignore[no-untyped-def]
    saver, store = counted
    for thread in ("a", "b"):
        put(saver, thread, IDS[0])
    put(saver, "a", IDS[1])
    put(saver, "a", IDS[2], ns="sub:1")
    cold = ObjectStoreSaver(store)
    store.reset()
    head, _etag = driver.run(store, cold.heads.read("a"))
    assert head is not None and head.latest_id == IDS[1] and counts(store) == {"GET": 1, "round_trips": 1}
    store.reset()
    reads = driver.run(store, cold.heads.read_many([("a", ""), ("a", "sub:1"), ("c", "")]))
    assert [r.head.latest_id if r.head else None for r in reads] == [IDS[1], IDS[2], None]
    assert counts(store) == {"GET": 3, "round_trips": 1}
    store.reset()
    assert driver.run(store, cold.heads.ids()) == [("a", ""), ("a", "sub:1"), ("b", "")]
    assert driver.run(store, cold.heads.namespaces("a")) == ["", "sub:1"]
    assert counts(store) == {"LIST": 2, "round_trips": 2}
    store.reset()
    assert driver.run(store, cold.heads.prune_count("a")) == 1  # the root's older checkpoint
    assert counts(store) == {"LIST": 1, "GET": 2, "round_trips": 3}
    assert cold.heads.remembered("a") is None  # none of it was recorded


def test_decode_takes_a_head_fetched_in_the_callers_own_round_trip(counted) -> None:  # type: ignore[no-untyped-def]
    saver, store = counted
    put(saver, "t", IDS[0])
    obj = store.get(keys.head_key("t", ""))
    assert saver.heads.decode(obj, "t").etag == obj.etag and saver.heads.decode(None, "t") == (None, None)
    with pytest.raises(CorruptObjectError, match="misplaced"):
        saver.heads.decode(obj, "u")


def test_the_swap_runs_the_same_plan_async(counted) -> None:  # type: ignore[no-untyped-def]
    saver, store = counted
    put(saver, "t", IDS[0])
    store.reset()
    done = asyncio.run(driver.arun(store, saver.heads.cas("t", "", count_resume("c1"), contention="busy")))
    assert done.head is not None and done.head.meta == HeadMeta(team_resumes=ResumeCount("c1", 1))
    assert counts(store) == {"GET": 1, "PUT": 1, "round_trips": 2}


def test_a_swap_is_never_written_to_a_store_no_probe_has_passed() -> None:
    store = CountingStore(Remote())
    saver = ObjectStoreSaver(store)
    driver.run(store, saver.heads.cas("t", "", lambda head: Head("t", "", {}, {}, (), HeadMeta(fence=1)),
                                      contention="busy"))  # fmt: skip
    written = [key for op, key in store.log if op == "PUT"]
    assert written[-1] == keys.head_key("t", "") and keys.FORMAT_MARKER_KEY in written  # probed first
