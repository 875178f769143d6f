"""The README is a front page that links into docs/: every relative link and anchor there, and
between the docs pages, must resolve (a moved section must not leave a dead link behind)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: links from the docs site to files outside docs/ use this prefix, and are checked here too
REPO = "https://github.com/langgraph-handoff/langgraph-handoff"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.*)$", path.read_text(), re.M)}


def test_every_relative_link_and_anchor_in_the_readme_and_docs_resolves() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    assert len(pages) > 10
    dead = []
    for page in pages:
        for target in re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", page.read_text()):
            repo_file = re.match(rf"^{re.escape(REPO)}/(?:blob|tree)/main/([^#]+)", target)
            if repo_file:  # a link out of the docs site to a file of this repository
                if not (ROOT / repo_file.group(1)).exists():
                    dead.append(f"{page.name}: {target} (no such file in the repository)")
                continue
            if re.match(r"^(https?:|mailto:)", target):
                continue
            path, _, fragment = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                dead.append(f"{page.name}: {target} (no such file)")
            elif fragment and linked.suffix == ".md" and fragment not in _anchors(linked):
                dead.append(f"{page.name}: {target} (no such heading)")
    assert not dead, dead


def test_the_readme_stays_a_front_page() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300
