"""What every ``langgraph-handoff`` command shares: the typer app, the common options, opening
the store, loading ``--migrations``, printing, and the next step an error names.

The commands themselves live by concern: :mod:`langgraph_handoff.cli.threads` (reading threads:
``threads``, ``history``, ``show``, ``diff``, ``verify``), :mod:`langgraph_handoff.cli.maintenance`
(changing them: ``prune``, ``copy``, ``delete``, ``sweep``, ``migrate``),
:mod:`langgraph_handoff.cli.store` (``setup``, ``doctor``), :mod:`langgraph_handoff.cli.team`
(``team spawn``, ``remove``, ``revive``, ``discard``) and :mod:`langgraph_handoff.cli` (the entry
point, ``sessions`` and the other ``team`` commands).

**What a store holds is printed escaped.** Thread ids, keys, metadata and names come from whoever
can write to the store, and some characters make a terminal act (ESC sequences, CR, bidi
overrides): every field goes out through :mod:`langgraph_handoff.cli.safe_text` (``shown`` in
text, ``json_text`` for ``--json``, ``cell`` for rich), and every line through ``shown_lines``.
An error's message is printed with ``shown_message``, and the store URL in its next step as
:func:`~langgraph_handoff.stores.redact.redact_url` shows it (no query values, no user info).

**Errors name the next step.** A typed error raised while a command works on a store gets the
command to run next printed under it, with the store's URL and the thread filled in
(:func:`next_step`): the ``delete --force`` that removes a thread whose head cannot be read, the
``--migrations`` that reads a thread a migration moved to a newer state schema.
"""

from __future__ import annotations

import importlib
import os
import shlex
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Optional
from urllib.parse import unquote

import typer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from typer.core import TyperCommand, TyperGroup
from typer.models import CommandFunctionType

from langgraph_handoff._format import keys
from langgraph_handoff._format.damage import DamagedObject
from langgraph_handoff._version import __version__
from langgraph_handoff.checkpoint.saver import ObjectStoreSaver
from langgraph_handoff.cli.safe_text import cell, json_text, shown, shown_lines, shown_message, styled
from langgraph_handoff.errors import (
    CorruptObjectError,
    DamagedObjectsError,
    EnvelopeVersionError,
    InvalidConfigError,
    LangGraphHandoffError,
    MemberExistsError,
    MemberStateError,
    MigrationError,
    SchemaVersionError,
    ThreadExistsError,
    ThreadNotFoundError,
    UnknownTeamError,
)
from langgraph_handoff.migrations import SchemaMigrations
from langgraph_handoff.stores import urls
from langgraph_handoff.stores.redact import redact_url

__all__ = [
    "AllowTypes",
    "Commands",
    "InTeam",
    "Json",
    "Migrations",
    "Ns",
    "Url",
    "app",
    "load_migrations",
    "main",
    "next_step",
    "open_saver",
    "place",
    "reading_serializer",
    "report_next_step",
]


def _untyped_flags(params: list[Any]) -> list[Any]:
    """``params`` with no type shown for a flag or an argument: typer labels every flag
    ``<bool>`` (``--json <bool>``, ``--help <bool>``), which reads as if it took a value, and
    every argument with its Python type next to its name (``URL <str>``). Every value option and
    argument names its own metavar instead (``tests/cli/test_cli_surface.py``)."""
    for param in params:
        if getattr(param, "is_flag", False):
            param.metavar = ""
        elif param.param_type_name == "argument":
            param.display_type_rich = _no_type
    return params


def _no_type(ctx: Any) -> None:
    """What an argument shows in its panel's type column: nothing (its name is its metavar)."""
    return None


class _Command(TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:
        return _untyped_flags(super().get_params(ctx))


class _Group(TyperGroup):
    def get_params(self, ctx: Any) -> list[Any]:
        return _untyped_flags(super().get_params(ctx))


class Commands(typer.Typer):
    """A ``typer.Typer`` whose commands and groups show flags without a type (:class:`_Command`):
    the command line and each of its groups (``team``, ``audit``, ``index``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cls=_Group, **kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Callable[[CommandFunctionType], CommandFunctionType]:
        return super().command(*args, cls=kwargs.pop("cls", _Command), **kwargs)


app = Commands(
    name="langgraph-handoff",
    help="Inspect, maintain and migrate what a langgraph-handoff store holds.",
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# The arguments every command shares, declared once.
Url = Annotated[
    str,
    typer.Argument(
        metavar="URL",
        help="file:///dir, s3://bucket/prefix[?endpoint_url=...], az://container/prefix, gs://bucket/prefix "
        "or memory:// (unknown parameters are refused)",
    ),
]
Json = Annotated[bool, typer.Option("--json", help="machine-readable output")]
Migrations = Annotated[
    Optional[str],  # noqa: UP045 - typer reads the annotation at run time, on Python 3.10 too
    typer.Option(
        "--migrations",
        metavar="MODULE:NAME",
        help="your SchemaMigrations (e.g. myapp.schema:migrations, imported as `python -m` would, from the "
        "current directory first), to read and migrate threads a migration moved to a newer state schema",
    ),
]
Ns = Annotated[str, typer.Option("--ns", metavar="NS", help="checkpoint namespace ('' is the root graph)")]
InTeam = Annotated[
    Optional[str],  # noqa: UP045 - typer reads the annotation at run time, on Python 3.10 too
    typer.Option(
        "--team",
        metavar="TEAM",
        help="the threads of TEAM's members (thread ids TEAM/NAME), which live in the team's own space, "
        "apart from the store's threads",
    ),
]
AllowTypes = Annotated[
    Optional[list[str]],  # noqa: UP045 - typer reads the annotation at run time, on Python 3.10 too
    typer.Option(
        "--allow-type",
        metavar="MODULE:NAME",
        help="build stored values of this type as your workers do (repeatable); values of any other type a "
        "stored object names are shown as the arguments they were stored with, never imported",
    ),
]


def reading_serializer(allow_types: Sequence[str] | None = None) -> JsonPlusSerializer:
    """The serializer the command line reads your values with: LangGraph's own, in its strict
    mode. LangGraph's default imports and calls whatever module and type a stored msgpack ext
    value names; on a worker that is the price of your own types, but the command line runs on
    an operator's machine, over threads nobody vouched for. So it builds only LangGraph's safe
    types (messages, dates, ids...) and those ``--allow-type`` names; any other shows as the
    arguments it was stored with.

    >>> reading_serializer(["myapp.models:Order"])._allowed_msgpack_modules
    {('myapp.models', 'Order')}
    >>> reading_serializer(["no-colon"])
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidConfigError: --allow-type 'no-colon': give MODULE:NAME, a dotted module path and a type name (e.g. myapp.models:Order)
    """
    allowed = []
    for spec in allow_types or ():
        module, _, name = spec.partition(":")
        if not name.isidentifier() or not all(p.isidentifier() for p in module.split(".")):
            raise InvalidConfigError(
                f"--allow-type {spec!r}: give MODULE:NAME, a dotted module path and a type name (e.g. myapp.models:Order)"
            )
        allowed.append((module, name))
    return JsonPlusSerializer(allowed_msgpack_modules=allowed or None)


def load_migrations(spec: str | None) -> SchemaMigrations | None:
    """``module:attribute`` (``:attribute`` defaults to ``migrations``) naming a SchemaMigrations,
    imported as ``python -m`` would: from the current directory first, so ``--migrations
    myapp.schema:migrations`` works from the project directory as docs/migrations.md shows. The
    directory is on ``sys.path`` for that import only (when it was not there already).

    >>> load_migrations("langgraph_handoff.nosuch:migrations")
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidConfigError: --migrations 'langgraph_handoff.nosuch:migrations': no module named 'langgraph_handoff.nosuch' (looked in the current directory ... and sys.path). Run the command from your project's directory, or set PYTHONPATH to the directory that holds the package.
    """
    if spec is None:
        return None
    module, _, name = spec.partition(":")
    name = name or "migrations"
    if not module or not name.isidentifier() or not all(p.isidentifier() for p in module.split(".")):
        raise InvalidConfigError(
            f"--migrations {spec!r}: give MODULE:NAME, a dotted module path and the name of your SchemaMigrations "
            "in it (e.g. myapp.schema:migrations)"
        )
    cwd = os.getcwd()
    here = {str(Path(p or ".").resolve()) for p in sys.path}
    added = str(Path(cwd).resolve()) not in here
    if added:
        sys.path.insert(0, cwd)
    try:
        loaded = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module == exc.name or module.startswith(exc.name + ".")):
            raise InvalidConfigError(
                f"--migrations {spec!r}: no module named {exc.name!r} (looked in the current directory {cwd} "
                "and sys.path). Run the command from your project's directory, or set PYTHONPATH to the "
                "directory that holds the package."
            ) from None
        raise InvalidConfigError(f"--migrations {spec!r}: importing {module!r} failed: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the user's module raised while importing: say which and why
        raise InvalidConfigError(
            f"--migrations {spec!r}: importing {module!r} failed ({type(exc).__name__}: {exc})"
        ) from None
    finally:
        if added and cwd in sys.path:
            sys.path.remove(cwd)
    obj = getattr(loaded, name, None)
    if obj is None:
        found = sorted(k for k, v in vars(loaded).items() if isinstance(v, SchemaMigrations))
        also = f" (it has SchemaMigrations {', '.join(found)})" if found else ""
        raise InvalidConfigError(f"--migrations {spec!r}: module {module!r} has no attribute {name!r}{also}")
    if not isinstance(obj, SchemaMigrations):
        raise InvalidConfigError(f"--migrations {spec!r} is a {type(obj).__name__}, not a SchemaMigrations")
    return obj


def _cmd(*words: str) -> str:
    """A command line to run next, quoted for a POSIX shell."""
    return "`langgraph-handoff " + " ".join(shlex.quote(w) for w in words) + "`"


def next_step(exc: LangGraphHandoffError, url: str, migrations: str | None, team: str | None = None) -> str | None:
    """The command to run after ``exc``, on the store at ``url`` (None when the message says
    all there is to say). The URL is shown redacted: a query value or user info in it is ``***``
    (the reader has the URL; the terminal's scrollback and a CI log need not). With ``team``
    (``--team``) a thread is one of that team's members', so the commands name the team too: the
    same thread id among the store's own threads is another thread."""
    url = redact_url(url)
    in_team = ("--team", team) if team is not None else ()
    if isinstance(exc, CorruptObjectError):
        thread = keys.thread_of_key(exc.key)
        if thread is not None:
            return (
                f"{_cmd('verify', url, '--thread', thread, *in_team)} lists what is damaged; restore it from a backup, "
                f"or, if the thread's state is expendable, {_cmd('delete', url, thread, '--yes', '--force', *in_team)} "
                "deletes it without reading it"
            )
        if exc.key == keys.FORMAT_MARKER_KEY:
            return f"delete the object {exc.key!r}, then {_cmd('setup', url)} writes it again"
        return f"{_cmd('verify', url)} lists every damaged object"
    if isinstance(exc, DamagedObjectsError):
        return (
            f"{_cmd('verify', url)} lists every damaged object; restore them from a backup, or delete their threads "
            f"without reading them: {_cmd('delete', url, 'THREAD', '--yes', '--force')}"
        )
    if isinstance(exc, SchemaVersionError):
        if migrations is None:
            return (
                f"checkpoints in state schema {exc.found} were written (or migrated) with your SchemaMigrations: "
                "pass them, e.g. --migrations myapp.schema:migrations, run from your project's directory"
            )
        return (
            f"--migrations {migrations} knows state schemas up to {exc.supported}, the store holds {exc.found}: "
            "point --migrations at the SchemaMigrations your newest workers deploy"
        )
    if isinstance(exc, MigrationError):
        return f"{_cmd('migrate', url, '--migrations', migrations or 'MODULE:NAME')} rewrites the thread"
    if isinstance(exc, EnvelopeVersionError):
        return "pip install -U langgraph-handoff, then run the command again"
    if isinstance(exc, ThreadNotFoundError):
        return f"{_cmd('threads', url)} lists the threads this store holds"
    if isinstance(exc, ThreadExistsError):
        return f"{_cmd('delete', url, exc.thread_id, '--yes')} first, or choose another target id"
    if isinstance(exc, UnknownTeamError):
        return (
            f"check the URL and the team id, or {_cmd('team', 'spawn', url, exc.team_id, 'NAME', '--role', 'ROLE')} "
            "creates the team with its first member"
        )
    if isinstance(exc, MemberExistsError):
        return (
            f"pick another name, or {_cmd('team', 'remove', url, exc.team_id, exc.name)} first "
            "(its pending messages are kept as dead letters)"
        )
    if isinstance(exc, MemberStateError):
        if exc.state == "failed":
            return f"{_cmd('team', 'revive', url, exc.team_id, exc.name)} puts it back to work instead"
        return (
            f"wait for it to fail ({_cmd('team', 'status', url, exc.team_id)} shows it), or stop the worker "
            "that serves it first"
        )
    return None


@contextmanager
def open_saver(
    url: str,
    migrations: str | None,
    *,
    create: bool = False,
    allow_types: Sequence[str] | None = None,
    rewrites_values: bool = False,
    team: str | None = None,
) -> Iterator[ObjectStoreSaver]:
    """The saver for ``url``. A ``file://`` directory that does not exist is an error
    (:class:`~langgraph_handoff.errors.StoreNotFoundError`: a typo would otherwise read as an
    empty store, or a write command make one), except for ``setup``, whose first write makes it;
    a path that is a file is an error for every command (both are ``LocalStore``'s rules, so
    that every command says the same). Reading creates nothing: the read-only commands work on
    a store they cannot write to. A typed error raised inside gets the next step
    (:func:`next_step`) that :func:`main` prints.

    Values are read with :func:`reading_serializer` (strict), except by a command that
    ``rewrites_values`` (``migrate --migrations``): a value read strictly and written back would
    lose its type, so that command builds them as your workers do.

    With ``team``, the saver of that team's members' conversations (``Team.member_saver``): a
    member's thread is not among the store's own (:mod:`langgraph_handoff.teams.core`)."""
    # a malformed URL (user info, a repeated parameter) is refused before any message shows it
    store_kwargs: dict[str, Any] = {"create": False} if urls.parse(url).scheme == "file" and not create else {}
    serde = None if rewrites_values else reading_serializer(allow_types)
    space = None
    if team is not None:
        from langgraph_handoff.teams.model import validate_name

        space = keys.team_members_prefix(validate_name(team, "team id"))
    with ObjectStoreSaver.from_url(url, serde=serde, migrations=load_migrations(migrations), **store_kwargs) as saver:
        try:
            yield saver if space is None else saver.under(space)
        except LangGraphHandoffError as exc:
            if getattr(exc, "next_step", None) is None:
                exc.next_step = next_step(exc, url, migrations, team)  # type: ignore[attr-defined]
            raise


def place(url: str) -> str:
    """Where ``url``'s store keeps its objects, for a message: a listing that finds nothing
    must say where it looked (``threads s3://agents/prod``, one level above the threads,
    printed nothing). The query is never shown (:attr:`~langgraph_handoff.stores.urls.StoreUrl.shown`).

    >>> place("s3://agents/prod?endpoint_url=http://127.0.0.1:7480"), place("gs://agents")
    ("under prefix 'prod/' of s3://agents", 'at the root of gs://agents')
    >>> place("file:///var/lib/agents"), place("memory://")
    ("in '/var/lib/agents'", 'in memory://')
    """
    parsed = urls.parse(url)
    if parsed.scheme == "file":
        return f"in {str(Path(unquote(parsed.location + parsed.path)).expanduser()).rstrip('/')!r}"
    if parsed.scheme == "memory":
        return f"in {parsed.shown}"
    bucket = f"{parsed.scheme}://{parsed.location}"
    return f"under prefix {parsed.path + '/'!r} of {bucket}" if parsed.path else f"at the root of {bucket}"


def out(as_json: bool, obj: Any, text: str) -> None:
    """One result: ``obj`` as a JSON line with ``--json``, else ``text``, whose fields the
    command escaped with :func:`~langgraph_handoff.cli.safe_text.shown` (and whose other
    unprintable characters are escaped here)."""
    print(json_text(obj) if as_json else shown_lines(text))


def document(as_json: bool, obj: Any) -> None:
    print(json_text(obj, indent=None if as_json else 2))


def report_damaged(as_json: bool, damaged: Sequence[DamagedObject], console: Console | None = None) -> None:
    """Objects a command skipped because it could not read them: with ``--json`` one
    ``{"damaged": {...}}`` line each on stdout (beside the command's own lines), else one line
    each on stderr (or ``console``: a progress bar's)."""
    for d in damaged:
        if as_json:
            print(json_text({"damaged": d.as_dict()}), flush=True)
            continue
        if console is not None:
            console.print(
                styled(("skipped", "red"), " ", cell(d.key), " (", cell(d.reason), "): ", shown_message(d.detail))
            )
        else:
            print(
                f"langgraph-handoff: skipped {shown(d.key)} ({shown(d.reason)}): {shown_message(d.detail)}",
                file=sys.stderr,
            )


def report_next_step(damaged: Sequence[DamagedObject], url: str, migrations: str | None, team: str | None) -> None:
    """After a command reported ``damaged`` objects and goes on to exit 1: the ``next:`` line on
    stderr that an error about the first of them would have had (:func:`next_step`), so a thread
    a command reports damaged names the way out as one it refuses does (``history`` as ``show``)."""
    if damaged:
        first = damaged[0]
        hint = next_step(CorruptObjectError(first.key, first.detail, first.reason), url, migrations, team)
        if hint:
            print(f"langgraph-handoff: next: {shown_message(hint)}", file=sys.stderr)


@contextmanager
def progress_pass(
    url: str, migrations: str | None, what: str, as_json: bool, *, rewrites_values: bool = False
) -> Iterator[tuple[ObjectStoreSaver, Progress, TaskID]]:
    """The saver and a progress bar on stderr for a pass over every thread (``sweep``,
    ``migrate``); the bar's total is set once the pass knows how many threads there are. Hidden
    with ``--json``."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    opened = open_saver(url, migrations, rewrites_values=rewrites_values)
    with opened as saver, Progress(*columns, console=Console(stderr=True), disable=as_json) as bar:
        yield saver, bar, bar.add_task(what, total=None)


def summary_table(as_json: bool, summary: dict[str, Any], title: str, columns: dict[str, str]) -> None:
    """A pass's summary: one JSON line with ``--json``, else a one-row table of ``columns``
    (summary field -> column name)."""
    if as_json:
        print(json_text({"summary": summary}))
        return
    table = Table(title=title)
    for name in columns.values():
        table.add_column(name, justify="right")
    table.add_row(*(cell(summary[field]) for field in columns))
    Console(width=140).print(table)


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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 problems found, 2 bad input)."""
    try:
        app(args=list(argv) if argv is not None else None, prog_name="langgraph-handoff")
    except SystemExit as exc:  # typer ends every run this way, with the command's exit code
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except LangGraphHandoffError as exc:
        hint = getattr(exc, "next_step", None)
        # with a command to run next, the message's advice of a Python call (remove('alice')) goes
        message = exc.without_python_advice() if hint else str(exc)
        print(f"langgraph-handoff: {shown_message(message)}", file=sys.stderr)
        if hint:
            print(f"langgraph-handoff: next: {shown_message(hint)}", file=sys.stderr)
        return 2
    return 0
