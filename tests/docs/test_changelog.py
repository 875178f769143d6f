"""CHANGELOG.md follows Keep a Changelog 1.1.0 and names the package's version as its newest release."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import langgraph_handoff

CHANGELOG = Path(__file__).resolve().parents[2] / "CHANGELOG.md"
KINDS = ["Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"]
RELEASE = re.compile(r"## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})")


def sections() -> list[tuple[str, list[str]]]:
    """Each `## ` heading with the lines under it, in file order."""
    found: list[tuple[str, list[str]]] = []
    for line in CHANGELOG.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            found.append((line, []))
        elif found:
            found[-1][1].append(line)
    return found


def releases() -> list[tuple[str, date]]:
    """(version, date) of every released version, newest first as written."""
    out = []
    for heading, _ in sections()[1:]:
        match = RELEASE.fullmatch(heading)
        assert match, f"not a release heading: {heading!r} (want '## [X.Y.Z] - YYYY-MM-DD')"
        out.append((match[1], date.fromisoformat(match[2])))
    return out


def test_first_version_is_unreleased() -> None:
    assert sections()[0][0] == "## [Unreleased]"


def test_releases_are_dated_and_newest_first() -> None:
    dates = [day for _, day in releases()]
    assert dates, "no released version"
    assert dates == sorted(dates, reverse=True)


def test_change_kinds_appear_once_in_the_standard_order() -> None:
    for heading, lines in sections():
        kinds = [line[4:] for line in lines if line.startswith("### ")]
        assert set(kinds) <= set(KINDS), f"{heading}: unknown kinds {sorted(set(kinds) - set(KINDS))}"
        assert kinds == sorted(set(kinds), key=KINDS.index), f"{heading}: {kinds} repeat or are out of order"


def test_newest_release_is_the_package_version() -> None:
    assert releases()[0][0] == langgraph_handoff.__version__


def test_every_version_has_a_link_reference() -> None:
    text = CHANGELOG.read_text(encoding="utf-8")
    for heading, _ in sections():
        name = heading[3:].split("]")[0] + "]"
        assert re.search(rf"^{re.escape(name)}: https://\S+$", text, re.M), f"no link for {name}"
