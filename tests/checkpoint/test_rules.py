"""Pure core: pending-write slots and merges, and the fencing rule."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff._format import keys
from langgraph_handoff._format.records import Folded, Head, Record, WriteItem
from langgraph_handoff.checkpoint.fencing import PutIntent, check_put
from langgraph_handoff.checkpoint.plans.reading import folded_tasks
from langgraph_handoff.checkpoint.writes import merge_items, slot_items, sorted_pending
from langgraph_handoff.errors import CheckpointOrderError, StaleWriterError
from langgraph_handoff.stores.base import ObjectInfo

SERDE = JsonPlusSerializer()
C1, C2, C3 = (f"1f0c0a2e-3b4d-6e5f-8a9b-0c1d2e3f4a5{i}" for i in (1, 2, 3))


def test_special_channels_get_fixed_slots() -> None:
    items = slot_items([("a", 1), ("__interrupt__", "q"), ("b", 2), ("__error__", "e")], SERDE.dumps_typed)
    assert sorted((w.idx, w.channel) for w in items) == [(-3, "__interrupt__"), (-1, "__error__"), (0, "a"), (2, "b")]


def test_merge_keeps_regular_first_value_and_overwrites_special() -> None:
    first = slot_items([("__interrupt__", "q1"), ("ch", "v1")], SERDE.dumps_typed)
    second = slot_items([("__resume__", "r"), ("ch", "v2"), ("other", "o")], SERDE.dumps_typed)
    merged = merge_items(first, second)
    got = {w.idx: (w.channel, SERDE.loads_typed((w.type, w.data))) for w in merged}
    assert got == {-4: ("__resume__", "r"), -3: ("__interrupt__", "q1"), 1: ("ch", "v1"), 2: ("other", "o")}
    # a repeated special write overwrites; a regular slot keeps its first value
    again = merge_items(merged, slot_items([("__interrupt__", "q2")], SERDE.dumps_typed))
    assert {w.idx: SERDE.loads_typed((w.type, w.data)) for w in again}[-3] == "q2"


def test_pending_writes_sorted_by_path_task_idx() -> None:
    mk = lambda *w: slot_items(list(w), SERDE.dumps_typed)  # noqa: E731
    pending = sorted_pending(
        [
            ("a-task", "~p, b", mk(("x", 1))),
            ("z-task", "", mk(("x", 2))),
            ("b-task", "~p, a", mk(("x", 3), ("y", 4))),
        ],
        SERDE.loads_typed,
    )
    assert pending == [("z-task", "x", 2), ("b-task", "x", 3), ("b-task", "y", 4), ("a-task", "x", 1)]


def _head(*records: Record) -> Head:
    return Head("t", "", {r.id: r for r in records}, {})


def _rec(cid: str, parent: str | None) -> Record:
    return Record(cid, parent, ("null", b""), ("null", b""), {})


def test_loop_put_must_extend_the_latest() -> None:
    head = _head(_rec(C1, None), _rec(C2, C1))
    ok = PutIntent("t", "", C3, parent_id=C2, source="loop")
    assert check_put(head, ok) is None
    stale = check_put(head, PutIntent("t", "", C3, parent_id=C1, source="loop"))
    assert isinstance(stale, StaleWriterError) and stale.latest == C2 and stale.expected_parent == C1


def test_forks_may_start_anywhere() -> None:
    head = _head(_rec(C1, None), _rec(C2, C1))
    assert check_put(head, PutIntent("t", "", C3, parent_id=C1, source="fork")) is None
    assert check_put(head, PutIntent("t", "", C3, parent_id=C1, source="update")) is None


@pytest.mark.parametrize("source", ["input", "loop"])
def test_a_put_that_is_not_a_runs_may_start_anywhere(source: str) -> None:
    """``update_state(past, as_node="__input__")`` writes source "input" outside any run: the
    caller named the checkpoint, so it is a fork, as every explicit write is."""
    head = _head(_rec(C1, None), _rec(C2, C1))
    assert check_put(head, PutIntent("t", "", C3, parent_id=C1, source=source, by_run=False)) is None
    assert isinstance(check_put(head, PutIntent("t", "", C3, parent_id=C1, source=source)), StaleWriterError)


def test_a_run_addressed_at_a_superseded_checkpoint_may_branch_from_it() -> None:
    head = _head(_rec(C1, None), _rec(C2, C1))
    branch = PutIntent("t", "", C3, parent_id=C1, source="input", branches_from_history=True)
    assert check_put(head, branch) is None


def test_parentless_put_after_seeing_empty_is_stale() -> None:
    head = _head(_rec(C1, None))
    assert isinstance(check_put(head, PutIntent("t", "", C2, None, "input", saw_empty=True)), StaleWriterError)
    assert check_put(head, PutIntent("t", "", C2, None, "input", saw_empty=False)) is None
    assert check_put(None, PutIntent("t", "", C2, None, "input", saw_empty=True)) is None


def test_continuing_a_deleted_thread_is_stale() -> None:
    assert isinstance(check_put(None, PutIntent("t", "", C2, C1, "loop")), StaleWriterError)
    assert isinstance(check_put(_head(), PutIntent("t", "", C2, C1, "loop")), StaleWriterError)


def test_ids_older_than_latest_are_refused() -> None:
    head = _head(_rec(C1, None), _rec(C3, C1))
    err = check_put(head, PutIntent("t", "", C2, C3, "update"))
    assert isinstance(err, CheckpointOrderError) and "clock" in str(err)


def test_re_put_of_the_same_checkpoint_is_an_upsert() -> None:
    head = _head(_rec(C1, None), _rec(C2, C1))
    assert check_put(head, PutIntent("t", "", C2, C1, "loop")) is None
    assert isinstance(check_put(head, PutIntent("t", "", C2, C3, "loop")), StaleWriterError)


def test_a_rider_put_may_not_discard_an_input_that_has_not_run() -> None:
    """New input on top of an input checkpoint that still holds ``__start__`` would discard it
    (and whatever rode with it: a team turn's acked messages). Refused for a rider-carrying
    writer; finishing the input (a loop put) and writers without a rider are unaffected."""
    pending = Record(C2, C1, ("null", b""), ("null", b""), {"__start__": (C2, "1")})
    head = _head(_rec(C1, None), pending)
    stale = check_put(head, PutIntent("t", "", C3, C2, "input", keeps_pending_input=True))
    assert isinstance(stale, StaleWriterError) and "has not run" in str(stale)
    assert check_put(head, PutIntent("t", "", C3, C2, "loop", keeps_pending_input=True)) is None
    assert check_put(head, PutIntent("t", "", C3, C2, "input")) is None  # plain LangGraph semantics
    ran = _head(_rec(C1, None), _rec(C2, C1))
    assert check_put(ran, PutIntent("t", "", C3, C2, "input", keeps_pending_input=True)) is None


def test_a_listed_writes_document_finds_its_task_by_key_segment() -> None:
    """A walk matches each listed writes document to the task whose copy is folded into the
    record: by the task id itself when it is its own key segment (a UUID), else through the
    escaping. A task id that looks like another's escaped segment (``a%2fb`` beside ``a/b``)
    is never taken for it; an unknown or changed document is fetched."""
    item = WriteItem(0, "ch", "null", b"")
    ids = {"6f1c2d3e-aaaa-bbbb-cccc-0123456789ab": "e1", "a/b": "e2", "a%2fb": "e3"}
    writes = {t: Folded(etag, f"~p, {t}", (item,)) for t, etag in ids.items()}
    rec = Record(C1, None, ("null", b""), ("null", b""), {}, writes=writes)
    prefix = keys.writes_prefix("t", "") + keys.invert_checkpoint_id(C1) + "/"
    listed = [ObjectInfo(prefix + keys.encode_segment(t), etag, 1) for t, etag in ids.items()]
    stranger = ObjectInfo(prefix + "someone-else", "e9", 1)
    changed = ObjectInfo(prefix + "a%252fb", "rewritten", 1)  # a%2fb's document, written again
    saver = ObjectStoreSaver.from_url("memory://")
    tasks, want = folded_tasks(saver, "t", "", rec, [*listed, stranger])
    assert [(t, path) for t, path, _ in tasks] == [(t, f"~p, {t}") for t in ids] and want == [stranger.key]
    tasks, want = folded_tasks(saver, "t", "", rec, [listed[1], changed])
    assert [t for t, _, _ in tasks] == ["a/b"] and want == [changed.key]
