"""The inbox acknowledgement: which messages a member has ingested, and the merge rules. Pure.

A member's ack record lives in the metadata of its thread's *root head* (``HeadMeta.team_ack``,
this module is its owner), the object every
checkpoint put of that thread already compare-and-swaps. A turn that ingests messages stores them
(in its input checkpoint) and records them as consumed **in the same CAS**
(``ObjectStoreSaver.with_head_rider``): there is no state in which a message is acked but not in
the conversation, or in the conversation but still pending. The ack costs no request of its own,
and a fenced (superseded) worker cannot ack, because its checkpoint put is refused.

The input checkpoint holds the messages as input that has not run yet (``__start__``) until the
turn's next put moves them into ``messages``. New input on top of it would make LangGraph
discard them, so a put through a rider saver is refused (``StaleWriterError``) when its parent
still holds unrun input: a second consumer without a lease waits, or finishes that step first
(``invoke(None)``), as :meth:`TeamWorker.settle` does after a takeover.

The record::

    {"hwm": {stream: highest seq ingested},      # agent senders: permanent, O(senders)
     "recent": {message id: consumed_at},         # every id, kept `window` seconds
     "turn": token}                               # the turn that wrote it (idempotent re-puts)

``hwm`` makes deduplication of agent messages permanent: a dispatcher that re-sends an old
message after the blob was consumed and deleted (the SQS FIFO problem) is dropped by its ``seq``.
External sends have no sequence and are deduplicated by id for ``window`` seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from langgraph_handoff._format.head_meta import HeadMeta
from langgraph_handoff._format.keys import head_key
from langgraph_handoff.errors import CorruptObjectError, MessageIngestedError
from langgraph_handoff.teams.model import Message

__all__ = ["DEFAULT_WINDOW", "AckState", "Selection", "ack_rider", "select"]

#: how long an external message id is remembered after ingestion: longer than any sender's retry
#: horizon (SQS FIFO remembers 5 minutes)
DEFAULT_WINDOW = 15 * 60.0


@dataclass(frozen=True)
class AckState:
    hwm: dict[str, int] = field(default_factory=dict)
    recent: dict[str, float] = field(default_factory=dict)
    turn: str | None = None

    @classmethod
    def of(cls, meta: HeadMeta | None, thread_id: str) -> AckState:
        """The ack record in a member's root head (``None``: no head yet). A record that cannot
        be read makes the head corrupt: taking it for "nothing ingested" would ingest again.

        >>> AckState.of(HeadMeta(team_ack={"hwm": {"lead@1": 2}, "recent": {}, "turn": "t1"}), "crew/a")
        AckState(hwm={'lead@1': 2}, recent={}, turn='t1')
        >>> AckState.of(None, "crew/a")
        AckState(hwm={}, recent={}, turn=None)
        """
        raw = meta.team_ack if meta is not None else None
        if raw is None:
            if meta is not None and "team_ack" in meta.unreadable:
                raise CorruptObjectError(head_key(thread_id, ""), "malformed team ack record: not a record")
            return cls()
        return cls(
            hwm={str(k): int(v) for k, v in (raw.get("hwm") or {}).items()},
            recent={str(k): float(v) for k, v in (raw.get("recent") or {}).items()},
            turn=raw.get("turn"),
        )

    def into(self, meta: HeadMeta) -> HeadMeta:
        """``meta`` recording this ack (as ``{"hwm": ..., "recent": ..., "turn": ...}``)."""
        return meta.replace(team_ack={"hwm": dict(self.hwm), "recent": dict(self.recent), "turn": self.turn})

    def consumed(self, message: Message) -> bool:
        """Has this member already ingested ``message`` (by sequence or by id)?

        >>> ack = AckState(hwm={"lead@1": 3}, recent={"abc": 1.0})
        >>> ack.consumed(Message(id="x", team="t", sender="lead", to="a", content="", seq=2, stream="lead@1"))
        True
        >>> ack.consumed(Message(id="abc", team="t", sender="ops", to="a", content=""))
        True
        """
        if message.id in self.recent:
            return True
        return message.seq is not None and message.stream is not None and message.seq <= self.hwm.get(message.stream, 0)

    def record(self, messages: Iterable[Message], turn: str, now: float, window: float) -> AckState:
        """The record after ingesting ``messages`` in turn ``turn``; ids older than ``window``
        are forgotten (sequence marks never are)."""
        hwm = dict(self.hwm)
        recent = {i: t for i, t in self.recent.items() if now - t <= window}
        for m in messages:
            recent[m.id] = now
            if m.seq is not None and m.stream is not None:
                hwm[m.stream] = max(hwm.get(m.stream, 0), m.seq)
        return AckState(hwm=hwm, recent=recent, turn=turn)


@dataclass(frozen=True)
class Selection:
    """What a receive makes of an inbox listing."""

    #: to ingest now, in order: per stream by ``seq``; external senders by their order stamp
    ready: list[Message]
    #: already ingested (a re-sent copy, or a blob whose delete did not happen): delete them
    done: list[Message]
    #: waiting for an earlier ``seq`` of the same stream that is not visible yet
    held: list[Message]


def select(messages: Sequence[Message], ack: AckState, *, limit: int | None = None) -> Selection:
    """Split an inbox into ready, done and held messages.

    >>> def m(i, seq=None):
    ...     return Message(id=i, team="t", sender="lead", to="a", content=i, seq=seq, stream="lead@1" if seq else None)
    >>> s = select([m("c", 3), m("a", 1), m("d", 5), m("x")], AckState(hwm={"lead@1": 0}))
    >>> [x.id for x in s.ready], [x.id for x in s.held]
    (['x', 'a'], ['c', 'd'])
    """
    done = [m for m in messages if ack.consumed(m)]
    fresh = [m for m in messages if not ack.consumed(m)]
    ready: list[Message] = []
    held: list[Message] = []
    streams: dict[str, list[Message]] = {}
    seen_ids: set[str] = set()
    for m in fresh:
        if m.id in seen_ids:  # the same id twice in one listing cannot happen (one key per id)
            continue
        seen_ids.add(m.id)
        if m.seq is not None and m.stream is not None:
            streams.setdefault(m.stream, []).append(m)
        else:
            ready.append(m)
    for stream, items in streams.items():
        expected = ack.hwm.get(stream, 0) + 1
        for m in sorted(items, key=lambda x: x.seq or 0):
            if m.seq == expected:
                ready.append(m)
                expected += 1
            elif (m.seq or 0) < expected:  # a second copy of a seq taken above (cannot happen)
                done.append(m)
            else:
                held.append(m)
    # Across senders there is no order to keep; by send stamp reads naturally. Within a stream the
    # seq order above is preserved because stamps of one sender's sequential sends increase.
    ready.sort(key=lambda x: (x.order, x.seq or 0, x.id))
    ready = _keep_stream_order(ready)
    if limit is not None and len(ready) > limit:
        held = ready[limit:] + held
        ready = ready[:limit]
    return Selection(ready=ready, done=done, held=held)


def _keep_stream_order(ready: list[Message]) -> list[Message]:
    """Re-impose ``seq`` order inside each stream after the stamp sort (a stream's stamps come
    from different dispatchers after a takeover and need not increase with ``seq``)."""
    by_stream: dict[str, list[Message]] = {}
    for m in ready:
        if m.stream is not None and m.seq is not None:
            by_stream.setdefault(m.stream, []).append(m)
    queues = {s: iter(sorted(v, key=lambda x: x.seq or 0)) for s, v in by_stream.items()}
    out = []
    for m in ready:
        out.append(next(queues[m.stream]) if m.stream in queues and m.seq is not None else m)
    return out


def ack_rider(
    thread_id: str, messages: Sequence[Message], turn: str, now: float, window: float = DEFAULT_WINDOW
) -> Callable[[HeadMeta], HeadMeta]:
    """The head rider of one ingesting turn: records ``messages`` as consumed, inside the CAS of
    each root put of the turn.

    Idempotent for its own turn (the later puts of the run see their own record and leave it).
    If the head it would replace already records one of the messages under another turn, another
    consumer ingested it first, and the put is refused with :class:`MessageIngestedError`: the
    protocol never ingests a message twice, with or without leases.
    """

    def ride(meta: HeadMeta) -> HeadMeta:
        ack = AckState.of(meta, thread_id)
        if ack.turn == turn:
            return meta
        taken = [m.id for m in messages if ack.consumed(m)]
        if taken:
            raise MessageIngestedError(thread_id, taken)
        return ack.record(messages, turn, now, window).into(meta)

    return ride
