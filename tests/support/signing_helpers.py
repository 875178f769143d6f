"""A store holding every kind of object the package writes, for the signing tests (unit and
integration alike): a long ``DeltaChannel`` thread (heads, sealed segments, an archive, a
snapshot stored as pieces, blobs), a plain message list (tails), pending writes, a team (its
roster and a message in an inbox), long-term memories and a pack, a session worker's liveness
record, and the format marker."""

from __future__ import annotations

import base64
from datetime import datetime, timezone
from typing import Annotated, Any

from langchain_core.messages import HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import _messages_delta_reducer
from typing_extensions import TypedDict

from langgraph_handoff import Layout, ObjectStoreSaver
from langgraph_handoff._format import envelope, signing
from langgraph_handoff._format.envelope import Kind
from langgraph_handoff._format.signing import SigningKeys
from langgraph_handoff.handoff.audit import AuditRecord, StoreAuditSink
from langgraph_handoff.memory import ObjectStoreMemory
from langgraph_handoff.ownership import SessionManager
from langgraph_handoff.stores import StoreBase
from langgraph_handoff.teams import Team
from tests.support.chat_helpers import answering_chat, cfg

#: a head past 3 records seals; past 16 segments, an archive; a snapshot past 1 KiB is pieces
LAYOUT = Layout(spill_threshold=1024, head_max_records=3, head_keep=1, tail_min_base=1024)


def keys_of(*ids: str, accept_unsigned: bool = False) -> SigningKeys:
    """Keys with fixed secrets, one per id (the first signs)."""
    spec = ",".join(f"{i}:{base64.urlsafe_b64encode(i.encode().ljust(32, b'.')).decode()}" for i in ids)
    return SigningKeys.parse(spec, accept_unsigned=accept_unsigned)


class Chat(TypedDict):
    messages: Annotated[list, DeltaChannel(_messages_delta_reducer, snapshot_frequency=4)]


def _text(turn: int, who: str) -> str:
    return " ".join(f"{who}{turn}-{i}-{(turn * 31 + i * 17) % 97}" for i in range(40))


def populate(store: StoreBase, signing_key: Any = None) -> ObjectStoreSaver:
    """Every kind of object, written through a saver signing with ``signing_key`` (or none)."""
    saver = ObjectStoreSaver(store, layout=LAYOUT, signing_key=signing_key)
    saver.setup()
    chat = answering_chat(saver, Chat, _text)
    for turn in range(24):
        chat.invoke({"messages": [HumanMessage(content=_text(turn, "me"), id=f"q{turn}")]}, cfg("delta"))

    def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [("ai", "an answer of some length " * 20)]}

    plain = StateGraph(MessagesState).add_node(answer).add_edge(START, "answer").compile(checkpointer=saver)
    for turn in range(12):
        plain.invoke({"messages": [("user", f"question {turn} " * 30)]}, cfg("plain"))
    team = Team(saver, "crew")
    team.spawn("alice", role="answers questions")
    team.send("alice", "hello alice", sender="lead")
    memory = ObjectStoreMemory(saver.store)
    for i in range(4):
        memory.put(("users", "u1"), f"k{i}", {"note": f"remember {i}"})
    memory.search(("users", "u1"))
    sessions = SessionManager(saver)  # a session whose lease names its worker's liveness record
    sessions.keep_alive("worker-a", "0f3c", 30)
    sessions.acquire("leased", "worker-a", 30, liveness="0f3c")
    StoreAuditSink(saver).write(AUDITED)  # an audited handoff, as a graph's store sink files it
    return saver


#: the audit record :func:`populate` files (today, so the review's default window finds it)
AUDITED = AuditRecord(
    "h-audited", "plain", datetime.now(timezone.utc).isoformat(timespec="seconds"), ("sampled",),
    handoff={"id": "h-audited", "source": "triage", "target": "orders", "trigger": "tool", "hop": 1,
             "briefing": "customer asks where order A-1 is"},
)  # fmt: skip


def kinds(store: StoreBase) -> dict[Kind, list[str]]:
    """The keys of every envelope in ``store`` (read raw), by kind."""
    out: dict[Kind, list[str]] = {}
    for info in store.list(""):
        obj = store.get(info.key)
        if obj is None or obj.body[:4] != envelope.MAGIC:
            continue
        kind = envelope.decode(signing.strip(obj.body), key=info.key).kind
        out.setdefault(kind, []).append(info.key)
    return out


#: what :func:`populate` writes, every kind but the never-stored refusal
EVERY_KIND = set(Kind) - {Kind.REFUSED}
