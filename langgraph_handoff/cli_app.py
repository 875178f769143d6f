"""What every ``langgraph-handoff`` command shares: the typer app, the common options, opening
the store, loading ``--migrations``, printing (moved from :mod:`langgraph_handoff.cli`)."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Optional
from urllib.parse import unquote, urlparse

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from langgraph_handoff._version import __version__
from langgraph_handoff.checkpoint.saver import ObjectStoreSaver
from langgraph_handoff.errors import InvalidConfigError, LangGraphHandoffError
from langgraph_handoff.migrations import SchemaMigrations

__all__ = ["app", "main"]

app = typer.Typer(
    name="langgraph-handoff",
    help="Inspect, maintain and migrate what a langgraph-handoff store holds.",
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# The arguments every command shares, declared once.
Url = Annotated[str, typer.Argument(help="file:///dir, s3://bucket/prefix[?endpoint_url=...] or memory://")]
Json = Annotated[bool, typer.Option("--json", help="machine-readable output")]
Migrations = Annotated[
    Optional[str],  # noqa: UP045 - typer reads the annotation at run time, on Python 3.10 too
    typer.Option(
        "--migrations",
        metavar="MODULE:NAME",
        help="your SchemaMigrations (e.g. myapp.schema:migrations), to read and migrate migrated threads",
    ),
]
Ns = Annotated[str, typer.Option("--ns", help="checkpoint namespace ('' is the root graph)")]


def _load_migrations(spec: str | None) -> SchemaMigrations | None:
    """``module:attribute`` naming a SchemaMigrations object (the app's, so the CLI reads what it writes)."""
    if spec is None:
        return None
    module, _, name = spec.partition(":")
    try:
        obj = getattr(importlib.import_module(module), name or "migrations")
    except (ImportError, AttributeError) as exc:
        raise InvalidConfigError(f"--migrations {spec!r}: {exc}") from None
    if not isinstance(obj, SchemaMigrations):
        raise InvalidConfigError(f"--migrations {spec!r} is a {type(obj).__name__}, not a SchemaMigrations")
    return obj


@contextmanager
def _saver(url: str, migrations: str | None, *, create: bool = False) -> Iterator[ObjectStoreSaver]:
    """The saver for ``url``. A ``file://`` directory that does not exist is an error (a typo
    would otherwise create an empty store and report nothing to do), except for ``setup``."""
    parsed = urlparse(url)
    if parsed.scheme.lower() == "file" and not create:
        path = Path(unquote(parsed.netloc + parsed.path))  # as from_url reads it
        if not path.is_dir():
            raise InvalidConfigError(f"no store at {str(path)!r}: check the path (or create it with `setup`)")
    with ObjectStoreSaver.from_url(url, migrations=_load_migrations(migrations)) as saver:
        yield saver


def _out(as_json: bool, obj: Any, text: str) -> None:
    print(json.dumps(obj, ensure_ascii=False, default=str) if as_json else text)


def _document(as_json: bool, obj: Any) -> None:
    print(json.dumps(obj, indent=None if as_json else 2, ensure_ascii=False, default=str))


def _version(value: bool) -> None:
    if value:
        print(f"langgraph-handoff {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version and exit")
    ] = False,
) -> None:
    """Inspect, maintain and migrate what a langgraph-handoff store holds."""


@contextmanager
def _pass(
    url: str, migrations: str | None, what: str, as_json: bool
) -> Iterator[tuple[ObjectStoreSaver, Progress, TaskID]]:
    """The saver and a progress bar on stderr for a pass over every thread (``sweep``,
    ``migrate``); the bar's total is set once the pass knows how many threads there are. Hidden
    with ``--json``."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with _saver(url, migrations) as saver, Progress(*columns, console=Console(stderr=True), disable=as_json) as bar:
        yield saver, bar, bar.add_task(what, total=None)


def _summary(as_json: bool, summary: dict[str, Any], title: str, columns: dict[str, str]) -> None:
    """A pass's summary: one JSON line with ``--json``, else a one-row table of ``columns``
    (summary field -> column name)."""
    if as_json:
        print(json.dumps({"summary": summary}))
        return
    table = Table(title=title)
    for name in columns.values():
        table.add_column(name, justify="right")
    table.add_row(*(str(summary[field]) for field in columns))
    Console(width=120).print(table)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 problems found, 2 bad input)."""
    try:
        app(args=list(argv) if argv is not None else None, prog_name="langgraph-handoff")
    except SystemExit as exc:  # typer ends every run this way, with the command's exit code
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except LangGraphHandoffError as exc:
        print(f"langgraph-handoff: {exc}", file=sys.stderr)
        return 2
    return 0
