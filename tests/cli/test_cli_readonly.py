"""The commands that read a store (``threads``, ``history``, ``show``, ``diff``, ``verify``)
create nothing in it and work where they cannot write; ``file://`` paths follow one rule.

Found by issue 47 (deliverables 5 and 6): the read-only commands made ``.locks/`` in the target
directory (``verify`` on the repository's ``docs/`` left ``docs/.locks/``) and failed where they
could not, so a store copied to a read-only mount could not be inspected; ``verify`` on a
directory that is not a store printed ``ok``; ``doctor`` on a mistyped directory made it and
printed ``ok``; a path that is a file got advice to run ``setup``, which failed with an errno.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from langgraph_handoff import ObjectStoreSaver
from tests.cli.test_cli import cli, populate

READERS = ("threads", "history", "show", "diff", "verify")


def _commands(url: str) -> list[list[str]]:
    """One run of each read-only command on ``url``'s thread ``chat-1``."""
    with ObjectStoreSaver.from_url(url) as saver:
        ids = [t.config["configurable"]["checkpoint_id"] for t in saver.list({"configurable": {"thread_id": "chat-1"}})]
    return [
        ["threads", url],
        ["history", url, "chat-1"],
        ["show", url, "chat-1"],
        ["diff", url, "chat-1", ids[-1], ids[0]],
        ["verify", url],
    ]


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``root`` with its mode and size (what a command could have changed)."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            st = path.lstat()
            found[str(path.relative_to(root))] = (st.st_mode, st.st_size)
    return found


@pytest.fixture
def copied_store(tmp_path: Path) -> Iterator[tuple[Path, list[list[str]]]]:
    """A store as a copy of one holds it (the objects, without the writers' ``.locks/``), and
    the commands to run on it (found before ``.locks/`` goes: opening the store made it)."""
    store = tmp_path / "store"
    populate(f"file://{store}")
    commands = _commands(f"file://{store}")
    shutil.rmtree(store / ".locks")
    yield store, commands


def test_reading_commands_create_nothing(copied_store: tuple[Path, list[list[str]]]) -> None:
    store, commands = copied_store
    before = _tree(store)
    for command in commands:
        run = cli(*command)
        assert run.returncode == 0, (command, run.stderr)
        assert run.stdout.strip(), command
    assert _tree(store) == before  # no .locks/, no temporary file, nothing else


#: run as root, the test drops every capability: root then reads and writes as the owner of a file
#: only, as any other user does (no CAP_DAC_OVERRIDE), and the interpreter in /root stays readable
_UNPRIVILEGED = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"] if os.geteuid() == 0 else []

_DRIVER = """
import contextlib, io, json, sys
from langgraph_handoff.cli import main
results = []
for command in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(command)
    results.append({"command": command[0], "code": code, "stdout": out.getvalue(), "stderr": err.getvalue()})
print(json.dumps(results))
"""


@pytest.mark.heavy
@pytest.mark.skipif(
    bool(_UNPRIVILEGED) and shutil.which("setpriv") is None, reason="needs setpriv to drop root's rights"
)
def test_reading_commands_work_on_a_store_they_cannot_write_to(copied_store: tuple[Path, list[list[str]]]) -> None:
    """As on a read-only mount: every directory and file without write permission, for a
    process without the rights to override that. One interpreter runs the five commands."""
    store, commands = copied_store
    for path in [store, *store.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        run = subprocess.run(
            [*_UNPRIVILEGED, sys.executable, "-c", _DRIVER, json.dumps(commands)],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        assert run.returncode == 0, run.stderr
        results = json.loads(run.stdout)
        assert [(r["command"], r["code"], r["stderr"]) for r in results] == [(c, 0, "") for c in READERS]
        assert all(r["stdout"].strip() for r in results)
        assert "chat-1" in results[0]["stdout"] and "ok" in results[-1]["stdout"]
    finally:
        for path in [store, *store.rglob("*")]:
            path.chmod(0o700 if path.is_dir() else 0o600)


def test_verify_on_a_directory_that_is_not_a_store_says_so(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# not a store\n")
    populate(f"file://{tmp_path / 'above' / 'prod'}")  # a store one level below the URL
    for place, held in (("docs", "1 object(s), none of them"), ("above", "a store seems to be under 'prod/'")):
        run = cli("verify", f"file://{tmp_path / place}", "--json")
        assert run.returncode == 1, run.stderr
        problems = json.loads(run.stdout)["problems"]
        assert [p["kind"] for p in problems] == ["not_a_store"] and held in problems[0]["detail"], problems
    empty = tmp_path / "empty"
    empty.mkdir()
    run = cli("verify", f"file://{empty}")
    assert run.returncode == 1 and "no store here: no format marker and no object at all" in run.stdout
    assert json.loads(cli("verify", f"file://{empty}", "--json").stdout)["empty"] is True
    assert sorted(os.listdir(docs)) == ["index.md"] and os.listdir(empty) == []


def test_only_setup_makes_a_missing_directory_and_says_so(tmp_path: Path) -> None:
    missing = tmp_path / "typo-dir"
    for command in (["threads"], ["verify"], ["doctor", "--rounds", "1"], ["sessions"]):
        run = cli(command[0], f"file://{missing}", *command[1:])
        assert run.returncode == 2, (command, run.stdout)
        assert "no store at" in run.stderr and "setup" in run.stderr, command
        assert not missing.exists(), command
    made = cli("setup", f"file://{missing}", "--json")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["created_directory"] == str(missing) and missing.is_dir()
    again = cli("setup", f"file://{missing}")
    assert again.returncode == 0 and "made the directory" not in again.stdout


def test_opening_a_store_in_the_library_makes_no_directory(tmp_path: Path) -> None:
    """``from_url("file://~/agents")`` made the directory, with nothing written in it."""
    target = tmp_path / "agents"
    with ObjectStoreSaver.from_url(f"file://{target}") as saver:
        assert saver.get_tuple({"configurable": {"thread_id": "t"}}) is None
        assert list(saver.list(None)) == []
        assert not target.exists()
    populate(f"file://{target}")  # the first write makes it
    assert target.is_dir()


def test_every_command_says_a_file_is_not_a_directory(tmp_path: Path) -> None:
    regular = tmp_path / "notes.txt"
    regular.write_text("x")
    for where in (regular, regular / "store"):
        for command in ("threads", "verify", "setup", "doctor"):
            run = cli(command, f"file://{where}")
            assert run.returncode == 2, (command, where, run.stdout)
            assert f"'{regular}' is a file, not a directory" in run.stderr, (command, where, run.stderr)
            assert "Errno" not in run.stderr
    assert regular.read_text() == "x"
