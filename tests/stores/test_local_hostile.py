"""A ``file://`` store on a machine others share: what another local user, or a sidecar on the
same volume, places in the directory never takes the store outside it, never blocks it, and is
reported as damage to its key.

A security review (issue 44, item 5) found, with links placed in the store's directory:
``delete_thread`` deleted every file of a directory outside the store; ``copy_thread`` copied an
outside file into the store; a FIFO at a head key hung every listing; a link to ``/dev/zero``
took all memory; dangling links under ``.locks/`` made writers create files outside the store;
objects were made ``0644`` and directories ``0755``; and a write that failed partway left its
temporary file forever. Each test below failed on the code before the fix.

Most run twice: with ``openat2`` (one system call, Linux 5.6+) and with the fallback that opens
one directory at a time (older kernels, macOS); both must refuse the same links.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from langgraph_handoff import Layout, ObjectStoreSaver
from langgraph_handoff._format import keys
from langgraph_handoff._format.damage import DamagedObject
from langgraph_handoff.errors import (
    CorruptObjectError,
    InvalidConfigError,
    NotAnObjectError,
    StoreError,
    StoreNotFoundError,
)
from langgraph_handoff.inspection import list_threads, verify_store
from langgraph_handoff.stores import LocalStore, StoreBase, beneath, store_from_url
from langgraph_handoff.stores.local import NOT_A_FILE, TEMPORARY_MAX_AGE
from tests.checkpoint.test_damage import _cp, _store_with, _write
from tests.checkpoint.test_hostile_objects import _bounded_memory, _finishes
from tests.stores.test_stores import _stripe
from tests.support.store_contract import StoreContract

BAD = keys.head_key("bad", "")


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """How paths are resolved beneath the root: ``openat2``, or one directory at a time."""
    if request.param == "walk":
        monkeypatch.setattr(beneath, "_probed", True)
        monkeypatch.setattr(beneath, "_openat2", None)
    else:
        fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            if beneath._usable_openat2(fd) is None:
                pytest.skip("openat2 is not usable here (a kernel before 5.6, or a sandbox refusing it)")
        finally:
            os.close(fd)
    return str(request.param)


@pytest.fixture
def local(resolver: str, tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "store", fsync=False)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory beside the store, which nothing the store does may touch."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "precious").write_bytes(b"not the store's")
    return path


def _path(store: LocalStore, key: str) -> Path:
    return Path(store.root, *key.split("/"))


def _files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def _relink(store: LocalStore, key: str, target: Path | str) -> None:
    """What another user does: the file at ``key`` replaced by a symbolic link to ``target``."""
    path = _path(store, key)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)  # (moved out already)
    path.symlink_to(target)


def _damaged(saver: ObjectStoreSaver) -> list[tuple[str, str]]:
    found: list[DamagedObject] = []
    listed = list(saver.list(None, on_damaged=found.append))
    assert sum(t.config["configurable"]["thread_id"] == "good" for t in listed) == 5  # the walk went on
    return [(d.key, d.reason) for d in found]


# -- a link, a FIFO, a device where an object belongs ----------------------------------------------


@pytest.mark.parametrize("target", ["outside file", "/dev/zero", "dangling", "outside directory"])
def test_a_link_at_a_key_is_refused_unread_and_every_walk_reports_it(
    target: str, local: LocalStore, outside: Path
) -> None:
    """A link to ``/dev/zero`` took all memory; a link to any file was read as the object."""
    saver = _store_with(local)
    pointed = {
        "outside file": outside / "precious",
        "/dev/zero": Path("/dev/zero"),
        "dangling": outside / "nothing",
        "outside directory": outside,
    }[target]
    _relink(local, BAD, pointed)
    with _bounded_memory():
        with pytest.raises(NotAnObjectError) as info:
            local.get(BAD)
        assert info.value.key == BAD and "symbolic link" in str(info.value)
        assert [(i.key, i.etag, i.size) for i in local.list("heads/") if i.key == BAD] == [(BAD, NOT_A_FILE, 0)]
        assert _damaged(saver) == [(BAD, "not_ours")]
        assert [(p.key, p.kind) for p in verify_store(saver).problems] == [(BAD, "CorruptObjectError")]
    assert _files(outside) == {"precious": b"not the store's"}


@contextmanager
def _fifo_at(store: LocalStore, key: str) -> Iterator[None]:
    """The file at ``key`` replaced by a FIFO; on the way out, a reader left blocked in opening
    it (the code before the fix) gets its writer, and ends."""
    fifo = _path(store, key)
    fifo.unlink()
    os.mkfifo(fifo)
    try:
        yield
    finally:
        with suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def test_a_fifo_at_a_key_never_blocks_a_reader(local: LocalStore) -> None:
    """A FIFO at a head key: opening it to read waited for a writer forever, so every listing,
    ``threads`` and ``verify`` hung."""
    saver = _store_with(local)

    def walks() -> Any:
        with pytest.raises(NotAnObjectError, match="is a FIFO"):
            local.get(BAD)
        listed = [(i.key, i.etag, i.size) for i in local.list("heads/") if i.key == BAD]
        threads = list_threads(saver)
        return listed, _damaged(saver), [(d.key, d.reason) for d in threads.damaged]

    with _fifo_at(local, BAD):
        how, result = _finishes(walks, seconds=30)
    assert how == "returned", result
    assert result == ([(BAD, NOT_A_FILE, 0)], [(BAD, "not_ours")], [(BAD, "not_ours")])


def test_a_link_to_a_directory_is_listed_as_a_key_and_never_entered(local: LocalStore, outside: Path) -> None:
    (outside / "heads-like").mkdir()
    (outside / "heads-like" / "x").write_bytes(b"outside")
    local.put("heads/t/=", b"head")
    (local.root / "heads" / "u").symlink_to(outside / "heads-like")
    head = local.get("heads/t/=")
    assert head is not None
    assert [(i.key, i.etag) for i in local.list("")] == [("heads/t/=", head.etag), ("heads/u", NOT_A_FILE)]
    assert list(local.list("heads/u/")) == []
    with pytest.raises(NotAnObjectError):
        local.get("heads/u/x")


def test_the_memory_sweep_reports_a_fifo_among_its_items_and_goes_on(local: LocalStore) -> None:
    from langgraph_handoff.memory import ObjectStoreMemory

    memory = ObjectStoreMemory(local)
    memory.put(("users", "u1"), "bad", {"v": 1})
    memory.put(("users", "u1"), "good", {"v": 2})
    (bad,) = [i.key for i in local.list("memory/") if i.key.endswith("/bad")]
    with _fifo_at(local, bad):
        how, swept = _finishes(memory.sweep, seconds=30)
    assert how == "returned", swept
    assert [(d.key, d.reason) for d in swept.damaged] == [(bad, "not_ours")]
    assert memory.get(("users", "u1"), "good") is not None


# -- nothing outside the root is removed, written or copied ----------------------------------------


@pytest.mark.parametrize("linked", ["data/{T}", "heads/{T}"])
def test_delete_thread_removes_nothing_outside_the_store(linked: str, local: LocalStore, outside: Path) -> None:
    """A directory of the thread replaced by a link to a directory outside: ``delete_thread``
    listed through the link (the prefix its listing starts from) and deleted every file there.
    (A link met deeper, inside the listing, is a key of the thread: the delete removes the
    link itself.)"""
    saver = ObjectStoreSaver(local)
    _write(saver, "t")
    where = linked.format(T=keys.encode_segment("t"), N=keys.encode_segment(""))
    shutil.copytree(_path(local, where), outside / "victim")  # files named as the store's own
    before = _files(outside)
    _relink(local, where, outside / "victim")
    saver.delete_thread("t")
    assert _files(outside) == before
    assert [i.key for i in local.list("")] == [where]  # the link is left: every walk's damage
    inner = next(iter(_files(outside / "victim")))
    with pytest.raises(NotAnObjectError):
        local.delete(f"{where}/{inner}")
    assert _files(outside) == before


def test_a_key_reached_through_a_link_is_neither_written_nor_deleted(local: LocalStore, outside: Path) -> None:
    local.put("a/b/k", b"inside")
    _relink(local, "a/b", outside)
    with pytest.raises(NotAnObjectError):
        local.put("a/b/precious", b"overwritten")
    with pytest.raises(NotAnObjectError):
        local.delete("a/b/precious")
    with pytest.raises(NotAnObjectError):
        local.get("a/b/precious")
    assert _files(outside) == {"precious": b"not the store's"}
    assert not any(n.startswith(".tmp.") for n in os.listdir(outside))


def test_copy_thread_copies_no_file_from_outside_the_store(local: LocalStore, outside: Path) -> None:
    """A blob replaced by a link to a file outside was copied into the new thread. The file here
    is a well-formed blob (the old blob itself, moved out), so only the link gives it away."""
    saver = ObjectStoreSaver(local, layout=Layout(blob_threshold=16))
    saver.put(
        {"configurable": {"thread_id": "src", "checkpoint_ns": ""}},
        _cp(doc="x" * 100),
        {"source": "input", "step": -1},
        {"doc": 1},
    )
    (blob,) = [i.key for i in local.list("data/") if "/b/" in i.key]
    shutil.move(_path(local, blob), outside / "blob")
    _relink(local, blob, outside / "blob")
    with pytest.raises(CorruptObjectError) as info:
        saver.copy_thread("src", "dst")
    assert info.value.key == blob and info.value.reason == "not_ours"
    assert list(local.list(keys.heads_prefix("dst"))) == []


@pytest.mark.parametrize("lock", ["stripe", "turnstile"])
def test_a_link_under_locks_makes_no_file_outside_the_store(lock: str, local: LocalStore, outside: Path) -> None:
    """A dangling link at a lock file: a writer created the file it named, outside the store."""
    local.put("a/k", b"x")
    name = f"{_stripe('a/k'):03d}" if lock == "stripe" else "turnstile"
    link = local.root / ".locks" / name
    link.unlink(missing_ok=True)
    link.symlink_to(outside / "made-by-the-store")
    with pytest.raises(StoreError, match=r"lock file .* symbolic link"):
        local.delete("a/k") if lock == "turnstile" else local.put("a/k", b"y")
    assert not (outside / "made-by-the-store").exists()


def test_a_link_in_place_of_the_locks_directory_makes_no_file_outside_the_store(
    local: LocalStore, outside: Path
) -> None:
    local.put("a/k", b"x")
    shutil.rmtree(local.root / ".locks")
    (outside / "locks").mkdir()
    (local.root / ".locks").symlink_to(outside / "locks")
    with pytest.raises(StoreError, match=r"lock file .* symbolic link"):
        local.put("a/k", b"y")
    with pytest.raises(StoreError, match=r"at \.locks \(a link\?\)"):
        LocalStore(local.root)
    assert list((outside / "locks").iterdir()) == []
    assert local.get("a/k").body == b"x"  # type: ignore[union-attr]


# -- private by default ----------------------------------------------------------------------------


@contextmanager
def _umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def _modes(root: Path) -> dict[str, int]:
    """The permission bits of everything under ``root`` (itself as ``.``), by relative path."""
    found = {".": stat.S_IMODE(root.stat().st_mode)}
    for p in root.rglob("*"):
        found[str(p.relative_to(root))] = stat.S_IMODE(p.lstat().st_mode)
    return found


def test_what_the_store_makes_is_private_whatever_the_umask(tmp_path: Path) -> None:
    """Objects were made 0644 and directories 0755: every local user read every conversation."""
    with _umask(0o022):
        store = LocalStore(tmp_path / "s", fsync=False)
        store.put("a/b/k", b"secret")
        store.delete("a/b/missing")  # makes the prune locks too
    modes = _modes(tmp_path / "s")
    assert {p: m for p, m in modes.items() if m != 0o600} == {".": 0o700, ".locks": 0o700, "a": 0o700, "a/b": 0o700}
    assert "a/b/k" in modes and any(p.startswith(".locks/") for p in modes)


@pytest.mark.parametrize(
    ("mode", "dirs", "files"), [(0o750, 0o750, 0o640), ("0770", 0o770, 0o660), ("0o710", 0o710, 0o600)]
)
def test_mode_gives_a_group_exactly_what_it_asks_whatever_the_umask(
    mode: int | str, dirs: int, files: int, tmp_path: Path
) -> None:
    with _umask(0o077):  # a umask that would take the group's bits away
        store = LocalStore(tmp_path / "s", fsync=False, mode=mode)
        store.put("a/b/k", b"shared")
    modes = _modes(tmp_path / "s")
    assert {p: m for p, m in modes.items() if m != files} == {".": dirs, ".locks": dirs, "a": dirs, "a/b": dirs}
    assert store.mode == dirs


def test_a_shared_groups_set_group_id_directory_passes_it_on(tmp_path: Path) -> None:
    """A group's shared directory is set-group-id, so what is made in it belongs to the group:
    the exact mode keeps the bit on the directories it makes."""
    root = tmp_path / "s"
    root.mkdir()
    os.chmod(root, 0o2770)
    with _umask(0o022):
        store = LocalStore(root, fsync=False, mode=0o770)
        store.put("a/k", b"x")
    assert stat.S_IMODE((root / "a").stat().st_mode) == 0o2770
    assert stat.S_IMODE((root / "a" / "k").stat().st_mode) == 0o660


def test_an_existing_root_keeps_its_mode(tmp_path: Path) -> None:
    """Not chmodded behind the user's back: a store made before keeps what its owner gave it."""
    root = tmp_path / "s"
    root.mkdir()
    os.chmod(root, 0o755)
    LocalStore(root).put("k", b"x")
    assert stat.S_IMODE(root.stat().st_mode) == 0o755
    assert stat.S_IMODE((root / "k").stat().st_mode) == 0o600


def test_mode_comes_from_the_url_and_a_mode_that_cannot_work_is_refused(tmp_path: Path) -> None:
    store = store_from_url(f"file://{tmp_path}/s?mode=0750")
    assert isinstance(store, LocalStore) and store.mode == 0o750
    store.put("k", b"x")  # the first write makes the directory (opening makes nothing)
    assert stat.S_IMODE((tmp_path / "s").stat().st_mode) == 0o750
    for bad in ("0600", "0777", "0757", "1777", "rwx", "0o8", 0o4700, True):
        with pytest.raises(InvalidConfigError, match=r"e\.g\. 0700"):
            LocalStore(tmp_path / "t", mode=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigError, match=r"e\.g\. 0700"):
        store_from_url(f"file://{tmp_path}/t?mode=0666")
    assert not (tmp_path / "t").exists()


# -- opening creates nothing ----------------------------------------------------------------------


def test_opening_and_reading_make_nothing_and_the_first_write_makes_the_directory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Opening a store made its directory and ``.locks/`` (issue 47: the read-only commands
    wrote into what they inspected, and failed where they could not). The first write makes
    the directory, and says so in the log."""
    root = tmp_path / "a" / "s"
    store = LocalStore(root, fsync=False)
    assert store.get("k") is None and list(store.list("")) == []
    store.delete("k")  # nothing to delete: makes nothing either
    assert not (tmp_path / "a").exists() and not store.made_root
    with caplog.at_level("INFO", logger="langgraph_handoff.stores"):
        store.put("k", b"x")
        store.put("j", b"y")
    assert sorted(os.listdir(root)) == [".locks", "j", "k"] and store.made_root
    assert [r.getMessage() for r in caplog.records] == [
        f"made the directory {root} for a file:// store (its first write)"
    ]
    (root / "j").unlink()
    (root / "k").unlink()
    shutil.rmtree(root / ".locks")
    reader = LocalStore(root)
    assert reader.get("k") is None and list(reader.list("")) == [] and os.listdir(root) == []
    assert not reader.made_root


def test_a_directory_that_existed_and_is_gone_is_not_made_again(tmp_path: Path) -> None:
    """An unmounted volume must not become an empty store under its mount point."""
    store = LocalStore(tmp_path / "s", fsync=False)
    store.put("k", b"x")
    shutil.rmtree(tmp_path / "s")
    with pytest.raises(StoreError, match="is gone"):
        store.put("k", b"y")
    assert not (tmp_path / "s").exists()


def test_a_write_that_finds_the_directory_made_by_another_since_it_looked_goes_on(tmp_path: Path) -> None:
    """Two threads' first writes: one finds no directory, the other makes it, and the first
    then took the directory for a lost one ("is gone"), seen on a graph with a subgraph."""
    store = LocalStore(tmp_path / "s", fsync=False)
    real = store._tree.open_root
    calls = []

    def open_root() -> Any:
        calls.append(1)
        if len(calls) == 1:  # this write looks first; the other one runs before it goes on
            store.put("other", b"1")
            raise FileNotFoundError(errno.ENOENT, "no such directory")
        return real()

    store._tree.open_root = open_root  # type: ignore[method-assign]
    store.put("k", b"x")
    assert store.get("k").body == b"x" and store.get("other").body == b"1"  # type: ignore[union-attr]


def test_create_false_refuses_a_missing_directory_and_a_file_is_refused_either_way(tmp_path: Path) -> None:
    with pytest.raises(StoreNotFoundError, match=r"no store at .*setup"):
        LocalStore(tmp_path / "missing", create=False)
    regular = tmp_path / "f"
    regular.write_text("x")
    for where in (regular, regular / "below"):
        for create in (True, False):
            with pytest.raises(InvalidConfigError, match=r"'.*/f' is a file, not a directory"):
                LocalStore(where, create=create)
    assert not (tmp_path / "missing").exists() and regular.read_text() == "x"


# -- temporary files --------------------------------------------------------------------------------


@pytest.mark.parametrize("failing", ["write", "fsync"])
def test_a_write_that_fails_partway_removes_its_temporary_file(
    failing: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk (ENOSPC, on the write or, with delayed allocation, on the fsync) left the
    temporary file forever."""
    store = LocalStore(tmp_path / "s")
    store.put("d/k", b"before")

    def full(*args: Any) -> Any:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, failing, full)
    with pytest.raises(OSError) as info:
        store.put("d/k", b"after" * 1000)
    monkeypatch.undo()
    assert info.value.errno == errno.ENOSPC
    assert os.listdir(tmp_path / "s" / "d") == ["k"]
    assert store.get("d/k").body == b"before"  # type: ignore[union-attr]


def _left_behind(store: LocalStore, key: str) -> Path:
    """A temporary file as a put that died before its rename leaves it, beside ``key``."""
    path = _path(store, key)
    tmp = path.parent / f".tmp.{path.name}.0123456789ab"
    tmp.write_bytes(b"half a body")
    return tmp


def test_a_listing_removes_a_temporary_file_left_behind_once_it_is_old(tmp_path: Path) -> None:
    root = tmp_path / "s"
    LocalStore(root, fsync=False).put("d/k", b"x")
    tmp = _left_behind(LocalStore(root), "d/k")
    now = time.time()
    assert [i.key for i in LocalStore(root, clock=lambda: now + TEMPORARY_MAX_AGE - 60).list("")] == ["d/k"]
    assert tmp.exists()  # young: perhaps a put's, still being written
    assert [i.key for i in LocalStore(root, clock=lambda: now + TEMPORARY_MAX_AGE + 60).list("")] == ["d/k"]
    assert not tmp.exists()


def test_a_delete_prunes_a_directory_that_only_old_temporary_files_kept(tmp_path: Path) -> None:
    """A temporary file left behind kept its directory, and every parent, from being pruned."""
    root = tmp_path / "s"
    now = time.time()
    young = LocalStore(root, fsync=False, clock=lambda: now)
    young.put("x/y/k", b"1")
    young.put("x/y/j", b"2")
    tmp = _left_behind(young, "x/y/k")
    young.delete("x/y/k")
    assert tmp.exists() and (root / "x" / "y").is_dir()  # a put in flight keeps its directory
    old = LocalStore(root, fsync=False, clock=lambda: now + TEMPORARY_MAX_AGE + 60)
    old.delete("x/y/j")
    assert sorted(os.listdir(root)) == [".locks"]


# -- every way of resolving paths keeps the store's contract ---------------------------------------


class TestLocalStoreResolvers(StoreContract):
    """The contract with ``openat2``, with the walk one directory at a time, and with whole
    paths (where ``openat`` is missing)."""

    @pytest.fixture(params=["openat2", "walk", "paths"])
    def contract_store(
        self, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> Iterator[StoreBase]:
        if request.param != "openat2":
            monkeypatch.setattr(beneath, "_probed", True)
            monkeypatch.setattr(beneath, "_openat2", None)
        if request.param == "paths":
            monkeypatch.setattr(beneath, "_DIR_FD", False)
            monkeypatch.setattr(beneath, "_warned", True)
        store = LocalStore(tmp_path / "store", fsync=False)
        assert isinstance(store._tree, beneath.PathTree) == (request.param == "paths")
        yield store

    def test_nested_keys_list_delete_and_prune(self, contract_store: StoreBase) -> None:
        assert isinstance(contract_store, LocalStore)
        for key in ("a/b/c", "a/b/d", "a/e", "f"):
            contract_store.put(key, key.encode())
        assert [i.key for i in contract_store.list("")] == ["a/b/c", "a/b/d", "a/e", "f"]
        assert [i.key for i in contract_store.list("a/b/")] == ["a/b/c", "a/b/d"]
        for key in ("a/b/c", "a/b/d", "a/e", "f"):
            contract_store.delete(key)
        assert sorted(os.listdir(contract_store.root)) == [".locks"]


def test_a_file_larger_than_max_object_bytes_is_refused_unread(tmp_path: Path) -> None:
    """A sparse file of a terabyte planted at a key was read whole; it is refused from its
    ``fstat`` size, and a read of the saver reports it as that key's damage."""
    from langgraph_handoff.errors import ResponseTooLargeError

    store = LocalStore(tmp_path / "s")
    store.put("a/b", b"x")
    with open(tmp_path / "s" / "a" / "b", "r+b") as fh:
        fh.truncate(1 << 40)
    with pytest.raises(ResponseTooLargeError, match="past max_object_bytes"):
        store.get("a/b")


def test_a_file_this_process_may_not_read_is_not_an_object(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted file another user owns, unreadable to the workers: ``PermissionError`` from
    the open (injected: the tests run as root, which reads everything) is that key's damage,
    not a raw error that stops every walk."""
    store = LocalStore(tmp_path / "s")
    store.put("a/b", b"x")
    real = store._tree.open

    def refused(root: Any, key: str, flags: int, *args: Any) -> int:
        if key == "a/b":
            raise PermissionError(errno.EACCES, "Permission denied")
        return real(root, key, flags, *args)  # type: ignore[no-any-return]

    monkeypatch.setattr(store._tree, "open", refused)
    with pytest.raises(NotAnObjectError, match="permission denied"):
        store.get("a/b")
