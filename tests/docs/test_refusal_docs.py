"""Every page that states what a refused run leaves behind states the same contract: the refused
step is not stored, its input checkpoint may be, and ``StaleWriterError`` says whether its input
is in the conversation (``input_in_thread``). A page that says a refused run "stores nothing"
promises more than the saver does: with ``durability="sync"`` or ``"async"`` the input checkpoint
is stored before the first step."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: (page, heading of the section that states the contract)
PLACES = [
    ("README.md", "What is guaranteed"),
    ("docs/index.md", "What is guaranteed"),
    ("docs/checkpointer.md", "When two runs race"),
    ("docs/getting-started.md", "Two workers, one conversation"),
    ("docs/troubleshooting.md", "StaleWriterError"),
]

#: what no such section may say of a refused run
OVERPROMISES = ("stores nothing", "nothing it wrote is stored", "nothing of it is stored", "writes nothing")


def _section(page: str, heading: str) -> str:
    text = (ROOT / page).read_text()
    match = re.search(rf"^(#+) {re.escape(heading)}\s*$", text, re.MULTILINE)
    assert match is not None, f"{page} has no section {heading!r}"
    level = len(match.group(1))
    rest = text[match.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.MULTILINE)
    return " ".join((rest[: end.start()] if end else rest).split())


@pytest.mark.parametrize(("page", "heading"), PLACES, ids=[p for p, _ in PLACES])
def test_each_page_states_the_same_refusal_contract(page: str, heading: str) -> None:
    section = _section(page, heading)
    assert "StaleWriterError" in section or heading == "StaleWriterError"
    assert "input_in_thread" in section  # says how a caller learns whether its input is there
    assert "not stored" in section  # the refused step
    stale_sentences = [s for s in re.split(r"(?<=[.:;])\s", section) if "StaleWriterError" in s or "refused" in s]
    for phrase in OVERPROMISES:
        assert not any(phrase in s for s in stale_sentences), f"{page} says a refused run {phrase!r}"
