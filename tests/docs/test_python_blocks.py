"""Every ```python block in the README and in docs/ runs, so the docs cannot drift from the API.

A page's blocks run in order in one namespace, as a reader would paste them, in a fresh working
directory (``file://./...`` URLs land there). Top-level ``await`` works, as in a notebook. A page
whose blocks name an ``s3://`` URL runs against the real S3 server ``scripts/test`` starts: the
standard ``AWS_ENDPOINT_URL`` points both S3 transports at it, and the buckets the page names are
created first. Pages write Azure and Google Cloud URLs as text, not as Python blocks.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import re
import textwrap
import types
from pathlib import Path

import pytest

from conftest import S3_ENDPOINT, _need_s3

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(?P<indent>[ \t]*)```python[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)


def python_blocks(page: Path) -> list[tuple[int, str]]:
    """``(line, code)`` of each python block on the page, dedented (blocks may sit in lists)."""
    text = page.read_text()
    return [(text.count("\n", 0, m.start()) + 2, textwrap.dedent(m.group("body"))) for m in FENCE.finditer(text)]


def _pages_with_blocks() -> list[Path]:
    return [page for page in PAGES if python_blocks(page)]


def _run(code: str, namespace: dict[str, object], where: str) -> None:
    # dont_inherit: a block must not run under this module's `from __future__ import annotations`
    compiled = compile(code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    result = types.FunctionType(compiled, namespace)()
    if asyncio.iscoroutine(result):  # the block awaits at top level
        asyncio.run(result)


def _point_s3_at_the_test_server(code: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _need_s3()
    import boto3

    monkeypatch.setenv("AWS_ENDPOINT_URL", str(S3_ENDPOINT))
    s3 = boto3.client("s3", endpoint_url=S3_ENDPOINT)
    for bucket in sorted(set(re.findall(r"s3://([a-z0-9][a-z0-9.-]+)", code))):
        with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou, s3.exceptions.BucketAlreadyExists):
            s3.create_bucket(Bucket=bucket)


def test_the_docs_have_python_blocks() -> None:
    """The collector finds the blocks (a changed fence style must not silently skip them all)."""
    assert sum(len(python_blocks(page)) for page in PAGES) >= 10


# A block whose thread dies (an outcome the page does not describe) fails instead of warning:
# the getting-started race demo once refused the wrong worker one run in four, seen only as this
# warning.
@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
@pytest.mark.parametrize("page", _pages_with_blocks(), ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = python_blocks(page)
    if any("s3://" in code for _, code in blocks):
        _point_s3_at_the_test_server("\n".join(code for _, code in blocks), monkeypatch)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for line, code in blocks:
        where = f"{page.relative_to(ROOT)}:{line}"
        try:
            _run(code, namespace, where)
        except Exception as exc:  # name the block, then let pytest show the traceback
            raise AssertionError(f"the python block at {where} failed: {exc!r}") from exc


def test_blocks_do_not_inherit_this_modules_future_imports() -> None:
    """A reader's script evaluates annotations at definition time (``TypedDict`` with
    ``Annotated`` reducers depends on it); a block must run the same way here."""
    with pytest.raises(NameError):
        _run("def f(x: NotDefinedAnywhere) -> None: ...", {"__name__": "__docs__"}, "<test>")
