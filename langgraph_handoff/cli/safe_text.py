r"""Text from a store, made safe to print on a terminal: every command prints through these.

Thread ids, namespaces, checkpoint ids, metadata, team and member names, message contents and
object keys are written by whoever can write to the store, and a terminal acts on some of the
characters they may hold: ESC starts a control sequence (colours, moving the cursor, setting the
window title), CR returns to the start of the line and BS steps back, so ``"t1\rall good"``
overwrites what the operator reads; bidi overrides (U+202E) show text in another order than it
is stored; U+2028 breaks a line; a lone surrogate stops ``print`` with ``UnicodeEncodeError``.

The rule is Python's own for ``repr``: a character that is not :meth:`str.isprintable` (control
and format characters, line and paragraph separators, every blank but the space, surrogates,
private and unassigned code points) is shown as its escape, ``\x1b``, ``\r``, ``\u202e``; a
field's backslash is doubled, so a field's escaped form is unambiguous (``a\x1bb`` typed as text
shows as ``a\\x1bb``). Messages (an error's text, which quotes its values with ``repr`` already)
keep their backslashes.

>>> shown("t1\rall good\x1b[2J")
't1\\rall good\\x1b[2J'
>>> shown("admin\u202egnp.exe"), shown("a\\x1bb")
('admin\\u202egnp.exe', 'a\\\\x1bb')
>>> shown("Zoë 中文 ok")
'Zoë 中文 ok'

With ``--json`` the same characters become JSON escapes: the document stays valid JSON and
decodes to the very strings stored.

>>> json_text({"thread": "t\u202e1", "ok": "é"})
'{"thread": "t\\u202e1", "ok": "é"}'

Rich interprets ``[red]...[/red]`` markup and ``:emoji:`` codes in a string; text from a store
goes to rich only as :func:`cell` (a ``Text``, never parsed).
"""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text

__all__ = ["cell", "json_text", "shown", "shown_lines", "shown_message", "styled"]

_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escaped(char: str) -> str:
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _escape(text: str, backslashes: bool, keep: str = "") -> str:
    if text.isprintable() and not (backslashes and "\\" in text):
        return text  # the usual case: nothing to do
    out = []
    for char in text:
        if char == "\\":
            out.append("\\\\" if backslashes else char)
        elif char.isprintable() or char in keep:
            out.append(char)
        else:
            out.append(_escaped(char))
    return "".join(out)


def shown(value: object) -> str:
    """A field (a thread id, a key, a value) as it is printed: ``str(value)`` with every
    character that is not printable escaped, and backslashes doubled."""
    return _escape(value if isinstance(value, str) else str(value), backslashes=True)


def shown_message(text: object) -> str:
    r"""A message (an error's text) as it is printed: what is not printable escaped; its
    backslashes, mostly ``repr``'s own escapes, kept as they are.

    >>> shown_message("no thread 'a\\x1bb'\x1b[2K")
    "no thread 'a\\x1bb'\\x1b[2K"
    """
    return _escape(text if isinstance(text, str) else str(text), backslashes=False)


def shown_lines(text: str) -> str:
    r"""A command's output lines as they are printed, whatever their fields: what is not
    printable escaped, except the newlines and tabs that lay the lines out. Each field in them
    is :func:`shown` already (a tab or newline inside a field is escaped there); this is the net
    under a field a command would print as it is.

    >>> shown_lines("t1\tlatest x\x1b]0;pwned\x07\nnext")
    't1\tlatest x\\x1b]0;pwned\\x07\nnext'
    """
    return _escape(text, backslashes=False, keep="\n\t")


def _json_escaped(char: str) -> str:
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # as a surrogate pair, JSON's only form for it
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_text(obj: Any, indent: int | None = None) -> str:
    r"""``obj`` as JSON (non-ASCII letters as they are), with every character that is not
    printable written as a ``\u`` escape: ``json.dumps`` escapes only C0 controls when it
    leaves non-ASCII as it is, so DEL, C1 controls, bidi overrides and U+2028 went out raw.
    Outside strings the document holds only printable ASCII and (with ``indent``) newlines."""
    text = json.dumps(obj, ensure_ascii=False, default=str, indent=indent)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == "\n" else _json_escaped(c) for c in text)


def cell(value: object, style: str = "") -> Text:
    """A field for rich (a table cell, a line on a progress bar's console): escaped as
    :func:`shown` and never read as markup or emoji codes."""
    return Text(shown(value), style=style)


def styled(*parts: str | tuple[str, str] | Text) -> Text:
    """A line for rich from parts: our own words with a style (``("failed", "red")``), or
    :func:`cell` fields, or plain words of ours. No part is read as markup.

    >>> styled(("failed", "red"), " ", cell("[red]x[/red]")).plain
    'failed [red]x[/red]'
    """
    return Text.assemble(*parts)
