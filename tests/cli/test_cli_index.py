"""``langgraph-handoff index rebuild`` and what ``verify`` says of the metadata index, on a local
store, each command in a process of its own."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from langgraph_handoff import Layout, ObjectStoreSaver
from tests.support.processes import run_main
from tests.support.saver_helpers import put


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_main("langgraph_handoff.cli", *args)


def test_rebuild_indexes_an_old_store_and_every_team_space(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'store'}"
    old = ObjectStoreSaver.from_url(url, layout=Layout(indexed_metadata=()))  # before the index
    put(old, "chat-1", None, 1, user_id="alice")
    put(old, "chat-2", None, 1, user_id="bob")
    put(old.under("teams/support/members/"), "support/ann", None, 1, user_id="alice")
    assert cli("verify", url).returncode == 0  # nothing declared complete: nothing missing
    first = cli("index", "rebuild", url, "--json")
    rows = [json.loads(line) for line in first.stdout.splitlines()]
    assert first.returncode == 0, first.stderr
    assert [(r["space"], r["namespaces"], r["created"]) for r in rows] == [("", 2, 2), ("teams/support/members/", 1, 1)]
    assert all(r["complete"] == ["assistant_id", "graph_id", "user_id"] for r in rows)
    again = cli("index", "rebuild", url, "--key", "user_id")
    assert again.returncode == 0 and "0 entries written" in again.stdout and "store: 2 of 2" in again.stderr
    found = ObjectStoreSaver.from_url(url).list(None, filter={"user_id": "alice"})
    assert [t.config["configurable"]["thread_id"] for t in found] == ["chat-1"]
    team = ObjectStoreSaver.from_url(url).under("teams/support/members/").list(None, filter={"user_id": "alice"})
    assert [t.config["configurable"]["thread_id"] for t in team] == ["support/ann"]


def test_verify_reports_what_the_index_misses_until_a_rebuild(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'store'}"
    saver = ObjectStoreSaver.from_url(url)
    saver.setup()  # a fresh store: the index is declared complete
    put(saver, "chat-1", None, 1, user_id="alice")
    put(ObjectStoreSaver.from_url(url, layout=Layout(indexed_metadata=())), "chat-2", None, 1, user_id="alice")
    bad = cli("verify", url)
    assert bad.returncode == 1 and "missing_index_entry: heads/chat-2/=" in bad.stdout
    assert cli("index", "rebuild", url).returncode == 0
    ok = cli("verify", url, "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["stale_index_entries"] == 0
