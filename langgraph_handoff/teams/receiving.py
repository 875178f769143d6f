"""The receiving side of a member's mailbox: what its inbox holds, and deleting what it ingested.

A receive LISTs the inbox and, if anything is there, GETs every message and the member's root
head (for its ack record, :mod:`~langgraph_handoff.teams.acks`) in one round trip, and splits the
messages into ready, done and held (:func:`~langgraph_handoff.teams.acks.select`). A worker that
holds the member's lease passes the head it remembers (``saver.heads.remembered``) and saves the
head GET: unless it was superseded, that is the current head, and a stale one is harmless (the
ack rider checks again inside the checkpoint's compare-and-swap).

Ingested messages are deleted only after the checkpoint recording them committed; unconditional
deletes are safe, as keys are unique and objects immutable.

The worker runs these plans directly; ``Team.inbox`` and ``Team.receive`` (a consumer of your
own) run them for users.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langgraph_handoff._format import keys
from langgraph_handoff.checkpoint.driver import Batch, Plan
from langgraph_handoff.checkpoint.heads import HeadRead
from langgraph_handoff.errors import CorruptObjectError
from langgraph_handoff.stores.base import DeleteMany, Get, ListPage
from langgraph_handoff.teams.acks import AckState, Selection, select
from langgraph_handoff.teams.model import Message, decode_message, member_thread

if TYPE_CHECKING:
    from langgraph_handoff.checkpoint.saver import ObjectStoreSaver

__all__ = ["Receipt", "plan_delete_ingested", "plan_list", "plan_receive"]

log = logging.getLogger("langgraph_handoff.teams")


@dataclass(frozen=True)
class Receipt:
    """What a receive found in one member's inbox."""

    member: str
    ack: AckState
    selection: Selection
    #: objects that could not be read (corrupt): left in place and reported, never dropped
    unreadable: tuple[str, ...] = ()
    #: how many objects the inbox listing returned (diagnostics)
    keys_listed: int = 0


def plan_list(prefix: str) -> Plan[list[Any]]:
    """Every object under ``prefix`` (all pages)."""
    items: list[Any] = []
    cursor = None
    while True:
        page = yield ListPage(prefix, start_after=cursor)
        items.extend(page.items)
        if not page.truncated or not page.items:
            return items
        cursor = page.items[-1].key


def plan_receive(
    saver: ObjectStoreSaver, team_id: str, name: str, limit: int | None = None, *, known: HeadRead | None = None
) -> Plan[Receipt | None]:
    """LIST member ``name``'s inbox; if anything is there, GET every message (and the member's
    root head, unless the caller passes the one it ``known``-s) in one round trip, and split them
    into ready (at most ``limit``), done and held. None for an empty inbox.

    Runs on the team's store; ``saver`` is the team's member saver (``Team.member_saver``), whose
    head sits under ``keys.team_members_prefix``."""
    listed = yield from plan_list(keys.team_inbox_prefix(team_id, name))
    if not listed:
        return None
    thread = member_thread(team_id, name)
    ops = tuple(Get(i.key) for i in listed)
    if known is not None:
        head, got = known.head, (yield Batch(ops))
    else:
        got = yield Batch((Get(keys.team_members_prefix(team_id) + keys.head_key(thread, "")), *ops))
        head = saver.heads.decode(got[0], thread).head
        got = got[1:]
    ack = AckState.of(head.meta if head is not None else None, thread)
    messages: list[Message] = []
    unreadable: list[str] = []
    for info, obj in zip(listed, got, strict=True):
        if obj is None:
            continue  # deleted between LIST and GET: ingested by someone else meanwhile
        try:
            m = decode_message(obj.body, key=info.key)
        except CorruptObjectError as exc:
            log.error("team %s: unreadable message %s left in place: %s", team_id, info.key, exc)
            unreadable.append(info.key)
            continue
        if m.to != name or m.team != team_id or not info.key.endswith("/" + m.id):
            log.error("team %s: message %s is not addressed to %r; left in place", team_id, info.key, name)
            unreadable.append(info.key)
            continue
        messages.append(m)
    return Receipt(name, ack, select(messages, ack, limit=limit), tuple(unreadable), len(listed))


def plan_delete_ingested(team_id: str, name: str, messages: Sequence[Message]) -> Plan[None]:
    """Delete messages member ``name`` ingested (only ever after the checkpoint recording them
    committed): 1 DeleteObjects per 1,000."""
    ks = tuple(keys.team_inbox_key(team_id, name, m.id) for m in messages)
    for i in range(0, len(ks), 1000):
        yield DeleteMany(ks[i : i + 1000])
