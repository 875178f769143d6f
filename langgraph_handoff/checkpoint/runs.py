"""Which checkpoints each run of this process committed: what a refused run left behind.

A run refused with :class:`~langgraph_handoff.errors.StaleWriterError` may already have put its
input checkpoint (``durability="sync"`` or ``"async"``), which another run then extended. To say
so, the refusal needs to know which checkpoints of the thread are this run's. A checkpoint whose
metadata carries a ``run_id`` (the Agent Server sets one) says it in its record
(``Bookkeeping.run_id``), across processes. A plain ``graph.invoke`` sets none; its puts carry
the run's ``Runtime`` object in their config (LangGraph's ``__pregel_runtime``, one per run), so
this ledger keeps, per run object, the checkpoints it put, for the runs of this process.

Bounded: the latest :data:`RUNS` runs, each with its latest :data:`PER_RUN` checkpoints; a run
still holds its object alive while it is in the ledger, so an ``id`` is never reused for
another run meanwhile.

>>> ledger = RunLedger()
>>> run = object()
>>> config = {"configurable": {"__pregel_runtime": run}}
>>> ledger.wrote(config, "t", "", "c1"); ledger.wrote(config, "t", "", "c2")
>>> sorted(ledger.own(config, "t", "")), sorted(ledger.own({"configurable": {}}, "t", ""))
(['c1', 'c2'], [])
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

__all__ = ["PER_RUN", "RUNS", "RunLedger"]

RUNS = 512
PER_RUN = 64


class RunLedger:
    def __init__(self) -> None:
        self._runs: OrderedDict[int, tuple[object, dict[tuple[str, str], list[str]]]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _run_of(config: Any) -> object | None:
        conf = (config or {}).get("configurable") or {}
        return conf.get("__pregel_runtime")

    def wrote(self, config: Any, thread_id: str, ns: str, checkpoint_id: str) -> None:
        run = self._run_of(config)
        if run is None:
            return
        with self._lock:
            entry = self._runs.get(id(run))
            if entry is None or entry[0] is not run:
                entry = (run, {})
                self._runs[id(run)] = entry
            self._runs.move_to_end(id(run))
            ids = entry[1].setdefault((thread_id, ns), [])
            ids.append(checkpoint_id)
            del ids[:-PER_RUN]
            while len(self._runs) > RUNS:
                self._runs.popitem(last=False)

    def own(self, config: Any, thread_id: str, ns: str) -> frozenset[str]:
        """The checkpoints of ``thread_id``/``ns`` the run making this call put (none known: empty)."""
        run = self._run_of(config)
        if run is None:
            return frozenset()
        with self._lock:
            entry = self._runs.get(id(run))
            if entry is None or entry[0] is not run:
                return frozenset()
            return frozenset(entry[1].get((thread_id, ns), ()))
