"""The API reference is read instead of the source: each public class that a user builds shows its
constructor's signature under its heading, with every parameter and its annotation; its "Args:"
become a table of real parameters; no base a user cannot import is named; and a constant whose
value is what the reader needs is shown by value.

These read the HTML mkdocs renders (``mkdocs build --strict``, the ``site`` fixture of
conftest.py), because that is what a reader sees: a docstring that parses, an option in
mkdocs.yml or a template can each lose a signature.
"""

from __future__ import annotations

import html
import importlib
import inspect
import re
from pathlib import Path
from typing import Any, Protocol

import pytest
from typing_extensions import is_typeddict

from tests.api.test_public_api import PUBLIC

_HEADING = re.compile(
    r'<h(?P<level>\d) id="(?P<id>[\w.]+)" class="doc doc-heading">.*?</h(?P=level)>\s*'
    r'(?:<div class="doc-signature highlight">(?P<signature>.*?)</div>)?',
    re.S,
)
_BASES = re.compile(r'<p class="doc doc-class-bases">(.*?)</p>', re.S)
_ROW_NAME = re.compile(r'<tr class="doc-section-item">\s*<td>\s*<code>([^<]*)</code>', re.S)


def _text(fragment: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", fragment))).strip()


@pytest.fixture(scope="module")
def reference(site: Path) -> dict[str, tuple[str, str | None, str]]:
    """Each documented object of the reference by its heading id: its page, its rendered
    signature (None without one) and its HTML up to the next heading of an object."""
    found: dict[str, tuple[str, str | None, str]] = {}
    for page in sorted((site / "reference").glob("*/index.html")):
        text = page.read_text()
        heads = list(_HEADING.finditer(text))
        if not heads:  # the CLI reference: generated Markdown, no objects
            continue
        ends = [after.start() for after in heads[1:]] + [len(text)]
        for head, end in zip(heads, ends, strict=True):
            body = text[head.end() : end]
            signature = _text(head["signature"]) if head["signature"] else None
            found.setdefault(head["id"], (page.parent.name, signature, body))
    return found


def _public_classes() -> dict[str, type]:
    """Every class a public module exports, once, by the name it is exported under."""
    classes: dict[str, type] = {}
    for module_name, names in sorted(PUBLIC.items()):
        module = importlib.import_module(module_name)
        for name in sorted(names):
            value = getattr(module, name)
            if isinstance(value, type) and value not in classes.values():
                classes[name] = value
    return classes


def _built_by_users(cls: type) -> bool:
    """Errors are raised by the package, protocols and TypedDicts describe shapes, an abstract
    class is subclassed: none is called, so none has a constructor signature to show."""
    return not (
        issubclass(cls, BaseException)
        or is_typeddict(cls)
        or (Protocol in getattr(cls, "__mro__", ()) or getattr(cls, "_is_protocol", False))
        or inspect.isabstract(cls)
    )


def _parameters(cls: type) -> list[inspect.Parameter]:
    """The parameters a user passes: those of the ``__init__`` the class runs when this package
    wrote it (a dataclass's is generated from its fields), else what ``inspect.signature`` says
    (a pydantic model's fields; ``Model.__init__`` only translates pydantic's errors)."""
    owner = next(k for k in cls.__mro__ if "__init__" in vars(k))
    if owner.__module__.startswith("langgraph_handoff.") and owner.__module__ != "langgraph_handoff._model":
        return [p for p in inspect.signature(vars(owner)["__init__"]).parameters.values() if p.name != "self"]
    return list(inspect.signature(cls).parameters.values())


def _find(reference: dict[str, tuple[str, str | None, str]], name: str) -> tuple[str, str | None, str] | None:
    return next((entry for ident, entry in reference.items() if ident.rsplit(".", 1)[-1] == name), None)


def test_every_public_class_a_user_builds_shows_its_signature(reference: dict[str, Any]) -> None:
    checked, problems = 0, []
    for name, cls in _public_classes().items():
        if not _built_by_users(cls):
            continue
        entry = _find(reference, name)
        if entry is None:
            problems.append(f"{name}: not in the API reference")
            continue
        page, signature, _ = entry
        if signature is None or not signature.startswith(f"{name}("):
            problems.append(f"{name} ({page}): no signature under its heading, found {signature!r}")
            continue
        for param in _parameters(cls):
            shown = f"{param.name}:" if param.annotation is not inspect.Parameter.empty else param.name
            if not re.search(rf"(?<![\w.]){re.escape(shown)}", signature):
                problems.append(f"{name} ({page}): parameter {shown!r} missing from {signature!r}")
        checked += 1
    assert not problems, "\n".join(problems)
    assert checked > 60, f"only {checked} classes checked: did the reference or PUBLIC change?"


@pytest.mark.parametrize(
    "path",
    [
        "langgraph_handoff.checkpoint.ObjectStoreSaver",
        "langgraph_handoff.stores.S3Store",
        "langgraph_handoff.stores.ObstoreS3Store",
        "langgraph_handoff.stores.AzureBlobStore",
        "langgraph_handoff.stores.GCSStore",
        "langgraph_handoff.stores.LocalStore",
        "langgraph_handoff.memory.ObjectStoreMemory",
    ],
)
def test_args_render_as_a_table_of_every_parameter(reference: dict[str, Any], path: str) -> None:
    """The issue's classes: one row per parameter, no more ("a, b, c" rows) and none left out."""
    module, _, name = path.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    _, _, body = reference[path]
    assert '<span class="doc-section-title">Parameters:</span>' in body
    rows = _ROW_NAME.findall(body)
    expected = [p.name for p in _parameters(cls) if p.kind is not inspect.Parameter.VAR_KEYWORD]
    assert sorted(rows) == sorted(expected), f"table rows {rows}, parameters {expected}"


def test_no_base_outside_the_public_api_is_named(reference: dict[str, Any]) -> None:
    public = {name for names in PUBLIC.values() for name in names}
    shown = []
    for ident, (page, _, body) in reference.items():
        for bases in _BASES.findall(body):
            for title in re.findall(r'title="[^"(]*\(?(langgraph_handoff\.[\w.]+)\)?"', bases):
                if title.rsplit(".", 1)[-1] not in public:
                    shown.append(f"{ident} ({page}): Bases names {title}")
            if "SaverPlans" in bases:
                shown.append(f"{ident} ({page}): Bases names SaverPlans")
    assert not shown, "\n".join(shown)


def test_the_server_page_shows_the_default_url_itself(site: Path) -> None:
    from langgraph_handoff.server import DEFAULT_URL

    page = _text((site / "reference" / "server" / "index.html").read_text())
    assert f"Default {DEFAULT_URL} (DEFAULT_URL)" in page


def test_doctests_render_as_code(site: Path) -> None:
    """Markdown reads the ``>>>`` of a doctest as three nested quotes: every doctest, at the top
    of a docstring or under its ``Example:`` heading, must reach the page as a code block."""
    quoted = [
        page.parent.name
        for page in sorted((site / "reference").glob("*/index.html"))
        if "<blockquote>" in page.read_text()
    ]
    assert not quoted, f"doctests rendered as quotes on: {quoted}"
