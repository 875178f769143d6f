"""Signed objects: with a key, an object no held key signed is refused before it is decoded,
for every kind of object, and a store written without a key is signed by ``migrate``.

Without a key, write access to the bucket is write access to every worker that reads a thread:
the decoders refuse what the package never writes, but a well-formed object of someone else's is
read like one of yours. The integration twin on the real servers is
``integration_tests/test_store_signing.py``."""

from __future__ import annotations

import asyncio
import base64
import itertools
import logging
from pathlib import Path
from typing import Any

import msgpack
import pytest

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff._format import envelope, keys, signing
from langgraph_handoff._format.damage import DamagedObject
from langgraph_handoff._format.envelope import Kind
from langgraph_handoff._format.signing import SigningKey, SigningKeys
from langgraph_handoff.checkpoint.signed_store import SigningStore, signed_store
from langgraph_handoff.errors import CorruptObjectError, InvalidConfigError, SigningKeyRequiredError
from langgraph_handoff.inspection import verify_store
from langgraph_handoff.memory import ObjectStoreMemory
from langgraph_handoff.stores import LocalStore, MemoryStore, StoreBase
from langgraph_handoff.teams import Team
from tests.support.planted import Planted
from tests.support.signing_helpers import EVERY_KIND, LAYOUT, keys_of, kinds, populate

K1 = keys_of("k1")


def _refusal(store: StoreBase, key: str) -> CorruptObjectError:
    obj = store.get(key)
    assert obj is not None
    with pytest.raises(CorruptObjectError) as info:
        envelope.decode(obj.body, key=key)
    assert info.value.key == key and info.value.reason == "unsigned"
    return info.value


def test_every_object_of_every_kind_is_signed_and_reads_back(store: StoreBase) -> None:
    populate(store, K1)
    found = kinds(store)
    assert set(found) == EVERY_KIND
    for key in itertools.chain.from_iterable(found.values()):
        raw = store.get(key)
        assert raw is not None and signing.signer(raw.body) == "k1", key
    reader = ObjectStoreSaver(store, signing_key=K1)
    assert verify_store(reader).problems == []
    state = ObjectStoreSaver(store, signing_key=K1, layout=LAYOUT).get_tuple({"configurable": {"thread_id": "plain"}})
    assert state is not None and len(state.checkpoint["channel_values"]["messages"]) == 24
    assert [m.name for m in Team(reader, "crew").members()] == ["alice"]
    assert len(ObjectStoreMemory(reader.store).search(("users", "u1"))) == 4


@pytest.mark.parametrize("kind", sorted(EVERY_KIND, key=lambda k: k.value), ids=lambda k: k.name.lower())
def test_an_unsigned_object_of_each_kind_is_refused_unread(kind: Kind, store: StoreBase) -> None:
    """The object is replaced by its own bytes without the signature (what a writer without the
    key would store): the reader refuses it, naming the key, whatever its kind."""
    populate(store, K1)
    key = kinds(store)[kind][0]
    stored = store.get(key)
    assert stored is not None
    store.put(key, signing.strip(stored.body))
    error = _refusal(SigningStore(store, K1), key)
    assert "not signed" in error.detail and "migrate" in str(error)
    assert store.get(key).body == signing.strip(stored.body)  # type: ignore[union-attr]  # left as it was


def test_a_planted_object_is_refused_before_any_of_it_is_decoded(tmp_path: Path, store: StoreBase) -> None:
    """An unsigned head that would run code (a value naming a type to call) or inflate to 256
    MiB: refused for its signature, never decoded (no code ran, nothing inflated)."""
    saver = populate(store, K1)
    mark = tmp_path / "ran"
    key = keys.head_key("plain", "")
    writer = ObjectStoreSaver(MemoryStore(), layout=LAYOUT)  # no key: what an intruder writes
    cfg = writer.put(
        {"configurable": {"thread_id": "plain", "checkpoint_ns": ""}},
        {"v": 4, "id": "1fffffff-0000-6000-8000-000000000000", "ts": "2026-01-01T00:00:00+00:00",
         "channel_values": {"messages": Planted(str(mark))}, "channel_versions": {"messages": 99},
         "versions_seen": {}, "updated_channels": None},
        {"source": "loop", "step": 99}, {"messages": 99},
    )  # fmt: skip
    mark.unlink()
    store.put(key, writer.store.get(key).body)  # type: ignore[union-attr]
    with pytest.raises(CorruptObjectError) as info:
        saver.get_tuple({"configurable": {"thread_id": "plain"}})
    assert info.value.reason == "unsigned" and not mark.exists() and cfg
    found: list[DamagedObject] = []
    listed = list(saver.list(None, on_damaged=found.append))
    assert [(d.key, d.reason) for d in found] == [(key, "unsigned")] and listed
    assert not mark.exists()


def _resigned(body: bytes, key: SigningKey, object_key: str) -> bytes:
    return signing.sign(signing.strip(body), key, object_key)


def test_an_unknown_key_a_moved_object_and_altered_bytes_are_refused(store: StoreBase) -> None:
    populate(store, K1)
    reader = SigningStore(store, K1)
    head = keys.head_key("plain", "")
    body = store.get(head).body  # type: ignore[union-attr]

    store.put(head, _resigned(body, keys_of("intruder").signing, head))
    assert "'intruder', which this reader does not hold" in _refusal(reader, head).detail

    moved = keys.head_key("moved", "")
    store.put(moved, body)  # a valid signature, but for another key
    assert "moved from another key" in _refusal(reader, moved).detail

    # the body altered and its checksum made good again: the signature no longer matches
    env = envelope.decode(signing.strip(body), key=head)
    obj = msgpack.unpackb(env.body, raw=False, strict_map_key=False)
    obj["n"] = "elsewhere"
    altered = envelope.encode(Kind.HEAD, msgpack.packb(obj, use_bin_type=True))
    trailer = body[len(signing.strip(body)) :]
    forged = bytearray(altered)
    forged[7] |= envelope.FLAG_SIGNED
    store.put(head, bytes(forged) + trailer)
    assert "does not match" in _refusal(reader, head).detail


def test_keys_rotate(store: StoreBase) -> None:
    """Sign with a new key while the old one still verifies; a reader that only holds the old
    key refuses what the new one signed, and one holding both reads everything."""
    ObjectStoreSaver(store, signing_key=keys_of("old")).put(
        {"configurable": {"thread_id": "a", "checkpoint_ns": ""}}, _checkpoint(1), {"source": "loop", "step": 1}, {}
    )
    rotated = ObjectStoreSaver(store, signing_key=keys_of("new", "old"))
    assert rotated.get_tuple({"configurable": {"thread_id": "a"}}) is not None
    rotated.put(
        {"configurable": {"thread_id": "b", "checkpoint_ns": ""}}, _checkpoint(2), {"source": "loop", "step": 1}, {}
    )
    assert signing.signer(store.get(keys.head_key("b", "")).body) == "new"  # type: ignore[arg-type, union-attr]
    with pytest.raises(CorruptObjectError, match="'new', which this reader does not hold"):
        ObjectStoreSaver(store, signing_key=keys_of("old")).get_tuple({"configurable": {"thread_id": "b"}})
    # migrate re-signs what the old key signed with the new one
    summary = rotated.migrate()
    assert summary.signing is not None and summary.signing.signed >= 1 and summary.damaged == []
    assert {signing.signer(store.get(i.key).body) for i in store.list("heads/")} == {"new"}  # type: ignore[arg-type, union-attr]


def _checkpoint(n: int) -> Any:
    return {
        "v": 4,
        "id": f"1f0c0000-0000-6000-8000-{n:012x}",
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": {},
        "channel_versions": {},
        "versions_seen": {},
        "updated_channels": None,
    }


def test_migrate_signs_a_store_written_without_a_key_and_then_requires_one(store: StoreBase) -> None:
    """The rollout: workers that sign but still read unsigned objects, ``migrate`` with the key,
    then the marker says a key is required: a reader still accepting unsigned objects stops
    (at its next look at the marker), and a writer without the key is refused."""
    populate(store)  # no key
    clock = [0.0]
    rollout = SigningStore(store, keys_of("k1", accept_unsigned=True), clock=lambda: clock[0])
    reading = ObjectStoreSaver(rollout)
    assert reading.get_tuple({"configurable": {"thread_id": "plain"}}) is not None  # unsigned, accepted

    summary = ObjectStoreSaver(store, signing_key=K1).migrate()
    assert summary.damaged == [] and summary.marked, summary.as_dict()
    assert summary.signing is not None and summary.signing.signed == sum(len(v) for v in kinds(store).values())
    for key in itertools.chain.from_iterable(kinds(store).values()):
        assert signing.signer(store.get(key).body) == "k1", key  # type: ignore[arg-type, union-attr]
    marker = envelope.decode_msgpack(
        signing.strip(store.get(keys.FORMAT_MARKER_KEY).body), key="m", expect=Kind.MARKER
    )[0]  # type: ignore[union-attr]
    assert (marker["signing"] == "required" and marker.get("probe") is None) or isinstance(marker["probe"], dict)

    # an intruder's unsigned object: the rollout reader took unsigned objects until it reads the marker again
    planted = keys.head_key("planted", "")
    store.put(planted, signing.strip(store.get(keys.head_key("plain", "")).body))  # type: ignore[union-attr]
    clock[0] += 60
    assert _refusal(rollout, planted).reason == "unsigned"
    with pytest.raises(SigningKeyRequiredError):
        ObjectStoreSaver(store).setup()
    assert ObjectStoreSaver(store, signing_key=K1).migrate().signing.damaged == [  # type: ignore[union-attr]
        DamagedObject(planted, "unsigned", _refusal(SigningStore(store, K1), planted).detail, "planted")
    ]  # never signed: an intruder's object is not blessed by the next migrate


def test_a_new_store_written_with_a_key_requires_one_from_its_first_setup(store: StoreBase) -> None:
    ObjectStoreSaver(store, signing_key=K1).setup()
    with pytest.raises(SigningKeyRequiredError, match="LANGGRAPH_HANDOFF_SIGNING_KEYS"):
        ObjectStoreSaver(store).setup()


def test_the_async_paths_sign_and_check_alike(store: StoreBase) -> None:
    populate(store, K1)
    head = keys.head_key("plain", "")
    store.put(head, signing.strip(store.get(head).body))  # type: ignore[union-attr]
    saver = ObjectStoreSaver(store, signing_key=K1)

    async def run() -> None:
        with pytest.raises(CorruptObjectError, match="not signed"):
            await saver.aget_tuple({"configurable": {"thread_id": "plain"}})
        assert await saver.aget_tuple({"configurable": {"thread_id": "delta"}}) is not None
        await saver.aput(
            {"configurable": {"thread_id": "c", "checkpoint_ns": ""}}, _checkpoint(3), {"source": "loop", "step": 1}, {}
        )

    asyncio.run(run())
    assert signing.signer(store.get(keys.head_key("c", "")).body) == "k1"  # type: ignore[arg-type, union-attr]


def test_keys_come_from_the_environment_and_never_show_their_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = base64.b64encode(b"s" * 32).decode()
    monkeypatch.setenv("LANGGRAPH_HANDOFF_SIGNING_KEYS", f"k2:{secret},k1:{secret}")
    with ObjectStoreSaver.from_url("memory://") as saver:
        assert saver.store.signs and repr(saver.store).endswith("signed by 'k2'")
        assert secret not in repr(saver.store.keys) and "sssss" not in repr(saver.store.keys.signing)  # type: ignore[attr-defined]
    assert not ObjectStoreSaver.from_url("memory://", signing_key=None).store.signs
    assert SigningKeys.from_env(
        {"LANGGRAPH_HANDOFF_ACCEPT_UNSIGNED": "true", "LANGGRAPH_HANDOFF_SIGNING_KEYS": f"a:{secret}"}
    ).accept_unsigned  # type: ignore[union-attr]
    for bad, said in [
        ("k1", "ID:SECRET"),
        ("k1:not base64!", "not base64"),
        (f"bad id:{secret}", "1-32 characters"),
        ("k1:" + base64.b64encode(b"short").decode(), "16 to 64 bytes"),
        (f"k1:{secret},k1:{secret}", "unique"),
    ]:
        with pytest.raises(InvalidConfigError, match=said) as info:
            SigningKeys.from_env({"LANGGRAPH_HANDOFF_SIGNING_KEYS": bad})
        assert secret not in str(info.value)


def test_a_signing_store_is_signed_once(store: StoreBase) -> None:
    twice = signed_store(signed_store(store, K1), keys_of("k2"))
    assert isinstance(twice, SigningStore) and twice.inner is store


def test_signing_costs_one_keyed_hash_of_each_object(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    """Not timed (bench/signing.py measures): a put signs once, a get verifies once, and the
    request counts are unchanged."""
    from langgraph_handoff.stores import CountingStore

    plain, signed = CountingStore(LocalStore(tmp_path / "a")), CountingStore(LocalStore(tmp_path / "b"))
    for counting, key in ((plain, None), (signed, K1)):
        saver = ObjectStoreSaver(counting, signing_key=key)
        cfg: dict[str, Any] = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        for n in range(5):
            cfg = saver.put(cfg, _checkpoint(n + 1), {"source": "loop", "step": n}, {})
        ObjectStoreSaver(counting, signing_key=key).get_tuple({"configurable": {"thread_id": "t"}})
    assert plain.snapshot() == signed.snapshot()
    caplog.set_level(logging.WARNING)
