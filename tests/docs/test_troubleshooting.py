"""docs/troubleshooting.md says what every error the package exports means and what to do."""

from __future__ import annotations

import re
from pathlib import Path

from tests.api.test_public_api import exported_errors

ROOT = Path(__file__).resolve().parents[2]


def test_every_exported_error_is_explained() -> None:
    """A concrete error has its own section; a base class (one that other exported errors derive
    from, caught to handle a family) is at least named, in the table of families."""
    text = (ROOT / "docs" / "troubleshooting.md").read_text()
    sections = set(re.findall(r"^### (\w+)", text, re.M))
    errors = exported_errors()
    assert len(errors) > 30
    bases = {name for name, cls in errors.items() if any(o is not cls and issubclass(o, cls) for o in errors.values())}
    missing = sorted(name for name in errors if name not in bases and name not in sections)
    assert not missing, f"no section in docs/troubleshooting.md for {missing}"
    unnamed = sorted(name for name in bases if f"`{name}`" not in text)
    assert not unnamed, f"docs/troubleshooting.md never names {unnamed}"
