"""Every reader of a store, run over a store holding one mutated object, and what each must do.

A reader returns a **view**: for each thread (and the team and the long-term memory, as
pseudo-threads ``team:`` and ``memory:``) what it saw, in a comparable form, plus the damage it
reported. The same reader over the unmutated seed gives the baseline. Then, whatever the
mutation (:func:`check`):

- an exception escapes only as a typed one from :mod:`langgraph_handoff.errors` (the envelope
  family: ``CorruptObjectError`` and its subclasses, ``EnvelopeVersionError``...), naming only
  keys of the damaged object's own thread; a store-wide walk raises nothing at all;
- reported damage names only keys of the damaged thread;
- every other thread is seen exactly as in the baseline (after a reader that writes, too);
- an object a signed run's readers must refuse is refused as unsigned (or not ours), never read.

Memory and time are bounded by the child process (:mod:`.child`), not here.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff._format import keys
from langgraph_handoff._format.damage import DamagedObject
from langgraph_handoff.errors import DamagedObjectsError, EnvelopeError, LangGraphHandoffError
from langgraph_handoff.handoff.audit import StoreAuditSink
from langgraph_handoff.inspection import verify_store
from langgraph_handoff.memory import ObjectStoreMemory
from langgraph_handoff.ownership import SessionManager
from langgraph_handoff.stores import MemoryStore, StoreBase
from langgraph_handoff.stores.local import LocalStore
from langgraph_handoff.teams import Team
from langgraph_handoff.teams.worker import TeamWorker
from tests.fuzz.seeds import MEMBER, MEMORY_NS, ROLE, SIGNING_KEYS_TEXT, TEAM, Seed, signing_keys
from tests.support.signing_helpers import LAYOUT
from tests.support.team_helpers import echo_build

#: the threads of the store's root; the team member's conversation lives in its team's space
#: (``team.member_saver``) and is read by :func:`team_ingest`
THREADS = ("delta", "plain")
TEAM_VIEW, MEMORY_VIEW, SESSIONS_VIEW, AUDIT_VIEW = "team:", "memory:", "sessions:", "audit:"
#: the reasons a signed run's readers give for an object no key of theirs signed
REFUSALS = {"unsigned", "not_ours", "empty", "truncated"}
#: "now" for the TTL readers: every thread long expired
LATE = 4e9


class Finding(AssertionError):
    """A reader broke a promise (see the module docstring)."""


@dataclass
class View:
    """What one reader saw: per thread (or pseudo-thread) a comparable summary, the damage it
    reported (keys), and the typed errors it met (for the coverage table)."""

    threads: dict[str, Any] = field(default_factory=dict)
    damaged: list[str] = field(default_factory=list)
    errors: list[LangGraphHandoffError] = field(default_factory=list)


def _digest(value: Any) -> str:
    return hashlib.blake2b(repr(value).encode(), digest_size=8).hexdigest()


def cfg(thread: str, **more: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, **more}}


@dataclass
class Target:
    """The store a reader runs on: the seed with one object replaced (or none: the baseline)."""

    seed: Seed
    replace: dict[str, bytes]

    def store(self) -> MemoryStore:
        return self.seed.store(self.replace)

    def saver(self, store: StoreBase | None = None, **kw: Any) -> ObjectStoreSaver:
        key = signing_keys() if self.seed.signed else None
        return ObjectStoreSaver(store if store is not None else self.store(), layout=LAYOUT, signing_key=key, **kw)


def _typed(view: View, exc: BaseException) -> str:
    """Record ``exc`` if it is typed, and say what it was; re-raise anything else."""
    if not isinstance(exc, LangGraphHandoffError):
        raise exc
    view.errors.append(exc)
    return f"{type(exc).__name__}:{getattr(exc, 'reason', '')}"


def _per_thread(view: View, thread: str, read: Callable[[], Any]) -> None:
    try:
        view.threads[thread] = read()
    except Exception as exc:  # noqa: BLE001 - sorted by _typed
        view.threads[thread] = _typed(view, exc)


def _tuple_view(tup: Any) -> Any:
    if tup is None:
        return None
    c = tup.config["configurable"]
    return (c["checkpoint_ns"], c["checkpoint_id"], _digest(tup.checkpoint["channel_values"]), _digest(tup.metadata))


def _latest_of_every_thread(saver: ObjectStoreSaver, view: View, prefix: str = "") -> None:
    """After a reader that writes: each thread's latest checkpoint, as ``get_tuple`` reads it."""
    for t in THREADS:
        _per_thread(view, prefix + t, lambda t=t: _tuple_view(saver.get_tuple(cfg(t))))


# -- the readers ----------------------------------------------------------------------------------


def get_tuple(target: Target) -> View:
    view, saver = View(), target.saver()
    for t in THREADS:
        _per_thread(view, t, lambda t=t: _tuple_view(saver.get_tuple(cfg(t))))
    return view


def list_thread(target: Target) -> View:
    view, saver = View(), target.saver()
    for t in THREADS:
        _per_thread(view, t, lambda t=t: [_tuple_view(x) for x in saver.list(cfg(t))])
    return view


def list_all(target: Target) -> View:
    """``list(None)``: a store-wide walk; damage goes to ``on_damaged``."""
    view, saver = View(), target.saver()
    found: list[DamagedObject] = []
    by_thread: dict[str, list[Any]] = {}
    for tup in saver.list(None, on_damaged=found.append):
        by_thread.setdefault(tup.config["configurable"]["thread_id"], []).append(_tuple_view(tup))
    view.threads.update({t: by_thread.get(t, []) for t in THREADS})
    view.damaged += [d.key for d in found]
    return view


def delta_history(target: Target) -> View:
    view, saver = View(), target.saver()

    def read() -> Any:
        history = saver.get_delta_channel_history(config=cfg("delta"), channels=["messages"])
        return {ch: _digest(h) for ch, h in sorted(history.items())}

    _per_thread(view, "delta", read)
    return view


def _sweep_view(view: View, result: Any) -> None:
    for outcome in result.threads:
        if outcome.thread_id in THREADS:
            view.threads["status " + outcome.thread_id] = outcome.status
    view.damaged += [d.key for d in result.damaged]


def sweep_dry_run(target: Target) -> View:
    view, saver = View(), target.saver(clock=lambda: LATE)
    _sweep_view(view, saver.sweep(default_ttl=1, dry_run=True, strategy="keep_latest"))
    return view


def sweep(target: Target) -> View:
    view, store = View(), target.store()
    _sweep_view(view, target.saver(store, clock=lambda: LATE).sweep(default_ttl=1, strategy="keep_latest"))
    _latest_of_every_thread(target.saver(store), view)
    return view


def asweep(target: Target) -> View:
    view, store = View(), target.store()
    saver = target.saver(store, clock=lambda: LATE)
    _sweep_view(view, asyncio.run(saver.asweep(default_ttl=1, strategy="delete")))
    _latest_of_every_thread(target.saver(store), view)
    return view


def prune(target: Target) -> View:
    view, store = View(), target.store()
    try:
        target.saver(store).prune(list(THREADS))
    except DamagedObjectsError as exc:
        view.damaged += [d.key for d in exc.damaged]
    _latest_of_every_thread(target.saver(store), view)
    return view


def verify(target: Target) -> View:
    view = View()
    report = verify_store(target.saver())
    view.damaged += [p.key for p in report.problems]
    view.threads["heads"] = report.heads
    return view


def migrate(target: Target) -> View:
    view, store = View(), target.store()
    summary = target.saver(store).migrate()
    for result in summary.results:
        if result.thread_id in THREADS:
            view.threads["status " + result.thread_id] = result.status
            view.damaged += [d.key for d in result.damaged]
    view.damaged += list(summary.foreign)
    _latest_of_every_thread(target.saver(store), view)
    return view


def copy_thread(target: Target) -> View:
    view, store = View(), target.store()
    saver = target.saver(store)
    for t in THREADS:
        _per_thread(
            view,
            t,
            lambda t=t: (saver.copy_thread(t, "copy-of-" + t), _tuple_view(saver.get_tuple(cfg("copy-of-" + t))))[1],
        )
    return view


@contextlib.contextmanager
def _local_copy(target: Target) -> Iterator[str]:
    """The store as a ``file://`` directory (what the command line opens)."""
    root = tempfile.mkdtemp(prefix="lgh-fuzz-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        local = LocalStore(root, fsync=False)
        for key, body in {**target.seed.objects, **target.replace}.items():
            local.put(key, body)
        yield f"file://{root}"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _cli(args: list[str], signed: bool) -> tuple[int, str]:
    from langgraph_handoff.cli.app import main

    out, err = io.StringIO(), io.StringIO()
    env = {"LANGGRAPH_HANDOFF_SIGNING_KEYS": SIGNING_KEYS_TEXT} if signed else {}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(args)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if "Traceback" in err.getvalue():
        raise Finding(f"langgraph-handoff {' '.join(args[:1])} printed a traceback:\n{err.getvalue()[-2000:]}")
    return code, out.getvalue()


def cli(target: Target) -> View:
    """``threads``, ``history``, ``show`` and ``verify`` (``--json``), in this process."""
    view = View()
    with _local_copy(target) as url:
        code, text = _cli(["threads", url, "--json"], target.seed.signed)
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        view.damaged += [r["damaged"]["key"] for r in rows if "damaged" in r]
        listed = {r.get("thread_id"): r.get("latest") for r in rows if "thread_id" in r}
        for t in THREADS:
            view.threads["threads " + t] = listed.get(t)
            for command in ("history", "show"):
                code, text = _cli([command, url, t, "--json"], target.seed.signed)
                view.threads[f"{command} {t}"] = (code, _digest(text))
        code, text = _cli(["verify", url, "--json"], target.seed.signed)
        for line in text.splitlines():
            row = json.loads(line) if line.strip() else {}
            for problem in row.get("problems", []) if isinstance(row, dict) else []:
                view.damaged.append(problem["key"])
    return view


def team_ingest(target: Target) -> View:
    """A worker's step: the roster, the member's inbox and conversation, one turn of ingest."""
    view, store = View(), target.store()
    saver = target.saver(store)
    team = Team(saver, TEAM)

    def receive() -> Any:
        receipt = team.receive(MEMBER)
        view.damaged.extend(receipt.unreadable if receipt is not None else ())
        return None if receipt is None else sorted(m.id for m in receipt.selection.ready)

    _per_thread(view, TEAM_VIEW + "receive", receive)
    _per_thread(view, TEAM_VIEW + "members", lambda: sorted(m.name for m in team.members(refresh=True)))
    member = cfg(team.thread_id(MEMBER))
    _per_thread(view, TEAM_VIEW + "conversation", lambda: _tuple_view(team.member_saver.get_tuple(member)))
    _per_thread(view, TEAM_VIEW + "history", lambda: [_tuple_view(x) for x in team.member_saver.list(member)])

    def ingest() -> Any:
        worker = TeamWorker(team, "fuzz-worker", {ROLE: echo_build}, auto_reply=False)
        try:
            return worker.step()
        finally:
            worker.stop()

    _per_thread(view, TEAM_VIEW + "ingest", ingest)
    for t in THREADS:
        _per_thread(view, t, lambda t=t: _tuple_view(saver.get_tuple(cfg(t))))
    return view


def memory_search(target: Target) -> View:
    view = View()
    memory = ObjectStoreMemory(target.store(), signing_key=signing_keys() if target.seed.signed else None)

    def search() -> Any:
        return [(i.key, _digest(i.value)) for i in memory.search(MEMORY_NS, limit=50)]

    _per_thread(view, MEMORY_VIEW + "search", search)
    _per_thread(view, MEMORY_VIEW + "get", lambda: _digest(getattr(memory.get(MEMORY_NS, "k0"), "value", None)))
    _per_thread(view, MEMORY_VIEW + "namespaces", lambda: memory.list_namespaces())
    swept = memory.sweep()
    view.damaged += [d.key for d in swept.damaged]
    return view


def sessions(target: Target) -> View:
    """The session monitor an hour on: every lease is past its own time, so each is judged by
    its worker's liveness record."""
    view = View()
    manager = SessionManager(target.saver(), clock=lambda: time.time() + 3600)
    # one session at a time, so that each view belongs to its thread (the store-wide monitor
    # skips a damaged head and reports it: its list changes with any thread's damage)
    for tid in (*THREADS, "leased"):
        _per_thread(
            view, f"{SESSIONS_VIEW} {tid}", lambda t=tid: [(i.thread_id, i.status) for i in manager.sessions([t])]
        )
    return view


def audit_review(target: Target) -> View:
    """``audit list`` and ``audit stats`` over the audited handoffs: a record that cannot be read
    is reported, the others are listed."""
    view = View()
    sink = StoreAuditSink(target.saver())

    def listed() -> Any:
        out = []
        for item in sink.records(since=timedelta(days=2)):
            if item.record is None:
                view.damaged.append(item.key)
            else:
                out.append((item.key, item.record.summary, _digest(item.record.as_data())))
        return out

    _per_thread(view, f"{AUDIT_VIEW}list", listed)
    return view


READERS: dict[str, Callable[[Target], View]] = {
    "get_tuple": get_tuple,
    "list": list_thread,
    "list(None)": list_all,
    "delta history": delta_history,
    "sweep dry run": sweep_dry_run,
    "sweep": sweep,
    "asweep": asweep,
    "prune": prune,
    "verify": verify,
    "migrate": migrate,
    "copy_thread": copy_thread,
    "cli": cli,
    "team ingest": team_ingest,
    "memory search": memory_search,
    "sessions": sessions,
    "audit review": audit_review,
}


# -- the promises ---------------------------------------------------------------------------------


def group_of(key: str) -> str:
    """What a damaged ``key`` may take down with it: its thread, the team, the memory, or (the
    format marker) every read of the store."""
    thread = keys.thread_of_key(key)
    if thread is not None:
        return thread
    if key.startswith("teams/"):
        return TEAM_VIEW
    if key.startswith("memory/"):
        return MEMORY_VIEW
    if key.startswith("workers/"):
        return SESSIONS_VIEW
    if key.startswith("audit/"):
        return AUDIT_VIEW
    return "*"


def _in_group(key: str, group: str) -> bool:
    if group == "*":
        return True
    if group == SESSIONS_VIEW:
        return key.startswith("workers/")
    if group == AUDIT_VIEW:
        return key.startswith("audit/")
    if group in (TEAM_VIEW, MEMORY_VIEW):
        # an error raised inside the member's saver names its key relative to the team's space
        # (``teams/crew/members/``): the member's own thread, so the team's group
        member = group == TEAM_VIEW and keys.thread_of_key(key) == f"{TEAM}/{MEMBER}"
        return member or key.startswith("teams/" if group == TEAM_VIEW else "memory/")
    return keys.thread_of_key(key) in (group, "copy-of-" + group)


def _keys_of(exc: LangGraphHandoffError) -> list[str]:
    if isinstance(exc, DamagedObjectsError):
        return [d.key for d in exc.damaged]
    key = getattr(exc, "key", None)
    return [key] if isinstance(key, str) else []


def _affected(view_key: str, group: str) -> bool:
    """Whether the view of ``view_key`` may differ from the baseline when ``group`` is damaged."""
    if group == "*":
        return True
    if group in (TEAM_VIEW, MEMORY_VIEW, SESSIONS_VIEW, AUDIT_VIEW):
        return view_key.startswith(group) or (group == TEAM_VIEW and view_key.endswith(f"{TEAM}/{MEMBER}"))
    return view_key.split(" ")[-1] == group or (view_key.startswith(TEAM_VIEW) and group == f"{TEAM}/{MEMBER}")


def check(reader: str, key: str, view: View, baseline: View, *, refused: bool) -> None:
    """Raise :class:`Finding` if ``view`` (with ``key`` mutated) breaks a promise."""
    group = group_of(key)
    for exc in view.errors:
        if not isinstance(exc, EnvelopeError):
            raise Finding(f"{reader}: {type(exc).__name__} is not damage: {exc}")
        for k in _keys_of(exc):
            if not _in_group(k, group):
                raise Finding(f"{reader}: an error names {k!r}, outside the damaged thread of {key!r}: {exc}")
        if refused and key in _keys_of(exc) and getattr(exc, "reason", None) not in REFUSALS:
            raise Finding(f"{reader}: {key!r} is not signed by a key the reader holds, yet was read: {exc}")
    for k in view.damaged:
        if not _in_group(k, group):
            raise Finding(f"{reader}: damage reported at {k!r}, outside the damaged thread of {key!r}")
    for name, seen in baseline.threads.items():
        if not _affected(name, group) and view.threads.get(name) != seen:
            raise Finding(f"{reader}: {name!r} is not what it was: {view.threads.get(name)!r} != {seen!r}")


def cross_check(key: str, views: dict[str, View]) -> None:
    """No silent loss: when ``get_tuple`` finds a thread's latest checkpoint damaged, the walks
    over the whole store say so (``list(None)`` whatever the cause; ``verify``, which reads
    objects but not the values in them, unless only a value is undecodable)."""
    read = views.get("get_tuple")
    if read is None:
        return
    failed = [e for e in read.errors if isinstance(e, EnvelopeError)]
    if not failed:
        return
    walk = views.get("list(None)")
    if walk is not None and not walk.damaged:
        raise Finding(f"get_tuple met {failed[0]}, but list(None) reported no damage")
    checked = views.get("verify")
    stored = [e for e in failed if getattr(e, "reason", "") != "undecodable"]
    if checked is not None and stored and not checked.damaged:
        raise Finding(f"get_tuple met {stored[0]}, but verify found no problem")


def outcome(view: View) -> str:
    """The coverage table's column for one run: the first typed error, or what was reported."""
    if view.errors:
        e = view.errors[0]
        return f"{type(e).__name__}({getattr(e, 'reason', '')})"
    return "reported damage" if view.damaged else "read"
