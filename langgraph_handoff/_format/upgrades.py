"""Migrations of the package's *own* storage format, on the same machinery as your state schema.

Every object's envelope names the format version that wrote it (see :mod:`.envelope`). When a
release changes how something is laid out, it bumps
:data:`~langgraph_handoff._format.envelope.FORMAT_VERSION` and registers the step here. Readers
then upgrade older bodies in memory as they decode them (so old and new objects can live side by
side while a fleet rolls over), and ``langgraph-handoff migrate`` rewrites them for good, which is
what lets a later release stop reading the old form.

A step is ``fn(body, context)`` over the decoded msgpack body of one object; ``context["kind"]``
says which kind of object it is (:class:`~langgraph_handoff._format.envelope.Kind`). Each applied
step is logged, like a state-schema step.

Format history:

* **1**: the first format.
* **2**: every pending write carries the state-schema version of the code that wrote it (a fifth
  field of each write item; ``None`` for writes stored in format 1, read as "the version of its
  checkpoint", which is what format 1 readers assumed). A write made by newer code on an older
  checkpoint was renamed as if it were old: with ``rename topic -> subject`` followed by a new
  channel ``topic``, the new ``topic`` writes went to ``subject``.
* **3**: a channel value may be stored as a *tail*: the items a list appended to an earlier
  value, over an immutable blob holding that value whole (:class:`~.records.Tail`), and a large
  list, in practice a ``DeltaChannel`` snapshot, as *pieces*: an earlier value's blobs plus a
  blob of the items appended since (:class:`~.records.Pieces`). Format 2
  bodies are valid format 3 bodies; the version says that readers older than this release
  cannot read the new payloads (they refuse the object with ``EnvelopeVersionError`` instead
  of calling it corrupt).
* **4**: the envelope header records the length its body inflates to, checked before a byte is
  inflated, and an object may carry a signature after its body (:mod:`.signing`). Bodies are
  as in format 3.

>>> body = {"t": "t1", "n": "", "c": "cid", "k": "task", "p": "", "i": [[0, "messages", "msgpack", b"x"]]}
>>> upgrade_body(body, Kind.WRITES, from_version=1, key="example")["i"]
[[0, 'messages', 'msgpack', b'x', None]]
"""

from __future__ import annotations

from typing import Any

from langgraph_handoff._format.envelope import FORMAT_VERSION, Kind
from langgraph_handoff.errors import CorruptObjectError, MigrationError
from langgraph_handoff.migrations import SchemaMigrations

__all__ = ["FORMAT_MIGRATIONS", "upgrade_body"]

#: Steps of the envelope/body layout; ``FORMAT_MIGRATIONS.current == FORMAT_VERSION`` always.
FORMAT_MIGRATIONS = SchemaMigrations(base=1, subject="storage format")


def _items_v2(items: list[Any]) -> None:
    for item in items:
        if len(item) == 4:
            item.append(None)


@FORMAT_MIGRATIONS.register(2, "pending writes carry their state-schema version")
def _writes_schema(body: dict[str, Any], context: dict[str, Any]) -> None:
    kind = context["kind"]
    if kind == Kind.WRITES:
        _items_v2(body["i"])
    elif kind in (Kind.HEAD, Kind.SEGMENT):
        for record in body["r"]:
            for folded in record.get("w", {}).values():
                _items_v2(folded[2])


@FORMAT_MIGRATIONS.register(3, "values may be stored as tails over an earlier value")
def _tails(body: dict[str, Any], context: dict[str, Any]) -> None:
    """Nothing to rewrite: a format 2 body never holds a tail."""


@FORMAT_MIGRATIONS.register(4, "envelopes record their plain length and may be signed")
def _plain_length(body: dict[str, Any], context: dict[str, Any]) -> None:
    """Nothing to rewrite: only the envelope's header changed."""


assert FORMAT_MIGRATIONS.current == FORMAT_VERSION, "register the step of every format version"


def upgrade_body(body: Any, kind: Kind, *, from_version: int, key: str) -> Any:
    """``body`` as the current format lays it out. A malformed old body is a corrupt object."""
    if from_version == FORMAT_VERSION:
        return body
    try:
        upgraded, _, _ = FORMAT_MIGRATIONS.upgrade(body, {"kind": kind}, from_version=from_version, where=key)
    except MigrationError as exc:
        raise CorruptObjectError(key, f"cannot upgrade from storage format {from_version}: {exc.__cause__}") from None
    return upgraded
