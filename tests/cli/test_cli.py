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
from langgraph_handoff._format.keys import head_key
from tests.support.processes import run_main


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
    (:func:`tests.support.processes.run_main`)."""
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

    from langgraph_handoff._format import records as rec_io
    from langgraph_handoff._format.keys import writes_key
    from langgraph_handoff.inspection import verify_store

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
    assert out.returncode == 2 and "no thread 'nobody'" in out.stderr
    assert cli("history", "bogus://x", "t").returncode == 2
    assert cli("copy", url, "chat-1", "chat-2").returncode == 2  # the target exists


@pytest.mark.heavy
def test_commands_handle_a_missing_source_east_of_utc_nested_counts_and_schemas(tmp_path: Path) -> None:
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

    from tests.support.graph_scenarios import with_subgraph

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
    assert "--migrations myapp.schema:migrations" in refused.stderr  # the next step, named
    shown = cli("show", url, "schema1", "--json", "--migrations", "myschema:migrations", path=tmp_path)
    assert shown.returncode == 0 and json.loads(shown.stdout)["values"]["log"] == ["m", "m", "x"]


def _damaged_store(tmp_path: Path) -> tuple[str, Path]:
    """chat-1 and chat-2, chat-2's root head truncated, and a README dropped into heads/."""
    url = f"file://{tmp_path / 'store'}"
    populate(url)
    head = tmp_path / "store" / head_key("chat-2", "")
    head.write_bytes(head.read_bytes()[:100])
    (tmp_path / "store" / "heads" / "README.txt").write_text("our notes\n")
    return url, head


@pytest.mark.heavy
def test_damage_is_reported_and_every_walk_goes_on(tmp_path: Path) -> None:
    """Found by a new user: one truncated head made `threads` and `prune --all` exit 2 for every
    thread, and a README under heads/ broke verify, threads, sweep, prune and migrate with a
    message about a bad key. Each now names what it skipped, does the rest, and exits 1."""
    url, head = _damaged_store(tmp_path)
    listed = cli("threads", url)
    assert listed.returncode == 1 and listed.stdout.startswith("chat-1\t")
    assert "skipped heads/chat-2/= (truncated)" in listed.stderr
    assert "skipped heads/README.txt (not_a_head)" in listed.stderr
    rows = [json.loads(x) for x in cli("threads", url, "--json").stdout.splitlines()]
    assert [r.get("thread_id") for r in rows if "thread_id" in r] == ["chat-1"]
    assert sorted(r["damaged"]["reason"] for r in rows if "damaged" in r) == ["not_a_head", "truncated"]
    verified = cli("verify", url)
    assert verified.returncode == 1 and "foreign_object: heads/README.txt" in verified.stdout
    assert "CorruptObjectError: heads/chat-2/=" in verified.stdout
    pruned = cli("prune", url, "--all", "--keep-latest", "--json")
    assert pruned.returncode == 1 and json.loads(pruned.stdout)["threads"] == ["chat-1"]
    assert len(cli("history", url, "chat-1", "--json").stdout.splitlines()) == 1
    swept = cli("sweep", url, "--ttl", "0.0001", "--dry-run", "--json")
    lines = [json.loads(x) for x in swept.stdout.splitlines()]
    assert swept.returncode == 1 and {x.get("thread_id"): x.get("status") for x in lines if "status" in x} == {
        "chat-1": "would delete",
        "chat-2": "failed",
    }
    assert lines[-1]["summary"]["damaged"] == 2
    migrated = cli("migrate", url, "--dry-run")
    assert migrated.returncode == 1 and "heads/README.txt" in migrated.stderr and "Traceback" not in migrated.stderr
    # a thread whose head cannot be read: deleted only with --force, without reading it
    refused = cli("delete", url, "chat-2", "--yes")
    assert refused.returncode == 2 and "'heads/chat-2/=' is corrupt" in refused.stderr
    assert f"langgraph-handoff delete {url} chat-2 --yes --force" in refused.stderr and head.exists()
    forced = cli("delete", url, "chat-2", "--yes", "--force")
    assert forced.returncode == 0 and "without reading 1 damaged head(s): heads/chat-2/=" in forced.stdout
    (tmp_path / "store" / "heads" / "README.txt").unlink()
    after = cli("threads", url)
    assert after.returncode == 0 and after.stdout.startswith("chat-1\t") and "chat-2" not in after.stdout


@pytest.mark.heavy
def test_a_thread_that_does_not_exist_is_an_error_not_a_success(url: str) -> None:
    """Found by a new user: `copy nosuch x` printed "copied", `delete nosuch --yes` "deleted",
    `history nosuch` nothing, all exit 0. Each now exits 2 with "no thread" and the command that
    lists the threads, and changes nothing."""
    for args in (
        ("copy", url, "nosuch", "x"),
        ("delete", url, "nosuch", "--yes"),
        ("history", url, "nosuch"),
        ("show", url, "nosuch"),
        ("show", url, "nosuch", "--raw"),
        ("diff", url, "nosuch", "a", "b"),
        ("prune", url, "--thread", "chat-1", "--thread", "nosuch", "--keep-latest"),
        ("verify", url, "--thread", "nosuch"),
    ):
        out = cli(*args)
        assert out.returncode == 2 and "no thread 'nosuch'" in out.stderr, (args, out.stderr)
        assert f"next: `langgraph-handoff threads {url}`" in out.stderr, args
    assert len(cli("history", url, "chat-1", "--json").stdout.splitlines()) == 4  # the prune changed nothing
    assert "'x'" not in cli("threads", url).stdout
    # an existing thread without that namespace or checkpoint says which
    out = cli("show", url, "chat-1", "--ns", "nope")
    assert out.returncode == 2 and "has no checkpoints in namespace 'nope' (its namespaces: '')" in out.stderr
    out = cli("history", url, "chat-1", "--ns", "nope")
    assert out.returncode == 2 and "namespace 'nope'" in out.stderr
    # a misspelt team: no empty table with exit 0
    for args in (("team", "status", url, "relase-42"), ("team", "dead", url, "relase-42")):
        out = cli(*args)
        assert out.returncode == 2 and "no team 'relase-42'" in out.stderr


def test_verify_checks_the_format_marker(url: str, tmp_path: Path) -> None:
    """Found by a new user: verify called a garbage meta/format "ok"."""
    from langgraph_handoff._format import envelope

    assert cli("setup", url).returncode == 0
    ok = cli("verify", url, "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["marker"]["format"] == envelope.FORMAT_VERSION
    marker = tmp_path / "store" / "meta" / "format"
    marker.write_bytes(b"garbage")
    bad = cli("verify", url)
    assert bad.returncode == 1 and "meta/format" in bad.stdout and "bad magic" in bad.stdout
    marker.write_bytes(envelope.encode_msgpack(envelope.Kind.MARKER, {"package": "someone-else"}))
    bad = cli("verify", url, "--json")
    assert bad.returncode == 1 and [p["kind"] for p in json.loads(bad.stdout)["problems"]] == ["format_marker"]
    marker.unlink()  # a store used without setup has no marker: not a problem
    none = cli("verify", url)
    assert none.returncode == 0 and "format marker: none" in none.stdout


@pytest.mark.parametrize(
    "extra", [{b"probe": 1}, {"probe": {1: b"x"}}, {"probe": float("nan")}], ids=["bytes key", "int key", "nan"]
)
def test_verify_reports_a_marker_that_holds_what_json_cannot(url: str, tmp_path: Path, extra: dict[Any, Any]) -> None:
    """Found by the fuzzer: a format marker with a bytes key crashed `verify --json` with a
    traceback (the report repeats the marker's fields). The marker holds only text keys and
    plain values; anything else is a `format_marker` problem."""
    import msgpack

    from langgraph_handoff._format import envelope

    assert cli("setup", url).returncode == 0
    record = {"package": "langgraph-handoff", **extra}
    marker = envelope.encode(envelope.Kind.MARKER, msgpack.packb(record, use_bin_type=True))
    (tmp_path / "store" / "meta" / "format").write_bytes(marker)
    bad = cli("verify", url, "--json")
    assert bad.returncode == 1 and "Traceback" not in bad.stderr, bad.stderr
    assert [p["kind"] for p in json.loads(bad.stdout)["problems"]] == ["format_marker"]


def test_history_shows_each_namespace_and_limits_each_one(tmp_path: Path) -> None:
    """Found by a new user: history mixed a subgraph's checkpoints into the root's, with no
    namespace column, and --limit cut across both."""
    from tests.support.graph_scenarios import with_subgraph

    url = f"file://{tmp_path / 'store'}"
    saver = ObjectStoreSaver.from_url(url)
    graph = with_subgraph(saver, S, "log")
    for i in range(2):
        graph.invoke({"log": [str(i)]}, {"configurable": {"thread_id": "nested"}})
    namespaces = thread_ns(saver, "nested")  # the root's, and a subgraph's per run
    assert namespaces[0] == "" and len(namespaces) == 3
    rows = [json.loads(x) for x in cli("history", url, "nested", "--json").stdout.splitlines()]
    assert list(dict.fromkeys(r["checkpoint_ns"] for r in rows)) == namespaces  # grouped, the root's first
    per_ns = {ns: [r["checkpoint_id"] for r in rows if r["checkpoint_ns"] == ns] for ns in namespaces}
    assert all(ids == sorted(ids, reverse=True) and len(ids) > 2 for ids in per_ns.values())  # newest first
    limited = [json.loads(x) for x in cli("history", url, "nested", "--limit", "2", "--json").stdout.splitlines()]
    assert [r["checkpoint_id"] for r in limited] == [i for ns in namespaces for i in per_ns[ns][:2]]
    text = cli("history", url, "nested", "--limit", "1").stdout.splitlines()
    assert [line.split()[0] for line in text] == ["(root)", *namespaces[1:]]
    assert text[0].split()[1] == per_ns[""][0]


def thread_ns(saver: ObjectStoreSaver, thread_id: str) -> list[str]:
    from langgraph_handoff.inspection import thread_heads

    return thread_heads(saver, thread_id).namespaces


SCHEMA = (
    "from langgraph_handoff.migrations import SchemaMigrations\n"
    "migrations = SchemaMigrations()\n"
    "@migrations.register(1, 'add language')\n"
    "def add_language(values, metadata):\n    values.setdefault('topic', 'none')\n"
)


def test_migrations_are_imported_from_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by a new user: `migrate --migrations myapp.schema:migrations`, run from the project
    directory as the README shows, failed with "No module named 'myapp'" unless PYTHONPATH=.
    The module is now imported as `python -m` would, from the current directory first."""
    project = tmp_path / "project"
    (project / "myapp").mkdir(parents=True)
    (project / "myapp" / "__init__.py").write_text("")
    (project / "myapp" / "schema.py").write_text(SCHEMA)
    url = f"file://{tmp_path / 'store'}"
    populate(url)
    monkeypatch.chdir(project)
    done = cli("migrate", url, "--migrations", "myapp.schema:migrations", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["summary"]["migrated"] == 2
    missing = cli("migrate", url, "--migrations", "yourapp.schema:migrations")
    assert missing.returncode == 2 and "no module named 'yourapp'" in missing.stderr
    assert f"(looked in the current directory {project}" in missing.stderr and "Traceback" not in missing.stderr
    attr = cli("migrate", url, "--migrations", "myapp.schema:migration")
    assert attr.returncode == 2 and "has no attribute 'migration' (it has SchemaMigrations migrations)" in attr.stderr
    (project / "myapp" / "broken.py").write_text("raise RuntimeError('no database')\n")
    broken = cli("migrate", url, "--migrations", "myapp.broken:migrations")
    assert broken.returncode == 2 and "RuntimeError: no database" in broken.stderr

    import sys

    from langgraph_handoff.cli.app import load_migrations

    path = list(sys.path)
    try:
        assert load_migrations("myapp.schema").current == 1  # ":migrations" is the default name
        assert sys.path == path  # the directory was on sys.path for that import only
    finally:  # this process imported the test's package: forget it, as the commands' processes do
        for name in [m for m in sys.modules if m == "myapp" or m.startswith("myapp.")]:
            del sys.modules[name]


GAP_SCHEMA = (
    "from langgraph_handoff.migrations import SchemaMigrations\n"
    "migrations = SchemaMigrations(required=('topic', 'language'))\n"
    "@migrations.register(1, 'forgets language')\n"
    "def forgets(values, metadata):\n    pass\n"
)


def test_migrate_dry_run_lists_the_threads_with_a_schema_gap(tmp_path: Path, url: str) -> None:
    """Each thread's checkpoints grouped by schema version and missing fields: step 0 lacks both
    (node ``a`` sets ``topic`` at step 1), steps 1 and 2 lack ``language``; the input checkpoint
    holds no field yet and is no gap. Nothing is written: a real run then still finds them."""
    (tmp_path / "gapschema.py").write_text(GAP_SCHEMA)
    text = cli("migrate", url, "--migrations", "gapschema:migrations", "--dry-run", path=tmp_path)
    assert text.returncode == 0, text.stderr
    # (on the progress bar's console, as failures are; the table goes to stdout)
    lines = [" ".join(line.split()) for line in text.stderr.splitlines() if line.startswith("schema gap")]
    assert sorted(lines) == [
        f"schema gap {t}: {n} checkpoint(s) of schema 0 lack {missing}"
        for t in ("chat-1", "chat-2")
        for n, missing in ((1, "topic, language"), (2, "language"))
    ]
    assert "still lacks" not in text.stderr  # a read's warning is not repeated by migrate
    assert " ".join(text.stdout.split()).count("schema gaps") == 1
    as_json = cli("migrate", url, "--migrations", "gapschema:migrations", "--dry-run", "--json", path=tmp_path)
    *threads, summary = (json.loads(line) for line in as_json.stdout.splitlines())
    assert summary["summary"]["gaps"] == 2
    assert sorted((t["thread_id"], [(g["missing"], g["checkpoints"]) for g in t["gaps"]]) for t in threads) == [
        (t, [(["language"], 2), (["topic", "language"], 1)]) for t in ("chat-1", "chat-2")
    ]
