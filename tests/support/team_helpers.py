"""Graphs and helpers for the agent-team tests: members whose "model" is a script, so every
message and turn is deterministic, and readers of what each member actually ingested."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import interrupt

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.teams import Team, TeamState, team_tools
from langgraph_handoff.testing import ScriptedChatModel


def echo_build(checkpointer: Any, member: Any = None) -> Any:
    """A member that answers every turn with ``ack <last line of each message>``."""

    def node(state: TeamState) -> dict[str, Any]:
        lines = [m.content.splitlines()[-1] for m in state["messages"] if m.type == "human"]
        return {"messages": [AIMessage(f"ack {lines[-1] if lines else ''}")]}

    g = StateGraph(TeamState)
    g.add_node("echo", node)
    g.add_edge(START, "echo")
    g.add_edge("echo", END)
    return g.compile(checkpointer=checkpointer)


def react_graph(checkpointer: Any, model: Any, tools: list[Any]) -> Any:
    """model -> tools -> model until the model answers without tool calls."""
    bound = model.bind_tools(tools)
    g = StateGraph(TeamState)
    g.add_node("model", lambda s: {"messages": [bound.invoke(s["messages"])]})
    g.add_node("tools", ToolNode(tools))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition, ["tools", END])
    g.add_edge("tools", "model")
    return g.compile(checkpointer=checkpointer)


def agent_build(
    team: Team, me: str, script: list[Any] | Callable[[list[BaseMessage]], Any], **kw: Any
) -> Callable[[Any], Any]:
    """A tool-calling agent with the team tools, driven by a script."""

    def build(checkpointer: Any, member: Any = None) -> Any:
        model = ScriptedChatModel(script if isinstance(script, list) else [script], cycle=not isinstance(script, list))
        return react_graph(checkpointer, model, team_tools(team, me, **kw))

    return build


def conversation(saver: ObjectStoreSaver, team: Team, name: str) -> list[BaseMessage]:
    tup = team.member_saver.get_tuple({"configurable": {"thread_id": team.thread_id(name)}})
    return list(tup.checkpoint["channel_values"].get("messages", [])) if tup is not None else []


def ingested_ids(saver: ObjectStoreSaver, team: Team, name: str) -> list[str]:
    """Ids of the team messages in a member's committed conversation, in order."""
    return [
        m.additional_kwargs["team_message"]["id"]
        for m in conversation(saver, team, name)
        if m.type == "human" and "team_message" in m.additional_kwargs
    ]


def ingested(saver: ObjectStoreSaver, team: Team, name: str) -> list[dict[str, Any]]:
    return [
        m.additional_kwargs["team_message"]
        for m in conversation(saver, team, name)
        if m.type == "human" and "team_message" in m.additional_kwargs
    ]


def duplicates(ids: list[str]) -> dict[str, int]:
    return {i: n for i, n in Counter(ids).items() if n > 1}


class Clock:
    """A fake clock the tests move by hand (lease expiry, dedupe windows, skew)."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def ask_build(checkpointer: Any, member: Any = None) -> Any:
    """A member that pauses at ``interrupt("Approve?")`` and answers ``plan <answer>``."""

    def ask(state: TeamState) -> dict[str, Any]:
        answer = interrupt("Approve?")
        return {"messages": [AIMessage(f"plan {answer}")]}

    g = StateGraph(TeamState)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    return g.compile(checkpointer=checkpointer)


def boom_build(checkpointer: Any, member: Any = None) -> Any:
    """A member whose every turn fails (a poison message)."""

    def node(state: TeamState) -> dict[str, Any]:
        raise RuntimeError("tool crashed")

    g = StateGraph(TeamState)
    g.add_node("boom", node)
    g.add_edge(START, "boom")
    g.add_edge("boom", END)
    return g.compile(checkpointer=checkpointer)
