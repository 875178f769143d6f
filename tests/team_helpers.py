"""Graphs and helpers for the agent-team tests: members whose "model" is a script, so every
message and turn is deterministic, and readers of what each member actually ingested."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.teams import Team, TeamState, team_tools
from langgraph_handoff.testing import ScriptedChatModel


def echo_build(checkpointer: Any) -> Any:
    """A member that answers every turn with ``ack <last line of each message>``."""

    def node(state: TeamState) -> dict[str, Any]:
        lines = [m.content.splitlines()[-1] for m in state["messages"] if m.type == "human"]
        return {"messages": [AIMessage(f"ack {lines[-1] if lines else ''}")]}

    g = StateGraph(TeamState)
    g.add_node("echo", node)
    g.add_edge(START, "echo")
    g.add_edge("echo", END)
    return g.compile(checkpointer=checkpointer)


def agent_build(
    team: Team, me: str, script: list[Any] | Callable[[list[BaseMessage]], Any], **kw: Any
) -> Callable[[Any], Any]:
    """A tool-calling agent (model -> tools -> model) with the team tools, driven by a script."""

    def build(checkpointer: Any) -> Any:
        tools = team_tools(team, me, **kw)
        model = ScriptedChatModel(script if isinstance(script, list) else [script], cycle=not isinstance(script, list))
        bound = model.bind_tools(tools)
        g = StateGraph(TeamState)
        g.add_node("model", lambda s: {"messages": [bound.invoke(s["messages"])]})
        g.add_node("tools", ToolNode(tools))
        g.add_edge(START, "model")
        g.add_conditional_edges("model", tools_condition, ["tools", END])
        g.add_edge("tools", "model")
        return g.compile(checkpointer=checkpointer)

    return build


def conversation(saver: ObjectStoreSaver, team: Team, name: str) -> list[BaseMessage]:
    tup = saver.get_tuple({"configurable": {"thread_id": team.thread_id(name)}})
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
