"""The retry recipe of docs/checkpointer.md, raced by two processes: every round both read the
same latest checkpoint before either writes (a barrier across processes), so one is refused,
and at the end every message each process sent is in the thread exactly once."""

from __future__ import annotations

from pathlib import Path

import pytest

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.stores import LocalStore
from tests.support.processes import process_context
from tests.support.refusal_racers import THREAD, sender

ROUNDS = 6


@pytest.mark.xfail(
    strict=False,
    reason="known defect: a refused run whose input checkpoint alone is in the thread counts its input as "
    "delivered, but another run's new input on top of that checkpoint replaces it before it is consumed; "
    "the message is then lost (seen once in 6 CI runs, on Python 3.13)",
)
def test_two_processes_racing_never_send_a_message_twice_or_lose_one(tmp_path: Path) -> None:
    root = tmp_path / "store"
    ObjectStoreSaver(LocalStore(root)).setup()
    ctx = process_context()
    barrier = ctx.Manager().Barrier(2)
    with ctx.Pool(2) as pool:
        runs = [pool.apply_async(sender, (str(root), who, ROUNDS, barrier)) for who in ("A", "B")]
        refusals = [r.get(timeout=240) for r in runs]
    assert sum(refusals) >= ROUNDS  # every round, one of the two lost the race
    log = ObjectStoreSaver(LocalStore(root)).get_tuple(THREAD).checkpoint["channel_values"]["log"]
    sent = [f"{who}-{i}" for who in ("A", "B") for i in range(ROUNDS)]
    users = [entry for entry in log if not entry.startswith("answered by")]
    assert sorted(users) == sorted(sent)  # each once: none lost, none sent twice
