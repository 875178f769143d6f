"""The Agent Server's ``store.index`` (``langgraph.json``, passed on as ``LANGGRAPH_STORE``): the
settings, and the store factory building an indexed ``ObjectStoreMemory`` from them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from langgraph_handoff.errors import InvalidConfigError
from langgraph_handoff.memory import E5Embeddings
from langgraph_handoff.server import ServerSettings, store

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent_server"


def env(index: Any, name: str) -> dict[str, str]:
    conf = {"path": "langgraph_handoff.server.store", "index": index}
    return {"LANGGRAPH_HANDOFF_URL": f"memory://server-index-{name}", "LANGGRAPH_STORE": json.dumps(conf)}


def test_settings_take_the_index_and_refuse_bad_ones() -> None:
    index = {"embed": "./embeddings.py:embeddings", "dims": 384, "fields": ["text", "tags[*]"]}
    assert ServerSettings.from_env(env(index, "ok")).store_index == index
    assert ServerSettings.from_env({"LANGGRAPH_STORE": json.dumps({"path": "x"})}).store_index is None
    for bad, match in [
        ({"embed": "./e.py:f", "dims": "384"}, "dims must be the positive int"),
        ({"embed": "./e.py:f", "dims": 3, "fields": "text"}, "fields must be a list of JSON paths"),
        ({"embed": 7, "dims": 3}, "embed must be './file.py:name'"),
        ({"embed": "./e.py:f", "dims": 3, "field": ["a"]}, "unknown keys"),
        (["embed"], "must be an object"),
    ]:
        with pytest.raises(InvalidConfigError, match=match) as info:
            ServerSettings.from_env(env(bad, "bad"))
        assert "store.index in langgraph.json (LANGGRAPH_STORE)" in str(info.value)


def test_the_factory_builds_an_indexed_store_from_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "embeddings.py").write_text(
        "def embeddings(texts):\n    return [[t.count(c) for c in 'aeiou'] for t in texts]\n"
    )
    monkeypatch.chdir(tmp_path)  # the server resolves the path from its working directory
    settings = env({"embed": "./embeddings.py:embeddings", "dims": 5, "fields": ["text"]}, "file")

    async def main() -> list[tuple[str, float | None]]:
        async with store(settings) as memory:
            assert memory.index_config is not None and memory.index_config["dims"] == 5
            await memory.aput(("docs",), "a", {"text": "banana"})
            await memory.aput(("docs",), "b", {"text": "tofu"})
            return [(i.key, i.score) for i in await memory.asearch(("docs",), query="papaya")]

    found = asyncio.run(main())
    assert [k for k, _ in found] == ["a", "b"] and found[0][1] == pytest.approx(1.0)


def test_the_examples_embedder_is_the_e5_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(EXAMPLE)
    conf = json.loads((EXAMPLE / "langgraph.json").read_text())["store"]
    settings = {"LANGGRAPH_HANDOFF_URL": "memory://server-index-e5", "LANGGRAPH_STORE": json.dumps(conf)}

    async def main() -> list[str]:
        async with store(settings) as memory:
            assert isinstance(memory.embeddings, E5Embeddings)
            await memory.aput(("notes",), "pet", {"text": "User's dog is called Biscuit"})
            await memory.aput(("notes",), "mail", {"text": "The user prefers email"})
            return [i.key for i in await memory.asearch(("notes",), query="what is the name of their dog")]

    assert asyncio.run(main()) == ["pet", "mail"]


def test_an_embedder_that_cannot_load_is_a_typed_error_that_names_the_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    async def enter(index: dict[str, Any]) -> None:
        async with store(env(index, "broken")):
            pass

    with pytest.raises(InvalidConfigError, match="no such file"):
        asyncio.run(enter({"embed": "./missing.py:embeddings", "dims": 3}))
    (tmp_path / "empty.py").write_text("")
    with pytest.raises(InvalidConfigError, match="defines no 'embeddings'"):
        asyncio.run(enter({"embed": "./empty.py:embeddings", "dims": 3}))
    with pytest.raises(
        InvalidConfigError, match=r"store section of langgraph.json \(LANGGRAPH_STORE\).*cannot be loaded"
    ):
        asyncio.run(enter({"embed": "nonexistent-provider:model", "dims": 3}))
