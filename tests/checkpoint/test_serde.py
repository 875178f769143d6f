"""Serialisation: the saver's ``serde`` covers everything it stores, including metadata; strict
msgpack allowlists from ``with_allowlist`` reach the saver; custom serializers are honoured."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_handoff import MemoryStore, ObjectStoreSaver
from langgraph_handoff._format import envelope
from langgraph_handoff.errors import UndecodableValueError
from tests.support.graph_scenarios import scenario_interrupt_resume, subgraph_with_interrupt

KEY = b"0123456789abcdef0123456789abcdef"


def _plain_bodies(store: MemoryStore) -> bytes:
    """Every stored object's body, unframed and decompressed, concatenated."""
    out = []
    for info in store.list(""):
        out.append(envelope.decode(store.get(info.key).body, key=info.key).body)
    return b"\n".join(out)


def test_encrypted_serializer_covers_values_writes_and_metadata() -> None:
    store = MemoryStore()
    serde = EncryptedSerializer.from_pycryptodome_aes(key=KEY)
    saver = ObjectStoreSaver(store, serde=serde)
    graph = subgraph_with_interrupt().compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "t", "customer": "SECRET-CUSTOMER"}, "metadata": {"note": "SECRET-NOTE"}}
    graph.invoke({"trail": ["SECRET-INPUT"]}, cfg)
    graph.invoke(__import__("langgraph.types", fromlist=["Command"]).Command(resume="SECRET-ANSWER"), cfg)
    state = graph.get_state(cfg)
    assert "SECRET-INPUT" in state.values["trail"] and state.values["answer"] == "approved=SECRET-ANSWER"
    assert state.metadata["customer"] == "SECRET-CUSTOMER"
    at_rest = _plain_bodies(store)
    for secret in (b"SECRET-INPUT", b"SECRET-ANSWER", b"SECRET-CUSTOMER", b"SECRET-NOTE", b"approve?"):
        assert secret not in at_rest, secret
    assert b"msgpack+aes" in at_rest
    # the wrong key cannot read it: a loud failure, never a silent empty state
    wrong = ObjectStoreSaver(store, serde=EncryptedSerializer.from_pycryptodome_aes(key=b"f" * 32))
    with pytest.raises(UndecodableValueError, match=r"MAC check failed.*serializer") as info:
        wrong.get_tuple(cfg)
    assert isinstance(info.value.__cause__, ValueError) and info.value.reason == "undecodable"


def test_unencrypted_store_does_hold_plaintext() -> None:
    """Control for the test above: the search would find the secrets if they were there."""
    store = MemoryStore()
    graph = subgraph_with_interrupt().compile(checkpointer=ObjectStoreSaver(store))
    graph.invoke({"trail": ["SECRET-INPUT"]}, {"configurable": {"thread_id": "t"}})
    assert b"SECRET-INPUT" in _plain_bodies(store)


def test_encrypted_runs_match_inmemory() -> None:
    serde = EncryptedSerializer.from_pycryptodome_aes(key=KEY)
    expected = scenario_interrupt_resume(InMemorySaver(), "sync", "t")
    assert scenario_interrupt_resume(ObjectStoreSaver(MemoryStore(), serde=serde), "sync", "t") == expected


class CountingSerde:
    """A custom serializer (not JsonPlus): it must be the one used for every value."""

    def __init__(self) -> None:
        self.inner = JsonPlusSerializer()
        self.dumps = 0
        self.loads = 0

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        self.dumps += 1
        typ, data = self.inner.dumps_typed(obj)
        return "custom-" + typ, data

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        self.loads += 1
        typ, raw = data
        assert typ.startswith("custom-"), typ
        return self.inner.loads_typed((typ[len("custom-") :], raw))


def test_custom_serde_is_used_for_everything() -> None:
    serde = CountingSerde()
    expected = scenario_interrupt_resume(InMemorySaver(), "sync", "t")
    assert scenario_interrupt_resume(ObjectStoreSaver(MemoryStore(), serde=serde), "sync", "t") == expected
    assert serde.dumps > 0 and serde.loads > 0


def test_with_allowlist_copy_shares_store_and_cache() -> None:
    """An explicit (strict) allowlist makes with_allowlist return a shallow copy with a new serde;
    the copy must keep using the same store, head cache and layout."""
    saver = ObjectStoreSaver(MemoryStore(), serde=JsonPlusSerializer(allowed_msgpack_modules=[("os", "PathLike")]))
    clone = saver.with_allowlist([("tests.checkpoint.test_serde", "CountingSerde")])
    assert clone is not saver and clone.serde is not saver.serde
    assert clone.store is saver.store and clone._cache is saver._cache and clone.layout is saver.layout
    cfg = clone.put(
        {"configurable": {"thread_id": "t"}},
        {
            "v": 4,
            "id": "1f0c0a2e-3b4d-6e5f-8a9b-0c1d2e3f4a5b",
            "ts": "",
            "channel_values": {"a": 1},
            "channel_versions": {"a": 1},
            "versions_seen": {},
            "updated_channels": None,
        },
        {"source": "input"},
        {"a": 1},
    )
    assert saver.get_tuple(cfg).checkpoint["channel_values"] == {"a": 1}


STRICT_SCRIPT = textwrap.dedent(
    """
    import dataclasses, operator
    from typing import Annotated
    from typing_extensions import TypedDict
    from langgraph.graph import StateGraph, START, END
    from langgraph_handoff import ObjectStoreSaver, MemoryStore

    @dataclasses.dataclass
    class Point:
        x: int
        y: int

    class S(TypedDict):
        p: Point

    b = StateGraph(S)
    b.add_node("move", lambda s: {"p": Point(s["p"].x + 1, s["p"].y)})
    b.add_edge(START, "move"); b.add_edge("move", END)
    saver = ObjectStoreSaver(MemoryStore())
    graph = b.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "t"}}
    graph.invoke({"p": Point(1, 2)}, cfg)
    restored = graph.get_state(cfg).values["p"]
    raw = saver.serde.loads_typed(saver.serde.dumps_typed(Point(1, 2)))
    print(type(restored).__name__, restored, type(raw).__name__, graph.checkpointer is not saver)
    """
)


def test_strict_msgpack_allowlist_reaches_the_saver() -> None:
    env = dict(os.environ, LANGGRAPH_STRICT_MSGPACK="true")
    out = subprocess.run([sys.executable, "-c", STRICT_SCRIPT], env=env, capture_output=True, text=True, check=True)
    # through the compiled graph (allowlisted) the dataclass comes back; through the bare saver,
    # strict mode refuses to revive it; and compile() swapped in an allowlisted copy of the saver
    assert out.stdout.split() == ["Point", "Point(x=2,", "y=2)", "dict", "True"], out.stdout + out.stderr
