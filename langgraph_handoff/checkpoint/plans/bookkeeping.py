"""What the saver's own bookkeeping reads of a checkpoint's metadata, without running user code.

A TTL sweep with ``keep_latest``, ``prune`` and ``delete_for_runs`` walk every thread of a store
and need two facts of each checkpoint's metadata: the run that wrote it and the
``DeltaChannel``\\ s counting since their last snapshot. The metadata is the user's, serialised by
the user's serializer, and LangGraph's default one imports and calls whatever a stored msgpack
ext type names: decoding it in a sweep would run code planted in any thread of the store in the
sweeping process, though nobody asked for that thread. So a put keeps those two facts in clear
in the record (:class:`~langgraph_handoff._format.records.Bookkeeping`, from storage format 4),
and bookkeeping reads only them.

A record written before format 4 has none. Its metadata is then read by :func:`plain_metadata`:
msgpack or JSON decoded as plain data (an ext type stays an opaque ``msgpack.ExtType``, never
imported), after decryption by the saver's own cipher when the metadata is encrypted. Anything
else (a pickled value, a serializer of the user's own) gives ``None``, and the callers then do
the safe thing: keep what they cannot judge.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import msgpack

from langgraph_handoff._format.records import Bookkeeping, Record

__all__ = ["of_record", "plain_metadata", "source_reader"]

log = logging.getLogger("langgraph_handoff.checkpoint")


def of_record(serde: Any, record: Record) -> Bookkeeping | None:
    """The record's bookkeeping: kept in clear, or read from metadata written before format 4
    as plain data (:func:`plain_metadata`); None when neither can be had."""
    if record.bookkeeping is not None:
        return record.bookkeeping
    metadata = plain_metadata(serde, record.metadata)
    if metadata is None:
        log.warning(
            "checkpoint %s: its metadata (%s) cannot be read without running the serializer; "
            "bookkeeping leaves it as it is (`langgraph-handoff migrate` records what it needs in clear)",
            record.id,
            record.metadata[0],
        )
        return None
    return Bookkeeping.of(metadata)


def plain_metadata(serde: Any, typed: tuple[str, bytes]) -> dict[str, Any] | None:
    """Metadata decoded as plain data, whatever the serializer: msgpack with every ext type left
    opaque, or JSON; decrypted first by ``serde.cipher`` (LangGraph's ``EncryptedSerializer``)
    when its type names a cipher. None for anything else, and for anything that does not decode
    to a map.

    >>> from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    >>> plain_metadata(JsonPlusSerializer(), JsonPlusSerializer().dumps_typed({"run_id": "r1"}))
    {'run_id': 'r1'}
    >>> plain_metadata(JsonPlusSerializer(), ("pickle", b"..."))  # never unpickled
    """
    kind, data = typed
    try:
        if "+" in kind:
            cipher = getattr(serde, "cipher", None)
            if cipher is None:
                return None
            kind, ciphername = kind.split("+", 1)
            data = cipher.decrypt(ciphername, data)
        if kind == "msgpack":
            out = msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=msgpack.ExtType)
        elif kind == "json":
            out = json.loads(data)
        else:
            return None
    except Exception:  # noqa: BLE001 - damaged metadata is metadata bookkeeping cannot judge
        return None
    return out if isinstance(out, dict) else None


def source_reader(serde: Any) -> Callable[[Record], str | None]:
    """A reader of a record's metadata ``source`` as plain data (:func:`plain_metadata`), for a
    refusal deciding whether the refused run's input is in the thread
    (:func:`~langgraph_handoff.checkpoint.fencing.input_in_thread`); ``None`` when unreadable.

    >>> from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    >>> serde = JsonPlusSerializer()
    >>> record = Record("c1", None, serde.dumps_typed({}), serde.dumps_typed({"source": "loop"}), {})
    >>> source_reader(serde)(record)
    'loop'
    """

    def source_of(record: Record) -> str | None:
        metadata = plain_metadata(serde, record.metadata)
        source = metadata.get("source") if metadata is not None else None
        return source if isinstance(source, str) else None

    return source_of
