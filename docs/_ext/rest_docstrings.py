"""A griffe extension for the API reference: our docstrings are reST-flavoured plain text.

They carry doctests (``>>>`` lines, run by pytest) and Sphinx roles (:class:`X`). Markdown would
read ``>>>`` as nested quotes and ``[...]`` in doctest output as links, so before mkdocstrings
renders a docstring this wraps each doctest in a ``pycon`` fence, turns roles into code spans and
``::`` literal-block markers into a colon. The docstrings stay as they are in the source.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):`~?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")


def _fence_doctests(text: str) -> str:
    out: list[str] = []
    in_doctest = False
    for line in text.splitlines():
        starts = line.lstrip().startswith(">>>")
        if starts and not in_doctest:
            out += ["```pycon"]
            in_doctest = True
        elif in_doctest and not line.strip():
            out += ["```"]
            in_doctest = False
        out.append(line)
    if in_doctest:
        out.append("```")
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


class RestDocstrings(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is None:
            return
        text = _indented_literals(_fence_doctests(obj.docstring.value))
        parts = re.split(r"(```.*?```)", text, flags=re.S)
        for k in range(0, len(parts), 2):  # outside fences only
            parts[k] = _LITERAL.sub(r"`\1`", _ROLE.sub(r"`\1`", parts[k]))
        obj.docstring.value = "".join(parts)
