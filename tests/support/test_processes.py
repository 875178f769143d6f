"""The process helpers the race tests stand on."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.support.processes import Forked


def test_signalling_a_process_the_server_reaped_before_its_code_arrived_is_a_no_op(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The chaos driver picked a worker to kill just as it died on its own: the forkserver had
    # reaped the pid, but the exit code had not reached the driver yet (CI, 2026-12-02).
    proc = Forked("timeit", ["-n", "1", "pass"], stderr=tmp_path / "err")
    assert proc.wait(timeout=60) == 0
    # the window, held open: the pid is gone and exitcode still says "running"
    monkeypatch.setattr(type(proc._proc), "exitcode", property(lambda self: None))
    proc.send_signal(signal.SIGKILL)
    proc.kill()
