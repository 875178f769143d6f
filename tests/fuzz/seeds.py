"""The seed store: every kind of object the package writes, in a few healthy threads.

Built once per campaign (checkpoint ids come from the clock, so two builds differ) and handed
to every child as a file, so that a case is the same bytes in every process that runs it.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

from langgraph_handoff._format import envelope, keys, signing
from langgraph_handoff._format.signing import SigningKeys
from langgraph_handoff.stores import MemoryStore
from langgraph_handoff.teams import Team
from langgraph_handoff.teams.worker import TeamWorker
from tests.support.signing_helpers import populate
from tests.support.team_helpers import echo_build

#: the team, its member, and the role the seed's worker serves
TEAM, MEMBER, ROLE = "crew", "alice", "answers questions"
#: the long-term memory namespace the seed writes
MEMORY_NS = ("users", "u1")


#: the campaign's key as ``LANGGRAPH_HANDOFF_SIGNING_KEYS`` takes it (a fixed secret: the fuzzer
#: is not testing the secret)
SIGNING_KEYS_TEXT = "fuzz:" + base64.urlsafe_b64encode(b"f" * 32).decode()


def signing_keys() -> SigningKeys:
    return SigningKeys.parse(SIGNING_KEYS_TEXT)


def foreign_key() -> SigningKeys:
    """A key the readers do not hold (what a foreign writer signs with)."""
    return SigningKeys.parse("other:" + base64.urlsafe_b64encode(b"o" * 32).decode())


@dataclass(frozen=True)
class Seed:
    """The seed store's objects (key -> body as stored), and whether they are signed."""

    objects: dict[str, bytes]
    signed: bool

    def kind_of(self, key: str) -> envelope.Kind | None:
        body = self.objects[key]
        if body[:4] != envelope.MAGIC:
            return None
        return envelope.decode(signing.strip(body), key=key).kind

    def store(self, replace: dict[str, bytes] | None = None) -> MemoryStore:
        """A fresh store of the seed's objects, with ``replace`` put over them."""
        store = MemoryStore()
        for key, body in {**self.objects, **(replace or {})}.items():
            store.put(key, body)
        return store


def build(signed: bool) -> Seed:
    """Every object kind (:func:`tests.support.signing_helpers.populate`), plus a team member's
    conversation written by a worker's ingest and one more message waiting in its inbox."""
    store = MemoryStore()
    saver = populate(store, signing_keys() if signed else None)
    team = Team(saver, TEAM)
    worker = TeamWorker(team, "seed-worker", {ROLE: echo_build}, auto_reply=False)
    worker.step()
    worker.stop()
    team.send(MEMBER, "are you there?", sender="lead")
    objects = {info.key: store.get(info.key).body for info in store.list("")}  # type: ignore[union-attr]
    assert f"teams/{TEAM}/members/" + keys.head_key(f"{TEAM}/{MEMBER}", "") in objects, sorted(objects)
    return Seed(objects, signed)


def save(seed: Seed, path: Path) -> None:
    path.write_bytes(msgpack.packb({"signed": seed.signed, "objects": seed.objects}, use_bin_type=True))


def load(path: Path) -> Seed:
    raw: dict[str, Any] = msgpack.unpackb(path.read_bytes(), raw=False)
    return Seed(raw["objects"], raw["signed"])
