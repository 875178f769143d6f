"""Asking a team from outside and waiting for the answer: ``Team.request``.

A sender outside the team (a person, a web handler, a scheduler) has no inbox. When it asks for
an answer (``expects_reply=True``, which :meth:`TeamRequests.request` sets), the member that
ingests the request owes it an automatic reply, like a teammate: its final answer, once it awaits
no teammate it asked meanwhile (so a lead that delegates answers with the result, not with
"delegated"). The worker delivers that answer create-only to
``teams/{team}/outside/{sender}/{request id}/{answer id}``, and the requester LISTs that prefix
until it appears, then deletes it. The same prefix receives the hop-budget event if a message
descending from the request is cut (``teams.chains``): the wait then fails at once with
:class:`~langgraph_handoff.errors.HopBudgetExceededError` instead of running into its timeout.

Waiting never happens inside an agent's turn (a teammate that waits on another blocks its own
inbox): agents use ``send_message`` and end their turn.

Requests: the send is 1 PUT; each poll is 1 LIST (backing off from ``poll`` to 2 s); collecting
the answer is 1 GET and 1 DeleteObjects.
"""

from __future__ import annotations

from langgraph_handoff._format import keys
from langgraph_handoff.checkpoint.driver import Batch, Plan, Sleep
from langgraph_handoff.errors import (
    CorruptObjectError,
    HopBudgetExceededError,
    InvalidInputError,
    ReplyTimeoutError,
)
from langgraph_handoff.stores.base import DeleteMany, Get
from langgraph_handoff.teams.chains import HopBudgetExceeded
from langgraph_handoff.teams.core import TeamCore
from langgraph_handoff.teams.model import Message, decode_message
from langgraph_handoff.teams.receiving import plan_list

__all__ = ["TeamRequests", "check_wait"]

#: the longest pause between two polls of a request's answer
_MAX_POLL = 2.0


class TeamRequests(TeamCore):
    """Waiting for the answer to a request (a mixin of ``Team``, which sends it)."""

    def _plan_wait_reply(self, to: str | None, sender: str, request_id: str, timeout: float,
                         poll: float) -> Plan[Message]:  # fmt: skip
        check_wait(timeout, poll)
        prefix = keys.team_outside_prefix(self.team_id, sender, request_id)
        deadline = self.clock() + timeout
        delay = poll
        while True:
            listed = yield from plan_list(prefix)
            if listed:
                objs = yield Batch(tuple(Get(i.key) for i in listed))
                found: list[Message] = []
                for info, obj in zip(listed, objs, strict=True):
                    if obj is None:
                        continue  # collected by a concurrent wait on the same request
                    try:
                        found.append(decode_message(obj.body, key=info.key))
                    except CorruptObjectError:
                        continue  # left in place; `replies()` shows it
                events = [e for m in found if (e := HopBudgetExceeded.from_message(m)) is not None]
                answers = sorted((m for m in found if m.reply_to == request_id and m.type != "event"),
                                 key=lambda m: m.order)  # fmt: skip
                if answers or events:
                    yield DeleteMany(tuple(i.key for i in listed))
                if answers:
                    return answers[0]
                if events:
                    raise HopBudgetExceededError(request_id, events[0], events[0].describe())
            remaining = deadline - self.clock()
            if remaining <= 0:
                raise ReplyTimeoutError(self.team_id, to or "the team", sender, request_id, timeout)
            yield Sleep(min(delay, remaining))
            delay = min(delay * 2, max(_MAX_POLL, poll))

    def wait_reply(self, request: Message | str, *, sender: str | None = None, timeout: float = 60.0,
                   poll: float = 0.1) -> Message:  # fmt: skip
        """Wait for the answer to a request sent earlier (a :class:`Message` from
        ``send(..., expects_reply=True)``, or its id with ``sender``): after a
        :class:`~langgraph_handoff.errors.ReplyTimeoutError`, or from another process.

        >>> from langgraph_handoff import ObjectStoreSaver
        >>> from langgraph_handoff.teams import Team
        >>> team = Team(ObjectStoreSaver.from_url("memory://"), "t")
        >>> _ = team.spawn("alice", role="coder")
        >>> ask = team.send("alice", "ready?", sender="ops", expects_reply=True)
        >>> team.wait_reply(ask, timeout=0)
        Traceback (most recent call last):
        ...
        langgraph_handoff.errors.ReplyTimeoutError: no answer from 'alice' to request #... within 0 s. ...
        """
        to, who, rid = _target(request, sender)
        return self._run(self._plan_wait_reply(to, who, rid, timeout, poll))

    async def await_reply(self, request: Message | str, *, sender: str | None = None, timeout: float = 60.0,
                          poll: float = 0.1) -> Message:  # fmt: skip
        """Async twin of :meth:`wait_reply`."""
        to, who, rid = _target(request, sender)
        return await self._arun(self._plan_wait_reply(to, who, rid, timeout, poll))

    def _plan_replies(self, sender: str) -> Plan[list[Message]]:
        listed = yield from plan_list(keys.team_outside_prefix(self.team_id, sender))
        objs = (yield Batch(tuple(Get(i.key) for i in listed))) if listed else []
        out = []
        for info, obj in zip(listed, objs, strict=True):
            if obj is not None:
                try:
                    out.append(decode_message(obj.body, key=info.key))
                except CorruptObjectError:
                    continue
        return out

    def replies(self, sender: str) -> list[Message]:
        """Answers (and budget events) waiting for outside sender ``sender``, not yet collected."""
        return self._run(self._plan_replies(sender))


def _target(request: Message | str, sender: str | None) -> tuple[str | None, str, str]:
    if isinstance(request, Message):
        return request.to, request.sender, request.id
    if not isinstance(request, str) or not request or not sender:
        raise InvalidInputError("wait_reply(request_id, sender=...) needs the request's id and its sender's name")
    return None, sender, request


def check_wait(timeout: float, poll: float) -> None:
    if not (isinstance(timeout, int | float) and timeout >= 0) or not (isinstance(poll, int | float) and poll > 0):
        raise InvalidInputError(f"timeout={timeout!r}, poll={poll!r}: use a timeout of 0 s or more and a poll above 0")
