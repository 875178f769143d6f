"""LocalStore listings from a stat memo: unchanged paths are not read again, changed ones always are.

The memo keeps a result only for a path whose stat is at least ``SETTLED_NS`` old. Files made by a
test are seconds old at most, so most tests give the memo a clock an hour ahead ("everything is
settled"). Such a clock takes away the memo's guard against a change within one tick of the file
system's clock, so before each change those tests wait until the file system's clock has moved
past the stat the memo kept (:func:`_past_tick`): a condition they check, not a sleep.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from langgraph_handoff.stores import LocalStore, MemoryStore
from langgraph_handoff.stores.stat_memo import COARSE_SETTLED_NS, SETTLED_NS, StatMemo

HOUR_NS = 3_600_000_000_000


def _ahead() -> int:
    return time.time_ns() + HOUR_NS


def _settled_store(root: Path) -> LocalStore:
    store = LocalStore(root)
    store._memo = StatMemo(clock=_ahead)
    return store


def _past_tick(*paths: Path) -> None:
    """Return once the wall clock is past every path's change time by more than a clock tick, so
    a change made now gets a later change time than the stat a memo kept."""
    newest = max(max(os.stat(p).st_ctime_ns, os.stat(p).st_mtime_ns) for p in paths)
    deadline = time.monotonic() + 10
    while time.time_ns() <= newest + 50_000_000:  # 50 ms: five ticks at HZ=100
        assert time.monotonic() < deadline, "the wall clock did not move"


def _counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    real = LocalStore._read_stat

    def read(self: LocalStore, root: Any, key: str) -> Any:
        reads.append(key)
        return real(self, root, key)

    monkeypatch.setattr(LocalStore, "_read_stat", read)
    return reads


def _read(path: str) -> tuple[os.stat_result, bytes]:
    with open(path, "rb") as fh:
        return os.fstat(fh.fileno()), fh.read()


def _listed(store: LocalStore, prefix: str = "") -> list[tuple[str, str, int]]:
    return [(o.key, o.etag, o.size) for o in store.list(prefix)]


def test_a_second_listing_of_unchanged_files_reads_none_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long thread listed its writes on every turn: 1,900 files opened, read and hashed."""
    store = _settled_store(tmp_path)
    for i in range(20):
        store.put(f"w/{i:02d}/doc", f"body {i}".encode())
    reads = _counting_reads(monkeypatch)
    first = _listed(store, "w/")
    assert len(reads) == 20
    assert _listed(store, "w/") == first
    assert len(reads) == 20  # nothing read again
    assert first == _listed(LocalStore(tmp_path, stat_memo=False), "w/")


def test_a_fresh_file_is_never_kept_so_a_change_in_the_same_tick_is_seen(tmp_path: Path) -> None:
    """The real clock: a file changed in place with the same size and its old mtime put back (so
    only its change time, perhaps within the same tick, tells) lists with its new ETag."""
    store = LocalStore(tmp_path)
    store.put("k", b"aaaa")
    path = tmp_path / "k"
    mtime = os.stat(path).st_mtime_ns
    before = _listed(store)
    path.write_bytes(b"bbbb")
    os.utime(path, ns=(mtime, mtime))
    after = _listed(store)
    assert after != before and after == _listed(LocalStore(tmp_path, stat_memo=False))
    assert str(path) not in store._memo  # type: ignore[operator]


def test_a_rewrite_in_place_that_only_the_change_time_tells_is_listed(tmp_path: Path) -> None:
    """Same size, same inode, the old mtime put back: only ctime differs."""
    store = _settled_store(tmp_path)
    store.put("k", b"aaaa")
    path = tmp_path / "k"
    mtime = os.stat(path).st_mtime_ns
    before = _listed(store)
    _past_tick(path)
    path.write_bytes(b"bbbb")
    os.utime(path, ns=(mtime, mtime))
    after = _listed(store)
    assert after != before and after == _listed(LocalStore(tmp_path, stat_memo=False))


def test_an_old_mtime_with_a_fresh_change_time_is_not_settled(tmp_path: Path) -> None:
    """``touch -d`` sets mtime, never ctime: the change time decides."""
    path = tmp_path / "k"
    path.write_bytes(b"x")
    old = time.time_ns() - HOUR_NS
    os.utime(path, ns=(old, old))
    memo = StatMemo()
    memo.get(str(path), _read)
    assert str(path) not in memo


def test_the_clock_is_read_before_what_is_kept_is_read(tmp_path: Path) -> None:
    """Read after, a clock could call settled a stat taken just before a change."""
    path = tmp_path / "k"
    path.write_bytes(b"x")
    log: list[str] = []

    def clock() -> int:
        log.append("clock")
        return _ahead()

    def compute(p: str) -> Any:
        log.append("read")
        return _read(p)

    StatMemo(clock=clock).get(str(path), compute)
    assert log == ["clock", "read"]


def test_a_file_rewritten_in_place_lists_its_new_etag(tmp_path: Path) -> None:
    store = _settled_store(tmp_path)
    store.put("k", b"aaaa")
    path = tmp_path / "k"
    before = _listed(store)
    _past_tick(path)
    path.write_bytes(b"bbbb")  # same size, same inode
    after = _listed(store)
    assert after != before and after == _listed(LocalStore(tmp_path, stat_memo=False))


@pytest.mark.parametrize("change", ["put", "replace", "delete", "add"])
def test_every_change_through_the_store_is_listed(tmp_path: Path, change: str) -> None:
    """The changes a saver makes: a rewrite (a rename over the file), a new key in a listed
    directory, a new directory, a delete (which may prune its directory)."""
    store = _settled_store(tmp_path)
    for i in range(3):
        store.put(f"w/{i}/doc", b"same size")
    _listed(store, "w/")
    _past_tick(tmp_path / "w", tmp_path / "w" / "1", tmp_path / "w" / "1" / "doc")
    if change == "put":
        store.put("w/1/doc", b"new  body")
    elif change == "replace":
        store.put("w/1/doc", b"same size")  # same body: only the inode differs
    elif change == "delete":
        store.delete("w/1/doc")
    else:
        store.put("w/1/more", b"x")
        store.put("w/9/doc", b"y")
    assert _listed(store, "w/") == _listed(LocalStore(tmp_path, stat_memo=False), "w/")


@pytest.mark.parametrize("seed", range(8))
def test_memo_pages_are_the_memory_stores_whatever_the_tree(tmp_path: Path, seed: int) -> None:
    """Pages served from the memo (each query listed twice) equal the in-memory store's."""
    rnd = random.Random(seed)
    local, memory = _settled_store(tmp_path / "s"), MemoryStore()
    keys = {
        "/".join(rnd.choice(["a", "b", "a-", "a0", "="]) for _ in range(rnd.randint(2, 3))) + "/d" for _ in range(40)
    }
    for k in sorted(keys):
        local.put(k, k.encode())
        memory.put(k, k.encode())
    for _ in range(40):
        prefix = rnd.choice(["", "a", "a/", "a-", "b/", rnd.choice(sorted(keys))[: rnd.randint(0, 5)]])
        start = rnd.choice([None, rnd.choice(sorted(keys))])
        size = rnd.choice([1, 2, 5, 1000])
        want = memory.list_page(prefix, start_after=start, max_keys=size)
        for _ in range(2):
            got = local.list_page(prefix, start_after=start, max_keys=size)
            assert [(o.key, o.etag, o.size) for o in got.items] == [(o.key, o.etag, o.size) for o in want.items]
            assert got.truncated == want.truncated
    assert len(local._memo) > len(keys)  # type: ignore[arg-type]  # files and directories


@pytest.mark.parametrize("cap", [4, 16])
def test_the_memo_is_bounded_and_drops_its_least_recently_used_entries(tmp_path: Path, cap: int) -> None:
    memo = StatMemo(clock=_ahead, max_entries=cap)
    paths = []
    for i in range(40):
        p = tmp_path / f"f{i}"
        p.write_bytes(b"x")
        paths.append(str(p))
    calls: list[str] = []

    def compute(p: str) -> Any:
        calls.append(p)
        return _read(p)

    memo.get(paths[0], compute)
    for p in paths[1:]:
        memo.get(p, compute)
        memo.get(paths[0], compute)  # used again and again: kept
        assert len(memo) <= cap
    assert len(calls) == 40
    memo.get(paths[-1], compute)  # the newest is kept
    assert len(calls) == 40
    memo.get(paths[1], compute)  # an old one, never used since, was dropped
    assert len(calls) == 41


def test_what_is_kept_is_the_stat_of_what_was_read(tmp_path: Path) -> None:
    """A path re-pointed between a stat and a read (a directory renamed away and back) must not
    pair one file's stat with another's content: the stat kept is the read descriptor's."""
    path = tmp_path / "k"
    path.write_bytes(b"old!")
    memo = StatMemo(clock=_ahead)
    _past_tick(path)
    calls: list[str] = []

    def rewrite_then_read(p: str) -> Any:
        calls.append(p)
        tmp = tmp_path / ".tmp"
        tmp.write_bytes(b"new!")
        os.replace(tmp, p)  # a writer between this memo's stat and its read
        return _read(p)

    assert memo.get(str(path), rewrite_then_read) == b"new!"
    assert memo.get(str(path), lambda p: (calls.append(p), _read(p))[1]) == b"new!"
    assert len(calls) == 1  # kept under the new file's stat, and that file is unchanged


def test_settled_means_older_than_the_window_by_the_given_clock(tmp_path: Path) -> None:
    path = tmp_path / "k"
    path.write_bytes(b"x")
    assert _kept_at(path, _read, SETTLED_NS - 1, SETTLED_NS) == [0, 1]


def _kept_at(path: Path, compute: Any, *ages: int) -> list[int]:
    """The entries a memo keeps after a ``get`` of ``path`` at each clock reading of its newest
    time plus ``age``, in order."""
    st = os.stat(path)
    newest = max(st.st_mtime_ns, st.st_ctime_ns)
    now = [newest]
    memo = StatMemo(clock=lambda: now[0])
    kept = []
    for age in ages:
        now[0] = newest + age
        memo.get(str(path), compute)
        kept.append(len(memo))
    return kept


def test_a_coarsely_stored_time_waits_the_long_window(tmp_path: Path) -> None:
    """A file system that stores whole seconds (or FAT's 2 s, exFAT's 10 ms) may stamp a change
    up to that far behind the clock, so the short window is only for times finer than 10 ms."""
    path = tmp_path / "k"
    path.write_bytes(b"x")
    st = os.stat(path)
    whole = (st.st_ctime_ns // 1_000_000_000) * 1_000_000_000  # a whole second, before ctime
    os.utime(path, ns=(whole, whole))  # mtime coarse; ctime is set to now by the kernel
    assert os.stat(path).st_mtime_ns % 10_000_000 == 0
    # settled for fine times at the first reading, not for this one until the last
    assert _kept_at(path, _read, SETTLED_NS, COARSE_SETTLED_NS - 1, COARSE_SETTLED_NS) == [0, 0, 1]


def test_a_directory_waits_the_long_window(tmp_path: Path) -> None:
    """An entry added to a directory changes neither its inode nor, mostly, its size: its
    names keep the long margin however fine its times are."""
    directory = tmp_path / "d"
    directory.mkdir()
    (directory / "a").write_bytes(b"x")

    def names(path: str) -> tuple[os.stat_result, tuple[str, ...]]:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            return os.fstat(fd), tuple(sorted(os.listdir(fd)))
        finally:
            os.close(fd)

    assert StatMemo(clock=_ahead).get(str(directory), names) == ("a",)
    assert _kept_at(directory, names, SETTLED_NS, COARSE_SETTLED_NS - 1, COARSE_SETTLED_NS) == [0, 0, 1]


def test_a_vanished_path_is_not_kept(tmp_path: Path) -> None:
    memo = StatMemo(clock=_ahead)
    assert memo.get(str(tmp_path / "gone"), lambda p: None) is None
    assert len(memo) == 0
    (tmp_path / "k").write_bytes(b"x")
    memo.get(str(tmp_path / "k"), _read)
    assert str(tmp_path / "k") in memo
    _past_tick(tmp_path / "k")  # a new file may reuse the inode: its times must differ
    (tmp_path / "k").unlink()
    assert memo.get(str(tmp_path / "k"), _read) is None  # LocalStore leaves such a key out of its page
    assert str(tmp_path / "k") not in memo
    (tmp_path / "k").write_bytes(b"y")
    assert memo.get(str(tmp_path / "k"), _read) == b"y"


def test_a_kept_path_whose_directory_became_a_file_is_gone(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_bytes(b"x")
    memo = StatMemo(clock=_ahead)
    assert memo.get(str(tmp_path / "d" / "f"), _read) == b"x"
    (tmp_path / "d" / "f").unlink()
    (tmp_path / "d").rmdir()
    (tmp_path / "d").write_bytes(b"now a file")
    assert memo.get(str(tmp_path / "d" / "f"), _read) is None  # NotADirectoryError
    assert len(memo) == 0


def test_compute_finding_the_path_gone_answers_none(tmp_path: Path) -> None:
    def vanishing(path: str) -> tuple[os.stat_result, bytes]:
        raise FileNotFoundError(path)

    memo = StatMemo(clock=_ahead)
    assert memo.get(str(tmp_path / "k"), vanishing) is None
    assert len(memo) == 0


def test_memo_off_takes_no_stat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(3):
        (tmp_path / "w" / f"c{i}").mkdir(parents=True)
        (tmp_path / "w" / f"c{i}" / "t").write_bytes(b"x" * i)
    stats: list[str] = []

    def counting(real: Any) -> Any:
        def call(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
            stats.append(str(path))
            return real(path, *args, **kwargs)  # type: ignore[no-any-return]

        return call

    # before the listings: a walk binds them; the memo checks a path with lstat (a link put in a
    # file's place is never taken for the file), other paths of the store may stat
    monkeypatch.setattr(os, "stat", counting(os.stat))
    monkeypatch.setattr(os, "lstat", counting(os.lstat))
    off, on = LocalStore(tmp_path, stat_memo=False), _settled_store(tmp_path)
    for _ in range(2):
        assert _listed(off, "w/") == _listed(on, "w/")
    assert any(s.startswith(str(tmp_path / "w")) for s in stats)  # the memo's second listing
    stats.clear()
    assert len(_listed(off, "w/")) == 3 and stats == [] and len(off._memo) == 0


def test_a_touch_of_an_entry_dropped_meanwhile_is_a_no_op(tmp_path: Path) -> None:
    """Another thread may drop an entry between a hit and its move to the newest end."""
    memo = StatMemo(clock=_ahead, max_entries=2)
    for name in ("a", "b"):
        (tmp_path / name).write_bytes(b"x")
        memo.get(str(tmp_path / name), _read)
    entry = memo._kept[str(tmp_path / "a")]
    memo._kept.pop(str(tmp_path / "a"))
    memo._touch(str(tmp_path / "a"), entry)
    assert str(tmp_path / "a") not in memo and len(memo) == 1


def test_listings_race_writes_on_a_small_memo(tmp_path: Path) -> None:
    """Listing threads and a writer share one store whose memo evicts and moves entries on
    almost every lookup (``_touch``, ``_keep`` and the drop of a changed entry). Nothing may
    raise and every listing comes back ordered. (What a listing holds is pinned elsewhere: this
    memo's clock is an hour ahead, so it may keep a directory changed twice in one clock tick.)"""
    store = _settled_store(tmp_path)
    store._memo = StatMemo(clock=_ahead, max_entries=6)
    for i in range(20):
        store.put(f"w/c{i:02d}/t", b"x" * i)
    start = threading.Barrier(4)
    errors: list[BaseException] = []

    def lister() -> None:
        start.wait()
        try:
            for _ in range(150):
                keys = [o.key for o in store.list("w/")]
                assert keys == sorted(set(keys))
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    def writer() -> None:
        start.wait()
        try:
            for i in range(20, 120):
                store.put(f"w/c{i:03d}/t", b"y")
                store.delete(f"w/c{i - 20:02d}/t" if i < 40 else f"w/c{i - 20:03d}/t")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # interleave the threads finely
    try:
        threads = [threading.Thread(target=lister) for _ in range(3)] + [threading.Thread(target=writer)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(switch)
    assert errors == []
    want = [f"w/c{i:03d}/t" for i in range(100, 120)]
    assert [k for k, _, _ in _listed(LocalStore(tmp_path, stat_memo=False), "w/")] == want
