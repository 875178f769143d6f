"""``StatMemo``: what a ``LocalStore`` listing learnt of a file or a directory, kept while its
``stat`` says it has not changed.

Why: a long thread's writes live in one directory per checkpoint, and a run lists them on every
turn to check the copies folded into its records (``listing._delta_history_once``). Listing 1,900
of them meant 1,900 ``scandir`` calls and 1,900 files opened, read and hashed for their ETags:
about 50 ms of CPU a turn at turn 1,000. A ``stat`` costs less than half of either.

Why it is safe (the rule git's index uses for "racily clean" entries): a result is kept only for
a path whose ``stat`` was *settled*, that is whose change and modification times are at least
:data:`SETTLED_NS` older than the clock read before that ``stat``. Any later change to the path
(a write in place, a rename over it, an entry added to or removed from a directory) sets its
change time to the time of that change, so its ``stat`` can never again equal the one kept: the
inode number, size and both times are compared. Without the rule, a file rewritten within one
tick of the file system's clock with the same size, on a reused inode, would keep its old ETag.

The rule assumes the wall clock does not step back by more than :data:`SETTLED_NS` and that the
file system's timestamps come from this host's clock (a local disk does; a network file system
whose server runs behind it by more than that does not). Pass ``LocalStore(..., stat_memo=False)``
there.

Thread-safe without a lock: entries are immutable tuples and each dict operation is atomic.
The memo is bounded; past :data:`MAX_ENTRIES` it drops its oldest entries.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["MAX_ENTRIES", "SETTLED_NS", "StatMemo"]

#: How old a stat's times must be before a result is kept for it: far above any file system's
#: timestamp granularity (a clock tick, at most 10 ms; 2 s on FAT).
SETTLED_NS = 3_000_000_000
#: Entries kept, files and directories together (about 200 bytes each).
MAX_ENTRIES = 1 << 17

T = TypeVar("T")
_Signature = tuple[int, int, int, int, int]


def _signature(st: os.stat_result) -> _Signature:
    return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class StatMemo:
    """Results computed from a path's content, kept while the path's ``stat`` is unchanged.

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "doc"
    >>> _ = path.write_bytes(b"body")
    >>> memo = StatMemo(clock=lambda: time.time_ns() + 3_600_000_000_000)  # an hour from now
    >>> reads = []
    >>> def size(p):
    ...     reads.append(p)
    ...     return len(open(p, "rb").read())
    >>> memo.get(str(path), size), memo.get(str(path), size), len(reads)
    (4, 4, 1)
    """

    def __init__(self, *, clock: Callable[[], int] = time.time_ns, max_entries: int = MAX_ENTRIES) -> None:
        self._clock = clock
        self._max = max_entries
        self._kept: dict[str, tuple[_Signature, object]] = {}

    def get(self, path: str, compute: Callable[[str], T]) -> T:
        """``compute(path)``, or what it returned for the same ``stat`` of ``path`` before.

        Raises what ``os.stat`` raises (``FileNotFoundError`` for a path that is gone). A None
        from ``compute`` (the path vanished meanwhile) is returned and not kept.
        """
        now = self._clock()
        st = os.stat(path)
        sig = _signature(st)
        kept = self._kept.get(path)
        if kept is not None and kept[0] == sig:
            return kept[1]  # type: ignore[return-value]
        value = compute(path)
        if value is not None and max(st.st_mtime_ns, st.st_ctime_ns) <= now - SETTLED_NS:
            kept_now = self._kept
            if len(kept_now) >= self._max and path not in kept_now:
                for old in list(kept_now)[: self._max // 8]:  # the oldest eighth
                    kept_now.pop(old, None)
            kept_now[path] = (sig, value)
        else:
            self._kept.pop(path, None)
        return value

    def __len__(self) -> int:
        return len(self._kept)
