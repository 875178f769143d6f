"""The fault campaign's agent team: ``TeamWorker`` processes serving a team through the fault
proxy, SIGKILLed at seeded points and started again, while a sender sends messages; then the
checker.

The sender (this process, through the proxy) sends each message with an idempotency key and
tries a failed send again with the same key, a few times at most; a send that returned is
*acknowledged*. A worker is killed right after a seeded choice of sends, whatever it is doing
then, and a new process takes its name at once (so it takes its members back without waiting
for their leases to expire). When the faults stop, the workers must ingest every acknowledged
message; then they are asked to stop (a file they watch) and must end on their own, exit code 0.

The checker fails on: an acknowledged message not ingested by its recipient, or out of the
order the sends returned in; any message ingested twice; a member left ``failed`` (the store's
errors must never fail a member); a worker that ended by itself before it was asked to stop, or
with an error (``TeamWorker.run`` must outlive every outage).
"""

from __future__ import annotations

import dataclasses
import json
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from langgraph_handoff import Layout, ObjectStoreSaver
from langgraph_handoff.errors import LangGraphHandoffError
from langgraph_handoff.teams import Team, TeamWorker
from tests.support.fault_campaign import Report, under_faults
from tests.support.fault_proxy import FaultProxy
from tests.support.fault_stores import StoreSpec
from tests.support.processes import Forked
from tests.support.team_helpers import echo_build, ingested_ids

__all__ = ["main", "run_team"]

MEMBERS = ("alice", "bob")
TEAM = "crew"
#: the workers' leases: a member whose worker was killed and not restarted is free after this
TTL = 6.0


def main() -> int:
    """A worker process: ``python -m tests.support.fault_team SPEC URL OWNER STOPFILE``."""
    spec, url, owner, stop = StoreSpec(**json.loads(sys.argv[1])), sys.argv[2], sys.argv[3], Path(sys.argv[4])
    team = Team(ObjectStoreSaver(spec(url), layout=Layout(backoff=0.005)), TEAM)
    worker = TeamWorker(team, owner, {"echo": echo_build}, auto_reply=False, ttl=TTL, poll=0.01, max_poll=0.1)
    worker.run(until=stop.exists)
    print("stopped", flush=True)
    return 0


def run_team(
    proxy: FaultProxy,
    spec: StoreSpec,
    *,
    seed: int,
    messages: int = 12,
    workers: int = 2,
    kills: int = 3,
    rate: float = 0.1,
    partition_seconds: float = 0.3,
) -> Report:
    report = Report()
    rng = random.Random(seed)
    clean = ObjectStoreSaver(spec(proxy.upstream))
    clean.setup()
    team = Team(clean, TEAM)
    for name in MEMBERS:
        team.spawn(name, role="echo")
    sender = Team(ObjectStoreSaver(spec(proxy.url), layout=Layout(backoff=0.005)), TEAM)
    acked: dict[str, list[str]] = {name: [] for name in MEMBERS}
    owners = [f"w{i}" for i in range(workers)]
    with tempfile.TemporaryDirectory(prefix="lgh-team-") as tmp:
        stop = Path(tmp, "stop")
        starts = Counter[str]()

        def start(owner: str) -> Forked:
            starts[owner] += 1
            n = starts[owner]
            args = [json.dumps(dataclasses.asdict(spec)), proxy.url, owner, str(stop)]
            return Forked("tests.support.fault_team", args, stdout=Path(tmp, f"{owner}-{n}.out"),
                          stderr=Path(tmp, f"{owner}-{n}.err"))  # fmt: skip

        def died(owner: str, proc: Forked, code: int | None) -> None:
            err = Path(tmp, f"{owner}-{starts[owner]}.err").read_text()[-600:]
            report.dead.append(f"worker {owner} ended by itself (exit code {code}): {err}")

        def kill(owner: str) -> None:
            code = procs[owner].poll()
            if code is not None:
                died(owner, procs[owner], code)
            procs[owner].kill()
            procs[owner].wait(60)
            report.figures["SIGKILLs"] += 1
            procs[owner] = start(owner)

        def ingested() -> dict[str, list[str]]:
            return {name: ingested_ids(clean, team, name) for name in MEMBERS}

        def caught_up(seconds: float, kills: int) -> None:
            """Until every acknowledged message is ingested (or ``seconds``): a poll of the store
            for a condition, with a deadline; ``kills`` workers SIGKILLed on the way, each once
            the team ingested a seeded number of messages more since the last."""
            deadline, done = time.monotonic() + seconds, threading.Event()
            next_kill = sum(map(len, ingested().values())) + rng.randint(1, 3)
            while time.monotonic() < deadline:
                now = ingested()
                if all(set(ids) <= set(now[name]) for name, ids in acked.items()):
                    return
                if kills and sum(map(len, now.values())) >= next_kill:
                    kill(rng.choice(owners))
                    kills -= 1
                    next_kill += rng.randint(1, 3)
                done.wait(0.05)

        procs = {owner: start(owner) for owner in owners}
        kill_after = set(rng.sample(range(messages), kills // 2))
        with under_faults(proxy, report, seed=seed, rate=rate, partition_seconds=partition_seconds):
            for i in range(messages):
                to = MEMBERS[i % len(MEMBERS)]
                for _ in range(4):  # the same key each time: a send that committed is not sent twice
                    report.invokes += 1
                    try:
                        message = sender.send(to, f"m{i}", sender="ops", idempotency_key=f"m{i}")
                    except LangGraphHandoffError as exc:
                        report.typed[type(exc).__name__] += 1
                        report.samples.setdefault(type(exc).__name__, f"send m{i}: {exc}"[:400])
                        continue
                    except Exception as exc:  # noqa: BLE001 - what the campaign is looking for
                        report.untyped.append(f"send m{i}: {type(exc).__name__}: {exc}"[:300])
                        continue
                    report.acknowledged += 1
                    acked[to].append(message.id)
                    break
                if i in kill_after:  # wherever the worker is then
                    kill(rng.choice(owners))
            caught_up(30, kills - kills // 2)  # the workers do their work under the faults too
        caught_up(120, 0)  # the faults stopped: the workers must catch up with every message
        stop.touch()
        for owner, proc in procs.items():
            try:
                code = proc.wait(60)
            except Exception:  # noqa: BLE001 - did not stop: a hung worker
                proc.kill()
                code = proc.wait(60)
            if code != 0:
                died(owner, proc, code)
    for name, ids in acked.items():
        got = ingested_ids(clean, team, name)
        twice = {i: n for i, n in Counter(got).items() if n > 1}
        if twice:
            report.duplicated.append(f"{name}: ingested more than once: {twice}")
        missing = [i for i in ids if i not in got]
        if missing:
            report.lost.append(f"{name}: acknowledged messages never ingested: {missing}")
        elif [i for i in got if i in set(ids)] != [i for i in dict.fromkeys(ids)]:
            report.duplicated.append(f"{name}: ingested out of order: {got} (sent {ids})")
    for name, member in team.roster(refresh=True).members.items():
        if member.state != "active":
            report.unusable.append(f"member {name} is {member.state} after the faults")
    report.figures["messages ingested"] += sum(len(ingested_ids(clean, team, n)) for n in MEMBERS)
    sender.saver.store.close()
    clean.store.close()
    return report


if __name__ == "__main__":
    sys.exit(main())
