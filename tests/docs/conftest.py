"""The docs site, built once for the tests that read what a reader of it sees."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``scripts/test`` builds the site before pytest and passes it in ``LGH_DOCS_SITE``; without
    it, the site is built into a temporary directory (about 10 s, once per session)."""
    given = os.environ.get("LGH_DOCS_SITE")
    if given and (Path(given) / "reference").is_dir():
        return Path(given)
    pytest.importorskip("mkdocstrings_handlers.python", reason="the docs extra is not installed")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"}
    build = [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)]
    done = subprocess.run(build, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-4000:]}"
    return out
