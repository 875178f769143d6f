"""Every saver operation, written once as a sans-I/O plan; :class:`SaverPlans` is what a saver is made of.

Each ``plan_*`` function is a generator: it yields store operations (see
:mod:`~langgraph_handoff.checkpoint.driver`) and gets their results back, so the very same logic
serves ``get_tuple`` and ``aget_tuple``, ``put`` and ``aput``, and so on. Nothing here blocks or
awaits. The plans are plain functions of the saver's state (:class:`~.state.SaverState`), one
module per concern, and call each other directly, never back through the saver:

===================  ==========================================================================
:mod:`.reading`      ``get_tuple``: the head, a record in it or in a sealed segment, its values
                     and pending writes
:mod:`.upgrading`    checkpoints of an older state schema, upgraded in memory as they are read
:mod:`.writing`      ``put``, ``put_writes``: the record, the next head (spills, sealing), the
                     head's compare-and-swap and its retries, fencing
:mod:`.listing`      ``list``, the DeltaChannel ancestor walk, the heads under a prefix
:mod:`.rewriting`    dropping checkpoints from a namespace's history, crash-safely
:mod:`.blobs`        large values: their names, and which ones a namespace still references
:mod:`.maintenance`  ``delete_thread``, ``delete_for_runs``, ``prune``, ``copy_thread``
:mod:`.migrate`      ``migrate_thread``: stored threads rewritten into the current schema
:mod:`.sweep`        the TTL sweep
:mod:`.state`        :class:`Layout`, the saver state every plan reads, shared helpers
===================  ==========================================================================

Request budget per operation (S3 requests; counted by the tests):

==============================  ====================================================
``put``                         1 conditional PUT of the head. Plus, only when needed:
                                1 PUT per new value >= ``blob_threshold`` and per new
                                base of a tail (in parallel, before the head) and 1 PUT
                                of a sealed segment every ``head_max_records``
                                checkpoints. A cold cache adds 1 GET.
``put_writes``                  1 create-only PUT (a retried task: GET + CAS)
``get_tuple`` (latest)          GET head + LIST writes, in one round trip (``file://``:
                                GET, then LIST of the latest's own writes; no LIST on a
                                new thread); + 1 GET per pending-writes document and per
                                blob value or tail base the process does not hold yet
``list`` / history of k         GET head + LIST writes (one round trip), + GETs only for
                                writes documents not folded into the head and for sealed
                                segments reached
``delete_thread``               2 LISTs + 1 DeleteObjects per 1000 objects
==============================  ====================================================
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from langgraph_handoff.checkpoint import trust
from langgraph_handoff.checkpoint.plans import blobs, listing, maintenance, migrate, reading, rewriting, sweep, writing
from langgraph_handoff.checkpoint.plans.state import Layout, SaverState

__all__ = ["Layout", "SaverPlans"]

F = TypeVar("F", bound=Callable[..., Any])


def _gated(plan: F) -> F:
    """The plan, probed before its first write on a store no probe has passed yet
    (:mod:`langgraph_handoff.checkpoint.trust`); on a local or probed store, the plan itself."""

    @functools.wraps(plan)
    def bound(self: SaverState, *args: Any, **kwargs: Any) -> Any:
        return trust.gated(self.store, plan(self, *args, **kwargs))

    return bound  # type: ignore[return-value]


class SaverPlans(SaverState):
    """What a saver is made of: every plan ``ObjectStoreSaver`` runs, named after the module that
    holds it. The saver drives these (``driver.run`` or ``driver.arun``); inside, a plan calls the
    others as plain functions, never back through the saver, so this table is the whole
    composition. Each is ``_gated``: a saver never writes to a store no probe has passed."""

    # reading
    _plan_get_tuple = _gated(reading.plan_get_tuple)
    # writing
    _plan_put = _gated(writing.plan_put)
    _plan_put_writes = _gated(writing.plan_put_writes)
    # listing
    _plan_list = _gated(listing.plan_list)
    _plan_delta_history = _gated(listing.plan_delta_history)
    # maintenance (prune and delete_for_runs rewrite history through .rewriting)
    _plan_delete_thread = _gated(maintenance.plan_delete_thread)
    _plan_delete_for_runs = _gated(maintenance.plan_delete_for_runs)
    _plan_prune = _gated(maintenance.plan_prune)
    _plan_copy_thread = _gated(maintenance.plan_copy_thread)
    # migration and the TTL sweep
    _plan_migration_targets = _gated(migrate.plan_migration_targets)
    _plan_migrate_thread = _gated(migrate.plan_migrate_thread)
    _plan_sweep = _gated(sweep.plan_sweep)
    # what tests call on a saver directly (the package's other layers use ``saver.heads``,
    # :mod:`langgraph_handoff.checkpoint.heads`)
    _plan_load_namespace = _gated(rewriting.plan_load_namespace)
    _blob_keys = staticmethod(blobs.blob_keys)
