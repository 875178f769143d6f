"""LangGraph Agent Server (``langgraph dev``) on our saver and store, on the real S3 server.

Starts ``langgraph dev`` on loopback with ``examples/agent_server`` (a copy, so the server's own
``.langgraph_api`` directory lands in a temporary directory), its checkpointer and store being
``langgraph_handoff.server``'s factories on a fresh S3 prefix, and drives it over HTTP with
``langgraph_sdk``. What is checked is what the server's users rely on and could break: objects on
S3 under the prefix, the copied thread's history equal to its source's, the heads gone after a
delete or a prune.

No network beyond loopback: CLI analytics and the server's version check are turned off (both
reach the internet otherwise), tracing is off and no LangSmith key or licence is passed on.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import S3_BUCKET, S3_ENDPOINT, _need_s3, make_s3_store
from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.stores import StoreBase

pytestmark = pytest.mark.s3

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "agent_server"
LANGGRAPH_CLI = Path(sys.executable).parent / "langgraph"
READY_WITHIN = 20.0  # seconds; startup takes about 2 s here
#: variables that would make the server or the CLI talk to LangSmith
_DROPPED = (
    "LANGSMITH_API_KEY",
    "LANGCHAIN_API_KEY",
    "LANGGRAPH_CLOUD_LICENSE_KEY",
    "LANGSMITH_CONTROL_PLANE_API_KEY",
    "LANGGRAPH_HANDOFF_ENCRYPTION",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _log_tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _wait_ready(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    """Poll ``GET /ok`` until it answers 200; fail at once if the server exits."""
    deadline = time.monotonic() + READY_WITHIN
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"langgraph dev exited with {proc.returncode}:\n{_log_tail(log)}")
        try:
            with urllib.request.urlopen(f"{url}/ok", timeout=1) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.05)  # poll interval
    pytest.fail(f"langgraph dev not ready after {READY_WITHIN} s:\n{_log_tail(log)}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's process group, SIGKILL it if it lingers."""
    for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture
def prefix() -> str:
    _need_s3()
    return f"t-{uuid.uuid4().hex}"


@pytest.fixture
def objects(prefix: str) -> Iterator[StoreBase]:
    """The server's prefix on the test bucket (created if missing), to read what it wrote."""
    store = make_s3_store(prefix)
    yield store
    store.close()


@pytest.fixture
def server(objects: StoreBase, prefix: str, tmp_path: Path) -> Iterator[str]:
    if not LANGGRAPH_CLI.exists():
        if os.environ.get("LGH_REQUIRE_S3") == "1":
            pytest.fail(f"{LANGGRAPH_CLI} missing: pip install -e '.[test]' (langgraph-cli[inmem])")
        pytest.skip("langgraph-cli[inmem] is not installed (the test extra)")
    app = tmp_path / "app"
    app.mkdir()
    for name in ("langgraph.json", "graph.py", "embeddings.py"):
        shutil.copy(EXAMPLE / name, app / name)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
    # a thread idle for two hours, for the server's TTL sweep (60 minutes) to delete
    seeded = ObjectStoreSaver(objects, ttl={"default_ttl": 60}, clock=lambda: time.time() - 2 * 3600)
    seeded.put(_IDLE_CFG, _idle_checkpoint(), {"source": "input", "step": -1}, {"greetings": 1})
    env.update(
        LANGGRAPH_HANDOFF_TTL_MINUTES="60",
        LANGGRAPH_HANDOFF_URL=f"s3://{S3_BUCKET}/{prefix}?endpoint_url={S3_ENDPOINT}",
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        LANGGRAPH_NO_VERSION_CHECK="true",
        LANGSMITH_TRACING="false",
        LANGCHAIN_TRACING_V2="false",
    )
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(LANGGRAPH_CLI), "dev", "--host", "127.0.0.1", "--port", str(port), "--no-browser", "--no-reload"],
            cwd=app,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, stopped as a whole
        )
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_ready(proc, url, log)
        yield url
    finally:
        _stop(proc)
    text = log.read_text(errors="replace")
    assert "Using custom checkpointer: ObjectStoreSaver" in text
    assert "Using custom store" in text


_IDLE_CFG: Any = {"configurable": {"thread_id": "idle-thread", "checkpoint_ns": ""}}
SWEPT_WITHIN = 20.0  # seconds; the factory's first sweep runs as the server enters it


def _idle_checkpoint() -> dict[str, Any]:
    from langgraph.checkpoint.base.id import uuid6

    return {
        "v": 4,
        "id": str(uuid6()),
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": {"greetings": ["old"]},
        "channel_versions": {"greetings": 1},
        "versions_seen": {},
    }


def _wait_swept(objects: StoreBase) -> None:
    """Poll S3 until the server's TTL sweep emptied the idle thread (it runs in the server's
    process, so there is nothing to wait on but what it writes)."""
    reader = ObjectStoreSaver(objects)
    deadline = time.monotonic() + SWEPT_WITHIN
    while time.monotonic() < deadline:
        if reader.get_tuple(_IDLE_CFG) is None:
            return
        time.sleep(0.05)  # poll interval
    pytest.fail(f"the server's TTL sweep did not delete the idle thread within {SWEPT_WITHIN} s")


def _keys(objects: StoreBase, prefix: str = "") -> list[str]:
    return [info.key for info in objects.list(prefix)]


def _lineage(history: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What a thread's history says, without the thread id (which a copy changes)."""
    return [
        (
            h["checkpoint"]["checkpoint_id"],
            (h["parent_checkpoint"] or {}).get("checkpoint_id"),
            h["values"],
            h["next"],
            h["metadata"].get("step"),
            h["metadata"].get("source"),
        )
        for h in history
    ]


@pytest.mark.heavy
async def test_agent_server_on_s3(server: str, objects: StoreBase) -> None:
    from langgraph_sdk import get_client
    from langgraph_sdk.errors import NotFoundError

    client: Any = get_client(url=server)  # its TypedDict results are read as plain dicts

    # checkpoint TTL (LANGGRAPH_HANDOFF_TTL_MINUTES): the factory's background sweep deletes the
    # thread idle for two hours; the threads below are fresh and stay
    await client.threads.search()  # the server enters the checkpointer factory by now
    _wait_swept(objects)
    assert _keys(objects, "data/idle-thread/") == []

    # long-term memory through /store, read back and by the graph's node
    await client.store.put_item(["settings"], "style", {"word": "Ahoy"})
    assert (await client.store.get_item(["settings"], "style"))["value"] == {"word": "Ahoy"}
    found = await client.store.search_items(["settings"])
    assert [(i["namespace"], i["key"]) for i in found["items"]] == [(["settings"], "style")]
    assert _keys(objects, "memory/settings/=k/") == ["memory/settings/=k/style"]
    assert len(_keys(objects, "memory/settings/=p/")) == 1  # the search packed the namespace

    # semantic search: store.index in langgraph.json (the [e5] encoder, ./embeddings.py)
    await client.store.put_item(["notes"], "pet", {"text": "User's dog is called Biscuit"})
    await client.store.put_item(["notes"], "mail", {"text": "The user prefers email"})
    await client.store.put_item(["notes"], "raw", {"text": "not embedded"}, index=False)
    ranked = (await client.store.search_items(["notes"], query="what is the name of their dog"))["items"]
    assert [i["key"] for i in ranked] == ["pet", "mail", "raw"]
    assert ranked[0]["score"] > ranked[1]["score"] and ranked[2]["score"] is None
    for key in ("pet", "mail", "raw"):
        await client.store.delete_item(["notes"], key)
    assert _keys(objects, "memory/notes/") == []  # the deletes purged the namespace's pack too

    # two runs on one thread
    source = (await client.threads.create())["thread_id"]
    for _ in range(2):
        out = await client.runs.wait(source, "greeter", input={"name": "ada"})
    assert out["greetings"] == ["Ahoy, ada!", "Ahoy, ada!"]
    assert _keys(objects, f"heads/{source}/"), "the thread's head is not on S3"

    state = await client.threads.get_state(source)
    history = await client.threads.get_history(source, limit=100)
    assert state["values"]["greetings"] == ["Ahoy, ada!", "Ahoy, ada!"]
    assert len(history) == 6  # input, loop and final checkpoint of each run
    assert state["checkpoint"]["checkpoint_id"] == history[0]["checkpoint"]["checkpoint_id"]
    for newer, older in itertools.pairwise(history):
        assert newer["parent_checkpoint"]["checkpoint_id"] == older["checkpoint"]["checkpoint_id"]

    # a copy: the same lineage under a new thread id, stored under its own keys, then independent
    copy = (await client.threads.copy(source))["thread_id"]
    assert copy != source
    assert _lineage(await client.threads.get_history(copy, limit=100)) == _lineage(history)
    assert _keys(objects, f"heads/{copy}/")
    await client.runs.wait(copy, "greeter", input={"name": "bob"})
    assert (await client.threads.get_state(copy))["values"]["greetings"][-1] == "Ahoy, bob!"
    assert _lineage(await client.threads.get_history(source, limit=100)) == _lineage(history)

    # delete: the source's head and data go, the copy stays
    await client.threads.delete(source)
    with pytest.raises(NotFoundError):
        await client.threads.get_state(source)
    assert _keys(objects, f"heads/{source}/") == []
    assert _keys(objects, f"data/{source}/") == []
    assert _keys(objects, f"heads/{copy}/")

    # prune with the delete strategy: the copy goes too
    await client.threads.prune([copy], strategy="delete")
    assert _keys(objects, f"heads/{copy}/") == []
    assert _keys(objects, f"data/{copy}/") == []

    # the memory item goes with its own delete
    await client.store.delete_item(["settings"], "style")
    assert _keys(objects, "memory/") == []
    # only the store's format marker is left, and the empty head the TTL sweep leaves
    left = [k for k in _keys(objects) if not k.startswith("meta/")]
    assert left == ["heads/idle-thread/="], left
