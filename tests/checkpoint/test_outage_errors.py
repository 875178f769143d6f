"""An outage is reported as an outage, not as contention.

When every compare-and-swap write of a put fails without an answer (an unknown outcome, and the
head unchanged when read back), the put used to end in ``ConflictError`` "lost 12
compare-and-swap races in a row ... heavy contention ... raise Layout.max_attempts": advice for a
contended namespace, given during a network outage. Now it is ``StoreUnavailableError`` saying
what was tried for how long; contention still ends in ``ConflictError``.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_handoff import Layout, ObjectStoreSaver
from langgraph_handoff.errors import ConflictError, StoreUnavailableError, UnknownOutcomeError
from langgraph_handoff.stores import MemoryStore

CONFIG: dict[str, Any] = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


class Unanswered(MemoryStore):
    """Every conditional write under ``prefix`` fails without an answer and is not applied."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix
        self.failing = False

    def put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        if self.failing and key.startswith(self.prefix) and (if_match is not None or if_none_match):
            raise UnknownOutcomeError(key, "the connection closed before a whole response")
        return super().put(key, body, if_match=if_match, if_none_match=if_none_match)


class Contended(MemoryStore):
    """Every conditional write of a head loses to another writer's write of that head."""

    rewrites = 0

    def put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        if key.startswith("heads/") and if_match is not None:
            current = super().get(key)
            assert current is not None
            self.rewrites += 1  # someone else rewrote it (a benign change): a new ETag
            self._objects[key] = (current.body, f"{current.etag}-{self.rewrites}")
            raise UnknownOutcomeError(key, "HTTP 500 (Ceph RGW answers some lost races so)")
        return super().put(key, body, if_match=if_match, if_none_match=if_none_match)


def _saver(store: MemoryStore) -> ObjectStoreSaver:
    return ObjectStoreSaver(store, layout=Layout(max_attempts=3, backoff=0.001))


@pytest.mark.parametrize("first", [True, False], ids=["first put", "later put"])
def test_a_put_no_write_of_which_is_answered_is_store_unavailable(first: bool) -> None:
    store = Unanswered("heads/")
    saver = _saver(store)
    config = CONFIG if first else saver.put(CONFIG, empty_checkpoint(), {"source": "input", "step": -1}, {})
    store.failing = True
    with pytest.raises(StoreUnavailableError, match=r"answered none of 3 compare-and-swap attempts over [\d.]+ s"):
        saver.put(config, empty_checkpoint(), {"source": "loop", "step": 0}, {})


async def test_the_async_put_says_so_too() -> None:
    store = Unanswered("heads/")
    saver = _saver(store)
    store.failing = True
    with pytest.raises(StoreUnavailableError):
        await saver.aput(CONFIG, empty_checkpoint(), {"source": "input", "step": -1}, {})


def test_task_writes_no_write_of_which_is_answered_are_store_unavailable() -> None:
    store = Unanswered("data/")
    saver = _saver(store)
    config = saver.put(CONFIG, empty_checkpoint(), {"source": "input", "step": -1}, {})
    store.failing = True
    with pytest.raises(StoreUnavailableError, match="writes of task 'task-1'"):
        saver.put_writes(config, [("messages", "hi")], "task-1")


def test_contention_is_still_a_conflict() -> None:
    saver = _saver(Contended())
    config = saver.put(CONFIG, empty_checkpoint(), {"source": "input", "step": -1}, {})
    with pytest.raises(ConflictError, match="heavy contention"):
        saver.put(config, empty_checkpoint(), {"source": "loop", "step": 0}, {})


class DropsOnce(MemoryStore):
    """The first conditional write under ``prefix`` fails without an answer and is not applied."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix
        self.dropped = 0

    def put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        if key.startswith(self.prefix) and (if_match is not None or if_none_match) and not self.dropped:
            self.dropped += 1
            raise UnknownOutcomeError(key, "the connection closed before a whole response")
        return super().put(key, body, if_match=if_match, if_none_match=if_none_match)


def test_copy_thread_sends_its_head_again_when_a_write_got_no_answer() -> None:
    """The fault campaign saw ``ThreadExistsError`` from a copy whose head write got no answer
    and did not land: nobody else had written the target. It is sent again."""
    store = DropsOnce("heads/dst/")
    saver = _saver(store)
    saver.put(CONFIG, empty_checkpoint(), {"source": "input", "step": -1}, {})
    saver.copy_thread("t", "dst")
    assert store.dropped == 1 and saver.get_tuple({"configurable": {"thread_id": "dst"}}) is not None
