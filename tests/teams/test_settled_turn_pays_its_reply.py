"""A turn that fails once after its input checkpoint committed (a transient error in a node, or
in the post-commit delete/delivery) is finished by the same worker's next step (settle), but
nobody pays its automatic reply nor delivers its outbox: `_reply`/`_deliver` run only after a
successful `_turn` or for a member new to the worker.

Found by an adversarial review of the first teams code (2026-11-30); failed on commit 46b14db.
"""

from typing import Any

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.stores import MemoryStore
from langgraph_handoff.teams import Team, TeamState, TeamWorker
from tests.support.team_helpers import Clock, echo_build, ingested


def flaky_build_factory():
    calls = {"n": 0}

    def build(checkpointer: Any, member: Any = None) -> Any:
        def node(state: TeamState) -> dict[str, Any]:
            calls["n"] += 1
            if calls["n"] == 1:
                raise RuntimeError("transient: model API 503")
            return {"messages": [AIMessage("done the task")]}

        g = StateGraph(TeamState)
        g.add_node("work", node)
        g.add_edge(START, "work")
        g.add_edge("work", END)
        return g.compile(checkpointer=checkpointer)

    return build


def test_transient_node_failure_still_pays_the_automatic_reply():
    saver = ObjectStoreSaver.from_url("memory://")
    team = Team(saver, "t", clock=Clock())
    team.spawn("lead", role="echo")
    team.spawn("bob", role="flaky")
    w = TeamWorker(team, "w", {"echo": echo_build, "flaky": flaky_build_factory()}, max_failures=3)
    team.send("bob", "do the task", sender="lead")
    for _ in range(5):
        w.step()
    lead_got = [m["content"] for m in ingested(saver, team, "lead")]
    assert lead_got == ["done the task"], (lead_got, team.inbox("lead"))


class FailOnceDeleteMany(MemoryStore):
    armed = False

    def delete_many(self, keys, **kw):
        if self.armed and any("/inbox/bob/" in k for k in keys):
            self.armed = False
            raise OSError("connection reset")
        return super().delete_many(keys, **kw)


def test_transient_error_deleting_ingested_messages_still_pays_the_automatic_reply():
    store = FailOnceDeleteMany()
    saver = ObjectStoreSaver(store)
    team = Team(saver, "t", clock=Clock())
    team.spawn("lead", role="echo")
    team.spawn("bob", role="echo")
    w = TeamWorker(team, "w", {"echo": echo_build}, max_failures=3)
    w.step()
    team.send("bob", "task", sender="lead")
    store.armed = True
    for _ in range(5):
        w.step()
    lead_got = [m["content"] for m in ingested(saver, team, "lead")]
    assert lead_got == ["ack task"], (lead_got, team.inbox("lead"))
