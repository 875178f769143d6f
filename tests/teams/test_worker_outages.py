"""A team worker outlives a store outage.

``TeamWorker.run()`` read the roster and took leases outside ``step()``'s error handling, so a
one-second outage ended it with ``StoreUnavailableError`` and a message sent after the network
came back was ingested by no one; and three turns failed by the store in a row marked a member
``failed``, as a poison message would, until an operator's ``revive``. Here the store fails on
command (a flag the test flips, no timing), and the worker waits it out and goes on."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.errors import StoreUnavailableError
from langgraph_handoff.stores import MemoryStore
from langgraph_handoff.teams import Team, TeamWorker
from tests.support.team_helpers import Clock, echo_build, ingested_ids


class Flaky(MemoryStore):
    """Every request fails while ``down``; while ``puts_down``, every PUT under ``prefix``."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.puts_down = False
        self.prefix = "teams/"
        self.failed = 0

    def _fail(self, what: str) -> None:
        self.failed += 1
        raise StoreUnavailableError(f"{what} kept failing: connection refused (the test's outage)")

    def get(self, key: str) -> Any:
        if self.down:
            self._fail(f"GET {key}")
        return super().get(key)

    def list_page(self, prefix: str, **kw: Any) -> Any:
        if self.down:
            self._fail(f"LIST {prefix}")
        return super().list_page(prefix, **kw)

    def put(self, key: str, body: bytes, **kw: Any) -> str:
        if self.down or (self.puts_down and key.startswith(self.prefix)):
            self._fail(f"PUT {key}")
        return super().put(key, body, **kw)

    def delete(self, key: str, **kw: Any) -> None:
        if self.down:
            self._fail(f"DELETE {key}")
        super().delete(key, **kw)


def _team(store: Flaky) -> tuple[ObjectStoreSaver, Team]:
    saver = ObjectStoreSaver(store)
    team = Team(saver, "t", clock=Clock())
    team.spawn("lead", role="echo")
    team.spawn("alice", role="echo")
    return saver, team


@pytest.mark.parametrize("loop", ["run", "arun"])
def test_the_loop_waits_out_an_outage_and_ingests_what_is_sent_after_it(loop: str) -> None:
    store = Flaky()
    saver, team = _team(store)
    worker = TeamWorker(team, "w", {"echo": echo_build}, auto_reply=False, poll=0.001, max_poll=0.01)
    store.down = True
    checks = 0
    sent: list[str] = []

    def until() -> bool:
        nonlocal checks
        checks += 1
        if checks == 6:  # five steps failed: the store comes back, and a message is sent
            assert store.failed >= 5
            store.down = False
            sent.append(team.send("alice", "after the outage", sender="lead").id)
        return bool(sent) and ingested_ids(saver, team, "alice") == sent

    if loop == "run":
        worker.run(until=until)
    else:
        asyncio.run(worker.arun(until=until))
    assert ingested_ids(saver, team, "alice") == sent


def test_turns_the_store_fails_never_mark_a_member_failed() -> None:
    store = Flaky()
    saver, team = _team(store)
    worker = TeamWorker(team, "w", {"echo": echo_build}, auto_reply=False, max_failures=3)
    first = team.send("alice", "one", sender="lead")
    assert worker.step() == 1
    second = team.send("alice", "two", sender="lead")
    store.puts_down = True
    for _ in range(5):  # more turns failed by the store than max_failures
        worker.step()
    assert store.failed >= 5
    assert team.roster(refresh=True).members["alice"].state == "active"
    store.puts_down = False
    worker.step()
    assert ingested_ids(saver, team, "alice") == [first.id, second.id]
    worker.stop()
