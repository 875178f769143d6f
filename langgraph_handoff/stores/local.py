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

POSIX only (``fcntl``). Lock and temporary files start with ``.`` and never appear in listings;
keys can never start with ``.`` (see :func:`~langgraph_handoff.stores.base.validate_key`). Unlike
S3, a file system cannot hold both ``a/b`` and ``a/b/c``: such a put raises
:class:`~langgraph_handoff.errors.InvalidKeyError` (the saver's key layout never does this).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from langgraph_handoff.errors import InvalidKeyError, PreconditionFailedError, StoreError
from langgraph_handoff.stores.base import (
    ListResult,
    ObjectInfo,
    StoreBase,
    StoredObject,
    validate_key,
    validate_prefix,
)
from langgraph_handoff.stores.memory import content_etag
from langgraph_handoff.stores.stat_memo import StatMemo

__all__ = ["LocalStore"]

_LOCK_STRIPES = 256


def _entries(directory: str) -> tuple[os.stat_result, tuple[str, ...]] | None:
    """The ``fstat`` of ``directory`` and its names in key order, a subdirectory's with a trailing
    ``/`` (every key inside it starts so): a file ``a-b`` sorts before the keys under ``a/``
    (``-`` < ``/``) and ``a0`` after them. None if it is not a directory (any more).

    The stat is the opened directory's, so :class:`StatMemo` keeps the names under the stat of
    the very directory they were read from."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        st = os.fstat(fd)
        with os.scandir(fd) as it:
            return st, tuple(sorted(e.name + "/" if e.is_dir(follow_symlinks=False) else e.name for e in it))
    finally:
        os.close(fd)


def _keys_in_order(
    entries: Callable[[str], tuple[str, ...] | None], root: str, rel: str, prefix: str, start_after: str | None
) -> Iterator[str]:
    """The keys under directory ``rel`` (``""`` or ending in ``/``) that start with ``prefix`` and
    sort after ``start_after``, in S3's byte order, lazily; ``entries`` names a directory's
    entries in key order (:func:`_entries`, or its memo).

    A directory whose keys all sort at or before ``start_after``, or none of which can start
    with ``prefix``, is not entered. (Paths are plain strings: ``pathlib`` cost more than the
    system calls on a listing of thousands of directories.)
    """
    names = entries(root + "/" + rel if rel else root)
    for name in names or ():
        if name.startswith("."):
            continue
        key = rel + name
        if name.endswith("/"):
            # prune: no key under it can match the prefix, or all of them sort before start_after
            if not (key.startswith(prefix) or prefix.startswith(key)):
                continue
            if start_after is not None and key < start_after and not start_after.startswith(key):
                continue
            yield from _keys_in_order(entries, root, key, prefix, start_after)
        elif key.startswith(prefix) and (start_after is None or key > start_after):
            yield key


class LocalStore(StoreBase):
    """Objects as files under ``root``; safe for many threads and processes on one host.

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

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = True, stat_memo: bool = True) -> None:
        self.root = Path(root).expanduser().resolve()
        self.fsync = fsync
        # listings take a directory's names and a file's ETag from a stat when it is unchanged
        # (see stat_memo's docstring for why that is safe, and when to turn it off)
        self._memo = StatMemo() if stat_memo else StatMemo(max_entries=0)
        self._locks = self.root / ".locks"
        self._tree_lock = str(self._locks / "tree")
        self._turnstile_lock = str(self._locks / "turnstile")
        try:
            self._locks.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the local store at {self.root}: {exc}") from exc

    def trust_scope(self) -> None:
        """Nothing to probe: this package implements this store's conditional writes itself."""
        return None

    def __repr__(self) -> str:
        return f"LocalStore({str(self.root)!r})"

    # -- helpers ---------------------------------------------------------------------------------
    def _path(self, key: str) -> Path:
        return self.root.joinpath(*validate_key(key).split("/"))

    @contextmanager
    def _locked(self, key: str) -> Iterator[None]:
        stripe = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=2).digest(), "big")
        fd = os.open(self._locks / f"{stripe % _LOCK_STRIPES:03d}", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the flock

    def _fsync_dir(self, path: Path) -> None:
        if not self.fsync:
            return
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    @staticmethod
    def _flock(path: str, operation: int) -> int:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, operation)
        except BaseException:
            os.close(fd)
            raise
        return fd  # closing it releases the flock

    @contextmanager
    def _pruning(self) -> Iterator[None]:
        """Held while a delete removes empty directories. Prunes share it with each other and
        never run while a put holds :meth:`_making_dirs`. They take it through a turnstile that
        such a put holds while it waits, so the put waits only for the prunes already under way."""
        turnstile = self._flock(self._turnstile_lock, fcntl.LOCK_EX)
        try:
            tree = self._flock(self._tree_lock, fcntl.LOCK_SH)
        finally:
            os.close(turnstile)
        try:
            yield
        finally:
            os.close(tree)

    @contextmanager
    def _making_dirs(self) -> Iterator[None]:
        """Held by a put that lost its directory to a prune while making it: no prune runs until
        the put's temporary file is in the directory (from then on ``rmdir`` refuses it).

        Without it the put could only retry, and a bounded retry lost to steady deletes:
        ``StoreError`` "could not create the directory" (8 of 100 rounds of a 10-thread
        put/delete test on Python 3.11, 5 on 3.13). Most puts never take it: a directory that is
        there takes the temporary file at once, and one that is missing is usually made and
        used before any prune comes by."""
        turnstile = self._flock(self._turnstile_lock, fcntl.LOCK_EX)
        try:
            tree = self._flock(self._tree_lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                os.close(tree)
        finally:
            os.close(turnstile)

    def _makedirs(self, directory: Path) -> None:
        """Create missing parents, fsyncing each new entry's directory so it survives a crash.

        Without :meth:`_making_dirs` a concurrent prune may remove a parent between our check
        and our ``mkdir``, or a directory we made before our file lands in it: FileNotFoundError.
        """
        missing: list[Path] = []
        d = directory
        while not d.exists():
            missing.append(d)
            d = d.parent
        for d in reversed(missing):
            try:
                d.mkdir()
            except FileExistsError:
                continue  # another writer made it (and fsyncs its parent)
            self._fsync_dir(d.parent)

    @staticmethod
    def _read(path: Path | str) -> bytes | None:
        try:
            with open(path, "rb") as fh:
                return fh.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    @staticmethod
    def _read_stat(path: str) -> tuple[os.stat_result, bytes] | None:
        """:meth:`_read`, with the ``fstat`` of the file read (for :class:`StatMemo`)."""
        try:
            with open(path, "rb") as fh:
                return os.fstat(fh.fileno()), fh.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    # -- primitives ------------------------------------------------------------------------------
    def get(self, key: str) -> StoredObject | None:
        body = self._read(self._path(key))
        if body is None:
            return None
        return StoredObject(key=key, body=body, etag=content_etag(body))

    def put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        path = self._path(key)
        body = bytes(body)
        with self._locked(key):
            if if_none_match or if_match is not None:
                current = self._read(path)
                if if_none_match and current is not None:
                    raise PreconditionFailedError(key, "key exists")
                if if_match is not None and (current is None or content_etag(current) != if_match):
                    raise PreconditionFailedError(key, "key missing" if current is None else "ETag differs")
            tmp = path.parent / f".tmp.{path.name}.{secrets.token_hex(6)}"
            try:  # the directory is there: once the file is in it, no prune can remove it
                fd = self._create(tmp, key)
            except FileNotFoundError:
                try:
                    self._makedirs_safe(path.parent, key)
                    fd = self._create(tmp, key)
                except FileNotFoundError:  # a prune took a directory back: again, with no prune running
                    with self._making_dirs():
                        self._makedirs_safe(path.parent, key)
                        try:
                            fd = self._create(tmp, key)
                        except FileNotFoundError as exc:  # removed by something other than this store
                            raise StoreError(
                                f"could not create the directory for {key!r} in {self.root}: {exc}"
                            ) from exc
            try:
                view = memoryview(body)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                if self.fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.replace(tmp, path)
            except IsADirectoryError:
                os.unlink(tmp)
                raise self._shadowed(key) from None
            self._fsync_dir(path.parent)
            return content_etag(body)

    def _create(self, tmp: Path, key: str) -> int:
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except NotADirectoryError:
            raise self._shadowed(key) from None

    def _shadowed(self, key: str) -> InvalidKeyError:
        return InvalidKeyError(
            f"LocalStore cannot store {key!r}: a file system cannot hold a key that is also the "
            "prefix of another key ('a/b' and 'a/b/c'); use S3Store for such layouts"
        )

    def _makedirs_safe(self, directory: Path, key: str) -> None:
        try:
            self._makedirs(directory)
        except (FileExistsError, NotADirectoryError):
            raise self._shadowed(key) from None

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        path = self._path(key)
        with self._locked(key):
            if if_match is not None:
                current = self._read(path)
                if current is None:
                    return
                if content_etag(current) != if_match:
                    raise PreconditionFailedError(key, "ETag differs")
            try:
                path.unlink()
            except FileNotFoundError:
                return
            self._fsync_dir(path.parent)
        self._prune_empty_dirs(path.parent)

    def _prune_empty_dirs(self, directory: Path) -> None:
        """Remove ``directory`` and its parents while they are empty, never while a put holds
        :meth:`_making_dirs`.

        A directory seen holding an entry is left without taking the lock: that entry's own
        delete (or prune) checks again after it, and a temporary file becomes its put's object.
        """
        try:
            with os.scandir(directory) as entries:
                if next(entries, None) is not None:
                    return
        except FileNotFoundError:
            return  # pruned already
        with self._pruning():
            d = directory
            while d != self.root and self.root in d.parents:
                try:
                    d.rmdir()
                except OSError as exc:
                    if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
                        return
                    raise
                d = d.parent

    def list_page(self, prefix: str, *, start_after: str | None = None, max_keys: int = 1000) -> ListResult:
        validate_prefix(prefix)
        # Start at the deepest directory the prefix pins down and walk in key order, stopping
        # one key past the page: a page of a thread's newest writes reads a few directories, not
        # every checkpoint's (a long thread has thousands).
        dir_part, _, _ = prefix.rpartition("/")
        root = str(self.root)
        items: list[ObjectInfo] = []
        truncated = False
        now = self._memo.now()  # before every stat of this walk
        entries = self._memo.getter(_entries, now)
        info_of = self._memo.getter(self._info, now)
        for k in _keys_in_order(entries, root, dir_part + "/" if dir_part else "", prefix, start_after):
            if len(items) >= max_keys:
                truncated = True  # one more key exists (or did a moment ago)
                break
            # Listed as it is, even a file whose name is not a portable key (a README dropped
            # into the directory): a listing reports what exists, and the walks over it report
            # and skip such keys. Reading or writing one by key still refuses it.
            info = info_of(root + "/" + k)
            if info is not None:  # a key deleted while listing is left out, and the page filled on
                items.append(info)
        return ListResult(items=items, truncated=truncated)

    def _info(self, path: str) -> tuple[os.stat_result, ObjectInfo] | None:
        """The ``fstat`` of the file at ``path`` and its listing entry; None if it is gone. The
        entry is kept whole in the memo (it is immutable, and its key is the path's under this
        store's root): a long thread's listing of a thousand unchanged writes documents builds
        no new object for them."""
        read = self._read_stat(path)
        if read is None:
            return None
        key = path[len(str(self.root)) + 1 :]
        return read[0], ObjectInfo(key=key, etag=content_etag(read[1]), size=len(read[1]))
