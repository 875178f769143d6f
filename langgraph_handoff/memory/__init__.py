"""Long-term memory on the same object store: a LangGraph ``BaseStore`` with semantic search.

A session's *context* (the conversation, its checkpoints, the handoff note of a transfer) belongs
to one thread and moves with its lease. What outlives a session (a user's preferences, facts
learned in past conversations) belongs in a store every worker shares, keyed by user rather than
by thread. ``ObjectStoreMemory`` is that store, on the bucket or directory the checkpoints use::

    memory/{namespace...}/=k/{key}                one JSON value (and its vectors), in a versioned,
                                                  checksummed envelope
    memory/{namespace...}/=p/{L}-{B}-{n}-{digest} a pack: n items of the namespace in one object,
                                                  so that a search need not read each item

Pass it to ``compile(store=...)`` and nodes get it as ``runtime.store`` / the ``store`` argument.
Writes are last-writer-wins per key (memories are facts, not a lineage: no fencing). ``search``
filters by namespace prefix and field values (exact, or ``$eq/$ne/$gt/$gte/$lt/$lte``).

**Semantic search** is configured as LangGraph's stores are: ``index={"embed": ..., "dims": ...,
"fields": [...]}`` (a LangChain ``Embeddings``, a sync or async function of texts, a
``"provider:model"`` string, or the offline ``[e5]`` extra: ``"e5:multilingual-e5-small"``, 384
dimensions). A put embeds the configured fields (``put(..., index=False)``: none; ``index=[paths]``:
those instead), and the vectors are stored *in the item's own object*, so one PUT writes a value and
its vectors together: no later write, delete or sweep can leave a vector attached to a value it
was not computed from. ``search(prefix, query=...)`` ranks by cosine similarity, best first
(``SearchItem.score``), then the items without vectors. Without an index a ``query`` is ignored,
as LangGraph's ``InMemoryStore`` ignores it.

**What a search costs.** The listing of the prefix (1 request per 1,000 items) says which items
exist at which version; their bodies come from this process's cache (same ETag: free), from the
namespace's packs, or from one GET each (:mod:`.view`). Packs are rebuilt by searches, only for
the buckets that changed, so a put stays 1 GET + 1 PUT whatever the index. A repeated search in
one process costs the listing alone. Figures: ``bench/memory_search.py`` and docs/performance.md.

**TTL** works as LangGraph's ``BaseStore`` defines it (``supports_ttl = True``): ``ttl=TTLConfig``
(``default_ttl`` minutes, ``refresh_on_read``, ``sweep_interval_minutes``), ``put(..., ttl=)`` per
item, ``refresh_ttl`` on ``get``/``search``. An expired item is invisible to ``get`` and
``search`` at once and removed by :meth:`ObjectStoreMemory.sweep_ttl` (or the background
sweeper, :meth:`~ObjectStoreMemory.start_ttl_sweeper`), which also rebuilds its namespace's packs.

>>> memory = ObjectStoreMemory.from_url("memory://")
>>> memory.put(("users", "customer-7"), "preferences", {"contact": "email"})
>>> memory.get(("users", "customer-7"), "preferences").value
{'contact': 'email'}
>>> [i.key for i in memory.search(("users",), filter={"contact": "email"})]
['preferences']

With an index (any embedder; this one counts letters, to keep the example self-contained):

>>> def letters(texts):
...     return [[t.count(c) for c in "aeiou"] for t in texts]
>>> memory = ObjectStoreMemory.from_url("memory://", index={"embed": letters, "dims": 5, "fields": ["text"]})
>>> memory.put(("notes",), "a", {"text": "banana bread"})
>>> memory.put(("notes",), "b", {"text": "tofu soup"})
>>> memory.put(("notes",), "c", {"text": "kept, not embedded"}, index=False)
>>> [(i.key, round(i.score, 2) if i.score is not None else None) for i in memory.search(("notes",), query="papaya")]
[('a', 0.97), ('b', 0.0), ('c', None)]

With a TTL (the clock is injected here; by default it is ``time.time``):

>>> now = [1_000_000.0]
>>> memory = ObjectStoreMemory.from_url("memory://", ttl={"default_ttl": 10}, clock=lambda: now[0])
>>> memory.put(("users", "u1"), "draft", {"text": "hi"})
>>> memory.put(("users", "u1"), "profile", {"name": "Ada"}, ttl=None)  # never expires
>>> now[0] += 11 * 60
>>> memory.get(("users", "u1"), "draft") is None, memory.get(("users", "u1"), "profile").value
(True, {'name': 'Ada'})
>>> memory.sweep_ttl()
1
"""

from __future__ import annotations

from langgraph_handoff.memory.e5 import E5_DIMS, E5Embeddings, e5_embeddings
from langgraph_handoff.memory.store import MemorySweep, ObjectStoreMemory

__all__ = ["E5_DIMS", "E5Embeddings", "MemorySweep", "ObjectStoreMemory", "e5_embeddings"]
