"""Paging through a LocalStore directory costs work in proportion to its keys, and lists the same.

Each page of ``heads/`` used to walk the directory's names from the first one to reach its
``start_after``, so paging through N threads examined about N² / (2 × page size) names: at
30,000 threads, 1.46 million comparisons for 30 pages. A page now starts by bisection. These
tests count names examined (a counting sequence in place of a directory's names) and directory
reads, never time, and check the pages against the in-memory store's, which is the contract.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from langgraph_handoff.stores import LocalStore, MemoryStore
from langgraph_handoff.stores.base import ListResult
from langgraph_handoff.stores.memory import content_etag
from langgraph_handoff.stores.stat_memo import StatMemo

HOUR_NS = 3_600_000_000_000


def _ahead() -> int:
    """A clock an hour ahead: every file the test made counts as settled (kept by the memo)."""
    return time.time_ns() + HOUR_NS


class _CountedNames(tuple):  # type: ignore[type-arg]
    """A directory's names that count every name a walk looks at, by index or by iteration."""

    examined = 0

    def __getitem__(self, index: Any) -> Any:
        _CountedNames.examined += 1
        return super().__getitem__(index)

    def __iter__(self) -> Any:
        for name in super().__iter__():
            _CountedNames.examined += 1
            yield name


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Directory reads, by path; every directory's names counted as they are examined."""
    reads: list[str] = []
    real = LocalStore._entries

    def entries(self: LocalStore, root: Any, path: str) -> Any:
        reads.append(path)
        found = real(self, root, path)
        return None if found is None else (found[0], _CountedNames(found[1]))

    monkeypatch.setattr(LocalStore, "_entries", entries)
    _CountedNames.examined = 0
    return reads


def _pages(store: Any, prefix: str, max_keys: int, start_after: str | None = None) -> list[ListResult]:
    pages = []
    while True:
        page = store.list_page(prefix, start_after=start_after, max_keys=max_keys)
        pages.append(page)
        if not page.truncated:
            return pages
        start_after = page.items[-1].key


def test_paging_through_n_heads_examines_each_name_about_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """3,000 threads in pages of 100: each name is examined a bounded number of times (about
    once, plus a bisection's worth per page), and the directory of every thread is read once
    (the memo keeps them). Before: about 46,000 names, each page re-walking those before it."""
    n, size = 3000, 100
    store = LocalStore(tmp_path, fsync=False)
    store._memo = StatMemo(clock=_ahead)
    for i in range(n):
        store.put(f"heads/t{i:05d}/=", b"h")
    reads = _counting(monkeypatch)
    pages = _pages(store, "heads/", size)
    assert [o.key for p in pages for o in p.items] == [f"heads/t{i:05d}/=" for i in range(n)]
    assert len(pages) == n // size
    # the heads directory's names, plus each thread directory's one name (examined as its page
    # ends and again as the next begins), plus about log2(n) per page for the bisection
    assert _CountedNames.examined <= 2 * n + len(pages) * 20, _CountedNames.examined
    assert sorted(reads) == sorted({*reads}), "a directory was read twice"
    assert len(reads) == n + 1  # heads/ and each thread's directory, once each

    reads.clear()
    _CountedNames.examined = 0
    again = _pages(store, "heads/", size)
    assert [p.items for p in again] == [p.items for p in pages]
    assert reads == [] and _CountedNames.examined <= 2 * n + len(pages) * 20  # warm: no directory read


def test_a_page_that_starts_in_the_middle_examines_only_what_it_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page of 10 keys after the 1,500th of 2,000 flat keys, and a page under a prefix that
    matches 10 of them, each look at a few dozen names, not the 1,500 before."""
    store = LocalStore(tmp_path, fsync=False)
    store._memo = StatMemo(clock=_ahead)
    for i in range(2000):
        store.put(f"p/k{i:04d}", b"x")
    _counting(monkeypatch)
    page = store.list_page("p/", start_after="p/k1499", max_keys=10)
    assert [o.key for o in page.items] == [f"p/k{i:04d}" for i in range(1500, 1510)] and page.truncated
    assert _CountedNames.examined <= 40, _CountedNames.examined
    _CountedNames.examined = 0
    page = store.list_page("p/k173", max_keys=100)
    assert [o.key for o in page.items] == [f"p/k{i:04d}" for i in range(1730, 1740)] and not page.truncated
    assert _CountedNames.examined <= 40, _CountedNames.examined


_NAMES = ["a", "a-", "a.", "a0", "a~", "b", "=", "~1", "z", "ab", "a-b"]


def _tree(rnd: random.Random, count: int) -> set[str]:
    keys: set[str] = set()
    while len(keys) < count:
        parts = [rnd.choice(_NAMES) + rnd.choice(["", "x", "-y", "0"]) for _ in range(rnd.randint(1, 4))]
        key = "/".join(parts)
        # a file system cannot hold both a/b and a/b/c: keep the key set a valid tree
        if any(k.startswith(key + "/") or key.startswith(k + "/") for k in keys):
            continue
        keys.add(key)
    return keys


@pytest.mark.parametrize("seed", range(8))
def test_pages_resumed_anywhere_are_the_memory_stores(tmp_path: Path, seed: int) -> None:
    """Every page sequence, from every kind of ``start_after`` (a key, a directory's name with
    and without its ``/``, a key cut short, one past a key, one sorting before or after
    everything, a name that is not a key), under every kind of prefix, in pages of 1, 2, 5 and
    1,000: the keys, ETags, sizes and truncation flags of the in-memory store, page by page."""
    rnd = random.Random(seed)
    keys = _tree(rnd, 50)
    local, memory = LocalStore(tmp_path / "s", fsync=False), MemoryStore()
    local._memo = StatMemo(clock=_ahead) if seed % 2 else local._memo  # with and without the memo
    for k in sorted(keys):
        local.put(k, k.encode())
        memory.put(k, k.encode())
    # a file whose name is not a key (listed as it is: see test_stores), put into the memory
    # store's sorted keys by hand since it refuses to write such a key
    (tmp_path / "s" / "README.TXT").write_bytes(b"not a key")
    memory._objects["README.TXT"] = (b"not a key", content_etag(b"not a key"))
    memory._keys = sorted([*memory._keys, "README.TXT"])
    starts: set[str | None] = {None, "", "0", "~~", "README.TXT", "README"}
    for k in keys:
        parts = k.split("/")
        for j in range(1, len(parts)):
            starts.update({"/".join(parts[:j]), "/".join(parts[:j]) + "/"})
        starts.update({k, k[:-1], k + "0", k + "/", k[: len(k) // 2]})
    starts.discard("")
    prefixes = {"", "a", "a/", "a-", "b/", "z", "a/a"} | {k[: rnd.randint(0, len(k))] for k in keys}
    prefixes = {p for p in prefixes if not p.startswith("/") and "//" not in p}
    for prefix in sorted(prefixes):
        for start in sorted(starts, key=str):
            size = rnd.choice([1, 2, 5, 1000])
            got, want = _pages(local, prefix, size, start), _pages(memory, prefix, size, start)
            assert [[(o.key, o.etag, o.size) for o in p.items] for p in got] == [
                [(o.key, o.etag, o.size) for o in p.items] for p in want
            ], (prefix, start, size)
            assert [p.truncated for p in got] == [p.truncated for p in want], (prefix, start, size)


def test_a_time_past_64_bits_is_kept_and_told_apart() -> None:
    """The memo packs a stat's signature into 40 bytes (a third of what a file's entry took);
    a time set past what 64 bits hold, or before 1970, must neither fail a listing nor match
    another time."""
    from langgraph_handoff.stores.stat_memo import _signature

    def st(mtime_ns: int, ctime_ns: int) -> os.stat_result:
        return os.stat_result((0o100600, 7, 3, 1, 0, 0, 5, 0, 0, 0, 0.0, 0.0, 0.0, 0, mtime_ns, ctime_ns))

    signatures = {_signature(st(m, c)) for m in (2**70 + 3, 2**70 + 4, -5, 0) for c in (1, 2**64 - 1)}
    assert len(signatures) == 8
    memo = StatMemo(clock=lambda: 2**71)
    assert memo.get("/nowhere", lambda path: (st(-5, 2**70), "value")) == "value" and "/nowhere" in memo


def test_the_memo_holds_every_head_of_100000_threads_at_about_half_a_kib_each(tmp_path: Path) -> None:
    """A walk of every thread keeps two entries per thread (its directory under ``heads/`` and
    its head). The memo held 32,768 entries, about 16,000 threads' walk, so a larger store was
    reread and rehashed on every walk; it now holds 2**18 entries, and an entry costs what the
    docs say (about 500 bytes; about 780 before, with a tuple signature and a dict per entry)."""
    from langgraph_handoff.stores.stat_memo import MAX_ENTRIES

    assert MAX_ENTRIES >= 2 * 100_000
    n = 2000
    # measured in a process of its own: tracemalloc counts every thread's allocations, and under
    # xdist other tests leave threads running (heartbeats, I/O pools) that would be counted too
    code = f"""
import tracemalloc, pathlib, sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from langgraph_handoff.stores import LocalStore
from langgraph_handoff.stores.stat_memo import StatMemo
from tests.stores.test_local_walks import _ahead
store = LocalStore(pathlib.Path({str(tmp_path)!r}), fsync=False)
for i in range({n}):
    store.put(f"heads/thread-{{i:07d}}/=", b"h" * 300)
store._memo = StatMemo(clock=_ahead)
tracemalloc.start()
before = tracemalloc.get_traced_memory()[0]
listed = list(store.list("heads/"))
held = tracemalloc.get_traced_memory()[0] - before
tracemalloc.stop()
del listed  # the listing's own objects are the memo's: nothing counted twice
print(len(store._memo), held)
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    entries, held = (int(x) for x in run.stdout.split())
    assert entries == 2 * n + 1
    assert held / entries < 560, held / entries


def test_stat_memo_takes_how_many_entries_to_keep(tmp_path: Path) -> None:
    """A store larger than the default memo can be given one that holds its whole walk."""
    from langgraph_handoff.errors import InvalidConfigError
    from langgraph_handoff.stores.stat_memo import MAX_ENTRIES

    assert LocalStore(tmp_path, stat_memo=True)._memo._max == MAX_ENTRIES
    assert LocalStore(tmp_path, stat_memo=False)._memo._max == 0
    assert LocalStore(tmp_path, stat_memo=1_000_000)._memo._max == 1_000_000
    store = LocalStore(tmp_path, stat_memo=3)
    store._memo._clock = _ahead
    for i in range(4):
        store.put(f"k{i}", b"x")
    assert len(list(store.list(""))) == 4 and len(store._memo) <= 3
    for bad in (-1, 2.5, "many"):
        with pytest.raises(InvalidConfigError, match="stat_memo"):
            LocalStore(tmp_path, stat_memo=bad)  # type: ignore[arg-type]


def test_an_unindexed_filtered_walk_keeps_two_memo_entries_a_thread(tmp_path: Path) -> None:
    """The memo is shaped by what a walk lists: a filtered ``list(None, ...)`` on a key the index
    does not cover reads the heads and lists no writes of a thread that does not match, so it
    keeps a thread's head directory and head (a walk of 130,000 threads fits the default memo),
    not the 9 entries a thread with writes took when every thread's writes were listed."""
    from langgraph_handoff import ObjectStoreSaver
    from tests.support.saver_helpers import put

    store = LocalStore(tmp_path / "store", fsync=False)
    saver = ObjectStoreSaver(store)
    for i in range(40):
        first = put(saver, f"t{i:03}", None, 1, tag=f"x{i % 4}")
        config: Any = {"configurable": {"thread_id": f"t{i:03}", "checkpoint_ns": "", "checkpoint_id": first}}
        saver.put_writes(config, [("ch", 1)], task_id="task")
        put(saver, f"t{i:03}", first, 2, tag=f"x{i % 4}")
    store._memo = StatMemo(clock=_ahead)
    found = list(ObjectStoreSaver(store).list(None, filter={"tag": "nobody"}))
    assert found == [] and len(store._memo) <= 2 * 40 + 4
    store._memo = StatMemo(clock=_ahead)
    list(ObjectStoreSaver(store).list(None))  # the unfiltered walk needs every thread's writes
    assert len(store._memo) > 4 * 40
