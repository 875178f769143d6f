"""What a reader of the docs site and the examples runs into: tables that hold together, code
blocks that wrap instead of being clipped, and the Python version a store needs."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from langgraph_handoff.errors import InvalidConfigError
from langgraph_handoff.stores import store_from_url
from langgraph_handoff.stores.obstore_base import missing_obstore

ROOT = Path(__file__).resolve().parents[2]


def _markdown() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "examples").rglob("*.md"))]


def test_no_table_is_split_by_a_blank_line() -> None:
    """A blank line ends a Markdown table: the rows after it render as a paragraph of pipes. So a
    row that follows a blank line must start a new table (a header, then its ``|---|`` line)."""
    split = []
    for page in _markdown():
        lines = page.read_text().splitlines()
        fenced = False
        for i, line in enumerate(lines):
            if line.lstrip().startswith("```"):
                fenced = not fenced
            starts_table = line.startswith("|") and (i == 0 or not lines[i - 1].strip())
            if not fenced and starts_table and not re.match(r"^\|\s*:?-", lines[i + 1] if i + 1 < len(lines) else ""):
                split.append(f"{page.relative_to(ROOT)}:{i + 1}: {line[:60]}")
    assert not split, split


def test_code_blocks_wrap_in_the_site(site: Path) -> None:
    css = (site / "stylesheets" / "extra.css").read_text()
    assert re.search(r"\.md-typeset pre > code\s*\{[^}]*white-space:\s*pre-wrap", css)
    for page in ("index.html", "deploy/index.html", "reference/stores/index.html"):
        assert "stylesheets/extra.css" in (site / page).read_text(), page


def test_az_needs_python_3_11_as_the_deploy_page_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """``az://`` has obstore as its only transport, and obstore installs on Python 3.11+ only."""
    extra = re.search(r"^obstore = \[(.*)\]$", (ROOT / "pyproject.toml").read_text(), re.M)
    assert extra is not None and "python_version >= '3.11'" in extra[1]
    azure = (ROOT / "docs" / "deploy.md").read_text().split("## Azure Blob Storage", 1)[1].split("\n## ", 1)[0]
    assert "Python 3.11 or later" in azure and "InvalidConfigError" in azure
    monkeypatch.setitem(sys.modules, "obstore", None)  # as on 3.10: the extra installed nothing
    said = r"needs Python 3\.11\+" if sys.version_info < (3, 11) else r"langgraph-handoff\[obstore\]"
    with pytest.raises(InvalidConfigError, match=said):
        store_from_url("az://agents/dev?account_name=devstoreaccount1")
    # where the extra installs nothing, the error does not tell the user to install it
    on_310 = missing_obstore((3, 10))
    assert "Python 3.11+" in on_310 and "pip install" not in on_310 and "transport='boto3'" in on_310


def test_the_performance_page_answers_one_question_per_table() -> None:
    """What to choose first, then one table per question, each saying when, on what and with
    which command it was measured; the run-by-run record lives in performance-log.md."""
    page = (ROOT / "docs" / "performance.md").read_text()
    assert len(page.splitlines()) <= 200, "the run-by-run record belongs in docs/performance-log.md"
    assert re.findall(r"^## .*", page, re.M)[0] == "## What to choose"
    for heading in (
        "## Long threads",
        "## Short threads",
        "## S3 over TLS with slow nodes",
        "### Long-term memory",
        "### Threads by metadata",
    ):
        body = page.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
        assert re.search(r"\b2\d{3}-\d{2}-\d{2}\b", body), f"{heading}: no date"
        assert "command" in body and "machine" in body, f"{heading}: no command or machine"
        assert "\n|---" in body, f"{heading}: no table"
    wordy = [
        cell.strip()[:60]
        for row in re.findall(r"^\|.*\|$", page, re.M)
        for cell in row.split("|")
        if len(cell.split()) > 25
    ]
    assert not wordy, f"table cells a reader cannot take in at a glance: {wordy}"


def test_the_readme_links_to_the_figures_instead_of_carrying_them() -> None:
    row = next(line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("| checkpointer |"))
    assert "(docs/performance.md" in row
    assert not re.search(r"\d+(\.\d+)? (KiB|ms)\b", row), row
