"""What a head carries besides its checkpoints: one typed field per concern, one owner each.

A head (``heads/{T}/{N}``) is rewritten whole by every compare-and-swap of its namespace, so the
subsystems that need a little state per namespace, atomic with its checkpoints, keep it there
and pay no request of their own. Each field has one owner: the module that says what it means
and offers the only constructors and typed readers of it. Everyone else writes it through the
owner (or carries it over untouched) and reads it through the owner's typed view:

``lease`` (stored under ``lease``)
    A root head's session lease: an ``ownership.Lease`` as JSON; the format does not look inside.
    Owner: session ownership. ``ownership/lease.py`` writes it (``Lease.into``) and reads it
    strictly (``lease_of``); its layer-4 half, ``checkpoint/fencing.py``, offers the lenient
    typed view (``LeaseTerms``) and the release a tombstone applies (``released``). Read by the
    write rule (``fencing``), the TTL sweep (``ttl.lease_hold``: a live lease keeps a thread),
    ``ownership/`` and ``teams/views.py``, each through one of those.
``fence`` (``fence``)
    The highest fencing epoch written to this head, an ``int``. Owner: ``checkpoint/fencing.py``
    (``fence_of``, ``fenced``): a lease-bound put stamps it, a lease change raises it
    (``ownership/manager.py``, through ``fenced``). Read by the write rule and by
    ``plans/maintenance.py`` (the tombstone of a root head that cannot be read).
``team_ack`` (``team_inbox``)
    The messages a team member ingested (``hwm``, ``recent``, ``turn``). Owner:
    ``teams/acks.py`` (``AckState.of``, ``ack_rider``); read by ``teams/`` (receive, ``remove``).
``team_resumes`` (``team_resumes``)
    :class:`ResumeCount`, the attempts to finish a member's unfinished step. Owner and only
    reader: ``teams/worker.py`` (``plan_count_resume``).
``swept`` (``swept``)
    :class:`SweptMark`: a TTL sweep emptied the head; when, and up to which checkpoint its data
    may still be there. Owner: ``checkpoint/ttl.py`` (``swept_mark``, ``restamp`` drops it);
    written through it by ``plans/sweep.py`` (tombstones) and ``plans/writing.py`` (a refused
    run's writes). Read by the write rule (``ThreadExpiredError``) and ``plans/sweep.py``.
``ttl`` (``ttl``)
    :class:`TTLStamp`: when the head was last written, and its TTL. Owner and only reader:
    ``checkpoint/ttl.py`` (``restamp`` on every put, refresh and copy; expiry, refresh).
``newer`` (any other key)
    What a newer release wrote, verbatim: carried over by every rewrite, read by nobody.

**The same format as before.** Every field is stored under the key the untyped dict used and in
its encoding, so releases before and after this record read each other's heads and no upgrade
step exists. Reading is lenient, as it always was: a value this release cannot read (a release
never wrote it so, but a store is not ours alone) is *absent* to every reader, never an
exception, and is written back exactly as it was read for as long as nobody changes its field.
So is every value read: a head decoded and encoded again without a change carries the same
metadata, value for value (``60`` stays an integer, a bare-number sweep mark stays a number).
Keys are written in one order (:data:`KEY_ORDER`, the order the writers before this record left
after a put), so a head whose keys were stored in another order comes back with the same
decoded structure but different bytes (``tests/format/test_head_meta_format.py``).

Pure data, no I/O: the sync and the async paths share it.

>>> meta = HeadMeta.from_wire({"ttl": {"at": 1000.0, "m": 60}, "fence": 2, "x-new": [1]})
>>> meta.ttl, meta.fence, dict(meta.newer)
(TTLStamp(at=1000.0, minutes=60.0), 2, {'x-new': [1]})
>>> meta.wire()  # read as written: 60 stays an int, keys in KEY_ORDER
{'fence': 2, 'x-new': [1], 'ttl': {'at': 1000.0, 'm': 60}}
>>> meta.replace(ttl=TTLStamp(2000.0, 30.0)).wire()
{'fence': 2, 'x-new': [1], 'ttl': {'at': 2000.0, 'm': 30.0}}
>>> odd = HeadMeta.from_wire({"ttl": "soon"})  # unreadable: absent, kept as it was
>>> odd.ttl, sorted(odd.unreadable), odd.replace(fence=1).wire()
(None, ['ttl'], {'fence': 1, 'ttl': 'soon'})
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

__all__ = ["KEY_ORDER", "FieldName", "HeadMeta", "ResumeCount", "SweptMark", "TTLStamp"]

FieldName = Literal["lease", "fence", "team_ack", "team_resumes", "swept", "ttl"]


def _number(value: Any) -> float | None:
    """A finite number as a float; None for anything else (``bool`` included)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


@dataclass(frozen=True)
class TTLStamp:
    """When a head was last written (epoch seconds) and the TTL, in minutes, of the saver that
    wrote it: the head expires ``minutes`` after ``at``. Stored as ``{"at": at, "m": minutes}``.

    >>> TTLStamp.from_wire({"at": 100.0, "m": 1}), TTLStamp.from_wire({"at": 100.0, "m": 0})
    (TTLStamp(at=100.0, minutes=1.0), None)
    >>> TTLStamp(100.0, 1.0).expires_at
    160.0
    """

    at: float
    minutes: float

    @property
    def expires_at(self) -> float:
        return self.at + self.minutes * 60

    @classmethod
    def from_wire(cls, raw: Any) -> TTLStamp | None:
        """Both numbers as ``float()`` reads them (strings included, as releases always read
        them), finite, and a positive TTL; else None."""
        if not isinstance(raw, Mapping):
            return None
        try:
            at, minutes = float(raw["at"]), float(raw["m"])
        except (KeyError, TypeError, ValueError):
            return None
        return cls(at, minutes) if math.isfinite(at) and math.isfinite(minutes) and minutes > 0 else None

    def wire(self) -> Any:
        return {"at": self.at, "m": self.minutes}


@dataclass(frozen=True)
class SweptMark:
    """A TTL sweep emptied this head ``at`` (epoch seconds); ``upto``, while set, is the newest
    checkpoint id it decided on: the data objects of ids up to it may still be there, and the
    next sweep deletes them. Either may be unknown (None), not both. Stored as
    ``{"at": ..., "upto": ...}`` without the keys that are None; the first TTL release wrote a
    bare number (``at``), read as ``bare``.

    >>> SweptMark.from_wire({"at": 5.0, "upto": "c1"}), SweptMark.from_wire(5.0)
    (SweptMark(at=5.0, upto='c1'), SweptMark(at=5.0, upto=None))
    >>> SweptMark.from_wire({"upto": ""}) is None, SweptMark.from_wire(5.0).wire()
    (True, 5.0)
    """

    at: float | None
    upto: str | None = None
    #: written as a bare number, as the first TTL release wrote it (``upto`` is then None)
    bare: bool = field(default=False, compare=False, repr=False)

    @classmethod
    def from_wire(cls, raw: Any) -> SweptMark | None:
        bare = _number(raw)
        if bare is not None:
            return cls(bare, None, bare=True)
        if not isinstance(raw, Mapping):
            return None
        at, upto = _number(raw.get("at")), raw.get("upto")
        upto = upto if isinstance(upto, str) and upto else None
        return None if at is None and upto is None else cls(at, upto)

    def wire(self) -> Any:
        if self.bare and self.upto is None and self.at is not None:
            return self.at
        mark: dict[str, Any] = {}
        if self.at is not None:
            mark["at"] = self.at
        if self.upto is not None:
            mark["upto"] = self.upto
        return mark


@dataclass(frozen=True)
class ResumeCount:
    """How many attempts were made to finish the unfinished step at ``checkpoint`` (counted
    before each attempt runs, so a step that kills its worker is counted too). Stored as
    ``{"checkpoint": id, "count": n}``.

    >>> ResumeCount.from_wire({"checkpoint": "c1", "count": 2}), ResumeCount.from_wire({"count": 2})
    (ResumeCount(checkpoint='c1', count=2), None)
    """

    checkpoint: str
    count: int

    @classmethod
    def from_wire(cls, raw: Any) -> ResumeCount | None:
        if not isinstance(raw, Mapping):
            return None
        checkpoint, count = raw.get("checkpoint"), raw.get("count", 0)
        if not isinstance(checkpoint, str) or isinstance(count, bool) or not isinstance(count, int):
            return None
        return cls(checkpoint, count)

    def wire(self) -> Any:
        return {"checkpoint": self.checkpoint, "count": self.count}


def _mapping(raw: Any) -> Mapping[str, Any] | None:
    return raw if isinstance(raw, Mapping) else None


def _epoch(raw: Any) -> int | None:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) else None


def _as_is(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class _Field:
    name: FieldName
    key: str
    parse: Callable[[Any], Any]
    wire: Callable[[Any], Any]


#: every field, in the order its key is written. ``newer`` keys go between the two groups:
#: where the writers of the untyped dict left them after a put (which re-added ``swept`` and
#: ``ttl`` last)
_LEADING: Final = (
    _Field("lease", "lease", _mapping, _as_is),
    _Field("fence", "fence", _epoch, _as_is),
    _Field("team_ack", "team_inbox", _mapping, _as_is),
    _Field("team_resumes", "team_resumes", ResumeCount.from_wire, ResumeCount.wire),
)
_TRAILING: Final = (
    _Field("swept", "swept", SweptMark.from_wire, SweptMark.wire),
    _Field("ttl", "ttl", TTLStamp.from_wire, TTLStamp.wire),
)
_FIELDS: Final = {f.key: f for f in (*_LEADING, *_TRAILING)}
#: the keys of the fields, in the order they are written (a newer release's keys go where
#: ``...`` stands)
KEY_ORDER: Final = (*(f.key for f in _LEADING), ..., *(f.key for f in _TRAILING))


class _Keep(enum.Enum):
    KEEP = "keep"


_KEEP: Final = _Keep.KEEP


@dataclass(frozen=True, eq=False)
class HeadMeta:
    """The metadata of one head: see the module docstring for each field's owner. ``None`` is
    "absent". Build it with keyword arguments, change it with :meth:`replace` (never with
    ``dataclasses.replace``: :meth:`replace` is what drops a changed field's value as read),
    read stored metadata with :meth:`from_wire`. Two records are equal when they write the same
    metadata.
    """

    #: the session lease (a root head's), as ``ownership`` stores it
    lease: Mapping[str, Any] | None = None
    #: the highest fencing epoch written to this head
    fence: int | None = None
    #: a team member's inbox acknowledgement, as ``teams.acks`` stores it
    team_ack: Mapping[str, Any] | None = None
    #: a team member's attempts to finish its unfinished step
    team_resumes: ResumeCount | None = None
    #: the mark of the TTL sweep that emptied this head
    swept: SweptMark | None = None
    #: the TTL stamp of the last write
    ttl: TTLStamp | None = None
    #: keys a newer release wrote, verbatim, in the order they were read
    newer: Mapping[str, Any] = field(default_factory=dict)
    #: the values under the fields' keys as read from the store: written back verbatim while
    #: their field still holds what they parse to (so nothing is re-encoded by a rewrite)
    _as_read: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_wire(cls, stored: Mapping[str, Any]) -> HeadMeta:
        """The record of a head's stored metadata keys (the body's keys that are not records,
        payloads, segments or the nonce). Never raises: what cannot be read is absent."""
        if not stored:
            return _EMPTY
        values: dict[str, Any] = {}
        newer: dict[str, Any] = {}
        as_read: dict[str, Any] = {}
        for key, raw in stored.items():
            f = _FIELDS.get(key)
            if f is None:
                newer[key] = raw
            else:
                values[f.name] = f.parse(raw)
                as_read[key] = raw
        return cls(**values, newer=newer, _as_read=as_read)

    def wire(self) -> dict[str, Any]:
        """The metadata keys to store, in :data:`KEY_ORDER` (a new dict)."""
        out: dict[str, Any] = {}
        for f in _LEADING:
            self._put(out, f)
        out.update(self.newer)
        for f in _TRAILING:
            self._put(out, f)
        return out

    def _put(self, out: dict[str, Any], f: _Field) -> None:
        value = getattr(self, f.name)
        if f.key in self._as_read:
            raw = self._as_read[f.key]
            if f.parse(raw) == value:
                out[f.key] = raw  # unchanged: exactly as it was read
                return
        if value is not None:
            out[f.key] = f.wire(value)

    @property
    def unreadable(self) -> frozenset[FieldName]:
        """Fields whose stored value this release cannot read: absent to every reader, and
        written back as they were until their owner writes the field. A strict reader (the
        session monitor, a team's ack) reports them instead of taking them for absent."""
        out: set[FieldName] = set()
        for key, raw in self._as_read.items():
            f = _FIELDS[key]
            if raw is not None and f.parse(raw) is None:
                out.add(f.name)
        return frozenset(out)

    def replace(
        self,
        *,
        lease: Mapping[str, Any] | _Keep | None = _KEEP,
        fence: int | _Keep | None = _KEEP,
        team_ack: Mapping[str, Any] | _Keep | None = _KEEP,
        team_resumes: ResumeCount | _Keep | None = _KEEP,
        swept: SweptMark | _Keep | None = _KEEP,
        ttl: TTLStamp | _Keep | None = _KEEP,
    ) -> HeadMeta:
        """A copy with the given fields changed (``None`` removes one); a changed field's value
        as read is dropped, whatever it was. Only the field's owner calls this for its field."""
        changes = {
            name: value
            for name, value in (("lease", lease), ("fence", fence), ("team_ack", team_ack),
                                ("team_resumes", team_resumes), ("swept", swept), ("ttl", ttl))
            if value is not _KEEP
        }  # fmt: skip
        if not changes:
            return self
        as_read = {k: v for k, v in self._as_read.items() if _FIELDS[k].name not in changes}
        values: dict[str, Any] = {f.name: getattr(self, f.name) for f in _FIELDS.values()}
        values.update(changes)
        return HeadMeta(**values, newer=self.newer, _as_read=as_read)

    def overlay(self, other: HeadMeta) -> HeadMeta:
        """This record with every field ``other`` holds (readable or not) taken from it, and its
        newer keys added: a head restored under a change someone else wrote on top of it.

        >>> HeadMeta(fence=1, ttl=TTLStamp(5.0, 1.0)).overlay(HeadMeta(fence=2)).wire()
        {'fence': 2, 'ttl': {'at': 5.0, 'm': 1.0}}
        """
        return HeadMeta.from_wire({**self.wire(), **other.wire()})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HeadMeta):
            return NotImplemented
        return self is other or self.wire() == other.wire()

    __hash__ = None  # type: ignore[assignment]


#: the metadata of a head that carries none (shared: records are immutable)
_EMPTY: Final = HeadMeta()
