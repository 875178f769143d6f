"""``fast_init`` and ``fast_replace`` on both kinds of frozen dataclass: with an instance
``__dict__`` (filled in one step) and with ``slots=True`` (no ``__dict__``: one object fewer
for the collector to walk, which the records a long thread keeps cached need)."""

from __future__ import annotations

import gc
from dataclasses import FrozenInstanceError, dataclass, field

import pytest

from langgraph_handoff._format.records import Folded, Record, WriteItem
from langgraph_handoff._frozen import fast_init, fast_replace


@fast_init
@dataclass(frozen=True)
class _Plain:
    x: int
    tags: list[str] = field(default_factory=list)
    y: int = 0
    _memo: bytes | None = field(default=None, init=False, compare=False, repr=False)


@fast_init
@dataclass(frozen=True, slots=True)
class _Slotted:
    x: int
    tags: list[str] = field(default_factory=list)
    y: int = 0
    _memo: bytes | None = field(default=None, init=False, compare=False, repr=False)


@pytest.mark.parametrize("cls", [_Plain, _Slotted])
def test_init_and_replace_keep_dataclass_semantics(cls: type) -> None:
    a = cls(1)
    assert (a.x, a.tags, a.y, a._memo) == (1, [], 0, None)
    assert cls(1).tags is not cls(1).tags  # a fresh default per instance
    assert cls(1, ["t"], y=2) == cls(x=1, tags=["t"], y=2) != a
    with pytest.raises(FrozenInstanceError):
        a.x = 2
    object.__setattr__(a, "_memo", b"packed")
    b = fast_replace(a, y=5)
    assert type(b) is cls and (b.x, b.tags, b.y) == (1, a.tags, 5)
    assert b._memo is None and a._memo == b"packed"  # a memo goes back to its default
    with pytest.raises(TypeError, match="no init field"):
        fast_replace(a, z=1)
    with pytest.raises(TypeError, match="no init field"):
        fast_replace(a, _memo=b"x")


def test_slotted_instances_have_no_dict() -> None:
    assert hasattr(_Plain(1), "__dict__") and not hasattr(_Slotted(1), "__dict__")
    assert not hasattr(fast_replace(_Slotted(1), y=1), "__dict__")


def test_a_cached_record_is_one_tracked_object_not_two() -> None:
    """Records and their folded writes are what a long ``DeltaChannel`` thread keeps cached by
    the thousand (sealed segments); each full collection walks every one of them. With slots,
    a record is not also a dict the collector tracks."""
    item = WriteItem(0, "messages", "msgpack", b"x")
    folded = Folded("etag", "~__pregel_pull, agent", (item,))
    rec = Record("1", None, ("msgpack", b"c"), ("msgpack", b"m"), {}, {"task": folded})
    object.__setattr__(rec, "_packed", b"memo")
    gc.collect()
    assert _tracked_referents(rec) == [rec.writes]  # not a __dict__ holding it
    assert _tracked_referents(folded) == [folded.items]
    again = fast_replace(rec, parent="0")
    assert again.parent == "0" and again.writes is rec.writes and again._packed is None


def _tracked_referents(obj: object) -> list[object]:
    """What the collector walks from ``obj``, its class aside."""
    return [o for o in gc.get_referents(obj) if gc.is_tracked(o) and not isinstance(o, type)]


def test_slotted_fields_of_a_base_and_memos_without_a_plain_default() -> None:
    @dataclass(frozen=True, slots=True)
    class Base:
        x: int

    @fast_init
    @dataclass(frozen=True, slots=True)
    class Child(Base):
        y: int = 0

    c = fast_replace(Child(1, 2), y=3)
    assert (c.x, c.y) == (1, 3) and Child(1) == Child(x=1, y=0)

    @dataclass(frozen=True, slots=True)
    class Listy:
        x: int
        memo: list[int] = field(init=False, default_factory=list)

    with pytest.raises(TypeError, match="no plain default"):
        fast_replace(Listy(1), x=2)
