"""The retry recipe of docs/checkpointer.md, raced by two processes. Every round is forced into a
race by a barrier across processes, in turn: both continue the same checkpoint (one input put
loses); one process's input checkpoint is stored and the other brings new input on top of it
(LangGraph drops the first input: the recipe must send it again); or the other resumes from it
(its turn answers the first input: the recipe must not send it again). At the end every message
each process sent is in the thread exactly once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.stores import LocalStore
from tests.support.processes import process_context
from tests.support.refusal_racers import MODES, THREAD, sender

ROUNDS = 12


def test_two_processes_racing_never_send_a_message_twice_or_lose_one(tmp_path: Path) -> None:
    root = tmp_path / "store"
    ObjectStoreSaver(LocalStore(root)).setup()
    ctx = process_context()
    barrier = ctx.Manager().Barrier(2)
    with ctx.Pool(2) as pool:
        runs = [pool.apply_async(sender, (str(root), who, ROUNDS, barrier)) for who in ("A", "B")]
        results = [r.get(timeout=240) for r in runs]
    seen: Counter[str] = Counter()
    for kinds, _ in results:
        seen.update(kinds)
    per_mode = ROUNDS // len(MODES)
    assert seen["nothing stored"] >= per_mode  # same read: one input put lost
    assert seen["input stored but dropped"] >= per_mode  # new input on top: must send again
    assert seen["input in the thread"] >= per_mode  # resume on top: must not send again
    log = ObjectStoreSaver(LocalStore(root)).get_tuple(THREAD).checkpoint["channel_values"]["log"]
    sent = [text for _, texts in results for text in texts]
    assert len(sent) == 2 * ROUNDS - per_mode  # in each resume round only the holder sends
    users = [entry for entry in log if not entry.startswith("answered by")]
    assert sorted(users) == sorted(sent)  # each once: none lost, none sent twice
