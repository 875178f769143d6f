"""Large values stored as their own objects ("blobs"), and which of them a namespace still uses.

A blob is named by the checkpoint that owns it and the digest of its bytes
(``data/{thread}/{ns}/b/{inv(owner)}-{digest}``), so writing the same value again is idempotent.
Garbage collection (``prune``, ``delete_for_runs``, ``migrate``) deletes a dropped checkpoint's
blobs, and the blobs its values referenced, only when no remaining record references them, by
key: :func:`blob_keys` says which keys those are, counting the copies a writer may still be
spilling.
"""

from __future__ import annotations

import hashlib

from langgraph_handoff._format import keys
from langgraph_handoff._format.records import Inline, PayloadTable, Record, blob_refs, payloads_for


def content_digest(data: bytes) -> str:
    """The digest naming a large value's blob (with its owner): the same bytes, the same key."""
    return hashlib.sha256(data).hexdigest()[:32]


def blob_keys(
    tid: str, ns: str, parts: list[tuple[dict[str, Record], PayloadTable]], *, may_spill: bool = False
) -> set[str]:
    """Keys of the large values the records reference (the bases of tails and the parts of pieces too), and of the
    copies being spilled behind inline values. With ``may_spill``, also the key *every* inline value may be
    copied to: a writer may write that copy at any time (and remember it written, dropping
    its inline copy on its next put), so garbage collection must keep such a key while any
    record holds the value."""
    out: set[str] = set()
    for recs, table in parts:
        for origin, chs in payloads_for(list(recs.values()), table).items():
            for p in chs.values():
                out.update(keys.blob_key(tid, ns, *ref) for ref in blob_refs(origin, p))
                if isinstance(p, Inline) and (p.spill or may_spill):  # (an inline value needs no blob)
                    out.add(keys.blob_key(tid, ns, origin, p.spill or content_digest(p.data)))
    return out
