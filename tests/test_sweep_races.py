"""The TTL sweep against a writer that revives the thread, at every point that matters, on the
memory store (the same scenarios run on Ceph RGW in integration_tests/test_s3_sweep.py).

Covered interleavings (sweeper S, writer W), each deterministic (a store hook, no sleeps):

* W lands after S read the head, before S's root swap: S skips the thread, nothing deleted;
* W loaded the thread before S and writes after: W gets ThreadExpiredError, stores nothing;
* W's input checkpoint lands before S reads: S keeps the thread;
* W starts a new thread on the emptied head before S deletes: W's objects survive S's delete;
* W's put wrote a large value, lost its swap to S, retried on the emptied head and landed
  before S deletes: the value S had listed under the same key is not deleted;
* W writes in a subgraph namespace after S's root swap: that namespace is left whole, W's next
  root put is refused;
* a refresh_on_read reader lands before S's root swap: S skips the thread.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from langgraph_handoff.stores import MemoryStore, StoreBase
from tests.sweep_helpers import SCENARIOS


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
def test_sweep_race(scenario: Callable[[StoreBase, str], None], mode: str) -> None:
    scenario(MemoryStore(), mode)
