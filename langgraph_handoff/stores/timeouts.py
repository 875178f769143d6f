"""How long a store waits: one setting for every transport.

A stuck server (it accepts connections and never answers) held a boto3 caller for 20 minutes
(20 sends of 60 s: botocore's retries inside ours), obstore for 60 to 151 s and the event-loop
client for 153 s, and no setting was documented. Every remote store now takes the same three:

* ``connect_timeout``: to open a connection (default 5 s);
* ``timeout``: for one request's whole answer once sent (default 15 s; a GET of a large
  object on a slow link may want more);
* ``deadline``: for one operation, its retries included (default 30 s). A retry starts only if
  it can finish (one ``timeout``) within the deadline, so a stuck server fails an operation
  with :class:`~langgraph_handoff.errors.StoreUnavailableError` within ``deadline`` (plus the
  connect time-out at most), under a minute by default; a server that fails fast (resets,
  503) is retried until the deadline.

Each is a number of seconds or a duration (``"500ms"``, ``"30s"``, ``"1m30s"``), in the
constructor and as a URL parameter (``?timeout=5s&deadline=20s``), so the Agent Server's
``LANGGRAPH_HANDOFF_URL`` carries them too.

>>> Timeouts.of(timeout="5s", deadline=20)
Timeouts(connect=5.0, request=5.0, deadline=20.0)
>>> Timeouts.of(timeout="1m30s"), Timeouts.of(deadline="3s")
(Timeouts(connect=5.0, request=90.0, deadline=90.0), Timeouts(connect=5.0, request=1.5, deadline=3.0))
>>> Timeouts.of(timeout=30, deadline=10)
Traceback (most recent call last):
...
langgraph_handoff.errors.InvalidConfigError: deadline (10 s) is shorter than one request's timeout (30 s): no request could finish within it; raise deadline or lower timeout
"""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass, field

from langgraph_handoff.errors import InvalidConfigError, StoreUnavailableError

__all__ = ["DEFAULT", "RetryBudget", "Timeouts", "as_duration", "seconds"]

_DURATION_UNITS = {
    "ns": 1e-9, "nsec": 1e-9, "us": 1e-6, "usec": 1e-6, "µs": 1e-6, "ms": 1e-3, "msec": 1e-3,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
}  # fmt: skip
_DURATION_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zµ]+)")
_NUMBER = re.compile(r"\s*\d+(?:\.\d+)?\s*")


def seconds(value: float | str, name: str = "timeout") -> float:
    """A duration in seconds: a number (or its digits, from a URL), or obstore's duration string
    (humantime: ``"30s"``, ``"500ms"``, ``"1m30s"``, ``"2min"``), so the loop client times out
    exactly when obstore would. Must be positive.

    >>> seconds("30s"), seconds("500ms"), seconds("1m30s"), seconds("2 min"), seconds("30sec"), seconds(2), seconds("1.5")
    (30.0, 0.5, 90.0, 120.0, 30.0, 2.0, 1.5)
    >>> seconds("15 secs please", "idle_timeout")
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidConfigError: idle_timeout '15 secs please' is not a duration like '30s', '500ms' or '1m30s'
    """
    if isinstance(value, bool):
        raise InvalidConfigError(f"{name} must be a number of seconds or a duration like '30s'")
    if isinstance(value, (int, float)) or (isinstance(value, str) and _NUMBER.fullmatch(value)):
        total = float(value)
    elif isinstance(value, str):
        text, total, at = value.strip().lower(), 0.0, 0
        if not text:
            raise InvalidConfigError(f"{name} is empty: give a duration like '30s'")
        while at < len(text):
            part = _DURATION_PART.match(text, at)
            if part is None or part.group(2) not in _DURATION_UNITS:
                raise InvalidConfigError(f"{name} {value!r} is not a duration like '30s', '500ms' or '1m30s'")
            total += float(part.group(1)) * _DURATION_UNITS[part.group(2)]
            at = part.end()
    else:
        raise InvalidConfigError(f"{name} must be a number of seconds or a duration like '30s'")
    if not total > 0:
        raise InvalidConfigError(f"{name} must be longer than zero")
    return total


def as_duration(value: float) -> str:
    """Seconds as obstore's duration string, to the millisecond.

    >>> as_duration(15.0), as_duration(0.25), as_duration(1.5)
    ('15000ms', '250ms', '1500ms')
    """
    return f"{max(1, round(value * 1000))}ms"


@dataclass(frozen=True)
class Timeouts:
    """A store's three time limits, in seconds (see the module's docstring)."""

    connect: float = 5.0
    request: float = 15.0
    deadline: float = 30.0

    @classmethod
    def of(
        cls,
        connect_timeout: float | str | None = None,
        timeout: float | str | None = None,
        deadline: float | str | None = None,
    ) -> Timeouts:
        """The limits from a store's arguments (None: the default), checked."""
        base = cls()
        connect = seconds(connect_timeout, "connect_timeout") if connect_timeout is not None else base.connect
        if timeout is not None and deadline is not None:
            made = cls(connect, seconds(timeout, "timeout"), seconds(deadline, "deadline"))
        elif timeout is not None:  # a long request time-out alone stretches the default deadline
            request = seconds(timeout, "timeout")
            made = cls(connect, request, max(base.deadline, request))
        elif deadline is not None:  # a short deadline alone shortens the request time-out, to leave
            limit = seconds(deadline, "deadline")  # room for at least one retry
            made = cls(connect, min(base.request, limit / 2), limit)
        else:
            made = base
        if made.deadline < made.request:
            raise InvalidConfigError(
                f"deadline ({made.deadline:g} s) is shorter than one request's timeout ({made.request:g} s): no "
                "request could finish within it; raise deadline or lower timeout"
            )
        return made


DEFAULT = Timeouts()


@dataclass
class RetryBudget:
    """The retries of one idempotent operation: at most ``attempts`` sends, jittered back-off
    from 50 ms doubling to 2 s, and none that could not finish before the deadline. Shared by
    the boto3 store's loop and the event-loop client's (each sleeps its own way).

    >>> clock = iter([0.0, 1.0, 29.0]).__next__
    >>> budget = RetryBudget(Timeouts(request=10.0, deadline=30.0), attempts=5, clock=clock)
    >>> budget.pause() is not None  # 1 s in: a 10 s request still fits
    True
    >>> budget.pause() is None  # 29 s in: it would not
    True
    """

    timeouts: Timeouts
    attempts: int
    clock: object = time.monotonic
    started: float = field(default=-1.0)
    tried: int = 0
    delay: float = 0.05

    def __post_init__(self) -> None:
        self.started = self._now()

    def _now(self) -> float:
        return float(self.clock())  # type: ignore[operator]

    def pause(self) -> float | None:
        """After a failed send: the pause before the next one, or None when the budget is spent."""
        self.tried += 1
        if self.tried >= self.attempts:
            return None
        pause = self.delay * (0.5 + random.random())
        self.delay = min(self.delay * 2, 2.0)
        if self._now() - self.started + pause + self.timeouts.request > self.timeouts.deadline:
            return None
        return pause

    def spent(self, what: str, last: object) -> StoreUnavailableError:
        elapsed = self._now() - self.started
        return StoreUnavailableError(
            f"{what} kept failing: {self.tried} attempt{'s' if self.tried != 1 else ''} over {elapsed:.1f} s "
            f"(deadline {self.timeouts.deadline:g} s, {self.timeouts.request:g} s a request): {last}. Check the "
            "endpoint and credentials, or retry later."
        )
