"""Audit sampling: a share of handoffs, every breaker trip and every flagged briefing, kept for
a person to check.

Multi-agent mistakes depend on model output, so they are found by reading what the agents did:
was the briefing right, did the conversation go to the right desk? Reading every handoff does
not scale, so :class:`AuditPolicy` picks a share of them (``rate=0.5``: 5 of every 10) and
always adds the ones most likely to be wrong: breaker trips and briefings the briefing check
flagged (``on_fail="warn"``).

Why it is decided from the handoff id: a handoff's id is derived from the LangGraph task that
made it, so a replayed step (a crash before its checkpoint, a worker taking the thread over)
makes the same handoff with the same id, and the same audit decision. The record a sink writes
for it is the same too, so the store sink writes it create-only and a replay writes nothing new.

What is recorded (:func:`audit_record`): the handoff (or the breaker trip that ended a turn),
the routing decision behind it, the briefing check's verdict and why it was picked. Where it
goes: ``audit: true`` on the handoff record in the state (``handoff_log()`` shows it), the
``langgraph_handoff.audit.sampled`` attribute on its span (a collector's tail sampler can keep
exactly the audited traces), and each sink: :class:`LogAuditSink` (the default) and
:class:`StoreAuditSink`, which writes one object per handoff to the saver's store, where
``langgraph-handoff audit`` lists them, shows one, records a reviewer's verdict and counts the
share judged wrong.

>>> policy = AuditPolicy(rate=0.5)
>>> ids = [f"{i:032x}" for i in range(1000)]
>>> 450 < sum(policy.sampled(i) for i in ids) < 550  # about half, and always the same half
True
>>> [policy.sampled(i) for i in ids[:6]] == [policy.sampled(i) for i in ids[:6]]
True
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Literal, Protocol, TypeVar

from langgraph_handoff import telemetry as T
from langgraph_handoff._format import envelope, keys
from langgraph_handoff._format.envelope import Kind
from langgraph_handoff.checkpoint import driver, trust
from langgraph_handoff.checkpoint.driver import Plan
from langgraph_handoff.errors import (
    AuditRecordNotFoundError,
    CorruptObjectError,
    InvalidInputError,
    PreconditionFailedError,
)
from langgraph_handoff.stores.base import Get, ListPage, Put

__all__ = [
    "AuditPolicy",
    "AuditRecord",
    "AuditSink",
    "LogAuditSink",
    "StoreAuditSink",
    "audit_record",
]

log = logging.getLogger("langgraph_handoff.audit")

R = TypeVar("R")

Why = Literal["sampled", "breaker", "briefing_flagged"]
Verdict = Literal["ok", "wrong"]

#: the reasons to audit a handoff whatever the rate
ALWAYS: tuple[Why, ...] = ("breaker", "briefing_flagged")


class AuditSink(Protocol):
    """Where audit records go. ``write`` is called on the sync path, ``awrite`` on the async
    one; a sink that raises is logged and skipped (an audit never breaks a run)."""

    def write(self, record: AuditRecord) -> None: ...

    async def awrite(self, record: AuditRecord) -> None: ...


@dataclass(frozen=True)
class AuditPolicy:
    """Which handoffs to audit, and where the records go.

    ``rate``: the share of handoffs sampled, 0 to 1 (``0.5`` is "5 of every 10"; decided from
    each handoff's id, so the same handoff is always decided the same way). ``always``: reasons
    audited whatever the rate, ``"breaker"`` (a circuit breaker tripped) and
    ``"briefing_flagged"`` (the briefing check flagged the briefing and the handoff went ahead).
    ``sinks``: where the records go (default: :class:`LogAuditSink`).
    Pass it as ``create_handoff_graph(..., audit=AuditPolicy(rate=0.5, sinks=[StoreAuditSink(saver)]))``,
    or just ``audit=0.5``.
    """

    rate: float = 0.0
    always: tuple[Why, ...] = ALWAYS
    sinks: Sequence[AuditSink] = field(default_factory=lambda: (LogAuditSink(),))

    def __post_init__(self) -> None:
        rate = self.rate
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not (0.0 <= rate <= 1.0):
            raise InvalidInputError(f"audit rate must be a number from 0 to 1 (0.5: 5 of every 10), got {rate!r}")
        bad = [w for w in self.always if w not in ALWAYS]
        if bad:
            raise InvalidInputError(f"audit always= takes {list(ALWAYS)}, got {bad}")
        object.__setattr__(self, "sinks", tuple(self.sinks))

    @classmethod
    def of(cls, value: AuditPolicy | float | None) -> AuditPolicy | None:
        """``audit=`` as given to the graph: a policy, a rate, or None (no audit)."""
        if value is None or isinstance(value, AuditPolicy):
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidInputError(f"audit must be an AuditPolicy, a rate from 0 to 1, or None; got {value!r}")
        return cls(rate=float(value))

    def sampled(self, handoff_id: str) -> bool:
        """Is this handoff in the sample? The same answer for the same id, in any process."""
        if self.rate <= 0.0:
            return False
        digest = hashlib.blake2b(handoff_id.encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") < self.rate * 2.0**64

    def why(self, handoff: Mapping[str, Any] | None, check: Mapping[str, Any] | None, rid: str) -> list[Why]:
        """Every reason to audit this handoff (or turn-ending trip), empty when it is not."""
        out: list[Why] = []
        if (handoff is None or handoff.get("trigger") == "breaker") and "breaker" in self.always:
            out.append("breaker")
        if check is not None and check.get("ok") is False and "briefing_flagged" in self.always:
            out.append("briefing_flagged")
        if self.sampled(rid):
            out.append("sampled")
        return out


@dataclass(frozen=True)
class AuditRecord:
    """One audited handoff (or a breaker trip that ended a turn with no fallback).

    ``id`` is the handoff's id (the breaker's, for a trip without a handoff); ``day`` the UTC
    date it was made, which the store sink files it under; ``review`` a person's verdict once
    one is recorded (``{"verdict": "ok"|"wrong", "note": ..., "at": ...}``)."""

    id: str
    thread_id: str | None
    at: str
    why: tuple[str, ...]
    handoff: Mapping[str, Any] | None = None
    breaker: Mapping[str, Any] | None = None
    decision: Mapping[str, Any] | None = None
    check: Mapping[str, Any] | None = None
    review: Mapping[str, Any] | None = None

    @property
    def day(self) -> str:
        return self.at[:10]

    def as_data(self) -> dict[str, Any]:
        return {"id": self.id, "thread_id": self.thread_id, "at": self.at, "why": list(self.why),
                "handoff": _plain(self.handoff), "breaker": _plain(self.breaker), "decision": _plain(self.decision),
                "check": _plain(self.check), "review": _plain(self.review)}  # fmt: skip

    @property
    def summary(self) -> str:
        """One line: what happened and why it was picked."""
        h = self.handoff or {}
        if h:
            what = f"{h.get('source') or 'the user'} -> {h.get('target')} ({h.get('trigger')}, hop {h.get('hop')})"
        else:
            what = f"turn ended by a breaker: {(self.breaker or {}).get('reason')}"
        judged = f"; judged {self.review.get('verdict')}" if self.review else ""
        return f"{what}; {', '.join(self.why)}{judged}"


def _plain(value: Any) -> Any:
    """JSON-ready: what msgpack stores and a record decodes back to."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return str(value)


def _utc(seconds: float | None) -> str:
    when = datetime.fromtimestamp(seconds, timezone.utc) if seconds is not None else datetime.now(timezone.utc)
    return when.isoformat(timespec="seconds")


def audit_record(
    policy: AuditPolicy,
    *,
    thread_id: str | None,
    handoff: Mapping[str, Any] | None = None,
    breaker: Mapping[str, Any] | None = None,
    decision: Mapping[str, Any] | None = None,
) -> AuditRecord | None:
    """The record of one handoff (or turn-ending breaker trip) if the policy audits it, else None.

    >>> policy = AuditPolicy(rate=1.0)
    >>> r = audit_record(policy, thread_id="t-1", handoff={"id": "h1", "source": "a", "target": "b",
    ...                  "trigger": "tool", "hop": 1, "created_at": "2026-12-07T10:00:00+00:00"})
    >>> r.why, r.day, r.summary
    (('sampled',), '2026-12-07', 'a -> b (tool, hop 1); sampled')
    """
    found = handoff.get("check") if handoff is not None else None
    check = found if isinstance(found, Mapping) else None
    rid = str((handoff or breaker or {}).get("id") or "")
    if not rid:
        return None
    why = policy.why(handoff, check, rid)
    if not why:
        return None
    created = (handoff or {}).get("created_at")
    at = created if isinstance(created, str) and len(created) >= 10 else _utc((breaker or {}).get("at_utc"))
    return AuditRecord(rid, thread_id, at, tuple(why), handoff, breaker, decision, check)


class LogAuditSink:
    """Each audit record as an INFO record on the ``langgraph_handoff.audit`` logger, with its
    fields as ``extra=`` (the briefing's text only with content capture on, like every log
    record of this package)."""

    def write(self, record: AuditRecord) -> None:
        h = record.handoff or {}
        extra = {T.EVENT: "audit", T.THREAD: record.thread_id, T.HANDOFF_ID: record.id, T.SOURCE: h.get("source"),
                 T.TARGET: h.get("target"), T.CHAIN: " -> ".join(str(x) for x in h.get("chain") or []),
                 T.AUDIT_WHY: ",".join(record.why)}  # fmt: skip
        if T.content_on() and h.get("briefing"):
            extra[T.BRIEFING] = h.get("briefing")
        log.info("audit %s on %s: %s", record.id, record.thread_id, record.summary, extra=extra)

    async def awrite(self, record: AuditRecord) -> None:
        self.write(record)


# -- the store sink, and the review ----------------------------------------------------------------


def encode_record(record: AuditRecord) -> bytes:
    return envelope.encode_msgpack(Kind.AUDIT, record.as_data())


def _mapping(obj: Mapping[str, Any], name: str, key: str) -> Mapping[str, Any] | None:
    value = obj.get(name)
    if value is None or isinstance(value, Mapping):
        return value
    raise CorruptObjectError(key, f"an audit record whose {name} is not a map")


def decode_record(body: bytes, *, key: str) -> AuditRecord:
    """An audit record as stored, read strictly (``CorruptObjectError`` naming ``key`` otherwise)."""
    obj, _ = envelope.decode_msgpack(body, key=key, expect=Kind.AUDIT)
    if not isinstance(obj, Mapping):
        raise CorruptObjectError(key, "not an audit record")
    rid, thread, at, why = obj.get("id"), obj.get("thread_id"), obj.get("at"), obj.get("why")
    if not (isinstance(rid, str) and rid and isinstance(at, str) and (thread is None or isinstance(thread, str))):
        raise CorruptObjectError(key, "an audit record without an id, a thread or a time")
    if not (isinstance(why, list) and all(isinstance(w, str) for w in why)):
        raise CorruptObjectError(key, "an audit record without its reasons")
    fields = {name: _mapping(obj, name, key) for name in ("handoff", "breaker", "decision", "check", "review")}
    return AuditRecord(rid, thread, at, tuple(why), **fields)


def audit_key(day: str, rid: str) -> str:
    """Where the store sink files a record: ``audit/{yyyy-mm-dd}/{id}``.

    >>> audit_key("2026-12-07", "8c5a")
    'audit/2026-12-07/8c5a'
    """
    return f"{keys.AUDIT_ROOT}{keys.encode_segment(day)}/{keys.encode_segment(rid)}"


def plan_write(record: AuditRecord) -> Plan[bool]:
    """Store the record create-only: True if this wrote it, False if it was there (a replay)."""
    try:
        yield Put(audit_key(record.day, record.id), encode_record(record), if_none_match=True)
    except PreconditionFailedError:
        return False
    return True


def _days(since: timedelta, now: datetime) -> list[str]:
    first = (now - since).date()
    count = (now.date() - first).days
    return [(first + timedelta(days=i)).isoformat() for i in range(count + 1)]


@dataclass(frozen=True)
class Listed:
    """One stored audit record, or the reason it could not be read (``record`` None)."""

    key: str
    record: AuditRecord | None
    problem: str | None = None


def plan_list(since: timedelta, now: datetime) -> Plan[list[Listed]]:
    """Every record filed on the days from ``now - since`` to ``now``, oldest day first. A
    record that cannot be read is listed with its problem, never skipped in silence."""
    out: list[Listed] = []
    for day in _days(since, now):
        prefix = f"{keys.AUDIT_ROOT}{keys.encode_segment(day)}/"
        cursor: str | None = None
        while True:
            page = yield ListPage(prefix, start_after=cursor)
            got = yield driver.Batch(tuple(Get(info.key) for info in page.items), outcomes=True)
            for info, obj in zip(page.items, got, strict=True):
                out.append(_read(info.key, obj))
            if not page.truncated or not page.items:
                break
            cursor = page.items[-1].key
    return out


def _read(key: str, obj: Any) -> Listed:
    if isinstance(obj, CorruptObjectError):
        return Listed(key, None, str(obj))
    if isinstance(obj, BaseException):
        raise obj
    if obj is None:
        return Listed(key, None, "deleted while listed")
    try:
        return Listed(key, decode_record(obj.body, key=key))
    except CorruptObjectError as exc:
        return Listed(key, None, str(exc))


def plan_find(rid: str, since: timedelta, now: datetime) -> Plan[tuple[str, Any] | None]:
    """The stored record ``rid`` (its key and stored object), looking at the newest day first."""
    days = list(reversed(_days(since, now)))
    got = yield driver.Batch(tuple(Get(audit_key(day, rid)) for day in days), outcomes=True)
    for day, obj in zip(days, got, strict=True):
        if isinstance(obj, BaseException) and not isinstance(obj, CorruptObjectError):
            raise obj
        if obj is not None:
            return audit_key(day, rid), obj
    return None


def plan_mark(rid: str, verdict: Verdict, note: str, since: timedelta, now: datetime) -> Plan[AuditRecord]:
    """Record a reviewer's verdict on record ``rid`` by compare-and-swap (a concurrent mark is
    re-read and the last one wins, never a torn record). The record is looked for once; a lost
    race re-reads only its key."""
    if verdict not in ("ok", "wrong"):
        raise InvalidInputError(f"an audit verdict is 'ok' or 'wrong', got {verdict!r}")
    found = yield from plan_find(rid, since, now)
    if found is None:
        raise AuditRecordNotFoundError(rid, since)
    key, obj = found
    for _ in range(5):
        if isinstance(obj, BaseException):
            raise obj
        if obj is None:
            raise AuditRecordNotFoundError(rid, since)
        record = decode_record(obj.body, key=key)
        review = {"verdict": verdict, "note": note, "at": now.isoformat(timespec="seconds")}
        marked = AuditRecord(record.id, record.thread_id, record.at, record.why, record.handoff, record.breaker,
                             record.decision, record.check, review)  # fmt: skip
        try:
            yield Put(key, encode_record(marked), if_match=obj.etag)
        except PreconditionFailedError:
            obj = yield Get(key)
            continue
        return marked
    raise PreconditionFailedError(key, "five reviewers' marks in a row raced this one; try again")


@dataclass(frozen=True)
class Stats:
    """What the reviewers found: records, reviewed, judged wrong, and the share judged wrong."""

    records: int
    reviewed: int
    wrong: int
    unreadable: int
    by_why: Mapping[str, tuple[int, int]]

    @property
    def wrong_share(self) -> float | None:
        return self.wrong / self.reviewed if self.reviewed else None


def stats(listed: Sequence[Listed]) -> Stats:
    """The share of reviewed records judged wrong, overall and by reason picked.

    >>> r = AuditRecord("a", "t", "2026-12-07", ("sampled",), review={"verdict": "wrong"})
    >>> s = stats([Listed("k", r), Listed("k2", None, "damaged")])
    >>> s.reviewed, s.wrong, s.unreadable, s.wrong_share
    (1, 1, 1, 1.0)
    """
    records = [x.record for x in listed if x.record is not None]
    reviewed = [r for r in records if r.review and r.review.get("verdict") in ("ok", "wrong")]
    wrong = [r for r in reviewed if r.review and r.review.get("verdict") == "wrong"]
    by: dict[str, tuple[int, int]] = {}
    for r in reviewed:
        for w in r.why:
            seen, bad = by.get(w, (0, 0))
            by[w] = (seen + 1, bad + (r in wrong))
    return Stats(len(records), len(reviewed), len(wrong), len(listed) - len(records), by)


class StoreAuditSink:
    """Audit records as objects on a saver's store, one per handoff (``audit/{day}/{id}``),
    written create-only: a replayed step finds its record there and writes nothing, and a
    reviewer's verdict on it is never overwritten.

    >>> from langgraph_handoff import ObjectStoreSaver
    >>> saver = ObjectStoreSaver.from_url("memory://")
    >>> sink = StoreAuditSink(saver)
    >>> record = AuditRecord("h1", "t-1", "2026-12-07T10:00:00+00:00", ("sampled",), {"target": "orders"})
    >>> sink.write(record); sink.write(record)  # the second is a replay: nothing new
    >>> [x.record.id for x in sink.records(since=timedelta(days=1), now=datetime(2026, 12, 7, tzinfo=timezone.utc))]
    ['h1']
    """

    def __init__(self, saver: Any) -> None:
        self.saver = saver

    def _run(self, plan: Plan[R]) -> R:
        return trust.run(self.saver.store, plan)

    async def _arun(self, plan: Plan[R]) -> R:
        return await trust.arun(self.saver.store, plan)

    def write(self, record: AuditRecord) -> None:
        self._run(plan_write(record))

    async def awrite(self, record: AuditRecord) -> None:
        await self._arun(plan_write(record))

    def records(self, *, since: timedelta = timedelta(days=1), now: datetime | None = None) -> list[Listed]:
        """The records of the last ``since`` (whole UTC days), oldest first."""
        return self._run(plan_list(since, now or datetime.now(timezone.utc)))

    async def arecords(self, *, since: timedelta = timedelta(days=1), now: datetime | None = None) -> list[Listed]:
        return await self._arun(plan_list(since, now or datetime.now(timezone.utc)))

    def get(self, rid: str, *, since: timedelta = timedelta(days=30), now: datetime | None = None) -> AuditRecord:
        """Record ``rid``, looked for over the last ``since`` (raises :class:`AuditNotFound`)."""
        found = self._run(plan_find(rid, since, now or datetime.now(timezone.utc)))
        if found is None:
            raise AuditRecordNotFoundError(rid, since)
        key, obj = found
        if isinstance(obj, BaseException):
            raise obj
        return decode_record(obj.body, key=key)

    def mark(
        self, rid: str, verdict: Verdict, note: str = "", *, since: timedelta = timedelta(days=30),
        now: datetime | None = None,
    ) -> AuditRecord:  # fmt: skip
        """Record a reviewer's verdict, ``"ok"`` or ``"wrong"``, with a note."""
        return self._run(plan_mark(rid, verdict, note, since, now or datetime.now(timezone.utc)))


# -- what a graph step hands the sinks -------------------------------------------------------------


def audit_records(
    policy: AuditPolicy | None, config: Mapping[str, Any] | None, state: Mapping[str, Any], events: Sequence[Any]
) -> list[AuditRecord]:
    """The records of what one graph step did: each audited handoff, and a breaker trip that
    ended the turn with no fallback to hand to. The decision behind them is this step's
    routing decision, else the turn's."""
    if policy is None:
        return []
    conf = (config or {}).get("configurable") or {}
    thread = str(conf["thread_id"]) if isinstance(conf, Mapping) and conf.get("thread_id") is not None else None
    routed = [d for kind, d in events if kind == "route"]
    earlier = state.get("routing") or []
    decision = routed[-1] if routed else (earlier[-1] if earlier else None)
    out = []
    for kind, data in events:
        record = None
        if kind == "handoff" and data.get("audit"):
            record = audit_record(policy, thread_id=thread, handoff=data, decision=decision)
        elif kind == "breaker" and data.get("target") is None:
            record = audit_record(policy, thread_id=thread, breaker=data, decision=decision)
        if record is not None:
            out.append(record)
    return out


def _noted(record: AuditRecord) -> None:
    T.counter(T.M_AUDITS, 1, {T.AUDIT_WHY: ",".join(record.why)})


def _failed(sink: Any, record: AuditRecord, exc: BaseException) -> None:
    log.warning(
        "audit sink %s could not take audit %s on %s: %s: %s",
        type(sink).__name__, record.id, record.thread_id, type(exc).__name__, exc,
        extra={T.EVENT: "audit.failed", T.THREAD: record.thread_id, T.HANDOFF_ID: record.id},
    )  # fmt: skip


def write_audits(policy: AuditPolicy | None, records: Sequence[AuditRecord]) -> None:
    """Hand each record to every sink; a sink that fails is logged (WARNING) and the run goes on."""
    for record in records:
        _noted(record)
        for sink in policy.sinks if policy is not None else ():
            try:
                sink.write(record)
            except Exception as exc:  # noqa: BLE001 - an audit never breaks a run
                _failed(sink, record, exc)


async def awrite_audits(policy: AuditPolicy | None, records: Sequence[AuditRecord]) -> None:
    for record in records:
        _noted(record)
        for sink in policy.sinks if policy is not None else ():
            try:
                await sink.awrite(record)
            except Exception as exc:  # noqa: BLE001
                _failed(sink, record, exc)
