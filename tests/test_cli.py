"""The langgraph-handoff command on a local store, each run in a process of its own (forked from a
preloaded server; one test runs it through a new interpreter and the installed script)."""

from __future__ import annotations

import json
import operator
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import pytest
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.format.keys import head_key
from tests.processes import run_main


class S(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    topic: str


def two_step_graph(saver: ObjectStoreSaver) -> Any:
    g = StateGraph(S)
    g.add_node("a", lambda s: {"log": ["a"], "topic": "refund"})
    g.add_node("b", lambda s: {"log": ["b"]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    return g.compile(checkpointer=saver)


def populate(url: str) -> ObjectStoreSaver:
    saver = ObjectStoreSaver.from_url(url)
    graph = two_step_graph(saver)
    for t in ("chat-1", "chat-2"):
        graph.invoke({"log": ["hi"]}, {"configurable": {"thread_id": t}})
    return saver


def cli(*args: str, path: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``langgraph-handoff ARGS`` in a process of its own, as ``subprocess.run`` would, with
    ``path`` (a test's own migrations module) importable and ``env`` added to the environment
    (:func:`tests.processes.run_main`)."""
    return run_main("langgraph_handoff.cli", *args, path=path, env=env)


@pytest.fixture
def url(tmp_path: Path) -> str:
    u = f"file://{tmp_path / 'store'}"
    populate(u)
    return u


def test_the_installed_command_runs_in_a_new_interpreter(url: str) -> None:
    """The other tests fork the command from a process that has imported it already; this one
    runs it as users do: ``python -m langgraph_handoff.cli`` and the ``langgraph-handoff`` script
    that the package's entry point installs next to the interpreter."""
    run = {"capture_output": True, "text": True, "timeout": 120}
    listed = subprocess.run([sys.executable, "-m", "langgraph_handoff.cli", "threads", url, "--json"], **run)
    assert listed.returncode == 0, listed.stderr
    assert {json.loads(x)["thread_id"] for x in listed.stdout.splitlines()} == {"chat-1", "chat-2"}
    script = Path(sys.executable).with_name("langgraph-handoff")
    bad = subprocess.run([str(script), "history", "bogus://x", "t"], **run)
    assert bad.returncode == 2 and bad.stderr.startswith("langgraph-handoff: unsupported store URL 'bogus://x'")


@pytest.mark.heavy
def test_threads_history_show_and_diff(url: str) -> None:
    out = cli("threads", url, "--json")
    assert out.returncode == 0 and {json.loads(x)["thread_id"] for x in out.stdout.splitlines()} == {"chat-1", "chat-2"}
    assert "chat-1" in cli("threads", url).stdout
    rows = [json.loads(x) for x in cli("history", url, "chat-1", "--json").stdout.splitlines()]
    assert len(rows) == 4 and rows[0]["step"] == 2
    shown = json.loads(cli("show", url, "chat-1", "--json").stdout)
    assert (
        shown["values"] == {"log": ["hi", "a", "b"], "topic": "refund"}
        and shown["checkpoint_id"] == rows[0]["checkpoint_id"]
    )
    older = json.loads(cli("show", url, "chat-1", "--checkpoint", rows[2]["checkpoint_id"], "--json").stdout)
    assert older["values"] == {"log": ["hi"]}
    diff = json.loads(cli("diff", url, "chat-1", rows[2]["checkpoint_id"], rows[0]["checkpoint_id"], "--json").stdout)
    assert diff["changed"] == {"log": {"appended": ["a", "b"]}} and diff["added"] == {"topic": "refund"}
    raw = json.loads(cli("show", url, "chat-1", "--raw").stdout)
    assert len(raw["records"]) == 4 and raw["records"][0]["schema"] == 0


def test_verify_finds_damage(url: str, tmp_path: Path) -> None:
    ok = cli("verify", url, "--json")
    report = json.loads(ok.stdout)
    assert ok.returncode == 0 and report["heads"] == 2 and report["problems"] == []
    path = tmp_path / "store" / head_key("chat-2", "")
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF  # flip bits in the body: the checksum no longer matches
    path.write_bytes(bytes(data))
    bad = cli("verify", url)
    assert bad.returncode == 1 and "CorruptObjectError" in bad.stdout and "chat-2" in bad.stdout


def test_verify_checks_writes_and_values_against_the_heads(tmp_path: Path) -> None:
    """Writes documents against the checkpoints that fold them, values against the payload
    tables, and objects nothing references."""
    from dataclasses import replace

    from langgraph_handoff.format import records as rec_io
    from langgraph_handoff.format.keys import writes_key
    from langgraph_handoff.inspect import verify_store

    saver = populate(f"file://{tmp_path / 'store'}")
    # Whether a run's writes are folded into a later head depends on thread timing under
    # LangGraph's default durability="async" (a task's put_writes and the next put race in its
    # executor: this test failed 1 run in 6). update_state makes both calls one after the other
    # on this thread, so chat-1's latest checkpoint gets its writes folded in every time.
    two_step_graph(saver).update_state({"configurable": {"thread_id": "chat-1"}}, {"log": ["edit"]}, as_node="b")
    store = saver.store
    clean = verify_store(saver)
    assert clean.problems == [] and clean.unreferenced == [] and clean.schemas == {0: 9}
    head = rec_io.decode_head(store.get(head_key("chat-1", "")).body, key="h")
    folded_in = next(r for r in head.records.values() if r.writes)
    task, copy = next(iter(folded_in.writes.items()))
    wkey = writes_key("chat-1", "", folded_in.id, task)
    doc = rec_io.decode_writes(store.get(wkey).body, key=wkey)
    # 1. a writes document whose folded copy (same ETag) says otherwise
    changed = replace(copy, items=tuple(replace(w, data=b"\xc0") for w in copy.items))
    bad_head = replace(head, records={**head.records, folded_in.id: replace(folded_in, writes={task: changed})})
    store.put(head_key("chat-1", ""), rec_io.encode_head(bad_head))
    # 2. a writes document stored under another checkpoint's key
    other = next(i for i in head.records if i != folded_in.id)
    store.put(writes_key("chat-1", "", other, task), rec_io.encode_writes(doc))
    # 3. a checkpoint referencing a value its head lacks
    head2 = rec_io.decode_head(store.get(head_key("chat-2", "")).body, key="h")
    latest = head2.latest
    assert latest is not None
    head2 = replace(head2, payloads={o: {} for o in head2.payloads})
    store.put(head_key("chat-2", ""), rec_io.encode_head(head2))
    # 4. writes of a checkpoint the thread does not hold: unreferenced, not a problem
    store.put(writes_key("chat-2", "", "1ef4f797-8335-6428-8001-8a1503f9b875", "t"), rec_io.encode_writes(
        replace(doc, thread_id="chat-2", checkpoint_id="1ef4f797-8335-6428-8001-8a1503f9b875", task_id="t")))  # fmt: skip
    report = verify_store(saver)
    kinds = sorted({p.kind for p in report.problems})
    assert kinds == ["folded_mismatch", "misplaced_writes", "missing_value"], report.problems
    assert report.unreferenced == [writes_key("chat-2", "", "1ef4f797-8335-6428-8001-8a1503f9b875", "t")]


@pytest.mark.heavy
def test_prune_copy_delete(url: str) -> None:
    dry = json.loads(cli("prune", url, "--thread", "chat-1", "--keep-latest", "--dry-run", "--json").stdout)
    assert dry == {
        "strategy": "keep_latest",
        "threads": ["chat-1"],
        "checkpoints_removed": {"chat-1": 3},
        "dry_run": True,
    }
    assert len(cli("history", url, "chat-1", "--json").stdout.splitlines()) == 4
    assert cli("prune", url, "--thread", "chat-1", "--keep-latest").returncode == 0
    assert len(cli("history", url, "chat-1", "--json").stdout.splitlines()) == 1
    idle = json.loads(cli("prune", url, "--all", "--older-than", "0", "--dry-run", "--json").stdout)
    assert sorted(idle["threads"]) == ["chat-1", "chat-2"]
    assert json.loads(cli("prune", url, "--all", "--older-than", "30", "--json").stdout)["threads"] == []
    assert cli("copy", url, "chat-2", "chat-3").returncode == 0
    assert json.loads(cli("show", url, "chat-3", "--json").stdout)["values"]["log"] == ["hi", "a", "b"]
    refused = cli("delete", url, "chat-3")
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert cli("delete", url, "chat-3", "--yes").returncode == 0
    assert "chat-3" not in cli("threads", url).stdout


def test_bad_input_exits_2(url: str) -> None:
    out = cli("show", url, "nobody")
    assert out.returncode == 2 and "'nobody' namespace '' has no checkpoints" in out.stderr
    assert cli("history", "bogus://x", "t").returncode == 2
    assert cli("copy", url, "chat-1", "chat-2").returncode == 2  # the target exists


@pytest.mark.heavy
def test_review_fixes_source_timezones_counts_and_migrations(tmp_path: Path) -> None:
    """Fourth review round: history without metadata.source, --older-than east of UTC, the
    keep-latest dry-run count with subgraphs, and threads written with migrations."""
    from langgraph.checkpoint.base.id import uuid6

    url = f"file://{tmp_path / 'store'}"
    saver = populate(url)
    saver.put(
        {"configurable": {"thread_id": "nosrc", "checkpoint_ns": ""}},
        {
            "v": 4,
            "id": str(uuid6()),
            "ts": "2024-01-01T00:00:00+00:00",
            "channel_values": {"x": 1},
            "channel_versions": {"x": 1},
            "versions_seen": {},
            "updated_channels": None,
        },
        {"step": 1},
        {},
    )
    out = cli("history", url, "nosrc")
    assert out.returncode == 0 and "None" in out.stdout
    east = cli(
        "prune", url, "--thread", "chat-1", "--older-than", "0.5", "--dry-run", "--json", TZ="Pacific/Kiritimati"
    )
    assert json.loads(east.stdout)["threads"] == []  # written moments ago, whatever the local zone

    from tests.graph_scenarios import with_subgraph

    graph = with_subgraph(saver, S, "log")
    for i in range(3):
        graph.invoke({"log": [str(i)]}, {"configurable": {"thread_id": "nested"}})
    before = sum(1 for _ in saver.list({"configurable": {"thread_id": "nested"}}))
    dry = json.loads(cli("prune", url, "--thread", "nested", "--keep-latest", "--dry-run", "--json").stdout)
    assert cli("prune", url, "--thread", "nested", "--keep-latest").returncode == 0
    after = sum(1 for _ in saver.list({"configurable": {"thread_id": "nested"}}))
    assert dry["checkpoints_removed"]["nested"] == before - after

    (tmp_path / "myschema.py").write_text(
        "from langgraph_handoff.migrations import SchemaMigrations\n"
        "migrations = SchemaMigrations()\n"
        "@migrations.register(1, 'noop')\n"
        "def noop(values, metadata):\n    pass\n"
    )
    import importlib.util

    spec = importlib.util.spec_from_file_location("myschema", tmp_path / "myschema.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    migrated = ObjectStoreSaver.from_url(url, migrations=module.migrations)
    with_subgraph(migrated, S, "log").invoke({"log": ["m"]}, {"configurable": {"thread_id": "schema1"}})
    refused = cli("show", url, "schema1", path=tmp_path)
    assert refused.returncode == 2 and "state schema version 1" in refused.stderr
    shown = cli("show", url, "schema1", "--json", "--migrations", "myschema:migrations", path=tmp_path)
    assert shown.returncode == 0 and json.loads(shown.stdout)["values"]["log"] == ["m", "m", "x"]
