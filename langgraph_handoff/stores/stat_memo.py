"""``StatMemo``: what a ``LocalStore`` listing learnt of a file or a directory, kept while its
``stat`` says it has not changed.

Why: a long thread's writes live in one directory per checkpoint, and a run lists them on every
turn to check the copies folded into its records (``listing._delta_history_once``). Listing 1,900
of them meant 1,900 ``scandir`` calls and 1,900 files opened, read and hashed for their ETags:
about 57 ms of CPU a turn at turn 950. A ``stat`` costs less than half of either.

Why it is safe (the rule git's index uses for "racily clean" entries): a result is kept only for
a path whose ``stat`` was *settled*, that is whose change and modification times are at least a
window older than the clock read before that ``stat``. Any later change to the path (a write in
place, a rename over it, an entry added to or removed from a directory) sets its change time to
the time of that change, so its ``stat`` can never again equal the one kept: the inode number,
device, size and both times are compared. Without the rule, a file rewritten in place within one
tick of the file system's clock, with the same size, would keep its old ETag. The kept signature
is the ``fstat`` of the very file descriptor the result was read from, so a path re-pointed
between a ``stat`` and a read (a directory renamed away and back) cannot pair one file's
signature with another's content.

The window is :data:`SETTLED_NS` (250 ms) for a *file* whose two times both show a precision
finer than 10 ms, and :data:`COARSE_SETTLED_NS` (3 s) for everything else:

* a **directory**: an entry added to it changes neither its inode nor (mostly) its size, so a
  directory's names are the result that a stale match would get wrong for a key just written;
  it keeps the long margin;
* a time that is a whole multiple of 10 ms: a file system that stores times that coarsely
  (FAT's 2 s, exFAT's 10 ms, whole seconds) may stamp a change that far behind the clock.

A file changes only by a write in place from outside the store (the store's own writes rename a
new file over it, a new inode), so the short window matters only for that case, and a file of
the last 3 s is no longer opened, read and hashed again on every listing.

The rule assumes that the file system stamps times from this host's clock, never more than the
window behind the clock read by :meth:`now` (a local disk does; a network or FUSE file system
whose server runs behind this host by more than 250 ms does not: pass
``LocalStore(..., stat_memo=False)`` there), and that the wall clock does not step back by more
than the window.

Why the short window: a result is recomputed on every listing until its path settles. A
``DeltaChannel`` thread writes a writes directory and document every turn and lists them all on
the next ones, so with a window of 3 s every file of the last 3 s was opened, read and hashed on
every listing: about 100 turns at turn 400 of the long-threads bench (2026-12-03).

Hits take no lock: entries are immutable tuples and each dict operation is atomic under the GIL.
Inserting and evicting take one. The memo is bounded: past :data:`MAX_ENTRIES` it drops its least
recently used eighth (a hit counts as a use once the memo is half full; before that nothing can be
evicted, and moving entries would only cost time).
"""

from __future__ import annotations

import os
import struct
import threading
import time
from collections.abc import Callable
from stat import S_ISDIR
from typing import TypeVar

__all__ = ["COARSE_SETTLED_NS", "MAX_ENTRIES", "SETTLED_NS", "StatMemo"]

#: How old a file's times must be before a result is kept for it, when both show a precision
#: finer than 10 ms: Linux's local file systems stamp times from the kernel's coarse clock,
#: normally one tick (10 ms at HZ=100) behind the wall clock; this is 25 such ticks.
SETTLED_NS = 250_000_000
#: The same for a directory, and when either time is a whole multiple of :data:`_COARSE_UNIT_NS`
#: (FAT stores 2 s, exFAT 10 ms, some file systems whole seconds): far above any of those
#: granularities. A fine time that happens to be such a multiple (one in ten million) only
#: waits longer.
COARSE_SETTLED_NS = 3_000_000_000
_COARSE_UNIT_NS = 10_000_000
#: Entries kept, files and directories together. A walk of every thread keeps two per thread
#: (its ``heads/`` directory and head: ``threads``, a sweep, an unindexed filtered list),
#: ``verify`` about nine; a file's entry takes about 470 bytes, so a full memo holds about
#: 120 MiB: every head of 130,000 threads, or what ``verify`` reads of 29,000 (about 9 entries
#: a thread of a few writes). Past that a walk rereads what it meets (once per walk: the walk stays
#: linear), unless the store was given a larger memo (``LocalStore(stat_memo=N)``); below, the
#: memo holds only what was walked.
MAX_ENTRIES = 1 << 18

T = TypeVar("T")
#: a ``stat``'s inode, device, size and both times, packed: 73 bytes where a tuple of five ints
#: took about 230, a third of a file's entry. The times are taken modulo 2**64 (:data:`_TIMES`):
#: a time someone set past what 64 bits hold must not make a listing fail, and two times that
#: far apart (584 years) never meet in one path's life.
_Signature = bytes
_pack = struct.Struct("<QQQQQ").pack
_TIMES = (1 << 64) - 1


def _settled(st: os.stat_result, settled: int, coarse: int) -> bool:
    """Both times at or before ``settled`` for a file with fine times, else at or before ``coarse``."""
    mtime_ns, ctime_ns = st.st_mtime_ns, st.st_ctime_ns
    if mtime_ns % _COARSE_UNIT_NS and ctime_ns % _COARSE_UNIT_NS and not S_ISDIR(st.st_mode):
        return mtime_ns <= settled and ctime_ns <= settled
    return mtime_ns <= coarse and ctime_ns <= coarse


def _signature(st: os.stat_result) -> _Signature:
    return _pack(st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns & _TIMES, st.st_ctime_ns & _TIMES)


class StatMemo:
    """Results computed from a path's content, kept while the path's ``stat`` is unchanged.

    ``compute(path)`` returns the ``stat`` of what it read (an ``fstat`` of its descriptor) and
    its result, or None if the path is gone. With ``max_entries=0`` nothing is kept: every
    ``get`` computes, and no ``stat`` is taken.

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "doc"
    >>> _ = path.write_bytes(b"body")
    >>> memo = StatMemo(clock=lambda: time.time_ns() + 3_600_000_000_000)  # an hour from now
    >>> reads = []
    >>> def size(p):
    ...     reads.append(p)
    ...     with open(p, "rb") as fh:
    ...         return os.fstat(fh.fileno()), len(fh.read())
    >>> memo.get(str(path), size), memo.get(str(path), size), len(reads)
    (4, 4, 1)
    """

    def __init__(self, *, clock: Callable[[], int] = time.time_ns, max_entries: int = MAX_ENTRIES) -> None:
        self._clock = clock
        self._max = max(0, max_entries)  # 0: keep nothing (``LocalStore(stat_memo=False)``)
        # never rebound (getters hold its ``get``); changed only under the lock
        self._kept: dict[str, tuple[_Signature, object]] = {}
        self._lock = threading.Lock()

    def now(self) -> int:
        """The clock, read before a walk's stats: one reading serves every :meth:`get` after it."""
        return self._clock()

    def get(
        self, path: str, compute: Callable[[str], tuple[os.stat_result, T] | None], now: int | None = None
    ) -> T | None:
        """``compute(path)``'s result, or what it returned for the same ``stat`` of ``path`` before.

        ``now`` is :meth:`now` read before this call (default: read here). None if the path is
        gone: its ``stat`` or ``compute`` found it missing (``FileNotFoundError``,
        ``NotADirectoryError``, or a None from ``compute``). A gone path is dropped.
        """
        return self.getter(compute, self._clock() if now is None else now)(path)

    def getter(self, compute: Callable[[str], tuple[os.stat_result, T] | None], now: int) -> Callable[[str], T | None]:
        """:meth:`get` with ``compute`` and ``now`` bound, for a walk's many paths.

        A listing makes two calls per key (its directory, its file): one Python frame each here
        instead of three took about a tenth off a 1,000-key listing of a long thread's writes
        (2026-12-03). The rest is the two ``stat`` calls themselves.
        """
        kept_get, keep, settled, coarse = self._kept.get, self._max > 0, now - SETTLED_NS, now - COARSE_SETTLED_NS
        stat = os.lstat  # a link put in a file's place is never taken for the file it names
        pack, times = _pack, _TIMES  # _signature, inlined: one frame less per path

        def get(path: str) -> T | None:
            kept = kept_get(path)
            if kept is not None:
                try:
                    st = stat(path)
                except (FileNotFoundError, NotADirectoryError):
                    self._drop(path, kept)
                    return None
                if kept[0] == pack(st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns & times, st.st_ctime_ns & times):
                    if len(self._kept) * 2 > self._max:  # only a memo near full evicts: keep the order then
                        self._touch(path, kept)
                    return kept[1]  # type: ignore[return-value]
            try:
                computed = compute(path)
            except (FileNotFoundError, NotADirectoryError):
                computed = None
            if computed is None:
                if kept is not None:
                    self._drop(path, kept)
                return None
            st, value = computed
            if keep and _settled(st, settled, coarse):
                self._keep(path, (_signature(st), value))
            elif kept is not None:
                self._drop(path, kept)
            return value

        return get

    def _touch(self, path: str, entry: tuple[_Signature, object]) -> None:
        """Move a hit to the newest end, so a scan larger than the memo evicts the others. Under
        the lock: another thread may drop or add entries meanwhile."""
        with self._lock:
            kept = self._kept
            if kept.get(path) is entry and next(reversed(kept)) != path:
                del kept[path]
                kept[path] = entry

    def _drop(self, path: str, entry: tuple[_Signature, object]) -> None:
        """Forget ``entry`` if it is still the one kept for ``path`` (not a newer one)."""
        with self._lock:
            if self._kept.get(path) is entry:
                del self._kept[path]

    def _keep(self, path: str, entry: tuple[_Signature, object]) -> None:
        with self._lock:
            kept = self._kept
            kept.pop(path, None)
            if len(kept) >= self._max:
                for old in list(kept)[: max(1, self._max // 8)]:  # the least recently used eighth
                    del kept[old]
            kept[path] = entry

    def __len__(self) -> int:
        return len(self._kept)

    def __contains__(self, path: object) -> bool:
        return path in self._kept
