"""Paths opened, made and removed beneath one directory, never through a symbolic link: what keeps
a ``file://`` store (:class:`~langgraph_handoff.stores.local.LocalStore`) inside its root
whatever another local user, or a sidecar on the same volume, places in it.

Why: someone who can write into a store's directory can put links there. Following them,
``delete_thread`` would delete every file of a directory outside the store, a read of a link to
``/dev/zero`` would take all memory, and a dangling link under ``.locks/`` would make writers
create files where it points. So a path below the root is resolved by the kernel with every link refused,
from a handle on the root, and every change to a directory (a file made, renamed, removed) is made
relative to a handle on that directory opened the same way, never by a path looked up again:

* **Linux 5.6+**: one ``openat2`` call with ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`` (through
  ``ctypes``: Python has no binding). A link anywhere on the way fails with ``ELOOP``.
  Measured on a 2-core VM, opening, reading and closing a write's 2 KiB file five directories
  deep: 6.2 µs, against 4.9 for ``os.open`` of the whole path and 18 for the fallback below.
* **Elsewhere** (an older kernel, a sandbox that refuses the call, macOS, the BSDs): one
  ``openat`` per directory with ``O_NOFOLLOW | O_DIRECTORY``. The same guarantee.
* **Without** ``openat`` (no ``dir_fd`` in ``os.supports_dir_fd``; no POSIX platform Python
  supports today): whole paths, with ``O_NOFOLLOW`` on the last component only, so a link in a
  parent directory is followed. Logged once as a warning.

A directory handle (:data:`Dir`) is a file descriptor, or in that last mode the directory's path.
Only :class:`Tree`'s methods take one apart.
"""

from __future__ import annotations

import errno
import logging
import os
import platform
import stat
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["LINKED", "NOFOLLOW", "Dir", "Tree", "tree"]

log = logging.getLogger(__name__)

#: ``O_NOFOLLOW`` where the platform has it
NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY: int = getattr(os, "O_DIRECTORY", 0)
_DIR_FLAGS = os.O_RDONLY | _DIRECTORY | NOFOLLOW | _CLOEXEC
#: errno values that mean "a link was refused": ``ELOOP`` (Linux, macOS), ``EMLINK`` (FreeBSD's
#: ``O_NOFOLLOW``), ``EXDEV`` (``openat2``: a way out of the root)
LINKED = frozenset({errno.ELOOP, errno.EMLINK, errno.EXDEV})

#: a directory handle: a file descriptor (:class:`Tree`), or a path (:class:`PathTree`)
Dir = Any

_RESOLVE_NO_MAGICLINKS, _RESOLVE_NO_SYMLINKS, _RESOLVE_BENEATH = 0x02, 0x04, 0x08
#: ``openat2``'s number where it is 437 (every architecture whose table it joined unshifted)
_OPENAT2_MACHINES = frozenset(
    {"x86_64", "amd64", "aarch64", "arm64", "armv7l", "armv8l", "i386", "i686", "ppc64le", "s390x", "riscv64"}
)
# (os.replace shares os.rename's implementation, but only os.rename is listed)
_DIR_FD = {os.open, os.mkdir, os.rmdir, os.unlink, os.rename, os.stat} <= os.supports_dir_fd


def _openat2_binding() -> Callable[[int, str, int, int], int] | None:
    """``openat2(dir_fd, path, flags, mode)`` refusing every link and every way out of
    ``dir_fd``, or None where the system call cannot be made (tried on first use)."""
    if sys.platform != "linux" or platform.machine() not in _OPENAT2_MACHINES:
        return None
    try:
        import ctypes
    except ImportError:  # a Python built without ctypes
        return None

    class OpenHow(ctypes.Structure):
        _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]

    try:
        syscall = ctypes.CDLL(None, use_errno=True).syscall
    except (OSError, AttributeError):
        return None
    syscall.restype = ctypes.c_long
    syscall.argtypes = (ctypes.c_long, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t)
    size = ctypes.sizeof(OpenHow)
    resolve = _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS
    hows: dict[tuple[int, int], Any] = {}  # (flags, mode) -> a pointer to its struct (read-only once made)
    get_errno, fsencode = ctypes.get_errno, os.fsencode

    def openat2(dir_fd: int, path: str, flags: int, mode: int) -> int:
        how = hows.get((flags, mode))
        if how is None:
            how = hows[flags, mode] = ctypes.pointer(OpenHow(flags, mode, resolve))
        name = fsencode(path)
        while True:
            fd: int = syscall(437, dir_fd, name, how, size)
            if fd >= 0:
                return fd
            code = get_errno()
            if code != errno.EINTR:
                raise OSError(code, os.strerror(code), path)

    return openat2


#: set on the first open: the ``openat2`` binding, or None to walk directory by directory
_openat2: Callable[[int, str, int, int], int] | None = None
_probed = False
_warned = False


def _usable_openat2(dir_fd: int) -> Callable[[int, str, int, int], int] | None:
    """The ``openat2`` binding if the kernel answers it (a seccomp policy may refuse it with
    ``EPERM`` or ``ENOSYS``; a kernel before 5.6 has none), probed once per process."""
    global _openat2, _probed
    if not _probed:
        binding = _openat2_binding()
        if binding is not None:
            try:
                os.close(binding(dir_fd, ".", _DIR_FLAGS, 0))
            except OSError as exc:
                log.debug("openat2 is not usable here (%s): opening directory by directory", exc)
                binding = None
        _openat2, _probed = binding, True
    return _openat2


def _linked_dir(dir_fd: int, name: str, exc: OSError) -> OSError:
    """``exc`` (``ENOTDIR`` from ``O_DIRECTORY | O_NOFOLLOW``), as ``ELOOP`` when ``name`` is a
    link: Linux answers ``ENOTDIR`` for a link there, and callers tell a link from a file."""
    try:
        linked = stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return exc
    return OSError(errno.ELOOP, "a symbolic link", name) if linked else exc


class Tree:
    """The directory ``root``, whose paths are opened beneath it and never through a link.

    Paths given to :meth:`open` and :meth:`open_dir` are ``/``-separated names relative to a
    directory handle, with no ``.`` or ``..`` among them (a store key; ``""`` is the directory
    itself). ``OSError`` passes through: ``errno`` in :data:`LINKED` means a link was refused.
    """

    def __init__(self, root: str) -> None:
        self.root = root

    def open_root(self) -> Dir:
        """A handle on the root, opened per operation: a root replaced by another directory (a
        backup restored under its name) is the one used from the next operation on."""
        return os.open(self.root, _DIR_FLAGS)

    def open(self, d: Dir, path: str, flags: int, mode: int = 0) -> int:
        """A descriptor of ``path`` beneath ``d``; no link is followed, the last one included."""
        parent, _, name = path.rpartition("/")
        if not parent:  # one name: O_NOFOLLOW refuses a link there as openat2 would
            return os.open(name, flags | NOFOLLOW | _CLOEXEC, mode, dir_fd=d)
        openat2 = _openat2 if _probed else _usable_openat2(d)
        if openat2 is not None:
            return openat2(d, path, flags | NOFOLLOW | _CLOEXEC, mode if flags & os.O_CREAT else 0)
        at = self._walk(d, parent)
        try:
            return os.open(name, flags | NOFOLLOW | _CLOEXEC, mode, dir_fd=at)
        finally:
            os.close(at)

    def open_dir(self, d: Dir, path: str) -> Dir:
        """A handle on the directory ``path`` beneath ``d`` (``""``: ``d`` itself, a new handle)."""
        if not path:
            return os.open(".", _DIR_FLAGS, dir_fd=d)
        openat2 = _openat2 if _probed else _usable_openat2(d)
        if openat2 is None:
            return self._walk(d, path)
        try:
            return openat2(d, path, _DIR_FLAGS, 0)
        except NotADirectoryError as exc:  # a link as the last component (one on the way is ELOOP)
            raise _linked_dir(d, path, exc) from None

    @staticmethod
    def _walk(d: int, path: str) -> int:
        at = d
        try:
            for name in path.split("/"):
                try:
                    nxt = os.open(name, _DIR_FLAGS, dir_fd=at)
                except NotADirectoryError as exc:
                    raise _linked_dir(at, name, exc) from None
                if at != d:
                    os.close(at)
                at = nxt
        except BaseException:
            if at != d:
                os.close(at)
            raise
        return at

    # -- what is done in a directory, by name ------------------------------------------------------
    @staticmethod
    def mkdir(d: Dir, name: str, mode: int) -> None:
        os.mkdir(name, mode, dir_fd=d)

    @staticmethod
    def unlink(d: Dir, name: str) -> None:
        os.unlink(name, dir_fd=d)

    @staticmethod
    def rmdir(d: Dir, name: str) -> None:
        os.rmdir(name, dir_fd=d)

    @staticmethod
    def replace(d: Dir, src: str, dst: str) -> None:
        os.replace(src, dst, src_dir_fd=d, dst_dir_fd=d)

    @staticmethod
    def lstat(d: Dir, name: str) -> os.stat_result:
        return os.stat(name, dir_fd=d, follow_symlinks=False)

    # -- the directory itself ----------------------------------------------------------------------
    @staticmethod
    def close(d: Dir) -> None:
        os.close(d)

    @staticmethod
    def fstat(d: Dir) -> os.stat_result:
        return os.fstat(d)

    @staticmethod
    def fsync(d: Dir) -> None:
        os.fsync(d)

    @staticmethod
    def chmod(d: Dir, mode: int) -> None:
        os.fchmod(d, mode)

    @staticmethod
    def scandir(d: Dir) -> Any:
        return os.scandir(d)


class PathTree(Tree):
    """:class:`Tree` where ``openat`` is missing: handles are paths, and only the last component
    of each is opened without following a link."""

    def open_root(self) -> Dir:
        if not os.path.isdir(self.root):
            raise FileNotFoundError(errno.ENOENT, "no such directory", self.root)
        return self.root

    def open(self, d: Dir, path: str, flags: int, mode: int = 0) -> int:
        return os.open(f"{d}/{path}", flags | NOFOLLOW | _CLOEXEC, mode)

    def open_dir(self, d: Dir, path: str) -> Dir:
        if not path:
            return d
        full = f"{d}/{path}"
        os.close(os.open(full, _DIR_FLAGS))  # a directory, not a link to one
        return full

    @staticmethod
    def mkdir(d: Dir, name: str, mode: int) -> None:
        os.mkdir(f"{d}/{name}", mode)

    @staticmethod
    def unlink(d: Dir, name: str) -> None:
        os.unlink(f"{d}/{name}")

    @staticmethod
    def rmdir(d: Dir, name: str) -> None:
        os.rmdir(f"{d}/{name}")

    @staticmethod
    def replace(d: Dir, src: str, dst: str) -> None:
        os.replace(f"{d}/{src}", f"{d}/{dst}")

    @staticmethod
    def lstat(d: Dir, name: str) -> os.stat_result:
        return os.lstat(f"{d}/{name}")

    @staticmethod
    def close(d: Dir) -> None:
        return None

    @staticmethod
    def fstat(d: Dir) -> os.stat_result:
        return os.stat(d)

    @staticmethod
    def fsync(d: Dir) -> None:
        fd = os.open(d, _DIR_FLAGS)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    @staticmethod
    def chmod(d: Dir, mode: int) -> None:
        os.chmod(d, mode)


def tree(root: str) -> Tree:
    """The :class:`Tree` of ``root`` for this platform (see the module docstring)."""
    global _warned
    if _DIR_FD:
        return Tree(root)
    if not _warned:
        _warned = True
        log.warning(
            "this platform's Python cannot open a path relative to a directory (no openat): "
            "a file:// store follows links in its parent directories"
        )
    return PathTree(root)
