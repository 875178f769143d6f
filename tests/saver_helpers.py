"""Small pieces shared by the saver's tests: a checkpoint written straight through ``put`` (no
graph), and the id of a thread's latest checkpoint."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base.id import uuid6


def put(saver: Any, thread: str, parent: str | None, step: int, *, ns: str = "", values: dict | None = None,
        versions: dict | None = None, new_versions: dict | None = None, source: str = "loop",
        cid: str | None = None, **md: Any) -> str:  # fmt: skip
    """One checkpoint on ``thread`` (namespace ``ns``) after ``parent``, as LangGraph's loop would
    put it; ``md`` is extra metadata (``run_id=...``). Returns its id."""
    cid = cid or str(uuid6(clock_seq=step))
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if parent:
        conf["checkpoint_id"] = parent
    values = {"x": "v", "step": step} if values is None else values
    versions = {k: 1 for k in values} if versions is None else versions
    cp = {"v": 4, "id": cid, "ts": "", "channel_values": values, "channel_versions": versions,
          "versions_seen": {}, "updated_channels": None}  # fmt: skip
    md = {"source": source, "step": step, "parents": {}, **md}
    saver.put({"configurable": conf}, cp, md, versions if new_versions is None else new_versions)
    return cid


def latest_id(saver: Any, thread: str) -> str | None:
    tup = saver.get_tuple({"configurable": {"thread_id": thread}})
    return tup and tup.config["configurable"]["checkpoint_id"]
