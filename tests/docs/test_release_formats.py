"""A storage format a released version cannot read is never written under that version's number.

Found by issue 47 (deliverable 4): main wrote storage format 3, then 4, while ``__version__`` and
``--version`` still said 0.2.0, a version docs/migrations.md says refuses format 3. The releases'
formats are the table in docs/migrations.md ("Storage formats by release"); every release in
CHANGELOG.md has a row.
"""

from __future__ import annotations

import re
from pathlib import Path

import langgraph_handoff
from langgraph_handoff._format.envelope import FORMAT_VERSION
from tests.docs.test_changelog import parse_version, releases

MIGRATIONS = Path(__file__).resolve().parents[2] / "docs" / "migrations.md"
ROW = re.compile(r"\| (\d+\.\d+\.\d+) \| (\d+) \| (\d+) \|")


def formats_by_release() -> dict[str, tuple[int, int]]:
    """release -> (the format it writes, the newest it reads), from the table's rows."""
    text = MIGRATIONS.read_text(encoding="utf-8")
    section = text.split("## Storage formats by release", 1)[1].split("\n## ", 1)[0]
    return {m[1]: (int(m[2]), int(m[3])) for m in ROW.finditer(section)}


def test_every_release_has_a_row() -> None:
    table = formats_by_release()
    assert sorted(table) == sorted(v for v, _ in releases())
    for version, (writes, reads) in table.items():
        assert writes <= reads, version


def test_a_released_number_never_writes_a_format_its_release_cannot_read() -> None:
    version = langgraph_handoff.__version__
    _, dev = parse_version(version)
    if dev:  # X.Y.Z.devN is no release: it may write what the next release will first read
        return
    reads = formats_by_release()[version][1]
    assert reads >= FORMAT_VERSION, (
        f"this code writes storage format {FORMAT_VERSION}, which release {version} cannot read "
        f"(it reads up to {reads}): give main a development version (X.Y.Z.dev0 of the next release), "
        "or add the release's row to docs/migrations.md"
    )


def test_the_cli_prints_the_package_version() -> None:
    from tests.cli.test_cli import cli

    run = cli("--version")
    assert run.returncode == 0 and run.stdout == f"langgraph-handoff {langgraph_handoff.__version__}\n"
