"""``langgraph-handoff sweep``: JSON lines and summary, dry run, --limit, --ttl, the exit code."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from langgraph_handoff import LocalStore, ObjectStoreSaver
from langgraph_handoff._format import keys
from langgraph_handoff.cli import main
from tests.support.sweep_helpers import cfg, chat_graph


def _store(tmp_path: Path) -> str:
    """Three threads stamped with a 60-minute TTL two hours ago, one fresh, one without a stamp."""
    store = LocalStore(tmp_path / "store")
    past = ObjectStoreSaver(store, ttl={"default_ttl": 60}, clock=lambda: time.time() - 7200)
    for t in ("a", "b", "c"):
        chat_graph("x").compile(checkpointer=past).invoke({"messages": ["hi"]}, cfg(t))
    chat_graph("x").compile(checkpointer=ObjectStoreSaver(store, ttl={"default_ttl": 60})).invoke(
        {"messages": ["hi"]}, cfg("fresh")
    )
    chat_graph("x").compile(checkpointer=ObjectStoreSaver(store)).invoke({"messages": ["hi"]}, cfg("plain"))
    return f"file://{tmp_path / 'store'}"


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict], str]:  # type: ignore[type-arg]
    code = main(["sweep", *args])
    out = capsys.readouterr().out
    lines = [json.loads(line) for line in out.splitlines()] if "--json" in args else []
    return code, lines, out


def test_sweep_json_dry_run_limit_and_ttl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = _store(tmp_path)
    code, lines, _ = _run(capsys, url, "--json", "--dry-run")
    assert code == 0
    statuses = {line["thread_id"]: line["status"] for line in lines[:-1]}
    assert statuses == {"a": "would delete", "b": "would delete", "c": "would delete", "fresh": "kept", "plain": "kept"}
    assert lines[-1]["summary"]["deleted"] == 3 and lines[-1]["summary"]["dry_run"] is True

    code, lines, _ = _run(capsys, url, "--json", "--limit", "2")
    assert code == 0 and lines[-1]["summary"]["deleted"] == 2 and lines[-1]["summary"]["limited"] is True
    code, lines, _ = _run(capsys, url, "--json")
    assert [line["status"] for line in lines[:-1]].count("deleted") == 1

    # a thread written without TTL expires only with --ttl (by its latest checkpoint's time)
    code, lines, _ = _run(capsys, url, "--json", "--ttl", "0.0001")
    assert {line["thread_id"]: line["status"] for line in lines[:-1]}["plain"] == "deleted"


def test_sweep_text_table_and_exit_code_on_an_unreadable_thread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _store(tmp_path)
    code, _, out = _run(capsys, url)
    assert code == 0 and "sweep" in out and "deleted" in out
    LocalStore(tmp_path / "store").put(keys.head_key("plain", ""), b"not a head")
    code, _, out = _run(capsys, url)
    assert code == 1
    assert main(["sweep", url, "--strategy", "archive"]) == 2


def test_sweep_reports_a_cleanup_left_pending_and_the_next_sweep_finishes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by review: a sweep whose DeleteObjects failed after the head swap reported the thread
    "failed" although it was emptied, and nothing ever deleted its data. The command now says
    "cleanup pending" (exit 1), and the next run reports the thread "cleaned"."""
    from langgraph_handoff.errors import StoreUnavailableError

    url = _store(tmp_path)

    def failing_delete(self: LocalStore, keys_: list[str]) -> None:
        raise StoreUnavailableError("DeleteObjects kept failing")

    with monkeypatch.context() as m:
        m.setattr(LocalStore, "delete_many", failing_delete)
        code, _, out = _run(capsys, url)
    assert code == 1 and "cleanup pending" in out
    code, lines, _ = _run(capsys, url, "--json")
    assert code == 0
    assert sorted(line["status"] for line in lines[:-1] if line["thread_id"] in "abc") == ["cleaned"] * 3
    assert lines[-1]["summary"]["cleaned"] == 3
    assert not [i.key for i in LocalStore(tmp_path / "store").list("data/") if i.key.split("/")[1] in "abc"]
