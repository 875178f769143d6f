"""CHANGELOG.md follows Keep a Changelog 1.1.0, and the package's version is its newest release (or a
development version after it)."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import langgraph_handoff

CHANGELOG = Path(__file__).resolve().parents[2] / "CHANGELOG.md"
KINDS = ["Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"]
RELEASE = re.compile(r"## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})")
#: the versions the package carries: a release ``X.Y.Z``, or ``X.Y.Z.devN`` on main before X.Y.Z
VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:\.dev(\d+))?")


def parse_version(text: str) -> tuple[tuple[int, int, int], bool]:
    """``(X, Y, Z)`` and whether ``text`` is a development version of it."""
    match = VERSION.fullmatch(text)
    assert match, f"not a version this project uses: {text!r} (want X.Y.Z, or X.Y.Z.devN between releases)"
    return (int(match[1]), int(match[2]), int(match[3])), match[4] is not None


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


def test_the_package_version_is_the_newest_release_or_a_development_one_after_it() -> None:
    """Between releases main carries ``X.Y.Z.devN`` of the next release, never a released number
    (what it writes may be more than that release reads: ``test_release_formats.py``)."""
    newest, _ = parse_version(releases()[0][0])
    package, dev = parse_version(langgraph_handoff.__version__)
    assert package > newest if dev else package == newest, (langgraph_handoff.__version__, releases()[0][0])


def test_every_version_has_a_link_reference() -> None:
    text = CHANGELOG.read_text(encoding="utf-8")
    for heading, _ in sections():
        name = heading[3:].split("]")[0] + "]"
        assert re.search(rf"^{re.escape(name)}: https://\S+$", text, re.M), f"no link for {name}"
