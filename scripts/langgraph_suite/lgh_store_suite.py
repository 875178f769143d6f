"""``langgraph-checkpoint``'s ``tests/test_store.py`` against ``ObjectStoreMemory``.

That file tests LangGraph's ``BaseStore`` contract on ``InMemoryStore``, the class it imports by
name. Loaded as a plugin (``-p lgh_store_suite``), this module points that name at
``ObjectStoreMemory`` on a fresh ``memory://`` store, built with the same arguments
(``index=...`` included), so every test that constructs a store constructs ours. Tests of pure
helpers (``get_text_at_path``, the batching base class) run unchanged alongside.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from langgraph_handoff.memory import ObjectStoreMemory
from langgraph_handoff.stores import MemoryStore

#: Tests left out, each with its reason (node id without parameters). Nothing else may fail.
LEFT_OUT: dict[str, str] = {}


class ObjectStoreMemoryOnMemory(ObjectStoreMemory):
    """``ObjectStoreMemory`` on a fresh in-memory object store, constructed as ``InMemoryStore`` is."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(MemoryStore(), **kwargs)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep, drop = [], []
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and getattr(module, "InMemoryStore", None) not in (None, ObjectStoreMemoryOnMemory):
            module.InMemoryStore = ObjectStoreMemoryOnMemory
        (drop if item.nodeid.split("[", 1)[0] in LEFT_OUT else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


_OUTCOMES: Counter[str] = Counter()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        _OUTCOMES[report.outcome] += 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    tr = terminalreporter
    tr.section("langgraph-handoff: langgraph-checkpoint's test_store.py on ObjectStoreMemory")
    tr.write_line(", ".join(f"{n} {o}" for o, n in sorted(_OUTCOMES.items())))
    for bare, reason in sorted(LEFT_OUT.items()):
        tr.write_line(f"  left out: {bare}: {reason}")
