"""The ``langgraph-handoff`` commands about the store itself: ``setup`` (probe it once, write its
format marker) and ``doctor`` (can it be trusted?), registered on :data:`langgraph_handoff.cli.app.app`.
"""

from __future__ import annotations

from typing import Annotated

import typer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_handoff._format import envelope
from langgraph_handoff.checkpoint.serde_policy import HOW_TO_STOP, named_code_risk
from langgraph_handoff.cli.app import Json, Migrations, Url, app, open_saver, out
from langgraph_handoff.cli.safe_text import shown, shown_message

__all__ = ["doctor", "setup"]


@app.command()
def setup(url: Url, as_json: Json = False, migrations: Migrations = None) -> None:
    """Check a store is reachable and write its format marker; a file:// directory that does
    not exist is made (the one command that makes it), and the output says so."""
    with open_saver(url, migrations, create=True) as saver:
        saver.setup()
        serializer, line = _serializer_report()
        made = getattr(saver.store, "made_root", False)  # a file:// store whose directory setup made
        root = str(getattr(saver.store, "root", "")) if made else None
        out(
            as_json,
            {
                "ok": True,
                "store": repr(saver.store),
                "format": envelope.FORMAT_VERSION,
                "created_directory": root,
                "serializer": serializer,
            },
            (f"made the directory {shown(root)}\n" if root else "")
            + f"ok: {shown(repr(saver.store))} is ready (envelope format {envelope.FORMAT_VERSION})\n{line}",
        )


def _before_last_line(text: str, line: str) -> str:
    head, _, last = text.rpartition("\n")
    return f"{head}\n{line}\n{last}" if head else f"{line}\n{last}"


def _serializer_report() -> tuple[dict[str, object], str]:
    """Whether the serializer a process of this environment builds by default (what your
    workers use unless they pass their own) would run code a stored object names."""
    risk = named_code_risk(JsonPlusSerializer())
    line = "serializer: " + (
        f"{risk}: whoever can write into the store can run code in the processes that read it; {HOW_TO_STOP}"
        if risk
        else "builds only LangGraph's safe types and those allowed (LANGGRAPH_STRICT_MSGPACK)"
    )
    return {"runs_code_named_by_stored_objects": risk is not None, "detail": risk}, line


@app.command()
def doctor(
    url: Url,
    rounds: Annotated[int, typer.Option("--rounds", min=1, metavar="N", help="timed rounds per operation")] = 5,
    as_json: Json = False,
    race: Annotated[bool, typer.Option("--race", help="also race concurrent conditional PUTs (atomicity)")] = False,
    race_writers: Annotated[
        int, typer.Option("--race-writers", min=2, metavar="N", help="writers at once, with --race")
    ] = 16,
    race_rounds: Annotated[
        int, typer.Option("--race-rounds", min=1, metavar="N", help="rounds per kind, with --race")
    ] = 20,
) -> None:
    """Probe the store: create-only and compare-and-swap PUTs, ETag quoting, conditional delete,
    list-after-write, median latency per operation (exit 1 on a store that cannot be trusted).
    `--race` also sends the same conditional PUT from many threads at once, round after round,
    and fails a store that lets two writers win (a check-then-write that is not atomic)."""
    from langgraph_handoff.checkpoint import driver
    from langgraph_handoff.probe import plan_report
    from langgraph_handoff.probe import race as run_race

    with open_saver(url, None) as saver:  # a missing file:// directory is refused, not made: `setup` makes it
        quoting = getattr(saver.store, "quoting", None)
        report = driver.run(saver.store, plan_report(repr(saver.store), rounds=rounds, quoting=quoting))
        raced = run_race(saver.store, writers=race_writers, rounds=race_rounds) if race and report.trusted else None
    latency = ", ".join(f"{op} {ms:g} ms" for op, ms in report.latency_ms.items())
    problems = report.problems + (raced.problems if raced else [])
    text = (
        f"{shown(report.store)}\n"
        f"  create-only PUT (If-None-Match: *): {report.create_only}\n"
        f"  compare-and-swap PUT (If-Match):    {report.compare_and_swap}\n"
        f"  ETag quoting in If-Match:           {report.etag_quoting}\n"
        f"  conditional DELETE:                 {report.conditional_delete} (never relied upon)\n"
        f"  list after write:                   {report.list_after_write}\n"
        f"  median latency:                     {latency}\n"
        + (
            f"  {'concurrent compare-and-swap PUT:':<36}{raced.compare_and_swap.verdict}\n"
            f"  {'concurrent create-only PUT:':<36}{raced.create_only.verdict}\n"
            if raced
            else ""
        )
        + ("ok: the saver can use this store" if not problems else "UNSAFE: " + "; ".join(map(shown_message, problems)))
    )
    serializer, line = _serializer_report()
    out(
        as_json,
        {**report.to_dict(), **({"race": raced.to_dict()} if raced else {}), "serializer": serializer},
        _before_last_line(text, line),  # the verdict stays the last line
    )
    if problems:
        raise typer.Exit(1)
