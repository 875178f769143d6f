"""The Agent Server factories' TTL: settings from our variables or from the server's own
``checkpointer.ttl`` / ``store.ttl``, and the background sweeps they run (the server runs none
for a custom checkpointer or store)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.errors import InvalidConfigError
from langgraph_handoff.memory import ObjectStoreMemory
from langgraph_handoff.server import ServerSettings, checkpointer, store
from tests.support.sweep_helpers import cfg, chat_graph


def test_our_variables_win_over_the_servers_config() -> None:
    conf = json.dumps({"path": "x", "ttl": {"strategy": "keep_latest", "default_ttl": 30, "sweep_limit": 50}})
    env = {"LANGGRAPH_CHECKPOINTER": conf, "LANGGRAPH_HANDOFF_TTL_MINUTES": "90"}
    ttl = ServerSettings.from_env(env).ttl
    assert ttl is not None and (ttl.default_ttl, ttl.strategy, ttl.sweep_limit) == (90.0, "keep_latest", 50)
    assert ServerSettings.from_env({"LANGGRAPH_THREAD_TTL": "15"}).ttl.default_ttl == 15.0  # type: ignore[union-attr]
    with pytest.raises(InvalidConfigError, match="LANGGRAPH_HANDOFF_TTL_REFRESH"):
        ServerSettings.from_env({"LANGGRAPH_HANDOFF_TTL_MINUTES": "5", "LANGGRAPH_HANDOFF_TTL_REFRESH": "maybe"})
    with pytest.raises(InvalidConfigError, match="thread TTL"):
        ServerSettings.from_env({"LANGGRAPH_CHECKPOINTER": json.dumps({"ttl": {"default_ttl": 5, "strategy": "x"}})})


def test_checkpointer_factory_sweeps_in_the_background_and_stops_on_exit() -> None:
    url = "memory://server-ttl-checkpoints"
    past = ObjectStoreSaver.from_url(url, ttl={"default_ttl": 60}, clock=lambda: time.time() - 2 * 3600)
    chat_graph("old").compile(checkpointer=past).invoke({"messages": ["hi"]}, cfg("idle"))
    chat_graph("new").compile(checkpointer=ObjectStoreSaver.from_url(url)).invoke({"messages": ["hi"]}, cfg("busy"))
    env = {"LANGGRAPH_HANDOFF_URL": url, "LANGGRAPH_HANDOFF_TTL_MINUTES": "60"}

    async def main() -> None:
        async with checkpointer(env) as saver:
            assert saver.ttl is not None and saver._sweeper.running
            await asyncio.get_running_loop().run_in_executor(None, saver._sweeper.round_done.wait, 30)
            assert await saver.aget_tuple(cfg("idle")) is None
            assert await saver.aget_tuple(cfg("busy")) is not None  # written without TTL: never expires
        assert not saver._sweeper.running

    asyncio.run(main())


def test_no_ttl_no_sweeper() -> None:
    async def main() -> None:
        env = {"LANGGRAPH_HANDOFF_URL": "memory://server-ttl-none"}
        async with checkpointer(env) as saver, store(env) as memory:
            assert saver.ttl is None and not saver._sweeper.running
            assert memory.ttl_config is None and not memory._sweeper.running

    asyncio.run(main())


def test_store_factory_takes_the_servers_store_ttl_and_sweeps() -> None:
    url = "memory://server-ttl-store"
    old = ObjectStoreMemory.from_url(url, clock=lambda: time.time() - 3600)
    old.put(("users", "u1"), "stale", {"n": 1}, ttl=10)
    env = {"LANGGRAPH_HANDOFF_URL": url, "LANGGRAPH_STORE": json.dumps({"ttl": {"default_ttl": 10}})}

    async def main() -> None:
        async with store(env) as memory:
            assert memory.ttl_config == {"default_ttl": 10} and memory._sweeper.running
            await asyncio.get_running_loop().run_in_executor(None, memory._sweeper.round_done.wait, 30)
            assert list(memory.store.list("memory/")) == []
        assert not memory._sweeper.running

    asyncio.run(main())
