"""Shared pieces of the ``migrate`` tests: the format-1 fixture store, what readers see of a store,
and a store wrapper that runs a hook around every write (to kill or race a migration there)."""

from __future__ import annotations

import tarfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff._format import envelope
from langgraph_handoff.stores import LocalStore, MemoryStore, StoreBase
from langgraph_handoff.stores.base import Delete, DeleteMany, Op, Put
from langgraph_handoff.stores.counting import CountingStore

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "format1_store.tar.gz"
#: threads in the fixture (see tests/fixtures/make_format1_store.py)
FIXTURE_THREADS = ["chat-0", "chat-1", "chat-2", "long", "nested", "pending", "waiting"]


def unpack_fixture(root: Path) -> LocalStore:
    root.mkdir(parents=True, exist_ok=True)
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(root, filter="data")
    return LocalStore(root)


def fixture_into(store: StoreBase, tmp: Path) -> StoreBase:
    """Copy every object of the format-1 fixture into ``store`` (memory, S3...)."""
    source = unpack_fixture(tmp / "fixture-src")
    for info in source.list(""):
        obj = source.get(info.key)
        assert obj is not None
        store.put(info.key, obj.body)
    return store


def old_store(kind: str, tmp: Path) -> StoreBase:
    if kind == "local":
        return unpack_fixture(tmp / "store")
    return fixture_into(MemoryStore(), tmp)


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def seen(saver: ObjectStoreSaver, threads: Sequence[str]) -> dict[str, list[Any]]:
    """Everything readers get from these threads: every checkpoint of every namespace with its
    values, metadata, parent and pending writes (channel versions are left out: a migration may
    number them differently, as LangGraph allows)."""
    out: dict[str, list[Any]] = {}
    for t in threads:
        rows = []
        for tup in saver.list(cfg(t)):
            c = tup.config["configurable"]
            rows.append(
                (
                    c["checkpoint_ns"],
                    c["checkpoint_id"],
                    (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
                    tup.checkpoint["channel_values"],
                    tup.metadata,
                    sorted(tup.pending_writes or [], key=repr),
                )
            )
        out[t] = sorted(rows, key=repr)
    return out


def formats(store: StoreBase) -> dict[str, set[int]]:
    """Storage format versions found, per object kind."""
    out: dict[str, set[int]] = {}
    for info in store.list(""):
        obj = store.get(info.key)
        assert obj is not None
        env = envelope.decode(obj.body, key=info.key)
        out.setdefault(env.kind.name, set()).add(env.format_version)
    return out


def is_write(op: Op) -> bool:
    return isinstance(op, (Put, Delete, DeleteMany))


class Tripwire(CountingStore):
    """Runs ``hook(op, "before" | "after")`` around every operation the saver sends."""

    def __init__(self, inner: StoreBase, hook: Callable[[Op, str], None]) -> None:
        super().__init__(inner)
        self.hook = hook

    def run(self, op: Op) -> Any:
        self.hook(op, "before")
        out = super().run(op)
        self.hook(op, "after")
        return out

    def run_many(self, ops: Sequence[Op], *, return_exceptions: bool = False) -> list[Any]:
        for op in ops:
            self.hook(op, "before")
        out = super().run_many(ops, return_exceptions=return_exceptions)
        for op in ops:
            self.hook(op, "after")
        return out
