"""Offline demo: the state schema changes under stored conversations, and nothing starts over.

The README's migration workflow, end to end, on the embedded local store:

1. release 1 of a support bot stores conversations (state: ``log`` and ``topic``);
2. release 2 adds ``language`` (default "en") and renames ``topic`` to ``subject``. It ships
   with ``migrations`` (below), so its workers read the old conversations upgraded, at once;
3. ``langgraph-handoff migrate --dry-run`` runs every step on every stored checkpoint and writes
   nothing; ``migrate`` then rewrites them for good (while a worker could keep writing);
4. ``verify`` shows every checkpoint at schema 2, and an old conversation goes on under release 2.

Run it with ``scripts/demo`` (or ``python examples/schema_migration.py``).
"""

from __future__ import annotations

import argparse
import operator
import shutil
import tempfile
from pathlib import Path
from typing import Annotated, Any

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.cli import main as cli
from langgraph_handoff.migrations import SchemaMigrations, rename_channel

# -- release 2's migrations: importable as ``schema_migration:migrations`` by the CLI ------------
migrations = SchemaMigrations()


@migrations.register(1, "add language")
def add_language(values: dict[str, Any], metadata: dict[str, Any]) -> None:
    values.setdefault("language", "en")


migrations.register(2)(rename_channel("topic", "subject"))


class Release1(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    topic: str


class Release2(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    subject: str
    language: str


def release1(saver: ObjectStoreSaver) -> Any:
    g = StateGraph(Release1)
    g.add_node("triage", lambda s: {"log": ["bot: which order?"], "topic": "refund"})
    g.add_edge(START, "triage")
    g.add_edge("triage", END)
    return g.compile(checkpointer=saver)


def release2(saver: ObjectStoreSaver) -> Any:
    g = StateGraph(Release2)
    g.add_node("answer", lambda s: {"log": [f"bot: your {s['subject']} is on its way ({s['language']})"]})
    g.add_edge(START, "answer")
    g.add_edge("answer", END)
    return g.compile(checkpointer=saver)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", type=Path, default=None, help="directory for the local store (default: a temp dir)")
    args = p.parse_args()
    root = args.store or Path(tempfile.mkdtemp(prefix="lgh-migration-"))
    shutil.rmtree(root, ignore_errors=True)
    url = f"file://{root}"
    cfg = {"configurable": {"thread_id": "customer-7"}}

    print("1. release 1 stores three conversations")
    old = ObjectStoreSaver.from_url(url)
    for n in (7, 8, 9):
        release1(old).invoke({"log": [f"customer {n}: my refund?"]}, {"configurable": {"thread_id": f"customer-{n}"}})
    print("   stored:", release1(old).get_state(cfg).values)

    print("2. release 2 (adds language, renames topic -> subject) reads them upgraded, on read")
    new = ObjectStoreSaver.from_url(url, migrations=migrations)
    print("   seen:  ", release2(new).get_state(cfg).values)

    print("3. langgraph-handoff migrate --dry-run, then migrate")
    spec = "schema_migration:migrations"
    assert cli(["migrate", url, "--migrations", spec, "--dry-run"]) == 0
    assert cli(["migrate", url, "--migrations", spec]) == 0
    print("   a second run has nothing left to do:")
    assert cli(["migrate", url, "--migrations", spec, "--json"]) == 0

    print("4. every checkpoint is at schema 2 now, and the conversation goes on under release 2")
    assert cli(["verify", url]) == 0
    out = release2(ObjectStoreSaver.from_url(url, migrations=migrations)).invoke({"log": ["customer 7: thanks"]}, cfg)
    print("   log:", out["log"])
    print(f"\nstate is in {root} (inspect it with: langgraph-handoff show {url} customer-7)")


if __name__ == "__main__":
    main()
