#!/usr/bin/env python3
"""Long-threads worker: ONE workload on ONE saver, in a fresh process (``long_threads.py`` runs it).

One thread, ``--turns`` turns; a turn is one sync ``invoke`` that adds a user question and gets a
scripted answer (no LLM). After every turn: the process CPU (``time.process_time``: user + system
of every thread of this process, so LangGraph's and the saver's background threads count) and the
wall time of that ``invoke``, and where the saver can be counted per turn, its requests and the
bytes it wrote. At each checkpoint turn (50, 100, 250, 500, 1,000): ``get_state`` and
``get_state_history(limit=10)`` timed three times each, the stored size, the resident memory,
and a check that the thread holds every message (a saver that lost checkpoints must not look
fast). Nothing outside the ``invoke`` call is timed.

Modes:

* ``turns`` (default): the above; ``--out FILE`` gets the per-turn series and the checkpoints.
* ``profile``: the same on one saver, with turns ``--profile-from``..``--turns`` under cProfile
  (one profiler per thread, each on its thread's CPU clock); writes the pstats file and a summary.
* ``short``: the 5-node graph of ``workload.py`` (sync nodes), ``--conversations`` new threads x 1
  sync ``invoke`` after ``--warmup`` ones: client CPU per invoke. With ``--latency-ms L`` (only
  for ``inmemory``) every saver call first blocks L ms in ``time.sleep``, standing in for a store
  round trip (:class:`LatentInMemorySaver`). ``--saver s3-floor`` is ``InMemorySaver`` making
  ours' requests on S3 (:func:`floor_s3_saver`).
* ``plot``: the PNG figures from ``long-threads-results.json`` (needs matplotlib).

The text is word-like and seeded (:class:`Words`): it compresses about as well as English prose,
so byte counts are not flattered by repeated characters.

Usage: ``python longwork.py --workload delta-100 --saver handoff-memory --turns 1000 --out F``
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import gc
import itertools
import json
import os
import random
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from workload import REGION, ensure_bucket, installed_versions, make_serde_shim, payload_bytes, s3_delete_prefix  # noqa: E402

CHECKPOINTS = (50, 100, 250, 500, 1000)


def window(turn: int) -> int:
    """Turns in the window that ends at a checkpoint turn: the last 10 %, at least 10 turns
    (41-50, 91-100, 226-250, 451-500, 901-1,000)."""
    return min(turn, max(10, turn // 10))


TIMED_READS = 3  # get_state / get_state_history calls per checkpoint (median reported)
HISTORY_LIMIT = 10
QUESTION_CHARS = ANSWER_CHARS = 400
TOOL_RESULT_CHARS = 8 * 1024
THREAD = "long-thread"

# ------------------------------------------------------------------------------------------------
# word-like text
# ------------------------------------------------------------------------------------------------

_ONSETS = [
    "b",
    "c",
    "d",
    "f",
    "g",
    "h",
    "j",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "w",
    "y",
    "z",
    "br",
    "ch",
    "cl",
    "cr",
    "dr",
    "fl",
    "gr",
    "pl",
    "pr",
    "sh",
    "st",
    "th",
    "tr",
]
_NUCLEI = ["a", "e", "i", "o", "u", "a", "e", "i", "o", "u", "ai", "ea", "ee", "ie", "oo", "ou"]
_CODAS = ["", "", "", "n", "r", "s", "t", "l", "nd", "st", "ng", "rt", "ck"]


class Words:
    """Seeded word-like text: a vocabulary of 5,000 made-up words of 1-4 syllables, drawn with a
    Zipf law (short words common), in sentences with capitals, commas and full stops. zlib level 1
    shrinks it to about 0.49 of its size (0.44 for this project's README), against 0.005 for
    ``"x" * n``. ``Words().text("answer", 7, 400)`` is the same string in every process."""

    def __init__(self, seed: int = 7, size: int = 5000) -> None:
        rng = random.Random(seed)
        words: set[str] = set()
        while len(words) < size:
            n = rng.choices((1, 2, 3, 4), (30, 40, 22, 8))[0]
            words.add("".join(rng.choice(_ONSETS) + rng.choice(_NUCLEI) for _ in range(n)) + rng.choice(_CODAS))
        ranked = sorted(words)
        rng.shuffle(ranked)
        ranked.sort(key=lambda w: len(w) + rng.random() * 4)
        self.vocab = ranked
        self.cum = list(itertools.accumulate(1 / (r + 1) ** 1.05 for r in range(size)))

    def text(self, kind: str, turn: int, chars: int) -> str:
        rng = random.Random(f"{kind}-{turn}")
        out: list[str] = []
        size, start = 0, True
        while size < chars + 20:
            w = self.vocab[bisect.bisect(self.cum, rng.random() * self.cum[-1])]
            if start:
                w, start = w.capitalize(), False
            r = rng.random()
            if r < 0.08:
                w, start = w + ".", True
            elif r < 0.14:
                w += ","
            out.append(w)
            size += len(w) + 1
        return " ".join(out)[:chars].rsplit(" ", 1)[0].rstrip(",.") + "."


# ------------------------------------------------------------------------------------------------
# workloads
# ------------------------------------------------------------------------------------------------

WORKLOADS = {
    # name: (shape, channel, snapshot_frequency, description)
    "delta-100": (
        "chat",
        "delta",
        100,
        "chat; `messages: Annotated[list, DeltaChannel(_messages_delta_reducer, snapshot_frequency=100)]`",
    ),
    "delta-1000": ("chat", "delta", 1000, "chat; the same `DeltaChannel` with `snapshot_frequency=1000`"),
    "list": ("chat", "list", None, "chat; `messages: Annotated[list, add_messages]` (the usual `MessagesState`)"),
    "tools": (
        "tools",
        "delta",
        100,
        "tool-heavy agent: question, AI tool call, 8 KiB tool result, AI answer per turn (3 nodes); "
        "`DeltaChannel(snapshot_frequency=100)`",
    ),
    "subgraph": (
        "subgraph",
        "list",
        None,
        "the conversation in a stateful subgraph (`compile(checkpointer=True)`, `add_messages`) called "
        "by the parent's node; the parent keeps only the last question and answer",
    ),
}
MESSAGES_PER_TURN = {"chat": 2, "tools": 4, "subgraph": 2}


class Workload:
    """Builds the graph of a workload and knows each turn's input and the expected state."""

    def __init__(self, name: str, saver: Any, words: Words) -> None:
        from typing import Annotated

        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        from langgraph.graph import END, START, StateGraph
        from langgraph.graph.message import add_messages
        from typing_extensions import TypedDict

        self.name = name
        self.shape, channel, snapshot, _ = WORKLOADS[name]
        self.words = words
        if channel == "delta":
            from langgraph.channels.delta import DeltaChannel
            from langgraph.graph.message import _messages_delta_reducer

            reducer: Any = DeltaChannel(_messages_delta_reducer, snapshot_frequency=snapshot)
        else:
            reducer = add_messages

        # functional form: the annotations of a local class would be strings (PEP 563 here)
        Chat = TypedDict("Chat", {"messages": Annotated[list, reducer]})  # noqa: UP013

        def answer(turn: int, last: Any) -> Any:
            if self.shape == "tools" and isinstance(last, HumanMessage):
                call = {"name": "search", "args": {"query": last.content[:60]}, "id": f"call-{turn}"}
                return AIMessage(content="", tool_calls=[call], id=f"t{turn}-call")
            return AIMessage(content=words.text("answer", turn, ANSWER_CHARS), id=f"t{turn}-a")

        def agent(state: dict) -> dict:
            msgs = state["messages"]
            turn = (len(msgs) + MESSAGES_PER_TURN[self.shape] - 1) // MESSAGES_PER_TURN[self.shape]
            return {"messages": [answer(turn, msgs[-1])]}

        def tools(state: dict) -> dict:
            call = state["messages"][-1].tool_calls[0]
            turn = int(call["id"].split("-")[1])
            result = words.text("tool", turn, TOOL_RESULT_CHARS)
            return {"messages": [ToolMessage(content=result, tool_call_id=call["id"], id=f"t{turn}-tool")]}

        chat = StateGraph(Chat)
        chat.add_node("agent", agent)
        chat.add_edge(START, "agent")
        if self.shape == "tools":
            chat.add_node("tools", tools)
            chat.add_conditional_edges("agent", lambda s: "tools" if s["messages"][-1].tool_calls else END)
            chat.add_edge("tools", "agent")
        else:
            chat.add_edge("agent", END)
        self.human = HumanMessage
        if self.shape != "subgraph":
            self.graph = chat.compile(checkpointer=saver)
            self.state_ns = ""
            return

        conversation = chat.compile(checkpointer=True)  # stateful: keeps its messages across turns

        Outer = TypedDict("Outer", {"question": str, "answer": str}, total=False)  # noqa: UP013

        def talk(state: dict) -> dict:
            turn = int(state["question"].split(":", 1)[0])
            q = HumanMessage(content=state["question"].split(":", 1)[1], id=f"t{turn}-q")
            out = conversation.invoke({"messages": [q]})
            return {"answer": out["messages"][-1].content}

        outer = StateGraph(Outer)
        outer.add_node("conversation", talk)
        outer.add_edge(START, "conversation")
        outer.add_edge("conversation", END)
        self.graph = outer.compile(checkpointer=saver)
        self.state_ns = "conversation"  # the subgraph's namespace (stateful: no task id in it)

    def input(self, turn: int) -> dict:
        q = self.words.text("question", turn, QUESTION_CHARS)
        if self.shape == "subgraph":
            return {"question": f"{turn}:{q}"}
        return {"messages": [self.human(content=q, id=f"t{turn}-q")]}

    def config(self) -> dict:
        return {"configurable": {"thread_id": THREAD}}

    def state_config(self) -> dict:
        """Where the conversation lives: the thread's root, or the subgraph's namespace."""
        return {"configurable": {"thread_id": THREAD, "checkpoint_ns": self.state_ns}}

    def check(self, values: dict, turn: int) -> None:
        n = len(values.get("messages", []))
        want = MESSAGES_PER_TURN[self.shape] * turn
        if n != want:
            raise AssertionError(f"after turn {turn}: {n} messages in the state, expected {want}")


# ------------------------------------------------------------------------------------------------
# savers and what each can count
# ------------------------------------------------------------------------------------------------

SAVERS = {
    # name: (venv, talks S3, description)
    "handoff-memory": ("long", False, 'ours: `ObjectStoreSaver.from_url("memory://")`'),
    "handoff-file": ("long", False, 'ours: `ObjectStoreSaver.from_url("file://<temp dir>")` (fsync on)'),
    "handoff-s3": ("long", True, "ours on S3 (RGW), obstore transport (the default), sync API"),
    "inmemory": ("long", False, "LangGraph `InMemorySaver`"),
    "sqlite": ("long", False, "`SqliteSaver` on a temp file (WAL, LangGraph's settings)"),
    "postgres": ("long", False, "`PostgresSaver` (psycopg 3) on a PostgreSQL 15 the bench starts"),
    "objectstorage": ("long", True, "langgraph-checkpoint-objectstorage 0.1.15 (s3fs), sync API"),
    "s3-peer+shim": ("aio", True, "langgraph-checkpoint-s3 0.1.3 `S3CheckpointSaver` + serde shim"),
}
#: savers of the short phase only (``--mode short``): not in the long-thread tables
SHORT_ONLY = {
    "s3-floor": (
        "long",
        True,
        "`InMemorySaver` that also makes ours' requests on S3 (obstore): the floor of any S3 saver",
    ),
}
ALL_SAVERS = {**SAVERS, **SHORT_ONLY}


def rss_kib() -> dict[str, int]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def wchar() -> int:
    """Bytes this process passed to write(2) and friends (/proc/self/io), all threads."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    return 0


def _byte_counting_store(inner: Any) -> Any:
    """Our ``CountingStore`` (requests by kind) that also sums the bodies of PUTs: the bytes the
    saver sends to storage. Bench-only; the package is unchanged."""
    from langgraph_handoff.stores.base import Put
    from langgraph_handoff.stores.counting import CountingStore

    class ByteCountingStore(CountingStore):
        put_bytes = 0

        def _note(self, ops):  # type: ignore[no-untyped-def]
            super()._note(ops)
            n = sum(len(op.body) for op in ops if isinstance(op, Put))
            if n:
                with self._lock:
                    self.put_bytes += n

        def put(self, key, body, *, if_match=None, if_none_match=False):  # type: ignore[no-untyped-def]
            with self._lock:
                self.put_bytes += len(body)
            return super().put(key, body, if_match=if_match, if_none_match=if_none_match)

    return ByteCountingStore(inner)


class Meter:
    """Per-turn requests and bytes written, stored size; the base counts nothing."""

    requests_how = "n/a"
    written_how = "n/a"
    stored_how = "n/a"
    last: tuple[int, int] | None = None

    def _now(self) -> tuple[int, int] | None:
        """(requests so far, bytes written so far), or None where this meter cannot count them."""
        return None

    def turn_start(self, turn: int) -> None:
        self.last = self._now()

    def turn_end(self, turn: int) -> tuple[float | None, float | None]:
        """(requests, bytes written) of the turn that just ended, or None where not counted here."""
        now = self._now()
        if now is None or self.last is None:
            return None, None
        return now[0] - self.last[0], now[1] - self.last[1]

    def stored(self) -> int | None:
        return None

    def mark(self, step: str) -> None:
        pass

    def proxy_steps(self) -> dict:
        return {}

    def close(self) -> None:
        pass


class ProxyMeter(Meter):
    """S3 savers: requests and request-body bytes counted at the counting proxy (``proxy.py``), per
    turn (each turn is a step there); stored bytes by listing the prefix on the server."""

    requests_how = "S3 requests counted at the proxy"
    written_how = "request bodies counted at the proxy"
    stored_how = "sizes of the objects under the thread's prefix, listed on the server"

    def __init__(self, proxy: str, tag: str, lister: Any) -> None:
        self.proxy, self.tag, self.lister = proxy, tag, lister

    def mark(self, step: str) -> None:
        name = urllib.parse.quote(f"{self.tag}|{step}")
        urllib.request.urlopen(f"{self.proxy}/__bench/phase?name={name}", timeout=30).read()

    def turn_start(self, turn: int) -> None:
        self.mark(f"turn{turn}")

    def turn_end(self, turn: int) -> tuple[float | None, float | None]:
        self.mark("idle")
        return None, None  # filled in from the proxy's counts at the end

    def stored(self) -> int | None:
        self.mark("measure")
        try:
            return self.lister()
        finally:
            self.mark("idle")

    def proxy_steps(self) -> dict:
        counts = json.load(urllib.request.urlopen(f"{self.proxy}/__bench/counts", timeout=60))
        out: dict[str, dict] = {}
        for section in ("counts", "totals"):
            for key, value in counts.get(section, {}).items():
                head, _, step = key.partition("|")
                if head == self.tag:
                    out.setdefault(step, {})[section] = value
        return out


class OursMeter(Meter):
    requests_how = "store requests counted by `CountingStore` (the requests S3 would get)"
    written_how = "bodies of the store's PUTs"
    stored_how = "sizes of all objects in the store"

    def __init__(self, counting: Any) -> None:
        self.counting = counting

    def _now(self) -> tuple[int, int]:
        return self.counting.requests, self.counting.put_bytes

    def stored(self) -> int | None:
        inner, total, after = self.counting.inner, 0, None
        while True:
            page = inner.list_page("", start_after=after)
            total += sum(o.size for o in page.items)
            if not page.items or not page.truncated:
                return total
            after = page.items[-1].key


class InMemoryMeter(Meter):
    written_how = "serialized bytes the saver holds, growth"
    stored_how = "serialized bytes the saver holds (checkpoints, blobs, writes)"

    def __init__(self, saver: Any) -> None:
        self.saver = saver

    def _now(self) -> tuple[int, int]:
        return 0, self.stored()

    def stored(self) -> int:
        return payload_bytes([self.saver.storage, self.saver.writes, self.saver.blobs])


class SqliteMeter(Meter):
    requests_how = "SQL statements (sqlite3 trace callback)"
    written_how = "bytes passed to write(2) by the process (/proc/self/io wchar: WAL frames and checkpointed pages)"
    stored_how = "database size: page_count x page_size, as a second connection sees it (WAL included)"

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        self.path, self.statements = path, 0
        conn.set_trace_callback(self._trace)
        self.reader = sqlite3.connect(path)

    def _trace(self, _sql: str) -> None:
        self.statements += 1

    def _now(self) -> tuple[int, int]:
        return self.statements, wchar()

    def stored(self) -> int | None:
        pages = self.reader.execute("pragma page_count").fetchone()[0]
        return int(pages * self.reader.execute("pragma page_size").fetchone()[0])

    def close(self) -> None:
        self.reader.close()


class PostgresMeter(Meter):
    requests_how = "SQL statements of the saver's role (pg_stat_statements calls)"
    written_how = "WAL bytes generated (pg_current_wal_lsn difference)"
    stored_how = "pg_database_size of the bench database"

    def __init__(self, dsn_admin: str, role: str, db: str) -> None:
        import psycopg

        self.conn = psycopg.connect(dsn_admin, autocommit=True)
        self.role, self.db = role, db

    def _now(self) -> tuple[int, int]:
        row = self.conn.execute(
            "select pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint,"
            " (select coalesce(sum(calls), 0) from pg_stat_statements where userid = %s::regrole)",
            (self.role,),
        ).fetchone()
        return int(row[1]), int(row[0])

    def stored(self) -> int | None:
        return int(self.conn.execute("select pg_database_size(%s)", (self.db,)).fetchone()[0])

    def close(self) -> None:
        self.conn.close()


class NotAvailable(Exception):
    pass


def latent_inmemory_saver(latency_s: float) -> Any:
    """An ``InMemorySaver`` whose every sync call first sleeps ``latency_s``: the CPU a LangGraph
    run spends *because* its saver waits on a network, with no saver work to speak of.

    Measured on the short graph (2026-12-03): 2.4 ms per call (RGW's round trip on this VM) took
    ``InMemorySaver`` from 3.5-8.7 to 8.9-12.9 ms of CPU per invoke. The waiting is not free:
    LangGraph's thread pools start 6 threads per invoke instead of 4, and every sleep and
    wake-up is a trip through the kernel's scheduler. So "ours on RGW against ``InMemorySaver``"
    mixes the saver's work with the price of any latency; against this saver it does not.
    """
    from langgraph.checkpoint.memory import InMemorySaver

    class LatentInMemorySaver(InMemorySaver):
        def get_tuple(self, config: Any) -> Any:
            time.sleep(latency_s)
            return super().get_tuple(config)

        def list(self, *args: Any, **kwargs: Any) -> Any:
            time.sleep(latency_s)
            return super().list(*args, **kwargs)

        def put(self, *args: Any, **kwargs: Any) -> Any:
            time.sleep(latency_s)
            return super().put(*args, **kwargs)

        def put_writes(self, *args: Any, **kwargs: Any) -> Any:
            time.sleep(latency_s)
            return super().put_writes(*args, **kwargs)

    return LatentInMemorySaver()


def floor_s3_saver(store: Any) -> Any:
    """An ``InMemorySaver`` that also sends, through ``store`` (ours on S3, the obstore
    transport), the requests ours sends per call: a GET and a LIST of 100 side by side per
    ``get_tuple``, a PUT of the serialized checkpoint per ``put``, a create-only PUT of the
    serialized writes per ``put_writes``. 15 requests per invoke of the short graph, as ours.

    It has no logic of its own, so its CPU is the least any saver pays that makes those requests
    on that transport: LangGraph's, the serializer's, the transport's and the waiting's. Ours
    minus this is what our envelopes, heads, caches and checks cost; this over ``InMemorySaver``
    is the price of storing remotely at all.
    """
    from langgraph.checkpoint.memory import InMemorySaver

    from langgraph_handoff.stores.base import Get, ListPage, Put

    class FloorS3Saver(InMemorySaver):
        def get_tuple(self, config: Any) -> Any:
            thread = config["configurable"]["thread_id"]
            store.run_many([Get(f"heads/{thread}"), ListPage(f"writes/{thread}/", max_keys=100)])
            return super().get_tuple(config)

        def put(self, config: Any, checkpoint: Any, *args: Any, **kwargs: Any) -> Any:
            out = super().put(config, checkpoint, *args, **kwargs)
            c = out["configurable"]
            body, _, _ = self.storage[c["thread_id"]][c["checkpoint_ns"]][c["checkpoint_id"]]
            store.run(Put(f"heads/{c['thread_id']}", body[1]))
            return out

        def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
            super().put_writes(config, writes, task_id, task_path)
            c = config["configurable"]
            held = self.writes[(c["thread_id"], c.get("checkpoint_ns", ""), c["checkpoint_id"])]
            body = b"".join(v[2][1] for k, v in held.items() if k[0] == task_id)
            key = f"writes/{c['thread_id']}/{c['checkpoint_id']}/{task_id}"
            store.run(Put(key, body, if_none_match=True))

    return FloorS3Saver()


@contextlib.contextmanager
def open_saver(a: argparse.Namespace):
    """Yield (saver, meter) for ``a.saver``; clean up what it stored."""
    name = a.saver
    tmp = tempfile.mkdtemp(prefix=f"long-{name.replace('+', '-')}-", dir=a.tmp_dir or None)
    bucket = "bench-long-" + name.replace("+", "-")
    prefix = f"{a.run_id}/{a.workload}"
    s3 = None
    meter: Meter = Meter()
    try:
        if ALL_SAVERS[name][1]:
            if not a.endpoint:
                raise NotAvailable("no S3 endpoint given")
            import boto3

            s3 = boto3.client("s3", endpoint_url=a.direct, region_name=REGION)
            ensure_bucket(s3, bucket)  # directly on the server: never counted

        def list_prefix() -> int:
            import boto3

            client = s3 or boto3.client("s3", endpoint_url=a.direct, region_name=REGION)
            total = 0
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
                total += sum(o["Size"] for o in page.get("Contents", []))
            return total

        if name.startswith("handoff-"):
            from langgraph_handoff import ObjectStoreSaver
            from langgraph_handoff.stores.urls import store_from_url

            if name == "handoff-memory":
                url = "memory://"
            elif name == "handoff-file":
                url = f"file://{tmp}/store"
            else:
                url = f"s3://{bucket}/{prefix}?" + urllib.parse.urlencode({"endpoint_url": a.endpoint})
            counting = _byte_counting_store(store_from_url(url))
            saver = ObjectStoreSaver(counting)
            saver.setup()
            meter = OursMeter(counting)
            if name == "handoff-s3":
                meter = ProxyMeter(a.count_at, a.tag, meter.stored) if a.count_at else meter
                meter.ours = counting  # type: ignore[attr-defined]
            with saver:
                yield saver, meter, type(counting.inner).__name__
        elif name == "s3-floor":
            from langgraph_handoff.stores.urls import store_from_url

            url = f"s3://{bucket}/{prefix}?" + urllib.parse.urlencode({"endpoint_url": a.endpoint})
            counting = _byte_counting_store(store_from_url(url))
            saver = floor_s3_saver(counting)
            meter = InMemoryMeter(saver)
            meter.ours = counting  # type: ignore[attr-defined]
            try:
                yield saver, meter, f"InMemorySaver + {type(counting.inner).__name__} requests"
            finally:
                counting.close()
        elif name == "inmemory":
            from langgraph.checkpoint.memory import InMemorySaver

            if a.latency_ms:
                saver = latent_inmemory_saver(a.latency_ms / 1000)
                yield saver, InMemoryMeter(saver), f"InMemorySaver + {a.latency_ms:g} ms per call"
            else:
                saver = InMemorySaver()
                yield saver, InMemoryMeter(saver), "InMemorySaver"
        elif name == "sqlite":
            from langgraph.checkpoint.sqlite import SqliteSaver

            path = os.path.join(tmp, "long.db")
            conn = sqlite3.connect(path, check_same_thread=False)
            saver = SqliteSaver(conn)
            saver.setup()
            meter = SqliteMeter(conn, path)
            yield saver, meter, "SqliteSaver"
            meter.close()
            conn.close()
        elif name == "postgres":
            if not a.pg_dsn:
                raise NotAvailable("no PostgreSQL given (--pg-dsn)")
            from langgraph.checkpoint.postgres import PostgresSaver

            with PostgresSaver.from_conn_string(a.pg_dsn) as saver:
                saver.setup()
                meter = PostgresMeter(a.pg_admin_dsn, a.pg_role, a.pg_db)
                # one server for the whole bench: every run starts from empty tables
                meter.conn.execute("truncate checkpoints, checkpoint_blobs, checkpoint_writes")
                meter.conn.execute("checkpoint")
                yield saver, meter, "PostgresSaver"
                meter.close()
        elif name == "objectstorage":
            from langgraph_checkpoint_objectstorage import ObjectStorageSaver

            saver = ObjectStorageSaver.from_conn_string(
                f"s3://{bucket}/{prefix}",
                key=os.environ["AWS_ACCESS_KEY_ID"],
                secret=os.environ["AWS_SECRET_ACCESS_KEY"],
                client_kwargs={"endpoint_url": a.endpoint, "region_name": REGION},
            )
            yield saver, ProxyMeter(a.count_at, a.tag, list_prefix), "ObjectStorageSaver"
        elif name == "s3-peer+shim":
            import boto3
            from langgraph_checkpoint_s3 import S3CheckpointSaver

            client = boto3.client("s3", endpoint_url=a.endpoint, region_name=REGION)
            saver = S3CheckpointSaver(bucket, prefix=prefix + "/", s3_client=client, serde=make_serde_shim())
            yield saver, ProxyMeter(a.count_at, a.tag, list_prefix), "S3CheckpointSaver"
        else:
            raise SystemExit(f"unknown saver {name}")
    finally:
        if s3 is not None:
            with contextlib.suppress(Exception):
                s3_delete_prefix(s3, bucket, f"{a.run_id}/")
        shutil.rmtree(tmp, ignore_errors=True)


# ------------------------------------------------------------------------------------------------
# the turns
# ------------------------------------------------------------------------------------------------


class ThreadProfiler:
    """cProfile in every thread: the main thread's profiler now, and one per thread started while
    it is on (LangGraph runs each invoke's tasks and checkpoint writes in a new thread pool).
    Each profiler reads its own thread's CPU clock, so the merged times add up to process CPU."""

    def __init__(self) -> None:
        import cProfile

        self._cls = cProfile.Profile
        self.profs: list[Any] = []
        self._lock = threading.Lock()

    def _hook(self, *_: Any) -> None:
        prof = self._cls(time.thread_time)
        with self._lock:
            self.profs.append(prof)
        prof.enable()  # replaces this hook in the new thread

    def start(self) -> None:
        self.main = self._cls(time.thread_time)
        threading.setprofile(self._hook)
        self.main.enable()

    def stop(self, path: str) -> Any:
        import pstats

        self.main.disable()
        threading.setprofile(None)
        self.main.create_stats()
        stats = pstats.Stats(self.main)
        for p in self.profs:
            with contextlib.suppress(Exception):
                p.create_stats()
                stats.add(p)
        stats.dump_stats(path)
        return stats


class Sampler:
    """py-spy attached to this process (``record --pid``; it pauses the process for each sample, which
    costs wall time, not this process's CPU): where the CPU goes without cProfile's per-call cost,
    which inflates code made of many small Python calls."""

    def __init__(self, exe: str, path: str, rate: int = 200) -> None:
        import subprocess

        self.path = path
        cmd = [exe, "record", "--pid", str(os.getpid()), "--rate", str(rate), "--format", "raw"]
        self.proc = subprocess.Popen([*cmd, "--output", path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(2)  # let it attach before the first sampled turn
        if self.proc.poll() is not None:
            raise RuntimeError(f"py-spy failed: {self.proc.stderr.read().decode()[-300:]}")

    def stop(self, turns: int) -> dict:
        import signal

        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(60)
        own: dict[str, int] = {}
        cum: dict[str, int] = {}
        total = waiting = 0
        for line in Path(self.path).read_text().splitlines():
            stack, _, n = line.rpartition(" ")
            if not stack:
                continue
            count = int(n)
            frames = [_spy_frame(f) for f in stack.split(";")]
            if frames[-1].split(" (", 1)[0] in WAITING:  # blocked in a C call py-spy took for running
                waiting += count
                continue
            total += count
            own[frames[-1]] = own.get(frames[-1], 0) + count
            for f in set(frames):
                cum[f] = cum.get(f, 0) + count
        groups: dict[str, int] = {}
        for f, n in own.items():
            g = _group(f.split(" (", 1)[1].rstrip(")") + ":" if " (" in f else "~" + f)
            groups[g] = groups.get(g, 0) + n

        def top(d: dict[str, int], k: int = 30, ours: bool = False) -> list[dict]:
            items = [(f, n) for f, n in d.items() if not ours or "langgraph_handoff/" in f]
            return [{"func": f, "share": round(n / total, 4)} for f, n in sorted(items, key=lambda kv: -kv[1])[:k]]

        return {
            "samples": total,
            "waiting_samples_dropped": waiting,
            "turns": turns,
            "by_own": top(own),
            "by_cumulative": top(cum),
            "ours_by_cumulative": top(cum, ours=True),
            "own_by_package": {k: round(v / total, 4) for k, v in sorted(groups.items(), key=lambda kv: -kv[1])},
        }


#: leaf frames of threads that wait (a lock, a queue) rather than run
WAITING = {"Condition.wait", "Event.wait", "_worker", "Thread._wait_for_tstate_lock", "Thread.join", "SimpleQueue.get"}


def _spy_frame(frame: str) -> str:
    """``func (path/file.py:123)`` -> ``func (path/file.py)``: one name per function, whatever line."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")").rsplit(":", 1)[0].split("site-packages/")[-1].replace(str(HERE.parent) + "/", "")
    return f"{name} ({where})" if where else name


def timed(fn: Any) -> tuple[Any, float, float]:
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, (time.process_time() - c0) * 1000, (time.perf_counter() - w0) * 1000


def read_checks(a, wl: Workload, meter: Meter, turn: int) -> dict:
    """get_state and get_state_history(limit=10), TIMED_READS times each, on the conversation."""
    graph, cfg = wl.graph, wl.state_config()
    ours = getattr(meter, "ours", None) or getattr(meter, "counting", None)
    out: dict[str, Any] = {}
    for what in ("get_state", "history"):
        cpu, wall, reqs = [], [], []
        for i in range(TIMED_READS):
            meter.mark(f"cp{turn}|{what}{i}")
            before = ours.requests if ours is not None else 0
            if what == "get_state":
                snap, c, w = timed(lambda: graph.get_state(cfg))
                wl.check(snap.values, turn)
            else:
                hist, c, w = timed(lambda: list(graph.get_state_history(cfg, limit=HISTORY_LIMIT)))
                if len(hist) != min(HISTORY_LIMIT, len(hist)) or not hist:
                    raise AssertionError(f"history: {len(hist)} items")
                out["history_items"] = len(hist)
            meter.mark("idle")
            cpu.append(round(c, 3))
            wall.append(round(w, 3))
            if ours is not None:
                reqs.append(ours.requests - before)
        out[what] = {"cpu_ms": cpu, "wall_ms": wall}
        if reqs:
            out[what]["store_requests"] = reqs
    return out


def run_turns(a: argparse.Namespace) -> dict:
    words = Words()
    result: dict[str, Any] = {"workload": a.workload, "saver": a.saver, "turns_asked": a.turns}
    checkpoints = sorted({c for c in CHECKPOINTS if c <= a.turns} | {a.turns})
    boundaries = set(checkpoints) | {c - window(c) for c in checkpoints}  # stored size sampled here
    t_start = time.monotonic()
    with open_saver(a) as (saver, meter, store_name):
        result["store"] = store_name
        result["measured"] = {"requests": meter.requests_how, "written": meter.written_how, "stored": meter.stored_how}
        wl = Workload(a.workload, saver, words)
        cfg = wl.config()
        inputs = [None] + [wl.input(t) for t in range(1, a.turns + 1)]  # built outside the timed part
        series: dict[str, list] = {"cpu_ms": [], "wall_ms": [], "requests": [], "written": [], "store_requests": []}
        samples: list[list[int]] = []  # [turn, stored bytes]
        cps: dict[str, dict] = {}
        prof = None
        gc.collect()
        base_rss = rss_kib()
        stored0 = meter.stored()
        samples.append([0, stored0 or 0])
        stop_reason = None
        turn = 0
        ours = getattr(meter, "ours", None)  # ours on S3: CountingStore too, beside the proxy
        for turn in range(1, a.turns + 1):
            if a.mode == "profile" and a.sample_turns and turn == a.profile_from - a.sample_turns:
                spy = Sampler(str(Path(sys.executable).parent / "py-spy"), a.pstats + ".spy.txt")
                spy_cpu = time.process_time()
            if a.mode == "profile" and a.sample_turns and turn == a.profile_from:
                result["sampled_turns"] = [a.profile_from - a.sample_turns, turn - 1]
                result["sampled_cpu_ms_per_turn"] = round((time.process_time() - spy_cpu) / a.sample_turns * 1000, 3)
                result["sampled"] = spy.stop(a.sample_turns)
            if a.mode == "profile" and turn == a.profile_from:
                prof = ThreadProfiler()
                result["profile_cpu_start"] = time.process_time()
                prof.start()
            meter.turn_start(turn)
            ours_before = ours.requests if ours is not None else 0
            _, c, w = timed(lambda t=turn: wl.graph.invoke(inputs[t], cfg))
            ours_reqs = ours.requests - ours_before if ours is not None else None
            reqs, written = meter.turn_end(turn)
            series["cpu_ms"].append(round(c, 3))
            series["wall_ms"].append(round(w, 3))
            series["requests"].append(reqs)
            series["written"].append(written)
            series["store_requests"].append(ours_reqs)
            if turn == min(2, a.turns):  # fail fast: a saver that loses the conversation (untimed)
                wl.check(wl.graph.get_state(wl.state_config()).values, turn)
            quiet = a.mode == "profile" and turn >= a.profile_from - a.sample_turns  # nothing else sampled
            if not quiet and (turn % a.sample_every == 0 or turn in boundaries):
                samples.append([turn, meter.stored() or 0])
            if turn in checkpoints and not quiet:
                cps[str(turn)] = {
                    **read_checks(a, wl, meter, turn),
                    "rss_kib": rss_kib(),
                    "elapsed_s": round(time.monotonic() - t_start, 1),
                }
                print(
                    f"[longwork] {a.workload} {a.saver}: turn {turn}, {cps[str(turn)]['elapsed_s']} s", file=sys.stderr
                )
            if a.budget_s and time.monotonic() - t_start > a.budget_s and turn < a.turns:
                stop_reason = f"time budget of {a.budget_s:.0f} s used up after turn {turn}"
                break
        if prof is not None:
            result["profile_cpu_s"] = time.process_time() - result.pop("profile_cpu_start")
            result["profile_turns"] = [a.profile_from, turn]
            before = series["cpu_ms"][max(0, a.profile_from - 51) : a.profile_from - 1]
            result["cpu_ms_before_profile"] = round(sum(before) / len(before), 3) if before else None
            stats = prof.stop(a.pstats)
            result["profile"] = profile_summary(stats, turn - a.profile_from + 1, result["profile_cpu_s"])
            # after the profile: one unprofiled check that the state is whole
            wl.check(wl.graph.get_state(wl.state_config()).values, turn)
        if all(x is None for x in series["store_requests"]):
            series.pop("store_requests")
        steps = meter.proxy_steps()
        if steps:
            series["requests"], series["written"] = [], []
            for t in range(1, turn + 1):
                st = steps.get(f"turn{t}", {})
                series["requests"].append(sum(st.get("counts", {}).values()))
                series["written"].append(int(st.get("totals", {}).get("request_body_bytes", 0)))
            for key, cp in cps.items():
                for what in ("get_state", "history"):
                    cp[what]["requests"] = [
                        sum(steps.get(f"cp{key}|{what}{i}", {}).get("counts", {}).values()) for i in range(TIMED_READS)
                    ]
            ops: dict[str, int] = {}
            for t in range(max(1, turn - 99), turn + 1):
                for op, n in steps.get(f"turn{t}", {}).get("counts", {}).items():
                    ops[op] = ops.get(op, 0) + n
            result["last_100_turns_ops"] = ops
        meter.close()
    result.update(
        turns_done=turn,
        stop_reason=stop_reason,
        series=series,
        stored_samples=samples,
        checkpoints=cps,
        base_rss_kib=base_rss,
        final_rss_kib=rss_kib(),
        wall_s=round(time.monotonic() - t_start, 1),
    )
    return result


def profile_summary(stats: Any, turns: int, cpu_s: float, top: int = 30) -> dict:
    """Top functions by cumulative and by own time, per turn and as a share of all profiled CPU."""
    rows = []
    total_tt = 0.0
    for (file, line, func), (_cc, nc, tt, ct, _callers) in stats.stats.items():
        total_tt += tt
        short = file.split("site-packages/")[-1].replace(str(HERE.parent) + "/", "")
        rows.append({"func": f"{short}:{line}({func})", "calls": nc, "tt": tt, "ct": ct})
    for r in rows:
        r["own_ms_per_turn"] = round(r["tt"] / turns * 1000, 3)
        r["cum_ms_per_turn"] = round(r["ct"] / turns * 1000, 3)
        r["own_share"] = round(r["tt"] / total_tt, 4) if total_tt else 0
        r["cum_share"] = round(min(r["ct"], total_tt) / total_tt, 4) if total_tt else 0
        r["calls_per_turn"] = round(r["calls"] / turns, 1)
    groups: dict[str, float] = {}
    for r in rows:
        groups[_group(r["func"])] = groups.get(_group(r["func"]), 0) + r["tt"]

    def clean(r: dict) -> dict:
        return {k: v for k, v in r.items() if k not in ("tt", "ct", "calls")}

    return {
        "turns": turns,
        "profiled_cpu_ms_per_turn": round(total_tt / turns * 1000, 2),
        "process_cpu_ms_per_turn": round(cpu_s / turns * 1000, 2),
        "by_cumulative": [clean(r) for r in sorted(rows, key=lambda r: -r["ct"])[:top]],
        "by_own": [clean(r) for r in sorted(rows, key=lambda r: -r["tt"])[:top]],
        "ours_by_cumulative": [
            clean(r) for r in sorted(rows, key=lambda r: -r["ct"]) if r["func"].startswith("langgraph_handoff/")
        ][:top],
        "own_by_package": {k: round(v / total_tt, 4) for k, v in sorted(groups.items(), key=lambda kv: -kv[1])},
    }


def _group(func: str) -> str:
    if func.startswith("~") or func.startswith("<"):
        name = func.split("(", 1)[-1].rstrip(")")
        for mod in ("zlib", "msgpack", "ormsgpack", "pickle", "json", "hashlib", "sqlite3", "_thread", "time"):
            if mod in name:
                return f"builtin: {mod}"
        return "builtins (other)"
    head = func.split(":", 1)[0]
    parts = head.split("/")
    if parts[0] == "langgraph" and len(parts) > 1:
        return "langgraph/" + parts[1] + ("/" + parts[2] if parts[1] in ("checkpoint",) and len(parts) > 2 else "")
    if parts[0] == "langgraph_handoff" and len(parts) > 1:
        return "langgraph_handoff/" + parts[1].removesuffix(".py")
    if head.startswith("/"):
        return "python stdlib"
    return parts[0].removesuffix(".py")


# ------------------------------------------------------------------------------------------------
# short threads: the 5-node graph, sync
# ------------------------------------------------------------------------------------------------


def run_short(a: argparse.Namespace) -> dict:
    from workload import build_graph, cfg, user_msg

    with open_saver(a) as (saver, meter, store_name):
        graph = build_graph(saver)
        for i in range(a.warmup):
            graph.invoke(user_msg(i), cfg(f"warm-{i}"))
        ours = getattr(meter, "ours", None) or getattr(meter, "counting", None)
        before = ours.requests if ours is not None else 0
        gc.collect()
        c0, w0 = time.process_time(), time.perf_counter()
        for i in range(a.conversations):
            graph.invoke(user_msg(i), cfg(f"short-{i}"))
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        for t in (0, a.conversations - 1):
            n = len(graph.get_state(cfg(f"short-{t}")).values["messages"])
            if n != 6:
                raise AssertionError(f"short-{t}: {n} messages")
        return {
            "saver": a.saver,
            "store": store_name,
            "invokes": a.conversations,
            "cpu_ms_per_invoke": round(cpu / a.conversations * 1000, 3),
            "wall_ms_per_invoke": round(wall / a.conversations * 1000, 3),
            "store_requests_per_invoke": round((ours.requests - before) / a.conversations, 2)
            if ours is not None
            else None,
            # the time a request waits, roughly: what the invoke did not spend on CPU, per request
            "wait_ms_per_request": round((wall - cpu) / (ours.requests - before) * 1000, 2)
            if ours is not None and ours.requests > before
            else None,
            "latency_ms_per_call": a.latency_ms or None,
        }


# ------------------------------------------------------------------------------------------------
# plots
# ------------------------------------------------------------------------------------------------


def smooth(xs: list[float | None], k: int) -> list[float | None]:
    out: list[float | None] = []
    for i in range(len(xs)):
        win = [x for x in xs[max(0, i - k + 1) : i + 1] if x is not None]
        out.append(sum(win) / len(win) if win else None)
    return out


def plot(results: str, out_dir: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = json.loads(Path(results).read_text())
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    runs = [r for r in data.get("runs", []) if r.get("ok")]
    written = []
    order = list(SAVERS)
    style = {
        "handoff-memory": ("tab:blue", "-"),
        "handoff-file": ("tab:blue", "--"),
        "handoff-s3": ("tab:blue", ":"),
        "inmemory": ("tab:gray", "-"),
        "sqlite": ("tab:green", "-"),
        "postgres": ("tab:purple", "-"),
        "objectstorage": ("tab:orange", "-"),
        "s3-peer+shim": ("tab:red", "-"),
    }
    for wl in WORKLOADS:
        mine = sorted((r for r in runs if r["workload"] == wl), key=lambda r: order.index(r["saver"]))
        if not mine:
            continue
        fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
        for r in mine:
            color, ls = style.get(r["saver"], ("black", "-"))
            s = r["series"]
            x = list(range(1, len(s["cpu_ms"]) + 1))
            axes[0].plot(x, smooth(s["cpu_ms"], 10), color=color, ls=ls, lw=1.2, label=r["saver"])
            by = s.get("written") or []
            if r["saver"] == "inmemory" or not any(v for v in by if v):
                by = []
            if by:
                axes[1].plot(
                    x,
                    smooth([v / 1024 if v is not None else None for v in by], 10),
                    color=color,
                    ls=ls,
                    lw=1.2,
                    label=r["saver"],
                )
        axes[0].set_title(f"{wl}: process CPU per turn (ms, mean of 10 turns)")
        axes[1].set_title(f"{wl}: bytes written per turn (KiB, mean of 10 turns)")
        for ax in axes:
            ax.set_xlabel("turn")
            ax.set_yscale("log")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle(
            f"long threads, workload {wl} ({data.get('meta', {}).get('date', '')}; see bench/LONG_THREADS.md)",
            fontsize=9,
        )
        fig.tight_layout()
        path = Path(out_dir) / f"long-threads-{wl}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(str(path))
    return written


# ------------------------------------------------------------------------------------------------


def versions() -> dict:
    return installed_versions(
        (
            "langgraph",
            "langgraph-checkpoint",
            "langchain-core",
            "langgraph-handoff",
            "obstore",
            "langgraph-checkpoint-sqlite",
            "langgraph-checkpoint-postgres",
            "psycopg",
            "langgraph-checkpoint-objectstorage",
            "s3fs",
            "langgraph-checkpoint-s3",
            "boto3",
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", default="turns", choices=["turns", "profile", "short", "plot"])
    ap.add_argument("--workload", default="delta-100", choices=sorted(WORKLOADS))
    ap.add_argument("--saver", default="handoff-memory", choices=sorted(ALL_SAVERS))
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--budget-s", type=float, default=0, help="stop after the turn that crosses this wall time")
    ap.add_argument("--sample-every", type=int, default=10, help="stored size every N turns")
    ap.add_argument("--endpoint", default="", help="S3 endpoint the saver talks to (the counting proxy)")
    ap.add_argument("--count-at", default="", help="the counting proxy")
    ap.add_argument("--direct", default="", help="the S3 server itself (buckets, listing, clean-up)")
    ap.add_argument("--tag", default="", help="step prefix at the proxy")
    ap.add_argument("--run-id", default=time.strftime("long-%Y%m%d-%H%M%S"))
    ap.add_argument("--tmp-dir", default="")
    ap.add_argument("--pg-dsn", default="")
    ap.add_argument("--pg-admin-dsn", default="")
    ap.add_argument("--pg-role", default="bench")
    ap.add_argument("--pg-db", default="bench")
    ap.add_argument("--profile-from", type=int, default=451)
    ap.add_argument("--pstats", default="")
    ap.add_argument("--sample-turns", type=int, default=0, help="py-spy over this many turns before --profile-from")
    ap.add_argument("--warmup", type=int, default=8)
    ap.add_argument("--conversations", type=int, default=60)
    ap.add_argument("--latency-ms", type=float, default=0, help="short mode, inmemory: sleep this long per call")
    ap.add_argument("--results", default=str(HERE / "long-threads-results.json"))
    ap.add_argument("--plot-dir", default=str(HERE.parent / "docs" / "img"))
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    if a.mode == "plot":
        for p in plot(a.results, a.plot_dir):
            print(p)
        return
    if a.latency_ms and (a.mode != "short" or a.saver != "inmemory"):
        ap.error("--latency-ms is for --mode short --saver inmemory only")
    if a.saver in SHORT_ONLY and a.mode != "short":
        ap.error(f"--saver {a.saver} is for --mode short only")
    a.tag = a.tag or f"{a.workload}:{a.saver}"
    result: dict[str, Any] = {"mode": a.mode, "saver": a.saver, "workload": a.workload}
    try:
        result.update(run_short(a) if a.mode == "short" else run_turns(a))
        result["ok"] = True
    except NotAvailable as exc:
        result.update(ok=False, available=False, reason=str(exc))
    except Exception as exc:  # noqa: BLE001 - a saver's failure is a result
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        result.update(
            ok=False,
            error=f"{type(exc).__name__}: {first}",
            raised_at=f"{frame.filename.split('site-packages/')[-1]}:{frame.lineno}",
        )
        traceback.print_exc()
    result["peak_rss_kib"] = rss_kib()["VmHWM"]
    result["versions"] = versions()
    Path(a.out).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
