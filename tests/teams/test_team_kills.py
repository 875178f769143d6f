"""Deterministic kill points for agent teams: a worker process is killed once at every send and
receive step of a delegation (right before the store operation, then right after it), another
worker finishes the work, and the outcome is compared with an unkilled run. Local directory
store, forked children."""

from __future__ import annotations

import os
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.stores import LocalStore
from langgraph_handoff.teams import Team, TeamWorker
from tests.support.team_harness import (
    KILLED,
    MATES,
    DyingStore,
    builds,
    check_team,
    conversation,
    give_tasks,
    point_of,
    setup_team,
)

TASKS, ROUNDS = 1, 2
_LINE = re.compile(r"^(task \d+|do \d+\.\d+|done \d+\.\d+)$")


def template(tmp: Path) -> Path:
    """A store with the team spawned and the tasks given: every run starts from a copy of it."""
    path = tmp / "template"
    team = setup_team(ObjectStoreSaver(LocalStore(path)), "k")
    give_tasks(team, range(TASKS))
    return path


def serve(saver: ObjectStoreSaver, owner: str, *, clock_offset: float = 0.0, steps: int = 60) -> Team:
    import time

    team = Team(saver, "k", clock=lambda: time.time() + clock_offset)
    worker = TeamWorker(team, owner, builds(team, ROUNDS), ttl=30)
    for _ in range(steps):
        if worker.step() == 0 and worker.step() == 0:
            break
    worker._stopping.set()  # no heartbeat or hand-over: a plain stop, like a crash at the end
    return team


def lines(saver: ObjectStoreSaver, team: Team) -> dict[str, Counter[str]]:
    """The meaningful lines each member ingested (independent of how messages were batched)."""
    out = {}
    for name in ["lead", *MATES]:
        got: Counter[str] = Counter()
        for m in conversation(saver, team, name):
            if m.type == "human" and "team_message" in m.additional_kwargs:
                got.update(x for x in str(m.content).splitlines()[1:] if _LINE.match(x))
        out[name] = got
    return out


def killed_run(
    tpl: Path, run_dir: Path, die_at: tuple[int, str]
) -> tuple[bool, dict[str, Any], dict[str, Counter[str]]]:
    shutil.copytree(tpl, run_dir)
    pid = os.fork()
    if pid == 0:  # the child: serve until done, or die at the chosen operation
        try:
            serve(ObjectStoreSaver(DyingStore(LocalStore(run_dir), die_at=die_at)), "victim")
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    died = os.waitstatus_to_exitcode(status) == KILLED
    saver = ObjectStoreSaver(LocalStore(run_dir))
    # the survivor's clock is an hour ahead: the victim's lease has expired for it
    team = serve(saver, "survivor", clock_offset=3600.0)
    return died, check_team(saver, team, rounds=ROUNDS, tasks=TASKS), lines(saver, team)


class Recording(DyingStore):
    """Counts like the dying store and remembers what each operation was."""

    def __init__(self, inner: LocalStore) -> None:
        super().__init__(inner)
        self.kinds: list[str] = []

    def _around(self, kind: str, key: str, call: Any) -> Any:
        self.kinds.append(point_of(kind, key) or kind)
        return super()._around(kind, key, call)


#: where a kill is tried: every step of sending and receiving (inbox LIST, message GET, the head
#: CAS that acks, the delete, a delivery PUT) and every other write (pending writes, the roster);
#: reads of heads and write listings are left to the ownership chaos tests
KILL_AT = {"inbox_list", "message_get", "head_cas", "discard", "deliver", "PUT", "DELETE"}


@pytest.mark.heavy
def test_a_kill_at_every_send_and_receive_step_loses_and_doubles_nothing(fast_dir: Path) -> None:
    tmp_path = fast_dir
    tpl = template(tmp_path)
    # the unkilled run, recording the worker's store operations
    base_dir = tmp_path / "base"
    shutil.copytree(tpl, base_dir)
    counting = Recording(LocalStore(base_dir))
    base_saver = ObjectStoreSaver(counting)
    base_team = serve(base_saver, "victim")
    ops = counting.count
    points = [n for n, kind in enumerate(counting.kinds, start=1) if kind in KILL_AT]
    base = check_team(base_saver, base_team, rounds=ROUNDS, tasks=TASKS)
    assert base["violations"] == [] and base["delegations_completed"] == TASKS
    expected = lines(base_saver, base_team)
    assert sum(sum(c.values()) for c in expected.values()) == TASKS * (1 + 2 * ROUNDS)
    assert ops > 30 and len(points) > 30, (ops, points)

    kills = 0
    for n in points:
        for where in ("before", "after"):
            died, figures, got = killed_run(tpl, tmp_path / f"run-{n}-{where}", (n, where))
            kills += died
            assert figures["violations"] == [], (n, where, figures["violations"])
            assert got == expected, (n, where)
            shutil.rmtree(tmp_path / f"run-{n}-{where}")
    assert kills == 2 * len(points)  # every run really died at its point
