"""A type whose construction leaves a mark: what a hostile writer's planted value stands for.

Stored by LangGraph's serializer as a msgpack ext value naming this module and type; a reader in
its permissive default imports the module and calls the type, which here writes a file. Tests
assert the file never appears where nobody should run code."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class Planted:
    mark: str

    def __post_init__(self) -> None:
        Path(self.mark).write_text("ran")
