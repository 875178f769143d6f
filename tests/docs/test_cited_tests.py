"""The security page pins each guarantee to the tests that check it: every test it cites exists,
so a renamed or deleted test cannot leave a guarantee pinned to nothing."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "docs" / "security.md"]
#: `path/to/test_x.py` or `path/to/test_x.py::name`, and `::name` continuing the last path named
_CITE = re.compile(r"`((?:tests|integration_tests)/[\w/]+\.py)?(?:::(\w+))?`")


def _citations(text: str) -> list[tuple[str, str | None]]:
    found: list[tuple[str, str | None]] = []
    last: str | None = None
    for path, name in _CITE.findall(text):
        if path:
            last = path
        if last is not None and (path or name):
            found.append((last, name or None))
    return found


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_cited_test_exists(page: Path) -> None:
    cited = _citations(page.read_text())
    assert len(cited) > 20
    missing = [
        f"{path}::{name}" if name else path
        for path, name in cited
        if not (ROOT / path).is_file() or (name is not None and name not in _test_names(ROOT / path))
    ]
    assert missing == []
