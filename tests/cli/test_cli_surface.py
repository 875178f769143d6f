"""The command line's rough edges, found by issue 47 (item 10): help showed typer's type labels
(`--json <bool>`, `--thread <list[str]>`, `--help <bool>`) and mixed `{url}` with `{THREAD}` in
one usage line; `threads` one level above the threads printed nothing, exit 0; `migrate
--dry-run` labelled a column "objects rewritten"; `sessions` printed `owner None`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from typer.main import get_command

from langgraph_handoff.cli import app
from tests.cli.test_cli import cli, populate


def _commands(cmd: Any, path: tuple[str, ...], parent: Any) -> Iterator[tuple[tuple[str, ...], Any, Any]]:
    """Every command and group under ``cmd``, with its path and a context to render it in."""
    ctx = cmd.context_class(cmd, info_name=path[-1], parent=parent)
    yield path, cmd, ctx
    for name, sub in sorted(getattr(cmd, "commands", {}).items()):
        yield from _commands(sub, (*path, name), ctx)


def test_every_value_has_an_explicit_metavar_and_no_flag_shows_a_type() -> None:
    found = []
    for path, cmd, ctx in _commands(get_command(app), ("langgraph-handoff",), None):
        for param in cmd.get_params(ctx):
            shown = param.display_type_rich(ctx)
            name = param.opts[-1]
            if param.param_type_name == "argument":
                if param.metavar is None or param.metavar != param.metavar.upper():
                    found.append(f"{' '.join(path)} argument {name}: metavar {param.metavar!r}")
                if shown:  # its name is its metavar; typer added the Python type (`URL <str>`)
                    found.append(f"{' '.join(path)} argument {name}: shown with {shown!r}")
            elif getattr(param, "is_flag", False):
                if shown:
                    found.append(f"{' '.join(path)} {name}: a flag shown with {shown!r}")
            elif param.metavar is None or (shown or "").startswith("<"):
                found.append(f"{' '.join(path)} {name}: shown as {shown!r}")
        usage = " ".join(cmd.collect_usage_pieces(ctx))
        if any(piece.strip("{}[]").lower() == piece.strip("{}[]") for piece in usage.split() if "{" in piece):
            found.append(f"{' '.join(path)}: usage {usage!r}")
    assert found == []


def test_a_listing_of_no_threads_says_where_it_looked(tmp_path: Path) -> None:
    populate(f"file://{tmp_path / 'prod'}")
    for url, where in ((f"file://{tmp_path}", f"in '{tmp_path}'"), ("memory://", "in memory://")):
        run = cli("threads", url)
        assert run.returncode == 0 and run.stdout == "", run.stderr
        assert run.stderr.startswith(f"langgraph-handoff: no threads {where} (`verify` tells"), run.stderr
    from langgraph_handoff.cli.app import place  # what says where a listing looked, on every store

    assert place("s3://agents/prod?endpoint_url=http://127.0.0.1:7480") == "under prefix 'prod/' of s3://agents"
    assert place("az://agents/a/b/") == "under prefix 'a/b/' of az://agents"
    listed = cli("threads", f"file://{tmp_path / 'prod'}")
    assert listed.returncode == 0 and "chat-1" in listed.stdout and listed.stderr == ""


def test_a_dry_run_migration_labels_what_it_would_do(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 's'}"
    populate(url)
    dry = " ".join(cli("migrate", url, "--dry-run").stdout.split())
    # (the table wraps its headers: "objects to" above "rewrite")
    assert "would migrate" in dry and "rewritten" not in dry and "upgraded" not in dry
    assert "rewrite" in dry and "upgrade" in dry
    real = " ".join(cli("migrate", url).stdout.split())
    assert "rewritten" in real and "upgraded" in real


def test_sessions_without_an_owner_say_so(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 's'}"
    populate(url)
    run = cli("sessions", url)
    rows = run.stdout.splitlines()
    assert len(rows) == 2 and all(r.split("\t")[2] == "no owner" for r in rows), run.stdout
    assert "None" not in run.stdout
