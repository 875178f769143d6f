"""Migrations of *your* graph state: numbered steps that upgrade old checkpoints when they are read.

A state schema changes (a field is added, renamed, split) while conversations are stored under
the old one. Every checkpoint records the schema version of the code that wrote it; a saver
configured with a :class:`SchemaMigrations` upgrades an older checkpoint **in memory, on read**,
before LangGraph sees it, so ``get_state``, history and resumed runs all see the current shape.
The next checkpoint of that thread is written in the current version. A checkpoint written by
*newer* code than this process knows raises :class:`~langgraph_handoff.errors.SchemaVersionError`
instead of being half understood.

>>> migrations = SchemaMigrations()
>>> @migrations.register(1, "add language")
... def add_language(values, metadata):
...     values.setdefault("language", "en")
>>> step = migrations.register(2, "rename topic -> subject")(rename_channel("topic", "subject"))
>>> values, _, applied = migrations.upgrade({"topic": "refund"}, {}, from_version=0)
>>> values, [m.name for m in applied]
({'language': 'en', 'subject': 'refund'}, ['add language', 'rename topic -> subject'])

Use it with ``ObjectStoreSaver(store, migrations=migrations)``.

``required`` names the fields every checkpoint of the current schema holds. An older checkpoint
that still lacks one after its steps ran has a *schema gap*: no step fills the field, so the
graph would meet a state its code never writes. The saver logs it (WARNING, once per thread and
schema version) and ``migrate --dry-run`` lists those threads:

>>> strict = SchemaMigrations(required=("language",))
>>> strict.missing({"topic": "refund"})
('language',)
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph_handoff.errors import InvalidConfigError, MigrationError, SchemaVersionError

__all__ = ["Migration", "MigrationFn", "SchemaMigrations", "rename_channel"]

log = logging.getLogger("langgraph_handoff.migrations")

#: ``fn(values, metadata)``: change the channel values (and metadata) in place, or return new values
MigrationFn = Callable[[dict[str, Any], dict[str, Any]], "dict[str, Any] | None"]


@dataclass(frozen=True)
class Migration:
    """Step ``version - 1 -> version``. ``renames`` (old -> new channel) also apply to the
    pending writes of a checkpoint, which are updates addressed to the old channel names."""

    version: int
    name: str
    fn: MigrationFn
    renames: Mapping[str, str] = field(default_factory=dict)


def rename_channel(old: str, new: str) -> Migration:
    """A migration body that renames a channel (its value, its version and pending writes)."""

    def fn(values: dict[str, Any], metadata: dict[str, Any]) -> None:
        if old in values:
            values[new] = values.pop(old)

    return Migration(0, f"rename {old} -> {new}", fn, {old: new})


class SchemaMigrations:
    """The numbered migrations of one graph's state schema; :attr:`current` is the newest.

    ``base`` is the version that needs no step (0 for a state schema; the package's own storage
    format starts at 1, see :mod:`langgraph_handoff._format.upgrades`). ``subject`` names what is
    migrated in log lines and errors.

    ``required``: the state fields (channel names) that every checkpoint of the current schema
    holds once the graph's input is in. LangGraph gives a saver no schema, and a channel nothing
    wrote yet is legitimately absent (a field a later node sets), so only you can say which
    absences are gaps; list only fields your input or your first node always sets. Checked on
    upgraded checkpoints of the root graph (a subgraph has a state of its own), except a thread's
    input checkpoint (step -1), which holds no field yet.
    """

    def __init__(self, *, base: int = 0, subject: str = "schema", required: Sequence[str] = ()) -> None:
        if isinstance(required, str) or not all(isinstance(f, str) and f for f in required):
            raise InvalidConfigError(
                f"required is a sequence of field names, e.g. ('messages', 'language'), got {required!r}"
            )
        self._steps: dict[int, Migration] = {}
        self.base = base
        self.subject = subject
        self.required: tuple[str, ...] = tuple(dict.fromkeys(required))

    @property
    def current(self) -> int:
        return max(self._steps, default=self.base)

    @property
    def steps(self) -> list[Migration]:
        return [self._steps[v] for v in sorted(self._steps)]

    def _after(self, version: int) -> list[Migration]:
        return [self._steps[v] for v in sorted(self._steps) if v > version]

    def register(self, version: int, name: str | None = None) -> Callable[[MigrationFn | Migration], Migration]:
        """Decorator: ``@migrations.register(3, "split name")`` on ``fn(values, metadata)``, or
        called on a :func:`rename_channel` migration. Versions start at ``base + 1`` and have no gaps."""
        if isinstance(version, bool) or not isinstance(version, int) or version <= self.base:
            raise InvalidConfigError(f"migration versions are ints starting at {self.base + 1}, got {version!r}")
        if version in self._steps:
            raise InvalidConfigError(f"migration {version} is registered twice")

        def add(fn: MigrationFn | Migration) -> Migration:
            if isinstance(fn, Migration):
                step = Migration(version, name or fn.name, fn.fn, dict(fn.renames))
            else:
                step = Migration(version, name or str(getattr(fn, "__name__", f"migration {version}")), fn)
            self._steps[version] = step
            return step

        return add

    def check(self) -> None:
        """Versions must run ``base + 1 .. current`` with no gaps (a gap would skip a step silently)."""
        missing = [v for v in range(self.base + 1, self.current + 1) if v not in self._steps]
        if missing:
            raise InvalidConfigError(
                f"migrations {missing} are missing: versions must run {self.base + 1}..{self.current} with no gaps"
            )

    def upgrade(
        self, values: dict[str, Any], metadata: dict[str, Any], *, from_version: int, where: str = ""
    ) -> tuple[dict[str, Any], dict[str, Any], list[Migration]]:
        """Apply every step after ``from_version``; returns new values, metadata and the steps.
        The inputs are not modified (a failed step leaves nothing half done)."""
        self.check()
        if from_version > self.current:
            raise SchemaVersionError(where or "a checkpoint", found=from_version, supported=self.current)
        values, metadata = copy.deepcopy(values), copy.deepcopy(metadata)
        applied: list[Migration] = []
        for step in self._after(from_version):
            try:
                out = step.fn(values, metadata)
            except Exception as exc:
                raise MigrationError(
                    f"migration {step.version} ({step.name}) failed on {where or 'a checkpoint'}: "
                    f"{type(exc).__name__}: {exc}. Nothing was loaded or written; fix the migration."
                ) from exc
            if out is not None and not isinstance(out, Mapping):
                raise MigrationError(
                    f"migration {step.version} ({step.name}) returned a {type(out).__name__}: a step changes "
                    "values in place (returning None) or returns the new values as a dict; fix the migration."
                )
            if out is not None:
                values = dict(out)
            applied.append(step)
            log.info(
                "migrated %s: %s %d -> %d (%s)",
                where or "a checkpoint",
                self.subject,
                step.version - 1,
                step.version,
                step.name,
            )
        return values, metadata, applied

    def missing(self, values: Mapping[str, Any]) -> tuple[str, ...]:
        """The :attr:`required` fields ``values`` lacks (a field holding ``None`` is there)."""
        return tuple(f for f in self.required if f not in values)

    def rename(self, channel: str, *, from_version: int) -> str:
        """Where a pending write addressed to ``channel`` goes after the steps since ``from_version``."""
        for step in self._after(from_version):
            channel = step.renames.get(channel, channel)
        return channel
