"""OS processes for the race and concurrency tests, forked from one preloaded server.

``spawn`` starts every process as a new interpreter that imports LangGraph, langchain-core and
this package again: about 0.7 s of CPU each, 18 processes for the team matrix, 12 for the lease
race. ``forkserver`` pays that once: a single-threaded server imports :data:`PRELOAD`, then forks
each process from itself. Not plain ``fork``: the test process has threads (pytest-xdist's
channel, the stores' I/O threads, boto3's pools) whose locks a forked child would inherit held.

The server is one per test process and keeps the preload it started with, so every test asks
for the same list.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from multiprocessing.context import BaseContext
from pathlib import Path

#: what the process targets import: the package, its command line, LangGraph's graph API and the
#: test harnesses
PRELOAD = [
    "langgraph_handoff",
    "langgraph_handoff.cli",
    "langgraph.graph",
    "tests.support.race_helpers",
    "tests.support.team_harness",
    "tests.support.chaos_harness",
    "tests.support.fault_racers",
    "tests.support.fault_team",
]


def process_context() -> BaseContext:
    """The multiprocessing context for tests that race processes (pools, managers, barriers)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


class Forked:
    """``python -m MODULE ARGS`` as a process forked from the preloaded server: the chaos drivers
    start a worker after every kill, and a new interpreter spent most of its first seconds
    importing. Offers the part of :class:`subprocess.Popen` the drivers use. The worker runs
    ``MODULE.main()`` with ``sys.argv`` set, in this process's working directory, with ``path``
    first on ``sys.path``, ``env`` as its environment when given (``TZ`` taking effect; else the
    server's), stdout to ``stdout`` (else ``/dev/null``) and stderr to ``stderr``.
    """

    def __init__(
        self,
        module: str,
        args: Sequence[str],
        *,
        stderr: Path,
        stdout: Path | None = None,
        path: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        target = (module, list(args), str(stderr), str(stdout or os.devnull), os.getcwd(), str(path or ""), env)
        self._proc = process_context().Process(target=_main, args=target, name=module)
        self._proc.start()
        self.pid = self._proc.pid

    @property
    def returncode(self) -> int | None:
        """The exit code, ``-N`` after signal N (as with ``Popen``); None while it runs."""
        return self._proc.exitcode

    def poll(self) -> int | None:
        return self._proc.exitcode

    def send_signal(self, sig: int) -> None:
        """Signal the process unless it has exited: signalling one that has is a no-op.

        The process is the forkserver's child, not ours: the server reaps it the moment it exits,
        and its exit code reaches us a little later. In that window ``exitcode`` is still None
        but the pid is gone, and ``os.kill`` raises ``ProcessLookupError`` (seen once in CI, a
        chaos worker that died on its own just as the driver picked it to kill)."""
        if self._proc.exitcode is None:  # as Popen does: never signal a pid that may be reused
            with contextlib.suppress(ProcessLookupError):  # exited and reaped: wait() has its code
                os.kill(self._proc.pid or 0, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        self._proc.join(timeout)
        code = self._proc.exitcode
        if code is None:
            raise subprocess.TimeoutExpired(self._proc.name, timeout or 0)
        return code


def run_main(
    module: str, *args: str, path: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """What ``subprocess.run([python, "-m", MODULE, *ARGS], capture_output=True, text=True)``
    returns, from a :class:`Forked` process: the command-line tests run the command about 50
    times, and a new interpreter spends about a second of CPU importing before it parses its
    arguments. The command still runs in a process of its own (its exit code, output, signals
    and module state are its own); ``tests/cli/test_cli.py`` keeps one run through the interpreter."""
    with tempfile.TemporaryDirectory(prefix="lgh-forked-") as tmp:
        out, err = Path(tmp, "stdout"), Path(tmp, "stderr")
        # this process's environment now, as subprocess.run would pass it, not the server's
        proc = Forked(module, args, stdout=out, stderr=err, path=path, env={**os.environ, **(env or {})})
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
        return subprocess.CompletedProcess([module, *args], code, out.read_text(), err.read_text())


def _main(
    module: str, args: list[str], stderr: str, stdout: str, cwd: str, path: str, env: dict[str, str] | None
) -> None:
    out = os.open(stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(out, 1)
    err = os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(err, 2)
    os.chdir(cwd)
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
        time.tzset()  # the C library reads TZ once; a new interpreter would have read the new one
    if path:
        sys.path.insert(0, path)
    sys.argv = [module, *args]
    sys.exit(importlib.import_module(module).main())
