"""The public surface is chosen, not accumulated: this test pins every exported name.

A public module is one listed in ``PUBLIC``; its ``__all__`` is the promise. Every other module is
internal: at the top level its name starts with an underscore, inside a public package it is an
implementation module whose names may change in any release (the API reference says so).
Changing a list below is changing the API: say so in CHANGELOG.md, under *Changed* or *Removed*.
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import langgraph_handoff

PUBLIC: dict[str, set[str]] = {
    "langgraph_handoff": {
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
    },
    "langgraph_handoff.checkpoint": {"Layout", "ObjectStoreSaver"},
    "langgraph_handoff.cli": {"app", "main", "team_app"},
    "langgraph_handoff.errors": {
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
        "MigrationError",
        "MissingCredentialsError",
        "MissingExtraError",
        "NotAnObjectError",
        "ObjectTooLargeError",
        "OwnershipLostError",
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
    },
    "langgraph_handoff.handoff": {
        "SERDE_ALLOWLIST",
        "AuditPolicy",
        "AuditRecord",
        "BriefingCheck",
        "BriefingOnly",
        "BriefingVerdict",
        "FullHistory",
        "Handoff",
        "HandoffAgent",
        "HandoffState",
        "HistoryProblem",
        "LastN",
        "LogAuditSink",
        "StoreAuditSink",
        "StripTools",
        "assert_valid_history",
        "build_handoff_graph",
        "create_handoff_graph",
        "create_handoff_tool",
        "handoff_log",
        "handoff_middleware",
        "handoff_to",
        "handoff_tools",
        "is_handoff_message",
        "routing_log",
        "validate_history",
    },
    "langgraph_handoff.handoff.audit": {
        "AuditPolicy",
        "AuditRecord",
        "AuditSink",
        "LogAuditSink",
        "StoreAuditSink",
        "audit_record",
    },
    "langgraph_handoff.handoff.briefing": {"BriefingCheck", "BriefingVerdict"},
    "langgraph_handoff.inspection": {
        "Problem",
        "ThreadHeads",
        "ThreadsListing",
        "diff_checkpoints",
        "jsonable",
        "list_threads",
        "show_checkpoint",
        "thread_heads",
        "verify_store",
    },
    "langgraph_handoff.memory": {"E5_DIMS", "E5Embeddings", "MemorySweep", "ObjectStoreMemory", "e5_embeddings"},
    "langgraph_handoff.migrations": {"Migration", "MigrationFn", "SchemaMigrations", "rename_channel"},
    "langgraph_handoff.ownership": {
        "Lease",
        "SessionInfo",
        "SessionManager",
        "SessionWorker",
        "Transfer",
        "WorkerStoppingError",
        "session_note",
    },
    "langgraph_handoff.probe": {"PROBE_PREFIX", "ProbeReport", "RaceReport", "RaceTally", "arace", "race"},
    "langgraph_handoff.routing": {
        "CharNgramEncoder",
        "CloseCall",
        "CloseCallSink",
        "CombinedEncoder",
        "E5Encoder",
        "EmbeddingsEncoder",
        "EvalReport",
        "FitReport",
        "HybridRouter",
        "JsonlCloseCalls",
        "LLMDecider",
        "MemoryCloseCalls",
        "Route",
        "RouteCalibration",
        "RouteDecision",
        "Rule",
        "RuleRouter",
        "SemanticRouter",
        "SweepPoint",
        "WordLlamaEmbeddings",
        "aevaluate",
        "describe_encoder",
        "e5_available",
        "evaluate",
        "load_close_calls",
        "recommended_encoder",
        "wordllama_embeddings",
    },
    "langgraph_handoff.server": {
        "DEFAULT_URL",
        "ENV_AES_KEY",
        "ENV_ENCRYPTION",
        "ENV_STORE_TTL_MINUTES",
        "ENV_SWEEP_INTERVAL",
        "ENV_TTL_MINUTES",
        "ENV_TTL_REFRESH",
        "ENV_URL",
        "ServerSettings",
        "checkpointer",
        "store",
    },
    "langgraph_handoff.stores": {
        "AzureBlobStore",
        "CountingStore",
        "GCSStore",
        "ListPage",
        "LocalStore",
        "MemoryStore",
        "ObjectInfo",
        "ObstoreS3Store",
        "S3Store",
        "StoreBase",
        "StoredObject",
        "store_from_url",
    },
    "langgraph_handoff.teams": {
        "Conversation",
        "DeadLetter",
        "HopBudgetExceeded",
        "InboxEntry",
        "KeyedStatus",
        "Member",
        "MemberContext",
        "MemberStatus",
        "Message",
        "Roster",
        "Team",
        "TeamMiddleware",
        "TeamState",
        "TeamWorker",
        "team_prompt",
        "team_tools",
    },
    "langgraph_handoff.telemetry": {"configure", "content_on", "is_on", "store_spans_on"},
    "langgraph_handoff.testing": {
        "ScriptExhaustedError",
        "ScriptedChatModel",
        "assert_valid_history",
        "reply",
        "tool_call",
        "validate_history",
    },
}


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_exports_are_pinned(name: str) -> None:
    module = importlib.import_module(name)
    exported = set(module.__all__)
    assert exported == PUBLIC[name], (
        f"{name}.__all__ changed: added {sorted(exported - PUBLIC[name])}, "
        f"removed {sorted(PUBLIC[name] - exported)}; update PUBLIC and CHANGELOG.md"
    )
    assert len(module.__all__) == len(exported), f"{name}.__all__ lists a name twice"
    for attr in module.__all__:
        assert hasattr(module, attr), f"{name}.__all__ names {attr!r}, which the module does not define"


def test_top_level_modules_are_public_or_private() -> None:
    """A module under ``langgraph_handoff/`` is either in ``PUBLIC`` or named with an underscore."""
    for info in pkgutil.iter_modules(langgraph_handoff.__path__):
        full = f"langgraph_handoff.{info.name}"
        assert info.name.startswith("_") or full in PUBLIC, f"{full} is neither pinned public nor private"


def exported_errors() -> dict[str, type[Exception]]:
    """Every exception class a public module exports, by its exported name."""
    found: dict[str, type[Exception]] = {}
    for module_name, names in PUBLIC.items():
        module = importlib.import_module(module_name)
        for name in names:
            value = getattr(module, name)
            if isinstance(value, type) and issubclass(value, Exception):
                found[name] = value
    return found


def test_errors_share_one_root() -> None:
    """Every error the package exports can be caught as ``LangGraphHandoffError``."""
    from langgraph_handoff.errors import LangGraphHandoffError

    for name, cls in exported_errors().items():
        assert issubclass(cls, LangGraphHandoffError), f"{name} is not a LangGraphHandoffError"
