"""The typed head metadata (``format/head_meta.py``): lenient reading with the rules the untyped
dict's readers had (``swept_of``, ``stamp_of``, ``lease_hold``: what cannot be read is absent,
never an exception), values written back as read, and a changed field re-encoded."""

from __future__ import annotations

import math
from typing import Any

import pytest

from langgraph_handoff._format.head_meta import KEY_ORDER, HeadMeta, ResumeCount, SweptMark, TTLStamp

# (stored value, what ``swept_of`` made of it before the typed record)
SWEPT = [
    ({"at": 5.0, "upto": "c1"}, (5.0, "c1")),
    ({"at": 5, "upto": "c1"}, (5.0, "c1")),
    ({"upto": "c1"}, (None, "c1")),
    ({"at": 5.0}, (5.0, None)),
    (5.0, (5.0, None)),
    (7, (7.0, None)),
    ({}, (None, None)),
    ({"at": "5", "upto": ""}, (None, None)),
    ({"at": True, "upto": 3}, (None, None)),
    (True, (None, None)),
    ("5", (None, None)),
    ([5.0], (None, None)),
]

# (stored value, what ``stamp_of`` made of it)
STAMPS = [
    ({"at": 1000.0, "m": 60.0}, (1000.0, 60.0)),
    ({"at": 1000, "m": 60}, (1000.0, 60.0)),
    ({"at": "1000", "m": "60"}, (1000.0, 60.0)),
    ({"at": 1000.0, "m": 0}, None),
    ({"at": 1000.0, "m": -1}, None),
    ({"at": math.inf, "m": 60}, None),
    ({"at": 1000.0, "m": math.nan}, None),
    ({"at": 1000.0}, None),
    ({"at": "soon", "m": 60}, None),
    ({"at": None, "m": 60}, None),
    ("soon", None),
    (None, None),
]


@pytest.mark.parametrize(("raw", "expected"), SWEPT)
def test_a_sweep_mark_is_read_as_before(raw: Any, expected: tuple[Any, Any]) -> None:
    mark = HeadMeta.from_wire({"swept": raw}).swept
    assert ((mark.at, mark.upto) if mark is not None else (None, None)) == expected


@pytest.mark.parametrize(("raw", "expected"), STAMPS)
def test_a_ttl_stamp_is_read_as_before(raw: Any, expected: tuple[float, float] | None) -> None:
    stamp = HeadMeta.from_wire({"ttl": raw}).ttl
    assert ((stamp.at, stamp.minutes) if stamp is not None else None) == expected


def test_what_cannot_be_read_is_absent_and_named() -> None:
    meta = HeadMeta.from_wire(
        {"ttl": "soon", "swept": True, "lease": "mine", "fence": "high", "team_inbox": [1], "team_resumes": 7}
    )
    assert (meta.ttl, meta.swept, meta.lease, meta.fence, meta.team_ack, meta.team_resumes) == (None,) * 6
    assert meta.unreadable == {"ttl", "swept", "lease", "fence", "team_ack", "team_resumes"}
    assert HeadMeta.from_wire({"lease": None, "fence": 3}).unreadable == frozenset()  # nil is absent, not damage


def test_fences_and_resume_counts_are_integers_only() -> None:
    assert HeadMeta.from_wire({"fence": 4}).fence == 4
    for odd in (True, 4.0, "4", None):
        assert HeadMeta.from_wire({"fence": odd}).fence is None
    assert HeadMeta.from_wire({"team_resumes": {"checkpoint": "c", "count": 2}}).team_resumes == ResumeCount("c", 2)
    assert HeadMeta.from_wire({"team_resumes": {"checkpoint": "c"}}).team_resumes == ResumeCount("c", 0)
    for odd in ({"count": 2}, {"checkpoint": "c", "count": "2"}, {"checkpoint": 1, "count": 2}, [1]):
        assert HeadMeta.from_wire({"team_resumes": odd}).team_resumes is None


def test_values_are_written_back_exactly_as_read() -> None:
    stored = {
        "lease": {"epoch": 2, "future": [1]},
        "fence": 2,
        "team_inbox": {"hwm": {}, "recent": {"m1": 1.0}, "turn": "t"},
        "team_resumes": {"checkpoint": "c", "count": 1, "extra": True},
        "x-newer": {"k": 1},
        "swept": 5,
        "ttl": {"at": "1000", "m": 60, "why": "kept"},
    }
    meta = HeadMeta.from_wire(stored)
    wire = meta.wire()
    assert wire == stored and list(wire) == list(stored)
    assert type(wire["swept"]) is int and type(wire["ttl"]["m"]) is int


def test_a_changed_field_is_written_in_its_own_form_and_the_rest_stays() -> None:
    meta = HeadMeta.from_wire({"ttl": "soon", "swept": {"at": 5.0, "upto": "c1"}, "later": 1})
    changed = meta.replace(ttl=TTLStamp(100.0, 30), swept=SweptMark(None, "c1"))
    assert changed.wire() == {"later": 1, "swept": {"upto": "c1"}, "ttl": {"at": 100.0, "m": 30}}
    assert meta.replace(ttl=None).wire() == {"later": 1, "swept": {"at": 5.0, "upto": "c1"}}  # garbage dropped
    assert meta.replace() is meta


def test_keys_are_written_in_one_order() -> None:
    meta = HeadMeta(ttl=TTLStamp(1.0, 2.0), swept=SweptMark(1.0), team_resumes=ResumeCount("c", 1),
                    team_ack={"turn": "t"}, fence=1, lease={"epoch": 1}, newer={"zz": 0})  # fmt: skip
    assert list(meta.wire()) == ["lease", "fence", "team_inbox", "team_resumes", "zz", "swept", "ttl"]
    assert KEY_ORDER == ("lease", "fence", "team_inbox", "team_resumes", ..., "swept", "ttl")
    assert list(HeadMeta.from_wire({"ttl": {"at": 1, "m": 1}, "fence": 1}).wire()) == ["fence", "ttl"]


def test_records_are_equal_when_they_write_the_same_metadata() -> None:
    assert HeadMeta.from_wire({"fence": 1, "ttl": {"at": 1.0, "m": 60}}) == HeadMeta(fence=1, ttl=TTLStamp(1.0, 60))
    assert HeadMeta.from_wire({"ttl": "soon"}) != HeadMeta()
    assert HeadMeta.from_wire({}) == HeadMeta() and HeadMeta(fence=1) != HeadMeta(fence=2)
