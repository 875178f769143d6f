"""Agent teams on Ceph RGW with real processes: the mailbox protocol raced by senders and
duplicate lease-less consumers, and the delegation workload under SIGKILL chaos and zombies."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from conftest import S3_BUCKET, S3_ENDPOINT, make_s3_store
from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.teams import Team, TeamWorker
from tests.support.processes import process_context
from tests.support.team_harness import (
    ChaosConfig,
    check_matrix,
    make_store,
    matrix_consumer,
    matrix_sender,
    run_chaos,
)
from tests.support.team_helpers import echo_build, ingested_ids

pytestmark = pytest.mark.s3

SENDERS = (1, 4, 16)
RECIPIENTS = (1, 4, 8)
CONSUMERS = 2
MESSAGES = 48  # per cell, split between the senders


def _spec() -> dict[str, str]:
    prefix = f"teams-{uuid.uuid4().hex}"
    make_s3_store(prefix).close()  # creates the bucket; fails (not skips) without the server
    return {"kind": "s3", "bucket": S3_BUCKET, "prefix": prefix, "endpoint_url": S3_ENDPOINT}


@pytest.fixture(scope="module")
def pool():  # type: ignore[no-untyped-def]
    ctx = process_context()
    with ctx.Manager() as manager, ctx.Pool(max(SENDERS) + CONSUMERS) as p:
        yield manager, p


@pytest.mark.heavy
@pytest.mark.parametrize("senders", SENDERS)
@pytest.mark.parametrize("recipients", RECIPIENTS)
def test_matrix_senders_by_recipients_with_duplicate_consumers_and_no_leases(
    pool, senders: int, recipients: int
) -> None:  # type: ignore[no-untyped-def]
    """Every cell: sender processes (10 % immediate and 5 % late re-sends) and two consumer
    processes per inbox with leases switched off, all released by one barrier. Nothing lost,
    nothing ingested twice, each sender's messages in order: the protocol alone guarantees it."""
    manager, p = pool
    spec = _spec()
    saver = ObjectStoreSaver(make_store(spec))
    team = Team(saver, "matrix")
    names = [f"r{i}" for i in range(recipients)]
    for n in names:
        team.spawn(n, role="echo")
    barrier, done = manager.Barrier(senders + CONSUMERS), manager.Event()
    sender_names = [f"s{i}" for i in range(senders)]
    per = max(2, MESSAGES // senders)
    consumers = p.starmap_async(
        matrix_consumer, [(spec, "matrix", names, 100 + c, done, barrier) for c in range(CONSUMERS)]
    )
    sent = p.starmap(matrix_sender, [(spec, "matrix", s, names, per, i, barrier) for i, s in enumerate(sender_names)])
    done.set()
    stats = consumers.get(timeout=300)
    figures = check_matrix(saver, team, sent, sender_names)
    print(json.dumps({"senders": senders, "recipients": recipients, **figures, "consumers": stats}))
    assert figures["violations"] == [] and figures["sent"] == senders * per
    saver.close()


def test_a_superseded_worker_process_cannot_ack_on_rgw() -> None:
    """The zombie case on the real store: a worker whose member was taken over keeps its stale
    lease; its next turn is refused by the epoch, and the messages go to the new owner once."""
    spec = _spec()
    saver = ObjectStoreSaver(make_store(spec))
    team = Team(saver, "zombie")
    team.spawn("alice", role="echo")
    zombie = TeamWorker(team, "zombie", {"echo": echo_build}, auto_reply=False)
    zombie.step()
    from langgraph_handoff.ownership import SessionManager

    SessionManager(team.member_saver).acquire("zombie/alice", "successor", 30, force=True)
    msg = team.send("alice", "hello", sender="ops")
    assert zombie.step() == 0 and ingested_ids(saver, team, "alice") == []
    successor = TeamWorker(Team(ObjectStoreSaver(make_store(spec)), "zombie"), "successor", {"echo": echo_build},
                           auto_reply=False)  # fmt: skip
    successor.leases  # noqa: B018 - nothing held yet: it acquires by renewing its own lease
    assert successor.step() == 1 and ingested_ids(saver, team, "alice") == [msg.id]
    zombie._stopping.set()
    successor._stopping.set()
    saver.close()


@pytest.mark.heavy
def test_chaos_delegations_on_rgw(tmp_path: Path) -> None:
    """A lead and 4 teammates on 4 worker processes: the driver SIGKILLs or SIGSTOPs (zombie) a
    worker every 1.5-3 s once the team made progress since the last action (at most 10 actions),
    and workers kill themselves at protocol points. Every delegation completes; nothing is lost,
    ingested twice, reordered, or sent by a superseded worker. ``seconds`` is only a backstop: on
    a quiet machine the run takes about 15 s."""
    cfg = ChaosConfig(store=_spec(), logdir=tmp_path / "logs", tasks=10, rounds=3, p_die=0.01, max_actions=10,
                      seconds=900)  # fmt: skip
    figures = run_chaos(cfg)
    print(json.dumps(figures))
    assert figures["violations"] == [], figures["violations"][:10]
    assert figures["finished"] and figures["delegations_completed"] == cfg.tasks
    assert figures["lost"] == figures["duplicated"] == figures["fifo_violations"] == 0
    assert figures["zombie_messages_delivered"] == 0
    # the run really was chaotic
    assert figures["driver_kills"] + figures["zombies"] + sum(figures["self_kills"].values()) >= 3
    assert figures["ownership_changes"] >= 3
