"""A griffe extension for the API reference: our docstrings are reST-flavoured Google style.

They carry doctests (``>>>`` lines, run by pytest) and Sphinx roles (:class:`X`). Markdown would
read ``>>>`` as nested quotes and ``[...]`` in doctest output as links, so before mkdocstrings
renders a docstring this wraps each doctest in a ``pycon`` fence, turns roles into code spans and
``::`` literal-block markers into a colon. The docstrings stay as they are in the source.

It also drops, from each class's "Bases:" line, the bases a user cannot import: classes of this
package that no public module exports (``SaverPlans``, ``Model``, ...). They are how the code
is shared, not part of the API; a base that is exported (``StoreBase``, an error) or comes from
another package (``BaseCheckpointSaver``) stays.
"""

from __future__ import annotations

import ast
import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):`~?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")


def _fence_doctests(text: str) -> str:
    """Each doctest in a ``pycon`` fence, indented as the doctest is: one under an ``Example:``
    heading stays inside the block the Google parser reads for it."""
    out: list[str] = []
    indent: str | None = None  # the open fence's, None outside a doctest
    for line in text.splitlines():
        if indent is None and line.lstrip().startswith(">>>"):
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}```pycon")
        elif indent is not None and not line.strip():
            out.append(f"{indent}```")
            indent = None
        out.append(line)
    if indent is not None:
        out.append(f"{indent}```")
    return "\n".join(out)


def _indented_literals(text: str) -> str:
    """A paragraph ending in ``::`` introduces an indented literal block: fence it."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::") and not line.lstrip().startswith(">>>"):
            out.append(line.rstrip()[:-1])
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            block: list[str] = []
            while j < len(lines) and (not lines[j].strip() or lines[j].startswith((" ", "\t"))):
                block.append(lines[j])
                j += 1
            while block and not block[-1].strip():
                block.pop()
            if block:
                indent = min(len(b) - len(b.lstrip()) for b in block if b.strip())
                out += ["", "```text", *(b[indent:] for b in block), "```", ""]
                i = j
                continue
        out.append(line)
        i += 1
    return "\n".join(out)


def _exported_names(package: griffe.Module) -> set[str]:
    """The names in the ``__all__`` of the package and of its modules and subpackages whose name
    has no leading ``_``: the public API (reference/index.md). The modules inside those (the
    ``plans`` of ``checkpoint``, ...) have an ``__all__`` too, but they are implementation."""
    names = {str(name) for name in package.exports or ()}
    for name, member in package.modules.items():
        if not member.is_alias and not name.startswith("_"):  # an alias: an imported module
            names |= {str(name) for name in member.exports or ()}
    return names


def _classes(obj: griffe.Object) -> list[griffe.Class]:
    found: list[griffe.Class] = []
    for member in obj.members.values():
        if member.is_alias:
            continue
        if isinstance(member, griffe.Class):
            found.append(member)
        if isinstance(member, (griffe.Module, griffe.Class)):
            found += _classes(member)
    return found


def _base_path(base: str | griffe.Expr) -> str:
    if isinstance(base, str):
        return base
    if isinstance(base, griffe.ExprSubscript):
        base = base.left
    return base.canonical_path if isinstance(base, griffe.Expr) else base


def _field_default(value: str) -> str | None:
    """The default a ``Field(...)`` gives, as source: ``default=`` (or the first argument), or
    for a ``default_factory`` the expression it evaluates for each instance (``dict()``, the
    lambda's body); None for a required field. Any other value is its own default."""
    try:
        call = ast.parse(value, mode="eval").body
    except SyntaxError:
        return value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "Field"):
        return value
    given = {kw.arg: kw.value for kw in call.keywords}
    if call.args:
        given.setdefault("default", call.args[0])
    if "default" in given:
        return ast.unparse(given["default"])
    factory = given.get("default_factory")
    if factory is None:
        return None
    return ast.unparse(factory.body) if isinstance(factory, ast.Lambda) else f"{ast.unparse(factory)}()"


def _model_init(cls: griffe.Class) -> griffe.Function:
    """The ``__init__`` pydantic gives a model, from its annotated fields: keyword-only, with
    their defaults."""
    params = [griffe.Parameter("self", kind=griffe.ParameterKind.positional_or_keyword)]
    for name, attr in cls.members.items():
        if attr.is_alias or not isinstance(attr, griffe.Attribute) or attr.annotation is None:
            continue
        if name.startswith("_") or str(attr.annotation).startswith("ClassVar"):
            continue
        default = None if attr.value is None else _field_default(str(attr.value))
        params.append(
            griffe.Parameter(name, annotation=attr.annotation, kind=griffe.ParameterKind.keyword_only, default=default)
        )
    return griffe.Function("__init__", parameters=griffe.Parameters(*params), returns="None")


def _is_model(cls: griffe.Class, package: str) -> bool:
    return any(_base_path(base) in (f"{package}._model.Model", "pydantic.BaseModel") for base in cls.bases)


class RestDocstrings(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        public = _exported_names(pkg)
        for cls in _classes(pkg):
            # a pydantic model's signature is its fields, not the ``**data`` of Model.__init__
            if "__init__" not in cls.members and _is_model(cls, pkg.name):
                cls.set_member("__init__", _model_init(cls))
            cls.bases = [
                base
                for base in cls.bases
                if not (path := _base_path(base)).startswith(f"{pkg.name}.") or path.rsplit(".", 1)[-1] in public
            ]
            # a class built without arguments still shows that it is built so: ``FullHistory()``
            # (dataclasses get theirs from griffe's dataclasses extension, after this one)
            dataclass = any("dataclass" in str(decorator.value) for decorator in cls.decorators)
            if not dataclass and cls.bases == [] and "__init__" not in cls.all_members:
                self_only = griffe.Parameters(griffe.Parameter("self", kind=griffe.ParameterKind.positional_or_keyword))
                cls.set_member("__init__", griffe.Function("__init__", parameters=self_only, returns="None"))

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is None:
            return
        text = _indented_literals(_fence_doctests(obj.docstring.value))
        parts = re.split(r"(```.*?```)", text, flags=re.S)
        for k in range(0, len(parts), 2):  # outside fences only
            parts[k] = _LITERAL.sub(r"`\1`", _ROLE.sub(r"`\1`", parts[k]))
        obj.docstring.value = "".join(parts)
