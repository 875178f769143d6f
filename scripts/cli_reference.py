"""Write docs/reference/cli.md from the ``langgraph-handoff`` command itself.

The page is generated, so it cannot drift: ``tests/docs/test_cli_reference.py`` fails when the
committed page differs from what this prints. After changing a command, run::

    .venv/bin/python scripts/cli_reference.py
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import typer

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "cli.md"
HEADER = """# CLI reference

Generated from the commands by `scripts/cli_reference.py`; do not edit by hand. The
[command line guide](../cli.md) shows them at work. Every command takes the store as `URL`, in
the form `ObjectStoreSaver.from_url` takes (`file:///dir`, `s3://bucket/prefix?...`,
`az://container/prefix`, `gs://bucket/prefix`, `memory://`). Exit codes: 0 ok, 1 problems found,
2 bad input or a store error.
"""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _type_name(param: Any) -> str:
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    return getattr(annotation, "__name__", None) or str(annotation or "text")


def _param_row(param: Any) -> str:
    help_text = param.help or ""
    if param.param_type_name == "argument":
        name = f"`{(param.metavar or param.name).upper()}`"
        kind = "argument" + ("" if param.required else ", optional")
    else:
        name = ", ".join(f"`{opt}`" for opt in [*param.opts, *param.secondary_opts])
        if param.metavar:
            name += f" `{param.metavar}`"
        kind = "flag" if param.is_flag else f"option ({_type_name(param)})"
        if param.multiple:
            kind += ", repeatable"
        if param.default not in (None, False, (), "") and not param.is_flag:
            help_text += f" (default: `{param.default}`)"
    return f"| {name} | {kind} | {_cell(help_text)} |"


def _command(cmd: Any, path: list[str], parent: Any) -> list[str]:
    # typer vendors click (typer._click): duck-typed here rather than importing its private module
    ctx = cmd.context_class(cmd, info_name=path[-1], parent=parent, terminal_width=200, max_content_width=200)
    lines = [f"{'#' * min(len(path) + 1, 4)} `{' '.join(path)}`", ""]
    if cmd.help:
        lines += [cmd.help.strip(), ""]
    usage = re.sub(r"\{(\w+)\}", lambda m: m.group(1).upper(), cmd.get_usage(ctx).replace("Usage: ", ""))
    lines += ["```text", usage, "```", ""]
    params = [p for p in cmd.get_params(ctx) if p.name != "help" and not getattr(p, "hidden", False)]
    if params:
        lines += ["| name | kind | meaning |", "|---|---|---|", *(_param_row(p) for p in params), ""]
    if hasattr(cmd, "list_commands"):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                lines += _command(sub, [*path, name], ctx)
    return lines


def render() -> str:
    from langgraph_handoff.cli import app

    root = typer.main.get_command(app)
    body = _command(root, ["langgraph-handoff"], None)
    return HEADER + "\n" + "\n".join(body).rstrip() + "\n"


if __name__ == "__main__":
    PAGE.write_text(render())
    print(f"wrote {PAGE}", file=sys.stderr)
