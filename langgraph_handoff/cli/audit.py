"""``langgraph-handoff audit``: review the handoffs a graph's ``StoreAuditSink`` kept.

A reviewer lists what was audited (``list``), reads one (``show``), records a verdict
(``mark ID --verdict ok|wrong --note ...``, by compare-and-swap, so two reviewers never tear a
record) and reads the share judged wrong (``stats``), the figure that says whether the agents'
handoffs can be trusted. Records that cannot be read are reported, never skipped in silence.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated

import typer

from langgraph_handoff.cli.app import Commands, Json, Url, app, document, open_saver, out
from langgraph_handoff.cli.safe_text import shown
from langgraph_handoff.errors import InvalidInputError
from langgraph_handoff.handoff.audit import StoreAuditSink, stats

audit_app = Commands(
    help="Audited handoffs: list, show, mark a verdict, and the share judged wrong.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(audit_app, name="audit")

_SPAN = re.compile(r"^\s*(\d+)\s*([dhw]?)\s*$")


def parse_since(text: str) -> timedelta:
    """``7d``, ``12h``, ``2w`` or a number of days.

    >>> parse_since("1d"), parse_since("36h"), parse_since("2w")
    (datetime.timedelta(days=1), datetime.timedelta(days=1, seconds=43200), datetime.timedelta(days=14))
    """
    m = _SPAN.match(text)
    if m is None or int(m.group(1)) > 100_000:
        raise InvalidInputError(f"--since takes an age such as 1d, 12h or 2w, got {text!r}")
    n, unit = int(m.group(1)), m.group(2) or "d"
    return timedelta(hours=n) if unit == "h" else timedelta(weeks=n) if unit == "w" else timedelta(days=n)


Since = Annotated[
    str, typer.Option("--since", metavar="SPAN", help="how far back: 1d, 12h, 2w (whole UTC days are read)")
]


@audit_app.command("list")
def list_(url: Url, since: Since = "1d", as_json: Json = False) -> None:
    """The audited handoffs of the last days, oldest first; exit 1 if one could not be read."""
    with open_saver(url, None) as saver:
        listed = StoreAuditSink(saver).records(since=parse_since(since))
    bad = 0
    for item in listed:
        if item.record is None:
            bad += 1
            out(
                as_json,
                {"key": item.key, "problem": item.problem},
                f"{shown(item.key)}: unreadable: {shown(item.problem)}",
            )
            continue
        r = item.record
        out(as_json, r.as_data(), f"{shown(r.id)}  {shown(r.at)}  {shown(r.thread_id)}  {shown(r.summary)}")
    if not listed and not as_json:
        print(f"no audited handoffs in the last {shown(since)}")
    if bad:
        raise typer.Exit(1)


@audit_app.command("show")
def show(
    url: Url, audit_id: Annotated[str, typer.Argument(metavar="ID")], since: Since = "30d", as_json: Json = False
) -> None:
    """One audited handoff, whole: the handoff, the routing decision behind it, the briefing
    check's verdict, why it was picked and any review."""
    with open_saver(url, None) as saver:
        record = StoreAuditSink(saver).get(audit_id, since=parse_since(since))
    document(as_json, record.as_data())


@audit_app.command("mark")
def mark(
    url: Url,
    audit_id: Annotated[str, typer.Argument(metavar="ID")],
    verdict: Annotated[str, typer.Option("--verdict", metavar="ok|wrong", help="ok or wrong")],
    note: Annotated[str, typer.Option("--note", metavar="TEXT", help="what the reviewer found")] = "",
    since: Since = "30d",
    as_json: Json = False,
) -> None:
    """Record a reviewer's verdict on one audited handoff (replaces an earlier one)."""
    if verdict not in ("ok", "wrong"):
        raise InvalidInputError(f"--verdict is ok or wrong, got {verdict!r}")
    with open_saver(url, None) as saver:
        record = StoreAuditSink(saver).mark(audit_id, verdict, note, since=parse_since(since))  # type: ignore[arg-type]
    out(as_json, record.as_data(), f"{shown(record.id)}: judged {shown(verdict)}")


@audit_app.command("stats")
def stats_(url: Url, since: Since = "30d", as_json: Json = False) -> None:
    """How many handoffs were audited and reviewed, and the share judged wrong, overall and by
    why they were picked (sampled, breaker, briefing_flagged)."""
    with open_saver(url, None) as saver:
        s = stats(StoreAuditSink(saver).records(since=parse_since(since)))
    share = f"{s.wrong_share:.1%}" if s.wrong_share is not None else "n/a (none reviewed)"
    lines = [f"{s.records} audited, {s.reviewed} reviewed, {s.wrong} judged wrong: {share}"]
    lines += [f"  {shown(why)}: {seen} reviewed, {bad} wrong" for why, (seen, bad) in sorted(s.by_why.items())]
    if s.unreadable:
        lines.append(f"  {s.unreadable} record(s) could not be read (audit list shows them)")
    data = {"records": s.records, "reviewed": s.reviewed, "wrong": s.wrong, "wrong_share": s.wrong_share,
            "unreadable": s.unreadable, "by_why": {k: {"reviewed": a, "wrong": b} for k, (a, b) in s.by_why.items()}}  # fmt: skip
    out(as_json, data, "\n".join(lines))
