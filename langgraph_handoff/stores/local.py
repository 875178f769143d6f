"""``LocalStore``: a directory on the local file system, the embedded default.

Each object is one file at ``root/<key>``. Compare-and-swap holds across threads *and processes*
on one host:

* every write of a key happens under an exclusive ``flock`` on one of a fixed set of lock files
  (``root/.locks/NN``, chosen by a hash of the key), so the check and the write are one atomic step;
* the new body goes to a temporary file that is fsynced, atomically renamed over the old one, and
  the directory is fsynced, so a write is durable before ``put`` returns and a crash leaves either
  the old or the new object, never a torn one;
* ETags are content hashes, as S3's are;
* a delete prunes the directories it leaves empty, and a prune never removes a directory a put is
  about to write into: a put whose directory was pruned while it made it makes it again under an
  exclusive lock (``root/.locks/tree``) that every prune shares, so no prune runs meanwhile
  (:meth:`LocalStore._making_dirs`).

**On a machine others share** (another local user or a sidecar can write into the
directory), nothing outside the root is read, written or removed, and nothing blocks:

* every path below the root is opened beneath it with every symbolic link refused
  (:mod:`~langgraph_handoff.stores.beneath`), and every file made, renamed or removed is named
  relative to a handle on its directory opened that way;
* only regular files are read; a FIFO is opened without waiting and refused, as are a link, a
  device and a socket: :class:`~langgraph_handoff.errors.NotAnObjectError` naming the key, which
  every walk over the store reports as damage and goes on (a listing shows such a key with size
  0 and the ETag :data:`NOT_A_FILE`, without opening it through a link or reading it);
* what the store creates is private: directories ``0700`` and files ``0600`` by default, or
  ``mode=`` (``0750``: a group that reads; files get the mode without its execute bits).
  Existing directories keep their modes;
* a write that fails after creating its temporary file removes it, and a temporary file left by
  a process that died is removed, once it is :data:`TEMPORARY_MAX_AGE` old, by the first walk of
  this store that meets it (a listing that reads its directory, or the prune after a delete).

**Opening creates nothing.** The directory is made by the first write (a put), and only when it
was missing when the store was opened (one that vanishes later is an error: a volume that is no
longer mounted must not turn into an empty store under its mount point); ``.locks/`` by the
first write too. So reading a store (listings, ``get``, the command line's ``threads`` or
``verify``) writes nothing, and works on a directory this process cannot write to: a store
copied to a read-only mount. ``create=False`` refuses a missing directory at once
(:class:`~langgraph_handoff.errors.StoreNotFoundError`: a typo must not read as an empty store),
and a path that is a file, or lies under one, is refused either way
(:class:`~langgraph_handoff.errors.InvalidConfigError`, "is a file, not a directory").

POSIX only (``fcntl``). Lock and temporary files start with ``.`` and never appear in listings;
keys can never start with ``.`` (see :func:`~langgraph_handoff.stores.base.validate_key`). Unlike
S3, a file system cannot hold both ``a/b`` and ``a/b/c``: such a put raises
:class:`~langgraph_handoff.errors.InvalidKeyError` (the saver's key layout never does this).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import secrets
import stat
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langgraph_handoff.errors import (
    InvalidConfigError,
    InvalidKeyError,
    NotAnObjectError,
    PreconditionFailedError,
    StoreError,
    StoreNotFoundError,
)
from langgraph_handoff.stores.base import (
    ListResult,
    ObjectInfo,
    StoreBase,
    StoredObject,
    too_large,
    validate_key,
    validate_prefix,
)
from langgraph_handoff.stores.beneath import LINKED, Dir, tree
from langgraph_handoff.stores.memory import content_etag
from langgraph_handoff.stores.stat_memo import MAX_ENTRIES, StatMemo

__all__ = ["NOT_A_FILE", "TEMPORARY_MAX_AGE", "LocalStore", "directory_exists"]

log = logging.getLogger("langgraph_handoff.stores")

_LOCK_STRIPES = 256
#: the ETag a listing gives a key that holds no regular file (never a content hash)
NOT_A_FILE = "not-a-file"
#: seconds after its last write when a temporary file counts as left behind (a put writes its
#: temporary file and renames it within one call; no put takes an hour)
TEMPORARY_MAX_AGE = 3600.0
_TEMPORARY = ".tmp."

_READ = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)  # a FIFO opens at once
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL
_LOCK = os.O_RDWR | os.O_NONBLOCK  # flock waits; opening never does
#: what opening a key may fail with when it holds no file a store can read: a link refused on the
#: way, a socket (``ENXIO``), a device without a driver (``ENODEV``)
_NOT_A_FILE_ERRNOS = LINKED | {errno.ENXIO, errno.ENODEV}
_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _what(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "a socket" if stat.S_ISSOCK(mode) else "not a regular file"


def directory_exists(root: Path) -> bool:
    """Whether directory ``root`` exists; False when nothing is at its path.

    Raises :class:`InvalidConfigError` when something other than a directory is there, or at one
    of its parents (so it can never be made): every command then says the same thing, instead of
    one suggesting ``setup`` and ``setup`` failing with an errno.

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile() as f:
    ...     directory_exists(Path(f.name) / "store")
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidConfigError: ... is a file, not a directory: a file:// store is a directory; give a directory's path (a missing one is made by `setup` or the first write)
    """
    for path in (root, *root.parents):
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            continue
        except NotADirectoryError:
            continue  # a parent is a file: found further up
        if stat.S_ISDIR(mode):
            return path == root
        what = "a file" if stat.S_ISREG(mode) else _what(mode)
        raise InvalidConfigError(
            f"{str(path)!r} is {what}, not a directory: a file:// store is a directory; give a directory's path "
            "(a missing one is made by `setup` or the first write)"
        )
    return False


def _dir_mode(mode: int | str) -> int:
    """``mode=`` as a number: an int, or octal text (``"0750"``, ``"750"``, ``"0o750"``).

    The owner must keep every right (the store writes and walks its own directories), and other
    users may not write: a directory every local user can write to is the hostile case itself."""
    value: int | None = None
    if isinstance(mode, int) and not isinstance(mode, bool):
        value = mode
    elif isinstance(mode, str):
        try:
            value = int(mode.removeprefix("0o"), 8)
        except ValueError:
            value = None
    if value is None or not 0 <= value <= 0o777 or value & 0o700 != 0o700 or value & 0o002:
        raise InvalidConfigError(
            f"LocalStore mode {mode!r} is not a directory mode it can use: give octal digits with the owner's "
            "rwx and no write for others, e.g. 0700 (private, the default), 0750 (a group reads) or 0770 (a "
            "group writes too)"
        )
    return value


def _first_at_or_after(names: Sequence[str], rel: str, prefix: str, start_after: str | None) -> int:
    """Where in directory ``rel``'s sorted ``names`` a walk for keys starting with ``prefix``
    after ``start_after`` begins: by bisection, so a page that resumes a walk of a directory of
    100,000 threads examines the names of its own page, not every name before it.

    ``len(names)`` when no key of the directory can come. Correct because ``names`` is sorted
    in key order and a name holds no ``/`` but a subdirectory's trailing one: the keys under
    ``rel`` that sort at or before ``start_after`` are a run at the front of ``names``, except
    the one subdirectory that ``start_after`` lies in, which sorts just before that run ends.
    """
    lo = 0
    if len(prefix) > len(rel):  # (a shorter prefix is a prefix of every key under rel: see _keys_in_order)
        lo = bisect_left(names, prefix[len(rel) :])
    if start_after is None or start_after < rel:
        return lo  # every key under rel sorts after start_after
    if not start_after.startswith(rel):
        return len(names)  # every key under rel sorts before it
    tail = start_after[len(rel) :]
    at = bisect_right(names, tail)
    slash = tail.find("/")
    if slash >= 0 and at and names[at - 1] == tail[: slash + 1]:
        at -= 1  # the subdirectory holding start_after: its later keys come next
    return max(lo, at)


def _keys_in_order(
    entries: Callable[[str], Sequence[str] | None], root: str, rel: str, prefix: str, start_after: str | None
) -> Iterator[str]:
    """The keys under directory ``rel`` (``""`` or ending in ``/``) that start with ``prefix`` and
    sort after ``start_after``, in S3's byte order, lazily; ``entries`` names a directory's
    entries in key order (:meth:`LocalStore._entries`, or its memo).

    The walk starts at the first name that can come (:func:`_first_at_or_after`) and stops at
    the first that cannot start with ``prefix``, so paging through a directory's N keys
    examines each name about once, not N / page size times. A directory whose keys all sort at
    or before ``start_after``, or none of which can start with ``prefix``, is not entered.
    (Paths are plain strings: ``pathlib`` cost more than the system calls on a listing of
    thousands of directories.)
    """
    names = entries(root + "/" + rel if rel else root) or ()
    # Only the directory the walk starts in can hold names that do not start with the prefix
    # (the prefix ends inside it): every key below a name that does starts with it too.
    partial = prefix[len(rel) :] if len(prefix) > len(rel) else ""
    for i in range(_first_at_or_after(names, rel, prefix, start_after), len(names)):
        name = names[i]
        if not name.startswith(partial):
            return  # sorted: no later name starts with it either
        key = rel + name
        if name.endswith("/"):
            yield from _keys_in_order(entries, root, key, prefix, start_after)
        elif start_after is None or key > start_after:
            yield key


def _memo_entries(stat_memo: bool | int) -> int:
    """``stat_memo=`` as a number of entries: True the default, False none."""
    if isinstance(stat_memo, bool):
        return MAX_ENTRIES if stat_memo else 0
    if isinstance(stat_memo, int) and stat_memo >= 0:
        return stat_memo
    raise InvalidConfigError(
        f"LocalStore stat_memo={stat_memo!r}: give True (the default, {MAX_ENTRIES} entries), False (none), "
        "or how many directories and files to keep (about 470 bytes each)"
    )


class LocalStore(StoreBase):
    """Objects as files under ``root``; safe for many threads and processes on one host, and
    kept inside ``root`` whatever else writes there (see the module docstring).

    Args:
        root: the directory; made (with ``mode``, its parents as the umask says) by the first
            write if missing, never by opening (see the module docstring).
        create: False: the directory must exist already (else
            :class:`~langgraph_handoff.errors.StoreNotFoundError`), and is never made.
        fsync: fsync each file and directory written (off: faster, a crash may lose writes).
        stat_memo: let listings reuse what they read of unchanged files
            (:mod:`~langgraph_handoff.stores.stat_memo`); a number is how many directories
            and files it keeps (default :data:`~langgraph_handoff.stores.stat_memo.MAX_ENTRIES`,
            about 470 bytes each): a walk of every thread keeps about 2 per thread (``threads``,
            a sweep, an unindexed filtered ``list(None, ...)``), 9 with a few writes each
            (``verify``); a store larger than the memo is read again by each walk.
        mode: what new directories are made with, exactly (whatever the umask); files get it
            without the execute bits. ``0o700`` by default; ``0o750`` lets a group read, ``0o770``
            write too. Also ``file:///dir?mode=0750``. Existing directories keep theirs, and so
            does a file until it is written again (a put writes a new file).
        clock: the wall clock, in seconds, by which left-behind temporary files are aged.

    >>> import tempfile
    >>> store = LocalStore(tempfile.mkdtemp())
    >>> etag = store.put("threads/t1", b"state", if_none_match=True)
    >>> store.put("threads/t1", b"newer", if_match=etag) != etag
    True
    >>> [o.key for o in store.list("threads/")]
    ['threads/t1']
    """

    lists_in_process = True  # see StoreBase
    lists_scan_directories = True  # see StoreBase

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        fsync: bool = True,
        stat_memo: bool | int = True,
        mode: int | str = 0o700,
        clock: Callable[[], float] = time.time,
        create: bool = True,
    ) -> None:
        self.root = Path(root).expanduser().resolve()
        self.fsync = fsync
        #: the mode new directories get; new files get it without the execute bits
        self.mode = _dir_mode(mode)
        self._file_mode = self.mode & 0o666
        # a umask takes group and other bits away: put them back where the mode asks for them
        self._chmod = bool(self.mode & 0o077)
        self._clock = clock
        # listings take a directory's names and a file's ETag from a stat when it is unchanged
        # (see stat_memo's docstring for why that is safe, and when to turn it off)
        self._memo = StatMemo(max_entries=_memo_entries(stat_memo))
        self._tree = tree(str(self.root))
        self._prefix = str(self.root) + "/"
        #: whether this store made its directory (its first write did; ``setup`` says so)
        self.made_root = False
        # a write makes the directory only if it was missing at open: one that vanishes later
        # (an unmounted volume) is an error, not a new empty store under the mount point
        self._may_make_root = not directory_exists(self.root)
        if self._may_make_root and not create:
            raise StoreNotFoundError(
                f"no store at {str(self.root)!r}: the directory does not exist. Check the path; "
                "`langgraph-handoff setup` (or the first write) makes it"
            )
        self._check_locks()

    def trust_scope(self) -> None:
        """Nothing to probe: this package implements this store's conditional writes itself."""
        return None

    def __repr__(self) -> str:
        return f"LocalStore({str(self.root)!r})"

    # -- the tree --------------------------------------------------------------------------------
    def _check_locks(self) -> None:
        """Refuse a ``.locks`` that is not a directory (a link: writers would make their lock
        files wherever it points), by looking only: opening writes nothing."""
        try:
            st = os.lstat(self.root / ".locks")
        except (FileNotFoundError, NotADirectoryError):
            return
        if not stat.S_ISDIR(st.st_mode):
            raise StoreError(
                f"the local store at {self.root} has something other than a directory at .locks (a link?), "
                "which this store never makes: remove it"
            )

    def _make_root(self) -> None:
        """The root, with :attr:`mode` (its parents as the umask says), for the first write."""
        try:
            self.root.parent.mkdir(parents=True, exist_ok=True)
            try:
                self.root.mkdir(self.mode)
            except FileExistsError:
                return  # made meanwhile, by another process writing to the store
        except OSError as exc:
            directory_exists(self.root)  # a file in the way: say so
            raise StoreError(f"cannot create the local store's directory {self.root}: {exc}") from exc
        if self._chmod:
            os.chmod(self.root, self.mode)
        self.made_root = True
        log.info("made the directory %s for a file:// store (its first write)", self.root)

    def _made_dir(self, d: Dir, name: str) -> Dir:
        """A handle on directory ``name`` in ``d``, made (with :attr:`mode`, its parent fsynced)
        if missing. ``FileNotFoundError`` if a prune removed it before it could be opened."""
        t = self._tree
        try:
            return t.open_dir(d, name)
        except FileNotFoundError:
            pass
        try:
            t.mkdir(d, name, self.mode)
        except FileExistsError:
            return t.open_dir(d, name)  # another writer made it (and fsyncs its parent)
        if self.fsync:
            t.fsync(d)
        made = t.open_dir(d, name)
        if self._chmod:  # keeps a set-group-id bit inherited from the parent (a shared group's)
            t.chmod(made, self.mode | (t.fstat(made).st_mode & stat.S_ISGID))
        return made

    def _not_an_object(self, key: str, what: str) -> NotAnObjectError:
        return NotAnObjectError(key, self._prefix + key, what)

    def _linked(self, key: str) -> NotAnObjectError:
        return self._not_an_object(key, "a symbolic link, or reached through one")

    def _open_root(self, *, make: bool) -> Dir | None:
        """A handle on the root for a write, the root made first if it was missing when the store
        was opened and ``make`` (a put); None if it never existed and not ``make`` (a delete:
        nothing to delete). A root that existed and is gone is an error (the module docstring)."""
        try:
            root = self._tree.open_root()
        except FileNotFoundError:
            if self._may_make_root and not make:
                return None
            if self._may_make_root:
                self._make_root()  # (made meanwhile by another thread or process: fine)
            try:  # made by this call, or by another thread's write since this one looked
                root = self._tree.open_root()
            except FileNotFoundError:
                raise StoreError(
                    f"the local store's directory {self.root} is gone: restore it, or open the store again to make it"
                ) from None
        self._may_make_root = False  # it exists: from now on a missing root is a lost one
        return root

    @contextmanager
    def _opened_root(self) -> Iterator[Dir]:
        root = self._open_root(make=True)
        assert root is not None  # made, or an error
        try:
            yield root
        finally:
            self._tree.close(root)

    # -- locks -----------------------------------------------------------------------------------
    def _lock_file(self, root: Dir, name: str) -> int:
        """A descriptor of ``.locks/<name>``, made (with the store's file mode) if missing, and
        ``.locks`` with it: the first write makes it, never opening or reading the store."""
        path = ".locks/" + name
        try:
            try:
                return self._tree.open(root, path, _LOCK)
            except FileNotFoundError:
                pass
            try:
                fd = self._tree.open(root, path, _LOCK | os.O_CREAT | os.O_EXCL, self._file_mode)
            except FileExistsError:
                return self._tree.open(root, path, _LOCK)
            except FileNotFoundError:  # no .locks yet
                self._tree.close(self._made_dir(root, ".locks"))
                try:
                    fd = self._tree.open(root, path, _LOCK | os.O_CREAT | os.O_EXCL, self._file_mode)
                except FileExistsError:
                    return self._tree.open(root, path, _LOCK)
        except OSError as exc:
            if exc.errno not in _NOT_A_FILE_ERRNOS:
                raise
            raise StoreError(
                f"the lock file {self._prefix + path} is a symbolic link (or reached through one), which this "
                "store never makes: remove it"
            ) from None
        if self._chmod:
            os.fchmod(fd, self._file_mode)
        return fd

    def _flock(self, root: Dir, name: str, operation: int) -> int:
        fd = self._lock_file(root, name)
        try:
            fcntl.flock(fd, operation)
        except BaseException:
            os.close(fd)
            raise
        return fd  # closing it releases the flock

    @contextmanager
    def _locked(self, root: Dir, key: str) -> Iterator[None]:
        stripe = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=2).digest(), "big")
        fd = self._flock(root, f"{stripe % _LOCK_STRIPES:03d}", fcntl.LOCK_EX)
        try:
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the flock

    @contextmanager
    def _pruning(self, root: Dir) -> Iterator[None]:
        """Held while a delete removes empty directories. Prunes share it with each other and
        never run while a put holds :meth:`_making_dirs`. They take it through a turnstile that
        such a put holds while it waits, so the put waits only for the prunes already under way."""
        turnstile = self._flock(root, "turnstile", fcntl.LOCK_EX)
        try:
            tree_lock = self._flock(root, "tree", fcntl.LOCK_SH)
        finally:
            os.close(turnstile)
        try:
            yield
        finally:
            os.close(tree_lock)

    @contextmanager
    def _making_dirs(self, root: Dir) -> Iterator[None]:
        """Held by a put that lost its directory to a prune while making it: no prune runs until
        the put's temporary file is in the directory (from then on ``rmdir`` refuses it).

        Without it the put could only retry, and a bounded retry lost to steady deletes:
        ``StoreError`` "could not create the directory" (8 of 100 rounds of a 10-thread
        put/delete test on Python 3.11, 5 on 3.13). Most puts never take it: a directory that is
        there takes the temporary file at once, and one that is missing is usually made and
        used before any prune comes by."""
        turnstile = self._flock(root, "turnstile", fcntl.LOCK_EX)
        try:
            tree_lock = self._flock(root, "tree", fcntl.LOCK_EX)
            try:
                yield
            finally:
                os.close(tree_lock)
        finally:
            os.close(turnstile)

    # -- reading ---------------------------------------------------------------------------------
    def _read_stat(self, root: Dir, key: str) -> tuple[os.stat_result, bytes] | None:
        """The ``fstat`` of the file at ``key`` and its bytes; None if there is none (or a
        directory). Anything but a regular file is refused unread: :class:`NotAnObjectError`."""
        try:
            fd = self._tree.open(root, key, _READ)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            if exc.errno in _NOT_A_FILE_ERRNOS:
                if exc.errno in LINKED:
                    raise self._linked(key) from None
                raise self._not_an_object(key, "not a regular file (a socket, or a device)") from None
            if isinstance(exc, PermissionError):  # a file this process may not read: not one it wrote
                raise self._not_an_object(key, "a file this process may not read (permission denied)") from None
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                if stat.S_ISDIR(st.st_mode):
                    return None  # the prefix of other keys, not an object
                raise self._not_an_object(key, _what(st.st_mode))
            if st.st_size > self.max_object_bytes:  # a sparse terabyte is not read into memory
                raise too_large(f"read of {key}", self.max_object_bytes, st.st_size)
            chunks = [os.read(fd, st.st_size + 1)]
            size = len(chunks[0])
            while chunks[-1]:  # to the end, should it have grown (only another writer's in-place write can)
                chunks.append(os.read(fd, 1 << 20))
                size += len(chunks[-1])
                if size > self.max_object_bytes:
                    raise too_large(f"read of {key}", self.max_object_bytes)
            return st, chunks[0] if len(chunks) == 2 else b"".join(chunks)
        finally:
            os.close(fd)

    def get(self, key: str) -> StoredObject | None:
        validate_key(key)
        try:
            root = self._tree.open_root()
        except FileNotFoundError:
            return None
        try:
            read = self._read_stat(root, key)
        finally:
            self._tree.close(root)
        if read is None:
            return None
        return StoredObject(key=key, body=read[1], etag=content_etag(read[1]))

    # -- writing ---------------------------------------------------------------------------------
    def put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        validate_key(key)
        body = bytes(body)
        with self._opened_root() as root, self._locked(root, key):
            if if_none_match or if_match is not None:
                current = self._read_stat(root, key)
                if if_none_match and current is not None:
                    raise PreconditionFailedError(key, "key exists")
                if if_match is not None and (current is None or content_etag(current[1]) != if_match):
                    raise PreconditionFailedError(key, "key missing" if current is None else "ETag differs")
            self._write(root, key, body)
        return content_etag(body)

    def _write(self, root: Dir, key: str, body: bytes) -> None:
        """``body`` at ``key``: a temporary file in its directory, fsynced, renamed over the key.
        A failure before the rename (a full disk) removes the temporary file."""
        t = self._tree
        parent, _, name = key.rpartition("/")
        tmp = f"{_TEMPORARY}{name}.{secrets.token_hex(6)}"
        d, fd = self._temporary(root, key, parent, tmp)
        try:
            try:
                if self._chmod:
                    os.fchmod(fd, self._file_mode)
                view = memoryview(body)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                if self.fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            try:
                t.replace(d, tmp, name)
            except IsADirectoryError:
                raise self._shadowed(key) from None
        except BaseException:
            with contextlib.suppress(OSError):  # the error that got us here is the one to report
                t.unlink(d, tmp)
            t.close(d)
            raise
        try:
            if self.fsync:
                t.fsync(d)
        finally:
            t.close(d)

    def _temporary(self, root: Dir, key: str, parent: str, tmp: str) -> tuple[Dir, int]:
        """A handle on ``key``'s directory and a descriptor of the new file ``tmp`` in it; the
        directories made if missing, and made again if a prune takes them back meanwhile."""
        try:  # the directory is there: once the file is in it, no prune can remove it
            return self._create(root, key, parent, tmp, make=False)
        except FileNotFoundError:
            pass
        try:
            return self._create(root, key, parent, tmp, make=True)
        except FileNotFoundError:  # a prune took a directory back: again, with no prune running
            pass
        with self._making_dirs(root):
            try:
                return self._create(root, key, parent, tmp, make=True)
            except FileNotFoundError as exc:  # removed by something other than this store
                raise StoreError(f"could not create the directory for {key!r} in {self.root}: {exc}") from exc

    def _create(self, root: Dir, key: str, parent: str, tmp: str, *, make: bool) -> tuple[Dir, int]:
        t = self._tree
        try:
            if not make or not parent:
                d = t.open_dir(root, parent)
            else:  # directory by directory, each made if missing
                d = t.open_dir(root, "")
                for name in parent.split("/"):
                    try:
                        d_next = self._made_dir(d, name)
                    finally:
                        t.close(d)
                    d = d_next
        except NotADirectoryError:  # a file where the key needs a directory
            raise self._shadowed(key) from None
        except OSError as exc:
            if exc.errno in LINKED:
                raise self._linked(key) from None
            raise
        try:
            return d, t.open(d, tmp, _CREATE, self._file_mode)
        except BaseException:
            t.close(d)
            raise

    def _shadowed(self, key: str) -> InvalidKeyError:
        return InvalidKeyError(
            f"LocalStore cannot store {key!r}: a file system cannot hold a key that is also the "
            "prefix of another key ('a/b' and 'a/b/c'); use S3Store for such layouts"
        )

    # -- deleting --------------------------------------------------------------------------------
    def delete(self, key: str, *, if_match: str | None = None) -> None:
        validate_key(key)
        t = self._tree
        parent, _, name = key.rpartition("/")
        root = self._open_root(make=False)
        if root is None:
            return  # the directory was never made: nothing to delete
        try:
            with self._locked(root, key):
                if if_match is not None:
                    current = self._read_stat(root, key)
                    if current is None:
                        return
                    if content_etag(current[1]) != if_match:
                        raise PreconditionFailedError(key, "ETag differs")
                try:
                    d = t.open_dir(root, parent)
                except (FileNotFoundError, NotADirectoryError):
                    return
                except OSError as exc:
                    if exc.errno in LINKED:
                        raise self._linked(key) from None
                    raise
                try:
                    t.unlink(d, name)  # a link at the key is removed itself, never what it names
                    if self.fsync:
                        t.fsync(d)
                except (FileNotFoundError, IsADirectoryError):
                    return  # no object there (a directory is the prefix of other keys)
                finally:
                    t.close(d)
            if parent:
                self._prune_empty_dirs(root, parent)
        finally:
            t.close(root)

    def _prune_empty_dirs(self, root: Dir, directory: str) -> None:
        """Remove ``directory`` and its parents while they are empty, never while a put holds
        :meth:`_making_dirs`; temporary files left behind in them go first (:meth:`_left_behind`).

        A directory seen holding an entry is left without taking the lock: that entry's own
        delete (or prune) checks again after it, and a temporary file becomes its put's object.
        """
        t = self._tree
        try:
            d = t.open_dir(root, directory)
        except OSError:
            return  # pruned already (or not a directory this store made)
        try:
            with t.scandir(d) as entries:
                if any(not self._left_behind(d, e) for e in entries):
                    return
        finally:
            t.close(d)
        parts = directory.split("/")
        with self._pruning(root):
            while parts:
                *up, name = parts
                try:
                    d = t.open_dir(root, "/".join(up))
                except OSError:
                    return
                try:
                    t.rmdir(d, name)  # a link is not a directory: never removed through
                except OSError as exc:
                    if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT, errno.ENOTDIR):
                        return
                    raise
                finally:
                    t.close(d)
                parts = up

    def _left_behind(self, d: Dir, entry: os.DirEntry[Any]) -> bool:
        """Remove ``entry`` of directory ``d`` if it is a temporary file no put has written to
        for :data:`TEMPORARY_MAX_AGE` (its put died before renaming it); whether it did.

        Best effort: a reader without write access to the directory leaves it to the writers."""
        if not entry.name.startswith(_TEMPORARY):
            return False
        try:
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode) or st.st_mtime > self._clock() - TEMPORARY_MAX_AGE:
                return False
            self._tree.unlink(d, entry.name)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return True

    # -- listing ---------------------------------------------------------------------------------
    def list_page(self, prefix: str, *, start_after: str | None = None, max_keys: int = 1000) -> ListResult:
        validate_prefix(prefix)
        # Start at the deepest directory the prefix pins down and walk in key order, stopping
        # one key past the page: a page of a thread's newest writes reads a few directories, not
        # every checkpoint's (a long thread has thousands).
        dir_part, _, _ = prefix.rpartition("/")
        items: list[ObjectInfo] = []
        truncated = False
        try:
            root = self._tree.open_root()
        except FileNotFoundError:
            return ListResult(items=items, truncated=False)
        try:
            now = self._memo.now()  # before every stat of this walk
            entries = self._memo.getter(lambda path: self._entries(root, path), now)
            info_of = self._memo.getter(lambda path: self._info(root, path), now)
            top = str(self.root)
            for k in _keys_in_order(entries, top, dir_part + "/" if dir_part else "", prefix, start_after):
                if len(items) >= max_keys:
                    truncated = True  # one more key exists (or did a moment ago)
                    break
                # Listed as it is, even a file whose name is not a portable key (a README dropped
                # into the directory): a listing reports what exists, and the walks over it report
                # and skip such keys. Reading or writing one by key still refuses it.
                info = info_of(top + "/" + k)
                if info is not None:  # a key deleted while listing is left out, and the page filled on
                    items.append(info)
        finally:
            self._tree.close(root)
        return ListResult(items=items, truncated=truncated)

    def _entries(self, root: Dir, path: str) -> tuple[os.stat_result, tuple[str, ...]] | None:
        """The ``fstat`` of directory ``path`` and its names in key order, a subdirectory's with
        a trailing ``/`` (every key inside it starts so): a file ``a-b`` sorts before the keys
        under ``a/`` (``-`` < ``/``) and ``a0`` after them. None if it is not a directory (any
        more), or is reached through a link. A link in it is named as a key (never entered);
        names starting with ``.`` (locks, temporary files) are left out, and a temporary file
        left behind is removed (:meth:`_left_behind`).

        The stat is the opened directory's, so :class:`StatMemo` keeps the names under the stat of
        the very directory they were read from."""
        t = self._tree
        try:
            d = t.open_dir(root, path[len(self._prefix) :].rstrip("/") if path != str(self.root) else "")
        except OSError:
            return None  # gone, a file, or a link: no keys under it
        try:
            st = t.fstat(d)
            names = []
            with t.scandir(d) as it:
                for e in it:
                    name = e.name
                    if name.startswith("."):
                        self._left_behind(d, e)
                    else:
                        names.append(name + "/" if e.is_dir(follow_symlinks=False) else name)
            return st, tuple(sorted(names))
        finally:
            t.close(d)

    def _info(self, root: Dir, path: str) -> tuple[os.stat_result, ObjectInfo] | None:
        """The ``fstat`` of the file at ``path`` and its listing entry; None if it is gone. The
        entry is kept whole in the memo (it is immutable, and its key is the path's under this
        store's root): a long thread's listing of a thousand unchanged writes documents builds
        no new object for them. What is not a regular file is listed with size 0 and the ETag
        :data:`NOT_A_FILE`, unread, so that a walk meets its key and reports it."""
        key = path[len(self._prefix) :]
        try:
            read = self._read_stat(root, key)
        except NotAnObjectError:
            try:
                return os.lstat(path), ObjectInfo(key=key, etag=NOT_A_FILE, size=0)
            except OSError:
                return None
        if read is None:
            return None
        return read[0], ObjectInfo(key=key, etag=content_etag(read[1]), size=len(read[1]))
