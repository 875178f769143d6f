"""OS processes for the race and concurrency tests, forked from one preloaded server.

``spawn`` starts every process as a new interpreter that imports LangGraph, langchain-core and
this package again: about 0.7 s of CPU each, 18 processes for the team matrix, 12 for the lease
race. ``forkserver`` pays that once: a single-threaded server imports :data:`PRELOAD`, then forks
each process from itself. Not plain ``fork``: the test process has threads (pytest-xdist's
channel, the stores' I/O threads, boto3's pools) whose locks a forked child would inherit held.

The server is one per test process and keeps the preload it started with, so every test asks
for the same list.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.context import BaseContext

#: what the process targets import: the package, LangGraph's graph API and the test harnesses
PRELOAD = ["langgraph_handoff", "langgraph.graph", "tests.race_helpers", "tests.team_harness"]


def process_context() -> BaseContext:
    """The multiprocessing context for tests that race processes (pools, managers, barriers)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx
