"""docs/reference/cli.md is generated from the commands and must match them."""

from __future__ import annotations

import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_cli_reference_is_generated_from_the_current_commands() -> None:
    generator = runpy.run_path(str(ROOT / "scripts" / "cli_reference.py"))
    page = ROOT / "docs" / "reference" / "cli.md"
    assert page.read_text() == generator["render"](), (
        "docs/reference/cli.md is stale: run `.venv/bin/python scripts/cli_reference.py`"
    )


def test_every_command_is_in_the_reference() -> None:
    text = (ROOT / "docs" / "reference" / "cli.md").read_text()
    for command in ("setup", "doctor", "threads", "history", "show", "diff", "verify", "prune", "copy", "delete"):
        assert f"`langgraph-handoff {command}`" in text
    for command in ("sweep", "sessions", "migrate", "team status", "team send", "team spawn", "team discard"):
        assert f"`langgraph-handoff {command}`" in text
