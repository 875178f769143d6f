"""Why a compare-and-swap loop gave up: contention, or a store that stopped answering.

A loop of conditional writes (a put's head, a task's writes) retries when a write fails and ends
after ``Layout.max_attempts``. Two very different things end it. Other writers winning every
race is contention (:class:`~langgraph_handoff.errors.ConflictError`: retry later, or raise
``max_attempts``). A store that answers none of the writes (every one an unknown outcome, and
the object unchanged when read back) is an outage, and calling it contention sent operators
tuning ``max_attempts`` during a network partition; it ends in
:class:`~langgraph_handoff.errors.StoreUnavailableError` saying what was tried for how long.

Ceph RGW answers some lost races with HTTP 500 (an unknown outcome): such an attempt counts as
answered when the read-back shows that the object changed, since someone else's write did.

>>> from langgraph_handoff.errors import PreconditionFailedError, UnknownOutcomeError
>>> tally = Attempts()
>>> tally.failed(UnknownOutcomeError("heads/t/=", "HTTP 503"), changed=False)
>>> type(tally.exhausted("thread 't'", "lost 1 race")).__name__
'StoreUnavailableError'
>>> tally.failed(PreconditionFailedError("heads/t/=", "HTTP 412"), changed=True)
>>> type(tally.exhausted("thread 't'", "lost 2 races")).__name__
'ConflictError'

Each failed attempt is logged at DEBUG on ``langgraph_handoff.checkpoint`` (thread, attempt,
the kind of key): one lost race is normal and says nothing, but a thread whose writes keep
losing is worth finding when someone asks why its turns are slow. The count of them is the
``langgraph_handoff.checkpoint.cas.retries`` metric.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from langgraph_handoff import telemetry
from langgraph_handoff._format import keys
from langgraph_handoff.errors import (
    ConflictError,
    LangGraphHandoffError,
    StoreUnavailableError,
    UnknownOutcomeError,
)

__all__ = ["Attempts"]

log = logging.getLogger("langgraph_handoff.checkpoint")


@dataclass
class Attempts:
    """The failed attempts of one compare-and-swap loop, as the loop reads each one back."""

    started: float = field(default_factory=time.monotonic)
    answered: int = 0
    unanswered: int = 0
    last: BaseException | None = None

    def failed(self, exc: BaseException, *, changed: bool) -> None:
        """One failed attempt: ``changed`` is whether the object read back after it differs from
        what the attempt was conditioned on (someone else wrote it)."""
        if isinstance(exc, UnknownOutcomeError) and not changed:
            self.unanswered += 1
        else:
            self.answered += 1
        self.last = exc
        if log.isEnabledFor(logging.DEBUG):
            _logged(exc, self.answered + self.unanswered, changed)

    def exhausted(self, what: str, contention: str) -> LangGraphHandoffError:
        """The error to raise when the loop ran out of attempts: ``what`` names the write,
        ``contention`` is the :class:`ConflictError` message when other writers were winning."""
        if self.unanswered and not self.answered:
            seconds = time.monotonic() - self.started
            return StoreUnavailableError(
                f"{what}: the store answered none of {self.unanswered} compare-and-swap attempts over "
                f"{seconds:.1f} s (last: {self.last}); nothing was written. The store is failing or "
                "unreachable, not contended: retry the operation when it is back"
            )
        return ConflictError(contention)


def _logged(exc: BaseException, attempt: int, changed: bool) -> None:
    key = getattr(exc, "key", "") or ""
    thread, kind = keys.thread_of_key(key), keys.key_kind(key)
    why = "the object changed" if changed else "the object is unchanged"
    log.debug(
        "compare-and-swap attempt %d on a %s of thread %r failed (%s: %s)",
        attempt,
        kind,
        thread,
        type(exc).__name__,
        why,
        extra={"langgraph_handoff.event": "checkpoint.cas_retry", telemetry.THREAD: thread,
               telemetry.CAS_ATTEMPT: attempt, telemetry.KEY_KIND: kind},
    )  # fmt: skip
