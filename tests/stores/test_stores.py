"""MemoryStore and LocalStore against the store contract, plus LocalStore's cross-process CAS."""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from langgraph_handoff.errors import PreconditionFailedError
from langgraph_handoff.stores import CountingStore, LocalStore, MemoryStore, StoreBase
from tests.support.processes import process_context
from tests.support.store_contract import StoreContract


class TestOfflineStores(StoreContract):
    @pytest.fixture
    def contract_store(self, store: StoreBase) -> StoreBase:
        return store


class TestCountingStore(StoreContract):
    @pytest.fixture
    def contract_store(self) -> StoreBase:
        return CountingStore(MemoryStore())

    def test_counts_requests_and_round_trips(self) -> None:
        from langgraph_handoff.stores.base import Get, Put

        store = CountingStore(MemoryStore())
        store.run_many([Put("a", b"1"), Put("b", b"2")])
        store.run(Get("a"))
        snap = store.snapshot()
        assert snap == {"PUT": 2, "GET": 1, "requests": 3, "round_trips": 2}


def _cas_increment(root: str, n: int, barrier) -> int:  # type: ignore[no-untyped-def]
    """Increment a counter object n times by compare-and-swap; returns the number of lost races."""
    store = LocalStore(root)
    barrier.wait()
    lost = 0
    done = 0
    while done < n:
        obj = store.get("counter")
        assert obj is not None
        try:
            store.put("counter", str(int(obj.body) + 1).encode(), if_match=obj.etag)
            done += 1
        except PreconditionFailedError:
            lost += 1
    return lost


def test_local_store_cas_holds_across_processes(tmp_path: Path) -> None:
    """Four OS processes increment one counter by CAS: no increment may be lost."""
    root = str(tmp_path / "store")
    LocalStore(root).put("counter", b"0")
    ctx = process_context()
    procs, per = 4, 60
    with ctx.Manager() as manager:
        barrier = manager.Barrier(procs)
        with ctx.Pool(procs) as pool:
            lost = pool.starmap(_cas_increment, [(root, per, barrier)] * procs)
    assert int(LocalStore(root).get("counter").body) == procs * per
    assert sum(lost) > 0, "the processes never contended; the test proved nothing"


@pytest.mark.parametrize("kind", ["memory", "local"])
def test_cas_holds_across_threads(kind: str, tmp_path: Path) -> None:
    store: StoreBase = MemoryStore() if kind == "memory" else LocalStore(tmp_path)
    store.put("counter", b"0")
    barrier = threading.Barrier(6)
    lost = [0]

    def worker() -> None:
        barrier.wait()
        for _ in range(40):
            while True:
                obj = store.get("counter")
                try:
                    store.put("counter", str(int(obj.body) + 1).encode(), if_match=obj.etag)
                    break
                except PreconditionFailedError:
                    lost[0] += 1

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert int(store.get("counter").body) == 240


def test_local_store_write_is_atomic_and_leaves_no_temp_files(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.put("x/y", b"a" * 10_000)
    store.put("x/y", b"b" * 10)
    assert store.get("x/y").body == b"b" * 10
    leftovers = [n for n in os.listdir(tmp_path / "x") if n.startswith(".tmp")]
    assert leftovers == []


def test_local_store_delete_prunes_empty_directories(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.put("a/b/c/d", b"x")
    store.delete("a/b/c/d")
    assert not (tmp_path / "a").exists()
    assert (tmp_path / ".locks").exists()


def test_local_store_put_survives_concurrent_directory_pruning(tmp_path: Path) -> None:
    """Four threads each put then delete keys under shared parents: every delete prunes the
    now-empty parents that another thread may be creating right then. LocalStore.put raised a raw
    FileNotFoundError when a concurrent delete pruned its directory.

    Found by an adversarial review of the saver; fails before commit ea58b81."""
    store = LocalStore(tmp_path, fsync=False)
    errors: list[BaseException] = []

    def worker(name: str) -> None:
        try:
            for i in range(500):
                key = f"data/t/n/w/{name}{i % 7}/deep/k"
                store.put(key, b"x")
                store.delete(key)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in "abcd"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert list(store.list("")) == []


def _stripe(key: str) -> int:
    """The lock stripe LocalStore takes for ``key`` (LocalStore._locked)."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=2).digest(), "big") % 256


def test_local_store_put_never_loses_its_directory_to_a_prune(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race behind the rare failures of the test above, forced on every attempt: a put has
    made its key's directories and is about to create its temporary file there when another
    thread deletes the last other key in that directory, and the delete prunes the directories,
    empty until the put's file lands. The put retried (5 times; ``_makedirs`` 20) and raised
    StoreError "could not create the directory" when the prunes kept coming. Now, after two
    lock-free tries, the put makes them under a lock no prune runs under
    (``LocalStore._making_dirs``), and that try cannot lose its directory.

    The other thread runs at the exact moment: the put's ``os.open`` of its temporary file waits
    until that thread's delete has pruned (every try before the fix, the two lock-free tries
    after it) or is blocked on a lock (the locked try)."""
    store = LocalStore(tmp_path, fsync=False)
    key, other = "a/b/c/mine", "a/b/c/other"
    assert _stripe(key) != _stripe(other)  # the other thread must not wait for this put's stripe
    writer = threading.get_ident()
    real_open, real_flock = os.open, fcntl.flock
    rounds: list[threading.Event] = []
    errors: list[BaseException] = []
    threads: list[threading.Thread] = []

    def put_and_delete_the_other_key(pruned_or_blocked: threading.Event) -> None:
        try:
            store.put(other, b"x")
            store.delete(other)  # prunes a/b/c, a/b and a if they are empty
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)
        finally:
            pruned_or_blocked.set()

    def flock(fd: int, operation: int) -> None:
        if threading.get_ident() != writer and not operation & fcntl.LOCK_NB and operation != fcntl.LOCK_UN:
            try:
                return real_flock(fd, operation | fcntl.LOCK_NB)
            except BlockingIOError:
                rounds[-1].set()  # the other thread is about to wait for a lock the put holds
        return real_flock(fd, operation)

    def hooked_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if threading.get_ident() == writer and os.path.basename(path).startswith(".tmp.") and len(rounds) < 8:
            rounds.append(threading.Event())
            thread = threading.Thread(target=put_and_delete_the_other_key, args=(rounds[-1],))
            threads.append(thread)
            thread.start()
            assert rounds[-1].wait(30), "the other thread neither pruned nor waited for a lock"
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", hooked_open)
    monkeypatch.setattr(fcntl, "flock", flock)
    store.put(key, b"mine")
    for thread in threads:
        thread.join(30)
    monkeypatch.undo()
    assert errors == []
    assert len(rounds) >= 2, rounds  # the race happened: a lock-free try lost its directory, the locked one won
    assert store.get(key).body == b"mine" and store.get(other) is None
    assert [o.key for o in store.list("")] == [key]
    store.delete(key)
    assert not (tmp_path / "a").exists()  # pruning still happens when nobody writes there


def test_local_store_survives_another_process_reading_its_files(tmp_path: Path) -> None:
    """Data written by one LocalStore instance is visible to a fresh instance (a new process)."""
    LocalStore(tmp_path).put("k", b"persisted")
    assert LocalStore(tmp_path).get("k").body == b"persisted"


def test_local_store_refuses_a_key_that_is_also_a_prefix(tmp_path: Path) -> None:
    from langgraph_handoff.errors import InvalidKeyError

    store = LocalStore(tmp_path)
    store.put("p/a", b"file")
    with pytest.raises(InvalidKeyError, match="prefix of another key"):
        store.put("p/a/b", b"x")
    store.put("q/a/b", b"x")
    with pytest.raises(InvalidKeyError):
        store.put("q/a", b"file")
    assert store.get("p/a").body == b"file" and store.get("q/a/b").body == b"x"
    assert [o.key for o in store.list("")] == ["p/a", "q/a/b"]


def test_local_store_lists_a_file_whose_name_is_not_a_key(tmp_path: Path) -> None:
    """Found by a new user: a README.txt copied into heads/ made every listing raise
    InvalidKeyError, which read as if they had typed a bad key. A listing reports what exists
    (the walks then report the key and skip it); reading or writing it by key is still refused."""
    from langgraph_handoff.errors import InvalidKeyError
    from langgraph_handoff.stores.base import validate_start_after

    store = LocalStore(tmp_path)
    store.put("heads/t/=", b"head")
    (tmp_path / "heads" / "README.txt").write_text("notes\n")
    assert [(i.key, i.size) for i in store.list("heads/")] == [("heads/README.txt", 6), ("heads/t/=", 4)]
    page = store.list_page("heads/", start_after="heads/README.txt")
    assert [i.key for i in page.items] == ["heads/t/="]
    with pytest.raises(InvalidKeyError):
        store.get("heads/README.txt")
    assert validate_start_after("heads/README.txt") == "heads/README.txt"  # what the S3 stores take
    for bad in ("", "a\x00b", "x" * 1025):
        with pytest.raises(InvalidKeyError):
            validate_start_after(bad)


@pytest.mark.parametrize("seed", range(30))
def test_local_listing_pages_are_the_memory_stores_whatever_the_tree(tmp_path: Path, seed: int) -> None:
    """LocalStore lists by walking directories in key order and stops one key past the page
    (a long thread's writes prefix has a directory per checkpoint: the whole tree was walked,
    sorted and read on every LIST). Any keys, prefix, start_after and page size: the pages are
    exactly the in-memory store's."""
    import random

    rnd = random.Random(seed)
    alphabet = ["a", "b", "a-", "a.", "a0", "=", "~1", "z"]
    keys: set[str] = set()
    while len(keys) < 40:
        parts = [rnd.choice(alphabet) + rnd.choice(["", "x", "-y"]) for _ in range(rnd.randint(1, 4))]
        key = "/".join(parts)
        # a file system cannot hold both a/b and a/b/c: keep the key set a valid tree
        if any(k.startswith(key + "/") or key.startswith(k + "/") for k in keys):
            continue
        keys.add(key)
    local, memory = LocalStore(tmp_path / "s"), MemoryStore()
    for k in sorted(keys):
        local.put(k, k.encode())
        memory.put(k, k.encode())
    probes = [*sorted(keys), "", "a", "a/", "a-", "b", "zz", "~"]
    for _ in range(60):
        prefix = rnd.choice(["", "a", "a/", "a-", "b/", "z", rnd.choice(sorted(keys))[: rnd.randint(0, 6)]])
        if prefix.startswith("/") or "//" in prefix:
            continue
        start = rnd.choice([None, rnd.choice(probes)])
        size = rnd.choice([1, 2, 3, 7, 1000])
        got = local.list_page(prefix, start_after=start, max_keys=size)
        want = memory.list_page(prefix, start_after=start, max_keys=size)
        assert [(o.key, o.etag, o.size) for o in got.items] == [(o.key, o.etag, o.size) for o in want.items], (
            prefix,
            start,
            size,
        )
        assert got.truncated == want.truncated, (prefix, start, size)


def test_a_local_page_whose_keys_vanish_is_filled_from_the_keys_after_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page whose every key was deleted between the walk and the read came back empty but
    truncated, and callers that stop at an empty page never listed the keys after it."""
    store = LocalStore(tmp_path / "s")
    for i in range(6):
        store.put(f"p/{i}", b"x")
    real = LocalStore._read_stat
    gone = {"p/0", "p/1"}

    def read(self: LocalStore, root: Any, key: str) -> Any:
        return None if key in gone else real(self, root, key)

    monkeypatch.setattr(LocalStore, "_read_stat", read)
    page = store.list_page("p/", max_keys=2)
    assert [o.key for o in page.items] == ["p/2", "p/3"] and page.truncated
    assert [o.key for o in store.list("p/", page_size=2)] == ["p/2", "p/3", "p/4", "p/5"]
