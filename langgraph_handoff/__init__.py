"""langgraph-handoff: LangGraph state on object storage that never silently forks or loses data.

>>> from langgraph_handoff import ObjectStoreSaver
>>> saver = ObjectStoreSaver.from_url("memory://")
"""

from langgraph_handoff._format.signing import SigningKey, SigningKeys
from langgraph_handoff._version import __version__
from langgraph_handoff.checkpoint import Layout, ObjectStoreSaver
from langgraph_handoff.errors import (
    CheckpointOrderError,
    ConflictError,
    CorruptObjectError,
    EnvelopeVersionError,
    StaleWriterError,
)
from langgraph_handoff.stores import LocalStore, MemoryStore, ObstoreS3Store, S3Store

__all__ = [
    "CheckpointOrderError",
    "ConflictError",
    "CorruptObjectError",
    "EnvelopeVersionError",
    "Layout",
    "LocalStore",
    "MemoryStore",
    "ObjectStoreSaver",
    "ObstoreS3Store",
    "S3Store",
    "SigningKey",
    "SigningKeys",
    "StaleWriterError",
    "__version__",
]
