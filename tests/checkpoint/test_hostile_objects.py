"""Objects written on purpose, by someone who can write into the bucket: each is refused as
damage to its own thread, and every walk over the store reports it and goes on.

A security review wrote these into a store: a head whose few hundred KB inflate to 256 MiB, a
value stored as pieces that names one blob 8,000 times, an integer where bytes belong (``bytes(n)``
of it allocated ``n`` bytes), a size of ``inf``, a segment reference ``../../x``, a checkpoint
that is its own parent (the TTL sweep and the ``DeltaChannel`` history walk never ended), user
values nested deeper than Python's stack. Every one has a valid checksum: the envelope's own
checks pass, so only the decoder's strictness stands between them and the workers.
"""

from __future__ import annotations

import hashlib
import threading
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import msgpack
import pytest

from langgraph_handoff import Layout, ObjectStoreSaver
from langgraph_handoff._format import envelope, keys
from langgraph_handoff._format import records as rec_io
from langgraph_handoff._format.damage import DamagedObject
from langgraph_handoff._format.envelope import Kind
from langgraph_handoff.errors import CorruptObjectError, DamagedObjectsError, UndecodableValueError
from langgraph_handoff.inspection import list_threads, verify_store
from langgraph_handoff.stores import StoreBase
from tests.checkpoint.test_damage import SUB, _cp, _store_with, _write

BAD = keys.head_key("bad", "")
#: what a single read, or a walk past one hostile object, may take at most (the objects below
#: asked for 256 MiB to 4.6 EiB)
MEMORY_BOUND = 48 * 1024 * 1024


def _body(store: StoreBase, key: str) -> dict[str, Any]:
    obj = store.get(key)
    assert obj is not None
    return msgpack.unpackb(envelope.decode(obj.body, key=key).body, raw=False, strict_map_key=False)  # type: ignore[no-any-return]


def _put_body(store: StoreBase, key: str, body: Any, kind: Kind = Kind.HEAD) -> None:
    """What a hostile writer stores: any msgpack, framed with a valid checksum (in format 3,
    which every release since tails reads)."""
    store.put(key, envelope.encode(kind, msgpack.packb(body, use_bin_type=True), format_version=3))


def _first_payload(body: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The payload table entry of the latest checkpoint's first value (what ``get_tuple`` reads)."""
    latest = max(body["r"], key=lambda r: r["i"])
    ch, (origin, _version) = next(iter(latest["v"].items()))
    return body["x"][origin], ch


def _inline_data(value: object) -> Callable[[dict[str, Any]], None]:
    def mutate(body: dict[str, Any]) -> None:
        chs, ch = _first_payload(body)
        chs[ch] = [chs[ch][0], value]

    return mutate


def _blob_size(size: object) -> Callable[[dict[str, Any]], None]:
    def mutate(body: dict[str, Any]) -> None:
        chs, ch = _first_payload(body)
        chs[ch] = {"b": "a" * 32, "t": "msgpack", "n": size}

    return mutate


def _repeated_pieces(body: dict[str, Any]) -> None:
    chs, ch = _first_payload(body)
    owner = body["r"][0]["i"]
    chs[ch] = {"p": [[owner, "a" * 32, 1024, 1]] * 8000, "t": "msgpack"}


def _segment_ref(ref: str) -> Callable[[dict[str, Any]], None]:
    def mutate(body: dict[str, Any]) -> None:
        cid = body["r"][0]["i"]
        body["s"] = [[ref, cid, cid, 1]]

    return mutate


def _parent_of_latest(body: dict[str, Any]) -> None:
    body["r"][0]["p"] = 12345  # a parent that is not a checkpoint id


def _wrong_type_version(body: dict[str, Any]) -> None:
    rec = body["r"][0]
    ch = next(iter(rec["v"]))
    rec["v"][ch] = [rec["v"][ch][0], float("inf")]


#: hostile rewrites of a head's body, each under a valid checksum
HOSTILE: dict[str, Callable[[dict[str, Any]], None]] = {
    "inline bytes(2**62)": _inline_data(2**62),
    "inline bytes(2**28)": _inline_data(2**28),
    "blob size inf": _blob_size(float("inf")),
    "blob size -1": _blob_size(-1),
    "pieces naming one blob 8,000 times": _repeated_pieces,
    "segment ../../x": _segment_ref("../../x"),
    "segment s/../../x": _segment_ref("s/../../x"),
    "parent not an id": _parent_of_latest,
    "version inf": _wrong_type_version,
    "records not a list": lambda body: body.update(r={"a": 1}),
    "table not a map": lambda body: body.update(x=[1, 2]),
    "thread id an int": lambda body: body.update(t=7),
}


@contextmanager
def _bounded_memory() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MEMORY_BOUND, f"peak {peak / 2**20:.0f} MiB"


def _expect_malformed(found: list[DamagedObject]) -> None:
    assert [(d.key, d.reason, d.thread_id) for d in found] == [(BAD, "malformed", "bad")], found


@pytest.mark.parametrize("how", list(HOSTILE))
def test_a_hostile_head_is_its_own_threads_damage_and_every_walk_goes_on(how: str, store: StoreBase) -> None:
    _store_with(store)
    body = _body(store, BAD)
    HOSTILE[how](body)
    _put_body(store, BAD, body)
    saver = ObjectStoreSaver(store, clock=lambda: 4e9)  # every thread long idle
    with _bounded_memory():
        with pytest.raises(CorruptObjectError) as info:
            saver.get_tuple({"configurable": {"thread_id": "bad"}})
        assert info.value.key == BAD and info.value.reason == "malformed"

        found: list[DamagedObject] = []
        listed = list(saver.list(None, on_damaged=found.append))
        _expect_malformed(found)
        assert sum(t.config["configurable"]["thread_id"] == "good" for t in listed) == 5

        threads = list_threads(saver)
        _expect_malformed(threads.damaged)
        assert [r["thread_id"] for r in threads.rows] == ["bad", "good"]  # bad's subgraph reads
        assert [(p.key, p.kind) for p in verify_store(saver).problems] == [(BAD, "CorruptObjectError")]

        swept = saver.sweep(default_ttl=1, dry_run=True)
        _expect_malformed(swept.damaged)
        assert {t.thread_id: t.status for t in swept.threads}["good"] == "would delete"

        with pytest.raises(DamagedObjectsError) as pruned:
            saver.prune(["bad", "good"])
        _expect_malformed(pruned.value.damaged)
    assert len(list(saver.list({"configurable": {"thread_id": "good"}}))) == 2  # pruned: latest per namespace
    assert saver.get_tuple({"configurable": {"thread_id": "good", "checkpoint_ns": SUB}}) is not None


def _bomb(inflated: int) -> bytes:
    """A zlib stream of ``inflated`` zero bytes, built without holding them (level 9: 1028:1)."""
    deflater = zlib.compressobj(9)
    chunk = bytes(1 << 20)
    out = [deflater.compress(chunk) for _ in range(inflated >> 20)]
    return b"".join([*out, deflater.flush()])


def _framed(kind: Kind, stored: bytes, *, version: int, plain: int | None = None) -> bytes:
    """An envelope as a hostile writer frames it: a valid digest over a zlib body."""
    digest = hashlib.blake2b(stored, digest_size=16).digest()
    header = envelope._HEADER.pack(envelope.MAGIC, version, int(kind), envelope.FLAG_ZLIB, 0, len(stored), digest)
    if version >= 4:
        header += (plain if plain is not None else 0).to_bytes(4, "big")
    return header + stored


@pytest.mark.parametrize(
    ("version", "plain"),
    [
        (3, None),  # no plain length: inflated under the ratio bound, and stopped there
        (4, 100),  # a plain length that lies: inflated no further than it says
        (4, 256 << 20),  # the truth, past the ratio bound: refused before inflating at all
        (4, 0),  # zlib takes a limit of 0 as none: the fuzzer's bomb inflated whole (600 MiB)
    ],
    ids=["format 3", "format 4 lying", "format 4 honest", "format 4 zero"],
)
def test_a_zlib_bomb_is_refused_before_it_inflates(version: int, plain: int | None, store: StoreBase) -> None:
    """The review's bomb: 261 KB of head inflating to 256 MiB (1028:1); one ``get_tuple`` took
    484 MiB more memory, and every sweep of the Agent Server read it."""
    _store_with(store)
    stored = _bomb(256 << 20)
    assert len(stored) < 300_000
    store.put(BAD, _framed(Kind.HEAD, stored, version=version, plain=plain))
    saver = ObjectStoreSaver(store)
    with _bounded_memory():
        with pytest.raises(CorruptObjectError, match="inflate") as info:
            saver.get_tuple({"configurable": {"thread_id": "bad"}})
        found: list[DamagedObject] = []
        assert len(list(saver.list(None, on_damaged=found.append))) == 7
        _expect_malformed(found)
    assert info.value.key == BAD


def test_what_the_writer_compresses_is_never_refused_by_the_ratio_bound() -> None:
    """zlib at level 1, the only level written, stays below 230:1 on the data that compresses
    best (zeros); the reader's bound is 256:1, so nothing written is refused."""
    for body in (bytes(8 << 20), b"ab" * (4 << 20)):
        framed = envelope.encode(Kind.BLOB, body)
        assert framed[7] & envelope.FLAG_ZLIB
        assert envelope.decode(framed, key="k").body == body


def test_a_body_past_the_object_limit_is_refused_by_the_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    from langgraph_handoff.errors import ObjectTooLargeError

    monkeypatch.setattr(envelope, "MAX_OBJECT_BYTES", 4 << 20)
    with pytest.raises(ObjectTooLargeError, match="LANGGRAPH_HANDOFF_MAX_OBJECT_BYTES"):
        envelope.encode(Kind.BLOB, bytes(5 << 20))


def _cyclic(store: StoreBase, *, delta: bool) -> ObjectStoreSaver:
    """Thread ``bad``: three checkpoints, the oldest rewritten to be its own parent's parent (a
    loop of two), under a valid checksum."""
    saver = ObjectStoreSaver(store)
    cfg: dict[str, Any] = {"configurable": {"thread_id": "bad", "checkpoint_ns": ""}}
    metadata: dict[str, Any] = {"source": "loop", "step": 0}
    if delta:  # a DeltaChannel counting since its snapshot: keep_latest keeps the ancestors
        metadata["counters_since_delta_snapshot"] = {"messages": 2}
    ids = []
    for step in range(3):
        cfg = saver.put(cfg, _cp(x=step), {**metadata, "step": step}, {"x": 1})
        ids.append(cfg["configurable"]["checkpoint_id"])
    body = _body(store, BAD)
    for rec in body["r"]:
        if rec["i"] == ids[0]:
            rec["p"] = ids[1]  # the first's parent is the second, whose parent is the first
    _put_body(store, BAD, body)
    return saver


def _finishes(call: Callable[[], Any], seconds: float = 60) -> Any:
    """Run ``call`` in a thread and return what it returned or raised; a call still running
    after ``seconds`` fails the test instead of hanging the suite (the old walks never ended)."""
    out: list[Any] = []

    def target() -> None:
        try:
            out.append(("returned", call()))
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out.append(("raised", exc))

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    assert out, f"still running after {seconds} s: the walk loops"
    return out[0]


def test_a_checkpoint_that_is_its_own_ancestor_ends_every_walk(store: StoreBase) -> None:
    saver = _cyclic(store, delta=True)
    _write(saver, "good")
    fresh = ObjectStoreSaver(store, clock=lambda: 4e9)
    how, result = _finishes(
        lambda: fresh.get_delta_channel_history(config={"configurable": {"thread_id": "bad"}}, channels=["messages"])
    )
    assert how == "raised" and isinstance(result, CorruptObjectError), result
    assert result.key == BAD and "own ancestor" in result.detail

    how, swept = _finishes(lambda: fresh.sweep(default_ttl=1, strategy="keep_latest"))
    assert how == "returned", swept
    outcomes = {t.thread_id: t for t in swept.threads}
    assert outcomes["bad"].status == "failed" and [d.key for d in swept.damaged] == [BAD]
    assert outcomes["good"].status in ("pruned", "kept")

    how, result = _finishes(lambda: fresh.prune(["bad"]))
    assert how == "raised" and isinstance(result, DamagedObjectsError), result


def test_the_async_sweep_ends_on_a_parent_loop(store: StoreBase) -> None:
    """The async sweep ran the looping plan on the event loop: the whole Agent Server stopped
    answering."""
    import asyncio

    _cyclic(store, delta=True)
    fresh = ObjectStoreSaver(store, clock=lambda: 4e9)
    how, swept = _finishes(lambda: asyncio.run(fresh.asweep(default_ttl=1, strategy="keep_latest")))
    assert how == "returned" and [d.key for d in swept.damaged] == [BAD], swept


def test_the_async_sweep_lets_the_event_loop_run_between_heads(store: StoreBase) -> None:
    """Inside the Agent Server the sweep shares the event loop with every request: it pauses
    after each head it decodes, so a slow or hostile head holds the loop for one decode at most.
    Counted, not timed: a task that only yields to the loop must get a turn per head."""
    import asyncio

    saver = ObjectStoreSaver(store)
    for i in range(12):
        _write(saver, f"t{i:02}", steps=1)
    fresh = ObjectStoreSaver(store)  # nothing expired: the sweep reads every head and acts on none

    async def run() -> int:
        ticks = 0
        done = False

        async def ticker() -> None:
            nonlocal ticks
            while not done:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        before = ticks
        swept = await fresh.asweep(default_ttl=10**6)
        during = ticks - before
        done = True
        await task
        assert swept.damaged == [] and not any(t.status == "deleted" for t in swept.threads)
        return during

    assert asyncio.run(run()) >= 12


def test_bookkeeping_never_runs_the_serializer_on_stored_metadata(store: StoreBase) -> None:
    """A sweep, ``prune`` and ``delete_for_runs`` read the run id and the delta channels kept in
    clear beside the metadata: a serializer that would run code on loading is never called."""
    calls: list[tuple[str, bytes]] = []

    class Watching(type(ObjectStoreSaver(store).serde)):  # type: ignore[misc]
        def loads_typed(self, data: tuple[str, bytes]) -> Any:
            calls.append(data)
            return super().loads_typed(data)

    saver = ObjectStoreSaver(store, serde=Watching(), clock=lambda: 4e9)
    cfg: dict[str, Any] = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    for step in range(3):
        meta = {"source": "loop", "step": step, "run_id": f"run-{step}", "counters_since_delta_snapshot": {"m": 1}}
        cfg = saver.put(cfg, _cp(x=step), meta, {"x": 1})
    calls.clear()
    saver.sweep(default_ttl=10**9, strategy="keep_latest")
    saver.prune(["t"])
    saver.delete_for_runs(["run-0"])
    assert calls == []
    assert saver.get_tuple({"configurable": {"thread_id": "t"}}) is not None


def test_records_written_before_format_4_are_read_as_plain_data(store: StoreBase) -> None:
    """A record with no bookkeeping in clear: its metadata is read as plain msgpack, every ext
    type left opaque (never imported), and ``delete_for_runs`` still finds its run."""
    saver = ObjectStoreSaver(store)
    cfg: dict[str, Any] = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    for step in range(2):
        cfg = saver.put(cfg, _cp(x=step), {"source": "loop", "step": step, "run_id": f"run-{step}"}, {"x": 1})
    body = _body(store, keys.head_key("t", ""))
    for rec in body["r"]:
        del rec["k"]  # as format 3 wrote it
    _put_body(store, keys.head_key("t", ""), body)
    fresh = ObjectStoreSaver(store)
    assert [
        r.bookkeeping for r in rec_io.decode_head(store.get(keys.head_key("t", "")).body, key="h").records.values()
    ] == [None, None]  # type: ignore[union-attr]
    fresh.delete_for_runs(["run-1"])
    assert [t.metadata["run_id"] for t in fresh.list({"configurable": {"thread_id": "t"}})] == ["run-0"]


@pytest.mark.parametrize(
    "data",
    [b"\x91" * 100_000 + b"\xc0", b"\xc1", b"\x92\x01"],
    ids=["nested past the stack", "not msgpack", "cut short"],
)
def test_a_user_value_the_serializer_cannot_read_is_a_typed_error(data: bytes, store: StoreBase) -> None:
    _store_with(store)
    body = _body(store, BAD)
    _inline_data(data)(body)
    _put_body(store, BAD, body)
    saver = ObjectStoreSaver(store)
    with pytest.raises(UndecodableValueError) as info:
        saver.get_tuple({"configurable": {"thread_id": "bad"}})
    assert info.value.key == BAD and info.value.reason == "undecodable"
    found: list[DamagedObject] = []
    assert sum(t.config["configurable"]["thread_id"] == "good" for t in saver.list(None, on_damaged=found.append)) == 5
    assert [(d.key, d.reason) for d in found] == [(BAD, "undecodable")]


def test_every_object_kind_refuses_an_integer_where_bytes_belong() -> None:
    """``bytes(2**62)`` of a stored integer raised MemoryError; ``bytes(2**28)`` took 19 s."""
    cid = "1f0c0001-aaaa-6bbb-8ccc-000000000001"
    writes = {"t": "t", "n": "", "c": cid, "k": "task", "p": "", "i": [[0, "messages", "msgpack", 2**62, None]]}
    record = {"i": cid, "p": None, "c": ["msgpack", 2**62], "m": ["msgpack", b""], "v": {}}
    for kind, body, decode in (
        (Kind.WRITES, writes, rec_io.decode_writes),
        (Kind.SEGMENT, {"t": "t", "n": "", "r": [record], "x": {}}, rec_io.decode_segment),
    ):
        data = envelope.encode(kind, msgpack.packb(body, use_bin_type=True))
        with _bounded_memory(), pytest.raises(CorruptObjectError, match="expected bytes"):
            decode(data, key="k")


def test_a_layout_that_seals_still_reads_and_writes_after_the_checks(store: StoreBase) -> None:
    """The strict decoder reads everything the writer writes: segments, archives, tails, blobs."""
    layout = Layout(head_max_records=3, head_keep=1, spill_threshold=64, blob_threshold=256, tail_min_base=64)
    saver = ObjectStoreSaver(store, layout=layout)
    cfg: dict[str, Any] = {"configurable": {"thread_id": "long", "checkpoint_ns": ""}}
    for step in range(40):
        cfg = saver.put(
            cfg,
            _cp(log=["entry"] * (step + 1), big="z" * 300 * (step % 3)),
            {"source": "loop", "step": step},
            {"log": 1, "big": 1},
        )
    fresh = ObjectStoreSaver(store, layout=layout)
    history = list(fresh.list({"configurable": {"thread_id": "long"}}))
    assert len(history) == 40 and history[0].checkpoint["channel_values"]["log"] == ["entry"] * 40
    assert verify_store(fresh).problems == []


def test_copy_thread_copies_no_blob_that_is_not_one(store: StoreBase) -> None:
    """A blob replaced by other bytes (an outside file, a planted object) is refused, naming
    its key, and the copy writes no head: nothing of it becomes part of another thread."""
    saver = ObjectStoreSaver(store, layout=Layout(blob_threshold=16))
    saver.put(
        {"configurable": {"thread_id": "src", "checkpoint_ns": ""}},
        _cp(doc="x" * 100),
        {"source": "input", "step": -1},
        {"doc": 1},
    )
    (blob,) = [i.key for i in store.list("data/") if "/b/" in i.key]
    store.put(blob, b"root:x:0:0:root:/root:/bin/bash\n")
    with pytest.raises(CorruptObjectError) as info:
        saver.copy_thread("src", "dst")
    assert info.value.key == blob and info.value.reason == "not_ours"
    assert list(store.list(keys.heads_prefix("dst"))) == []


def test_copy_thread_reports_a_missing_blob_as_damage_not_as_a_busy_thread(store: StoreBase) -> None:
    """Found by the fuzzer: a value naming a blob that is not there (a piece's digest altered)
    made ``copy_thread`` start again 12 times, as if a prune were moving the thread, then raise
    ``ConflictError`` ("retry when it is idle"). A head that has not changed meanwhile means the
    blob is missing: a ``CorruptObjectError`` naming it, on the first attempt."""
    saver = ObjectStoreSaver(store, layout=Layout(blob_threshold=16))
    saver.put(
        {"configurable": {"thread_id": "src", "checkpoint_ns": ""}},
        _cp(doc="x" * 100),
        {"source": "input", "step": -1},
        {"doc": 1},
    )
    (blob,) = [i.key for i in store.list("data/") if "/b/" in i.key]
    store.delete(blob)
    reads: list[str] = []
    get = store.get

    def counting(key: str) -> Any:
        reads.append(key)
        return get(key)

    store.get = counting  # type: ignore[method-assign]
    with pytest.raises(CorruptObjectError) as info:
        saver.copy_thread("src", "dst")
    assert (info.value.key, info.value.reason) == (blob, "missing")
    assert reads.count(blob) == 1  # no second attempt
    assert list(store.list(keys.heads_prefix("dst"))) == []


def test_an_object_too_large_to_fetch_is_its_threads_damage() -> None:
    """A client that refuses a body past its limit (the event-loop S3 client's
    ``max_object_bytes``) raises ``ResponseTooLargeError``; to a walk that is an object it
    cannot read, reported with its key, not the end of the walk."""
    from langgraph_handoff.errors import ResponseTooLargeError
    from langgraph_handoff.stores import MemoryStore
    from langgraph_handoff.stores.base import StoredObject

    class Refusing(MemoryStore):
        refusing = False

        def get(self, key: str) -> StoredObject | None:
            if self.refusing and key == BAD:
                raise ResponseTooLargeError(f"{key}: 2 GiB is past max_object_bytes (1 GiB)")
            return super().get(key)

    store = Refusing()
    _store_with(store)
    store.refusing = True
    saver = ObjectStoreSaver(store)
    with pytest.raises(CorruptObjectError, match="past max_object_bytes") as info:
        saver.get_tuple({"configurable": {"thread_id": "bad"}})
    assert info.value.key == BAD
    found: list[DamagedObject] = []
    assert sum(t.config["configurable"]["thread_id"] == "good" for t in saver.list(None, on_damaged=found.append)) == 5
    _expect_malformed(found)
    # the walks outside a plan (``threads``, ``verify``) raised it and stopped
    _expect_malformed(list_threads(saver).damaged)
    assert [(p.key, p.kind) for p in verify_store(saver).problems] == [(BAD, "CorruptObjectError")]


@pytest.mark.parametrize("stored_as", ["tail", "pieces"])
def test_verify_finds_a_base_or_piece_that_is_not_what_its_value_was_written_over(
    stored_as: str, store: StoreBase
) -> None:
    """Found by the fuzzer: a blob under a tail's base (or a piece of a value) replaced by another
    well-formed blob made ``get_tuple`` refuse the value, while ``verify`` called the store fine.
    ``verify`` now checks every base and piece as a read does (its size, a base's list frame)."""
    from tests.support.signing_helpers import populate

    populate(store)
    thread = "plain" if stored_as == "tail" else "delta"
    kind = rec_io.Tail if stored_as == "tail" else rec_io.Pieces
    tables = [
        rec_io.decode_segment(store.get(i.key).body, key=i.key).payloads  # type: ignore[union-attr]
        for i in store.list(keys.data_prefix(thread, ""))
        if "/s/" in i.key
    ]
    origin, payload = next((o, p) for t in tables for o, chs in t.items() for p in chs.values() if isinstance(p, kind))
    blob = keys.blob_key(thread, "", *rec_io.blob_refs(origin, payload)[-1])
    store.put(blob, envelope.encode(Kind.BLOB, msgpack.packb(["not", "the", "base"])))
    saver = ObjectStoreSaver(store)
    with pytest.raises(CorruptObjectError) as info:
        list(saver.list({"configurable": {"thread_id": thread}}))
    assert info.value.key == blob
    assert [p.key for p in verify_store(saver).problems] == [blob]
