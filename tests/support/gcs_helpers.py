"""Helpers for the GCS store's tests: a store that cleans up after itself on the emulator, and
the entry point of one OS process in the raw compare-and-swap races (spawned, so it lives in an
importable module)."""

from __future__ import annotations

import uuid
from typing import Any

from langgraph_handoff.errors import PreconditionFailedError, UnknownOutcomeError
from langgraph_handoff.stores.gcs import GCSStore

BUCKET = "lgh-tests"


class SelfCleaningGCSStore(GCSStore):
    """Deletes its objects when closed, so one emulator serves many runs (``--repeat``)."""

    def close(self) -> None:
        if not self._closed:
            self.delete_many([info.key for info in self.list("")])
        super().close()


def make_gcs_store(endpoint: str, prefix: str | None = None, **kwargs: Any) -> GCSStore:
    return SelfCleaningGCSStore(
        BUCKET, prefix=prefix or f"t-{uuid.uuid4().hex}", endpoint_url=endpoint, create_bucket=True, **kwargs
    )


def process_cas_racer(
    endpoint: str, prefix: str, rounds: list[tuple[str, str | None]], barrier: Any, me: int
) -> list[str]:
    """One racing process: for each ``(key, etag)`` round, wait for every racer at ``barrier``,
    then write ``racer-{me}`` to ``key`` with ``If-Match: etag`` (create-only when etag is None).
    Returns one outcome per round: ``won``, ``lost`` or ``unknown``."""
    store = GCSStore(BUCKET, prefix=prefix, endpoint_url=endpoint, max_workers=2)
    outcomes = []
    try:
        for key, etag in rounds:
            barrier.wait(timeout=60)
            try:
                if etag is None:
                    store.put(key, f"racer-{me}".encode(), if_none_match=True)
                else:
                    store.put(key, f"racer-{me}".encode(), if_match=etag)
                outcomes.append("won")
            except PreconditionFailedError:
                outcomes.append("lost")
            except UnknownOutcomeError:
                outcomes.append("unknown")
    finally:
        store.close()
    return outcomes
