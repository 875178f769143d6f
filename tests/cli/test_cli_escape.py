"""What the command prints from a store is escaped: no stored text can act on the terminal.

Found in a security review: ``threads`` and ``history`` printed thread ids, namespaces and
metadata as they were stored, control characters included, so a thread id could clear the
screen, set the window title, or rewrite the line the operator reads (``\\r``), and a bidi
override shows a name in another order than it is stored. Through rich (``team status``, the
progress lines of ``sweep`` and ``migrate``) a ``[red]...[/red]`` in a value was read as markup.
Now every field goes through ``langgraph_handoff/cli/safe_text.py``: escaped as Python's
``repr`` escapes it, backslashes doubled; ``--json`` documents stay valid JSON and decode to the
very strings stored."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from rich.console import Console

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff._format.damage import DamagedObject
from langgraph_handoff.cli.app import report_damaged
from langgraph_handoff.cli.safe_text import json_text, shown
from tests.cli.test_cli import cli

#: a thread id that clears the screen, sets the window title, returns to the start of the line,
#: reverses what follows, breaks the line, rings, holds rich markup, an emoji code, a C1 CSI, and
#: the text of an escape (a backslash, 'x1b'), which must not read like the real one
THREAD = "t1\x1b[2J\x1b]0;pwned\x07\rall good\u202egnp.exe\u2028[red]x[/red]:warning:\x9b31m\\x1b\x08"
NS = "sub\x1b[31m\u2066graph"
SOURCE = "in\x1b[5mput"
CHANNEL = "ch\u202ean"
ROLE = "[bold red]admin[/bold red]\x1b[31m"

#: what no line printed may hold: C0 and C1 controls but newline and tab, DEL, bidi and line marks
DANGEROUS = [chr(c) for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)] if chr(c) not in "\n\t"] + [
    *"\u2028\u2029\u200e\u200f\u061c",
    *map(chr, range(0x202A, 0x202F)),
    *map(chr, range(0x2066, 0x206A)),
]


def inert(text: str) -> str:
    """``text``, once checked to hold nothing a terminal acts on."""
    found = sorted({hex(ord(c)) for c in text if c in DANGEROUS})
    assert not found, f"printed raw: {found} in {text!r}"
    return text


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    u = f"file://{tmp_path_factory.mktemp('escape') / 'store'}"
    saver = ObjectStoreSaver.from_url(u)
    for ns in ("", NS):
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {CHANNEL: "v"}
        checkpoint["channel_versions"] = {CHANNEL: 1}
        config = {"configurable": {"thread_id": THREAD, "checkpoint_ns": ns}}
        saver.put(config, checkpoint, {"source": SOURCE, "step": 1}, {CHANNEL: 1})  # type: ignore[arg-type]
    return u


def test_threads_and_history_print_ids_namespaces_and_metadata_escaped(url: str) -> None:
    listed = cli("threads", url)
    assert listed.returncode == 0, listed.stderr
    assert shown(THREAD) in inert(listed.stdout)
    assert "t1\\x1b[2J\\x1b]0;pwned\\x07\\rall good\\u202egnp.exe\\u2028[red]x[/red]" in listed.stdout
    assert "\\x9b31m\\\\x1b\\x08" in listed.stdout  # the text '\x1b' shows as '\\x1b', the real ESC as '\x1b'
    history = cli("history", url, THREAD)
    assert history.returncode == 0, history.stderr
    inert(history.stdout)
    for field in (NS, SOURCE, CHANNEL):
        assert shown(field) in history.stdout, field


def test_json_output_stays_valid_json_of_the_very_strings_stored(url: str) -> None:
    listed = cli("threads", url, "--json")
    assert [json.loads(line)["thread_id"] for line in inert(listed.stdout).splitlines()] == [THREAD]
    rows = [json.loads(line) for line in inert(cli("history", url, THREAD, "--json").stdout).splitlines()]
    assert {(r["checkpoint_ns"], r["source"], tuple(r["channels"])) for r in rows} == {
        ("", SOURCE, (CHANNEL,)),
        (NS, SOURCE, (CHANNEL,)),
    }
    for args in (["--json"], []):  # show prints JSON either way (indented without --json)
        document = json.loads(inert(cli("show", url, THREAD, "--ns", NS, *args).stdout))
        assert document["metadata"]["source"] == SOURCE and document["values"] == {CHANNEL: "v"}


def test_errors_and_changes_print_what_they_quote_escaped(url: str) -> None:
    missing = cli("history", url, "nobody\x1b[2J\r")
    assert missing.returncode == 2 and "nobody\\x1b[2J\\r" in inert(missing.stderr)
    pruned = cli("prune", url, "--thread", THREAD, "--keep-latest", "--dry-run")
    assert pruned.returncode == 0 and shown(THREAD) in inert(pruned.stdout)
    sessions = cli("sessions", url)
    assert shown(THREAD) in inert(sessions.stdout)


@pytest.mark.heavy
def test_team_status_prints_a_role_as_text_not_as_markup(tmp_path: Path) -> None:
    team_url = f"file://{tmp_path / 'store'}"
    assert cli("setup", team_url).returncode == 0
    spawned = cli("team", "spawn", team_url, "crew", "lead", "--role", ROLE)
    assert spawned.returncode == 0 and shown(ROLE) in inert(spawned.stdout)
    status = cli("team", "status", team_url, "crew")
    assert "[bold red]admin[/bold red]\\x1b[31m" in inert(status.stdout)  # as text, not as bold red


def test_rich_lines_print_stored_text_as_text() -> None:
    """The lines a progress bar's console prints (a skipped object of ``sweep`` or ``migrate``):
    markup and emoji codes in a key or a detail are printed as they are, controls escaped."""
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=400, color_system=None)
    damaged = DamagedObject(key="heads/[red]x[/red]:warning:", reason="malformed", detail="bad\x1b[2J\rline")
    report_damaged(False, [damaged], console)
    printed = out.getvalue()
    assert "skipped heads/[red]x[/red]:warning: (malformed): bad\\x1b[2J\\rline" in printed, printed
    assert "\u26a0" not in printed  # no emoji


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain ok", "plain ok"),
        ("tab\there\nnewline", "tab\\there\\nnewline"),
        ("\x00\x1b\x7f\x85\x9b", "\\x00\\x1b\\x7f\\x85\\x9b"),
        ("\u200b\u200d\ufeff\u00a0", "\\u200b\\u200d\\ufeff\\xa0"),  # invisible or a space that is not one
        ("\U000e0041", "\\U000e0041"),  # a tag character: invisible
        ("\udc80", "\\udc80"),  # a lone surrogate: print() itself would fail on it
        ("Zoë 中文 ✓", "Zoë 中文 ✓"),
        ("a\\b", "a\\\\b"),
    ],
)
def test_what_shown_escapes(value: str, text: str) -> None:
    assert shown(value) == text
    assert json.loads(json_text({"v": value})) == {"v": value} and inert(json_text({"v": value}))
