"""The typed head metadata writes the format the untyped ``Head.extra`` wrote.

``tests/fixtures/head_meta_heads.tar.gz`` holds heads written by the code before the typed record
(commit bb7934b; ``tests/fixtures/make_head_meta_heads.py`` says how), every metadata field by its
real owner plus heads with a newer release's keys, unreadable values and an unusual key order.
Each is decoded and encoded again by the current code, with the nonce it was stored with:

* the decoded structures are equal key by key, down to the type of every value (an ``int``
  stays an ``int``): old and new releases read each other's heads, no upgrade step needed;
* the bytes are identical whenever the stored metadata keys were in ``KEY_ORDER``, the order the
  writers of the dict left after a put. Heads whose keys were stored in another order (a sweep's
  tombstone of a leased thread, a lease taken after a TTL stamp, the crafted ones) come back with
  their keys in that order: the same structure, other bytes.

And the other way round: the same operations run by the current code (each field written by its
typed owner) store metadata of the same shape, value types and numbers as the fixture's.
"""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Any

import msgpack
import pytest

from langgraph_handoff._format import envelope, records
from langgraph_handoff._format.head_meta import KEY_ORDER
from langgraph_handoff.stores import LocalStore

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "head_meta_heads.tar.gz"
_RECORD_KEYS = {"t", "n", "r", "x", "s", "u"}


def _fixture(root: Path) -> dict[str, bytes]:
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(root, filter="data")
    store = LocalStore(root)
    out = {}
    for info in store.list("heads/"):
        obj = store.get(info.key)
        assert obj is not None
        out[info.key] = obj.body
    return out


def _unpacked(data: bytes, key: str) -> dict[str, Any]:
    body = envelope.decode(data, key=key, expect=envelope.Kind.HEAD).body
    return msgpack.unpackb(body, raw=False, strict_map_key=False)  # type: ignore[no-any-return]


def _typed(value: Any) -> Any:
    """``value`` with the type of every scalar in it, so ``60`` and ``60.0`` differ."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


def _in_key_order(keys: list[str]) -> bool:
    known = [k for k in KEY_ORDER if k is not ...]
    lead, trail = known[:4], known[4:]
    ranks = [lead.index(k) if k in lead else 10 + trail.index(k) if k in trail else 5 for k in keys]
    return ranks == sorted(ranks)


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    heads = _fixture(tmp_path_factory.mktemp("head-meta"))
    assert len(heads) == 21
    return heads


def test_heads_written_through_the_dict_come_back_the_same(
    stored: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    same_bytes, reordered = [], []
    for key, data in sorted(stored.items()):
        before = _unpacked(data, key)
        schema = envelope.decode(data, key=key).schema_version
        monkeypatch.setattr(records.secrets, "token_bytes", lambda n, nonce=before["u"]: nonce)
        again = records.encode_head(records.decode_head(data, key=key), schema_version=schema)
        after = _unpacked(again, key)
        assert _typed(after) == _typed(before), key
        meta_keys = [k for k in before if k not in _RECORD_KEYS]
        assert [k for k in after if k not in _RECORD_KEYS] == sorted(meta_keys, key=list(after).index)
        if _in_key_order(meta_keys):
            # the same body byte for byte (its zlib stream may differ: pieces compress on their own)
            assert envelope.decode(again, key=key).body == envelope.decode(data, key=key).body, key
            same_bytes.append(key)
        else:
            assert envelope.decode(again, key=key).body != envelope.decode(data, key=key).body, key
            reordered.append(key)
    # both cases are exercised: most heads are byte for byte the same
    assert len(same_bytes) == 15 and sorted(reordered) == [
        "heads/half-read/=",
        "heads/newer/=",
        "heads/source/=",
        "heads/swept-leased/=",
        "heads/unordered/=",
        "heads/unreadable/=",
    ]


# --------------------------------------------------------------------------------------------------
# The same operations, run by the current code: each owner writes its field as the dict's writers did
# --------------------------------------------------------------------------------------------------

CP = {"v": 4, "ts": "2024-01-01T00:00:00+00:00", "channel_values": {"x": 1}, "channel_versions": {"x": 1},
      "versions_seen": {}}  # fmt: skip
FIRST = "1ef4f797-8335-6428-8001-8a1503f9b875"
#: the fixture's heads that no operation writes (built by hand there)
CRAFTED = {"newer", "unordered", "unreadable", "old-marks", "half-read"}


def _cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def _put(saver: Any, thread: str, cid: str = FIRST, source: str = "update") -> None:
    saver.put(_cfg(thread), {**CP, "id": cid}, {"source": source, "step": 1}, {"x": 1})


def _echo(checkpointer: Any, member: Any) -> Any:
    from langgraph.graph import END, START, StateGraph

    from langgraph_handoff.teams import TeamState

    g = StateGraph(TeamState)
    g.add_node("echo", lambda s: {"messages": [("ai", "got it")]})
    g.add_edge(START, "echo")
    g.add_edge("echo", END)
    return g.compile(checkpointer=checkpointer)


def _write_through_the_owners(store: Any) -> None:
    """``tests/fixtures/make_head_meta_heads.py``'s operations (not its crafted heads), on the
    same clock, through today's typed owners."""
    from langgraph_handoff import ObjectStoreSaver
    from langgraph_handoff._format.head_meta import HeadMeta
    from langgraph_handoff._format.keys import head_key
    from langgraph_handoff.checkpoint import driver
    from langgraph_handoff.checkpoint.ttl import TTLSettings, swept_mark
    from langgraph_handoff.ownership import SessionManager
    from langgraph_handoff.teams import Team, TeamWorker
    from langgraph_handoff.teams.worker import plan_count_resume
    from tests.checkpoint.test_migrations import V1, v1_graph
    from tests.support.graph_scenarios import with_subgraph

    clock = [1_700_000_000.0]
    plain = ObjectStoreSaver(store)
    ttl = ObjectStoreSaver(store, ttl={"default_ttl": 60, "refresh_on_read": True}, clock=lambda: clock[0])
    sessions = SessionManager(plain, clock=lambda: clock[0])
    _put(ttl, "swept")
    _put(ttl, "swept-leased")
    sessions.acquire("swept-leased", "worker-a", ttl=1)
    clock[0] += 120 * 60
    ttl.sweep()
    for thread in ("tomb-upto", "pending"):
        tomb = records.Head(thread, "", {}, {}, (), HeadMeta(swept=swept_mark(clock[0], FIRST)))
        store.put(head_key(thread, ""), records.encode_head(tomb))
    _put(ttl, "pending", "1ef4f797-8335-6428-8002-8a1503f9b875", source="input")
    _put(plain, "plain")
    _put(ttl, "ttl")
    ObjectStoreSaver(store, ttl=TTLSettings(default_ttl=30), clock=lambda: clock[0]).put(
        _cfg("ttl-int"), {**CP, "id": FIRST}, {}, {"x": 1}
    )
    _put(ttl, "refreshed")
    clock[0] += 30 * 60
    ttl.get_tuple(_cfg("refreshed"))
    with_subgraph(plain, V1, "log").invoke({"log": ["outer"]}, {"configurable": {"thread_id": "leased"}})
    lease = sessions.acquire("leased", "worker-a", ttl=30)
    v1_graph(ttl.with_lease(lease)).invoke({"log": ["more"]}, {"configurable": {"thread_id": "leased"}})
    _put(plain, "moving")
    sessions.begin_transfer(sessions.acquire("moving", "worker-a", ttl=30), to_owner="worker-b", timeout=60)
    _put(plain, "accepted")
    sessions.begin_transfer(sessions.acquire("accepted", "worker-a", ttl=30))
    sessions.accept("accepted", "worker-b", ttl=30)
    _put(ttl, "source")
    sessions.acquire("source", "worker-a", ttl=30)
    ttl.copy_thread("source", "copied")
    _put(plain, "deleted")
    sessions.acquire("deleted", "worker-a", ttl=30)
    plain.delete_thread("deleted")
    team = Team(ObjectStoreSaver(store, clock=lambda: clock[0]), "crew", clock=lambda: clock[0])
    team.spawn("lead", role="echo")
    team.spawn("bob", role="echo")
    team.send("bob", "ping", sender="ops")
    worker = TeamWorker(team, "worker-a", {"echo": _echo}, members=["bob"])
    worker.step()
    bob = worker.lease_for(team.thread_id("bob"))
    tup = team.member_saver.get_tuple(_cfg(team.thread_id("bob")))
    assert tup is not None
    cid = tup.config["configurable"]["checkpoint_id"]
    driver.run(team.member_saver.store, plan_count_resume(team.member_saver, team.thread_id("bob"), bob.epoch, cid))


#: maps keyed by ids that differ from run to run (a team ack's message ids and streams)
_ID_MAPS = {"recent", "hwm"}


def _shape(value: Any, name: str = "") -> Any:
    """Keys, the type of every value, and every number: what differs from run to run (ids,
    timestamps as text) is a string, and strings are compared by type only."""
    if isinstance(value, dict) and name in _ID_MAPS:
        return sorted((_shape(v) for v in value.values()), key=repr)
    if isinstance(value, dict):
        return {k: _shape(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return ("str", "") if isinstance(value, str) else (type(value).__name__, value)


def _which(key: str) -> tuple[str, str]:
    """``heads/{T}/{N}`` as (thread, "root" or "sub"): subgraph namespaces carry random task ids."""
    _, thread, ns = key.split("/")
    return thread, "root" if ns == "=" else "sub"


#: lease fields added since the fixture, each written only when set (an older reader ignores
#: them): the transfer that brought an accepted session (its note for the new owner)
_ADDED_LEASE_FIELDS = ("received",)


def _without_added_lease_fields(meta: dict[str, Any]) -> None:
    lease = meta.get("lease")
    if isinstance(lease, dict):
        for name in _ADDED_LEASE_FIELDS:
            lease.pop(name, None)


def test_the_owners_write_what_the_dicts_writers_wrote(stored: dict[str, bytes]) -> None:
    from langgraph_handoff.stores import MemoryStore

    store = MemoryStore()
    _write_through_the_owners(store)
    now = {_which(i.key): _unpacked(store.get(i.key).body, i.key) for i in store.list("heads/")}  # type: ignore[union-attr]
    # a team member's head is in its team's space now, with the same metadata as when it was at the root
    members = "teams/crew/members/"
    for info in store.list(members + "heads/"):
        obj = store.get(info.key)
        assert obj is not None
        now[_which(info.key[len(members) :])] = _unpacked(obj.body, info.key)
    before = {_which(k): _unpacked(data, k) for k, data in stored.items() if _which(k)[0] not in CRAFTED}
    assert sorted(now) == sorted(before)
    for which, head in before.items():
        meta_before = {k: v for k, v in head.items() if k not in _RECORD_KEYS}
        meta_now = {k: v for k, v in now[which].items() if k not in _RECORD_KEYS}
        _without_added_lease_fields(meta_now)
        assert _shape(meta_now) == _shape(meta_before), which
