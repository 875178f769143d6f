"""Bad input and damaged storage: typed errors that say what to do, and nothing half-loaded."""

from __future__ import annotations

import struct

import pytest
from langgraph.checkpoint.base.id import uuid6

from langgraph_handoff import CorruptObjectError, EnvelopeVersionError, ObjectStoreSaver
from langgraph_handoff._format import envelope, keys
from langgraph_handoff.errors import InvalidCheckpointIdError, InvalidConfigError, InvalidThreadIdError
from langgraph_handoff.stores import StoreBase
from tests.format.test_keys_and_envelope import HOSTILE
from tests.support.graph_scenarios import scenario_interrupt_resume


def _cp(step: int = 0, **values: object) -> dict:
    return {
        "v": 4,
        "id": str(uuid6(clock_seq=step)),
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": dict(values),
        "channel_versions": {k: 1 for k in values},
        "versions_seen": {},
        "updated_channels": None,
    }


@pytest.mark.parametrize("thread_id", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_thread_ids_and_namespaces_are_stored_safely(thread_id: str, store: StoreBase) -> None:
    saver = ObjectStoreSaver(store)
    cfg = {"configurable": {"thread_id": thread_id, "checkpoint_ns": thread_id}}
    stored = saver.put(cfg, _cp(v="value"), {"source": "input", "step": -1}, {"v": 1})
    saver.put_writes(stored, [("v", "w")], task_id=thread_id)
    tup = saver.get_tuple(cfg)
    assert tup.config["configurable"]["thread_id"] == thread_id
    assert tup.config["configurable"]["checkpoint_ns"] == thread_id
    assert tup.checkpoint["channel_values"] == {"v": "value"}
    assert tup.pending_writes == [(thread_id, "v", "w")]
    # nothing escaped the store's key space
    for info in store.list(""):
        assert info.key.startswith(("heads/", "data/")), info.key
    # the other ids' threads are untouched; the namespace is listed under the right thread
    listed = list(saver.list(None))
    assert [t.config["configurable"]["thread_id"] for t in listed] == [thread_id]
    saver.delete_thread(thread_id)
    assert saver.get_tuple(cfg) is None and list(store.list("")) == []


def test_hostile_ids_run_a_real_graph(store: StoreBase) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    saver = ObjectStoreSaver(store)
    for thread_id in ["../../etc", "a/b/../c", "x" * 3000, "中文", "nul\x00"]:
        expected = scenario_interrupt_resume(InMemorySaver(), "sync", thread_id)
        assert scenario_interrupt_resume(saver, "sync", thread_id) == expected
        assert expected[2]["answer"] == "approved=yes"


def test_invalid_configs_raise_typed_errors(store: StoreBase) -> None:
    saver = ObjectStoreSaver(store)
    for bad in [{}, {"configurable": {}}, {"configurable": {"thread_id": None}}, None]:
        with pytest.raises(InvalidConfigError, match="thread_id"):
            saver.get_tuple(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidThreadIdError, match="empty"):
        saver.get_tuple({"configurable": {"thread_id": ""}})
    with pytest.raises(InvalidConfigError):
        list(saver.list({"configurable": {"checkpoint_ns": ""}}))
    with pytest.raises(InvalidConfigError, match="checkpoint_id"):
        saver.put_writes({"configurable": {"thread_id": "t"}}, [("a", 1)], "task")
    bad_cp = _cp(a=1)
    bad_cp["id"] = "not-a-uuid"
    with pytest.raises(InvalidCheckpointIdError, match="uuid"):
        saver.put({"configurable": {"thread_id": "t"}}, bad_cp, {"source": "input"}, {})
    # an id that cannot exist is simply not found
    assert saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_id": "nope"}}) is None
    with pytest.raises(ValueError):  # typed errors are ValueErrors too
        saver.get_tuple({"configurable": {"thread_id": ""}})
    assert list(store.list("")) == []  # nothing was written by any refused call


def _saved_thread(store: StoreBase) -> ObjectStoreSaver:
    saver = ObjectStoreSaver(store)
    scenario_interrupt_resume(saver, "sync", "t")
    return saver


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty"])
def test_corrupt_head_raises_naming_the_key(damage: str, store: StoreBase) -> None:
    _saved_thread(store)
    key = keys.head_key("t", "")
    body = store.get(key).body
    damaged = {
        "truncate": body[: len(body) // 2],
        "flip": body[:-1] + bytes([body[-1] ^ 0xFF]),
        "garbage": b"{not: an envelope}",
        "empty": b"",
    }[damage]
    store.put(key, damaged)
    fresh = ObjectStoreSaver(store)
    with pytest.raises(CorruptObjectError) as info:
        fresh.get_tuple({"configurable": {"thread_id": "t"}})
    assert info.value.key == key and key in str(info.value)
    with pytest.raises(CorruptObjectError):
        list(fresh.list({"configurable": {"thread_id": "t"}}))
    # a writer is refused too: it must not overwrite what it cannot read
    with pytest.raises(CorruptObjectError):
        fresh.put({"configurable": {"thread_id": "t"}}, _cp(a=1), {"source": "update"}, {"a": 1})
    assert store.get(key).body == damaged


def test_corrupt_writes_document_is_reported_not_dropped(store: StoreBase) -> None:
    saver = _saved_thread(store)
    writes = [i.key for i in store.list("data/") if "/w/" in i.key]
    store.put(writes[0], b"LGHO\x00\x01 broken")
    fresh = ObjectStoreSaver(store, layout=saver.layout)
    with pytest.raises(CorruptObjectError) as info:
        list(fresh.list({"configurable": {"thread_id": "t"}}))
    assert info.value.key == writes[0]


def test_future_envelope_format_is_refused(store: StoreBase) -> None:
    _saved_thread(store)
    key = keys.head_key("t", "")
    data = bytearray(store.get(key).body)
    struct.pack_into(">H", data, 4, envelope.FORMAT_VERSION + 1)
    store.put(key, bytes(data))
    newer, ours = envelope.FORMAT_VERSION + 1, envelope.FORMAT_VERSION
    with pytest.raises(EnvelopeVersionError, match=rf"format {newer}.*up to {ours}.*Upgrade"):
        ObjectStoreSaver(store).get_tuple({"configurable": {"thread_id": "t"}})


def test_misplaced_object_is_detected(store: StoreBase) -> None:
    """A head copied under another thread's key is not silently served as that thread."""
    _saved_thread(store)
    store.put(keys.head_key("other", ""), store.get(keys.head_key("t", "")).body)
    with pytest.raises(CorruptObjectError, match="misplaced"):
        ObjectStoreSaver(store).get_tuple({"configurable": {"thread_id": "other"}})


def test_missing_blob_is_reported(store: StoreBase) -> None:
    from langgraph_handoff import Layout

    saver = ObjectStoreSaver(store, layout=Layout(blob_threshold=16))
    saver.put({"configurable": {"thread_id": "t"}}, _cp(doc="x" * 100), {"source": "input", "step": -1}, {"doc": 1})
    (blob,) = [i.key for i in store.list("data/") if "/b/" in i.key]
    store.delete(blob)
    with pytest.raises(CorruptObjectError, match="missing") as info:
        ObjectStoreSaver(store).get_tuple({"configurable": {"thread_id": "t"}})
    assert info.value.key == blob


def test_setup_writes_and_checks_the_format_marker(store: StoreBase) -> None:
    saver = ObjectStoreSaver(store)
    saver.setup()
    saver.setup()  # idempotent
    data = bytearray(store.get(keys.FORMAT_MARKER_KEY).body)
    struct.pack_into(">H", data, 4, envelope.FORMAT_VERSION + 1)
    store.put(keys.FORMAT_MARKER_KEY, bytes(data))
    with pytest.raises(EnvelopeVersionError):
        saver.setup()


@pytest.mark.parametrize("thread_id", HOSTILE, ids=range(len(HOSTILE)))
def test_every_head_key_of_a_hostile_id_is_a_head_key_and_names_its_thread(thread_id: str) -> None:
    """Walks tell our head keys from stray files by their shape alone (never reading a stray
    file): every key the saver writes must pass, whatever the ids."""
    for ns in ("", thread_id, "child:1|grand:2"):
        key = keys.head_key(thread_id, ns)
        assert keys.is_head_key(key), key
        assert keys.thread_of_key(key) in (thread_id, None)  # None: an over-long id, stored hashed


@pytest.mark.parametrize(
    "key",
    ["heads/README.txt", "heads/readme.md", "heads/t/notes.txt", "heads/t/=/x", "heads/t", "heads/%zz/=",
     "heads/t/%61", "heads//=", "heads/~abc/=", "heads/t/" + "~" + "0" * 63, "data/t/=", "heads/%ff%fe/="],
)  # fmt: skip
def test_keys_under_heads_that_the_saver_never_writes_are_not_head_keys(key: str) -> None:
    assert not keys.is_head_key(key)


#: command lines a user can get wrong: each exits 2 with a message (no traceback) and changes
#: nothing in the store
BAD_COMMANDS = [
    ("history", "{url}", ""),
    ("history", "{url}", "chat-1", "--limit", "0"),
    ("history", "{url}", "chat-1", "--ns", "nope"),
    ("show", "{url}", "chat-1", "--checkpoint", "not-a-uuid"),
    ("show", "{url}", "chat-1", "--ns", "nope", "--raw"),
    ("diff", "{url}", "chat-1", "not-a-uuid", "also-not"),
    ("verify", "{url}", "--thread", ""),
    ("prune", "{url}", "--all"),
    ("prune", "{url}", "--keep-latest"),
    ("prune", "{url}", "--thread", "nosuch", "--older-than", "1"),
    ("copy", "{url}", "chat-1", "chat-1"),
    ("copy", "{url}", "chat-1", "chat-2"),
    ("copy", "{url}", "", "x"),
    ("delete", "{url}", "chat-1"),
    ("delete", "{url}", "nosuch", "--yes", "--force"),
    ("sweep", "{url}", "--ttl", "-1"),
    ("sweep", "{url}", "--strategy", "archive"),
    ("migrate", "{url}", "--migrations", "no_such_module:migrations", "--dry-run"),
    ("migrate", "{url}", "--migrations", "json:nothing", "--dry-run"),
    ("migrate", "{url}", "--migrations", "json:loads", "--dry-run"),
    ("migrate", "{url}", "--migrations", ":migrations", "--dry-run"),
    ("migrate", "{url}", "--migrations", "my app:migrations", "--dry-run"),
    ("threads", "file:///no/such/directory"),
    ("threads", "bogus://x"),
    ("team", "status", "{url}", "nosuch"),
    ("team", "dead", "{url}", "nosuch"),
    ("team", "inbox", "{url}", "nosuch", "alice"),
]


@pytest.fixture(scope="module")
def cli_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, bytes]]:
    from tests.cli.test_cli import populate

    root = tmp_path_factory.mktemp("bad-cli") / "store"
    populate(f"file://{root}")
    return f"file://{root}", _files(root)


def _files(root: object) -> dict[str, bytes]:
    from pathlib import Path

    base = Path(str(root))
    return {
        str(p.relative_to(base)): p.read_bytes() for p in base.rglob("*") if p.is_file() and ".locks" not in p.parts
    }


@pytest.mark.parametrize("args", BAD_COMMANDS, ids=lambda a: " ".join(x for x in a if x != "{url}")[:60])
def test_bad_command_lines_exit_2_with_a_message_and_change_nothing(
    args: tuple[str, ...], cli_store: tuple[str, dict[str, bytes]]
) -> None:
    from tests.cli.test_cli import cli

    url, files = cli_store
    out = cli(*(a.replace("{url}", url) for a in args))
    assert out.returncode == 2, (args, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr and out.stderr.strip(), out.stderr
    assert _files(url[len("file://") :]) == files
