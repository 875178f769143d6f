"""Object keys: how thread ids, namespaces and checkpoint ids become store keys.

Layout (relative to the store's own prefix)::

    heads/{T}/{N}                          mutable head of one (thread, namespace); moved by CAS
    data/{T}/{N}/w/{inv(checkpoint_id)}/{K} one task's writes for one checkpoint (create-only)
    data/{T}/{N}/s/{inv(first_id)}-{nonce}  sealed history segment (create-only, listed in the head)
    data/{T}/{N}/b/{sha256}                 large channel value, content-addressed (create-only)
    data/{T}/{N}/m/{inv(last_id)}-{nonce}   archive: the head's older segment references (create-only)
    meta/format                             store marker written by ``setup()``
    workers/{W}/{I}                         liveness of incarnation I of session worker W
                                            (langgraph_handoff.checkpoint.liveness)
    teams/{TM}/roster                       a team's members; moved by CAS (langgraph_handoff.teams)
    teams/{TM}/inbox/{M}/{id}               one message to member M (create-only, deleted once acked)
    teams/{TM}/dead/{M}/{id}                a message kept for a removed member (dead letter)
    teams/{TM}/members/heads/..., .../data/... the members' conversations: threads "{TM}/{M}" in
                                            this layout, under the team's prefix
    memory/{NS...}/=k/{K}                   one long-term memory item (langgraph_handoff.memory)
    memory/{NS...}/=p/{L}-{B}-{n}-{digest}  a pack: a snapshot of n items of one namespace (a cache)

``T``, ``N`` and ``K`` are :func:`encode_segment` of the thread id, namespace and task id.

Why this shape:

* ``heads/`` is separate from ``data/`` so "every namespace of a thread" and "every thread" are
  tiny listings that never walk through writes or blobs.
* ``inv()`` maps each hex digit ``d`` of a uuid to ``f - d``. Checkpoint ids are time-ordered
  uuid6 strings, so ascending listings of inverted ids come out *newest first*: one LIST page
  returns the latest checkpoint's pending writes, and ``before=`` becomes ``StartAfter``.
* Every segment uses a lowercase-only alphabet, so the same keys work on case-insensitive file
  systems (``LocalStore`` on macOS) and can never contain ``/``, ``.``/``..``, NUL or control
  characters. Over-long segments are replaced by a hash: keys stay under S3's 1024-byte limit and
  file-name limits whatever the caller passes. The real ids are stored inside the objects.
"""

from __future__ import annotations

import functools
import hashlib
import re

from langgraph_handoff.errors import InvalidCheckpointIdError, InvalidThreadIdError

__all__ = [
    "FORMAT_MARKER_KEY",
    "MEMORY_ITEMS",
    "MEMORY_PACKS",
    "MEMORY_ROOT",
    "MAX_SEGMENT_LEN",
    "TEAMS_ROOT",
    "blob_key",
    "blobs_prefix",
    "checkpoint_id_from_inverted",
    "data_prefix",
    "decode_segment",
    "encode_segment",
    "head_key",
    "heads_prefix",
    "invert_checkpoint_id",
    "is_checkpoint_id",
    "is_head_key",
    "key_kind",
    "memory_item_key",
    "memory_namespace_prefix",
    "memory_pack_key",
    "parse_memory_pack_key",
    "parse_blob_key",
    "parse_memory_item_key",
    "parse_writes_key",
    "segment_key",
    "archive_suffix",
    "segment_suffix",
    "team_dead_prefix",
    "team_inbox_key",
    "team_inbox_prefix",
    "team_members_prefix",
    "team_prefix",
    "team_roster_key",
    "thread_data_prefix",
    "thread_of_key",
    "validate_checkpoint_id",
    "validate_namespace",
    "validate_thread_id",
    "worker_key",
    "writes_key",
    "writes_prefix",
]

#: Longest encoded segment kept readable; longer ones become ``~`` + sha256 hex (65 chars).
MAX_SEGMENT_LEN = 120

_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789_-")
_EMPTY = "="
_HASHED = "~"
_SAFE_RE = re.compile(r"[a-z0-9_-]+")
_UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_INVERT = str.maketrans("0123456789abcdef", "fedcba9876543210")


def encode_segment(value: str) -> str:
    """Encode an arbitrary string as one key segment.

    Bytes outside ``[a-z0-9_-]`` become ``%xx`` (lowercase hex); the empty string becomes ``=``;
    encodings longer than :data:`MAX_SEGMENT_LEN` become ``~`` + the sha256 of the UTF-8 bytes.
    The mapping is injective: ``=`` and ``~`` never occur in a percent-encoded segment.

    >>> encode_segment("user@example.com/conv 1")
    'user%40example%2ecom%2fconv%201'
    >>> encode_segment("")
    '='
    >>> encode_segment("..")
    '%2e%2e'
    """
    if value == "":
        return _EMPTY
    if len(value) <= MAX_SEGMENT_LEN and _SAFE_RE.fullmatch(value):
        return value  # nothing to escape: the common case (uuids, simple names), without a loop
    return _encode_escaped(value)


@functools.lru_cache(maxsize=4096)
def _encode_escaped(value: str) -> str:
    """:func:`encode_segment` of a value that needs escaping or hashing. Memoised: the same thread
    ids and namespaces come back on every call."""
    raw = value.encode("utf-8")  # lone surrogates raise here; callers validate first
    out = "".join(chr(b) if b in _SAFE else f"%{b:02x}" for b in raw)
    if len(out) > MAX_SEGMENT_LEN:
        return _HASHED + hashlib.sha256(raw).hexdigest()
    return out


def decode_segment(segment: str) -> str | None:
    """Invert :func:`encode_segment`; ``None`` for hashed segments (the id lives in the object).

    >>> decode_segment(encode_segment("a/b c"))
    'a/b c'
    """
    if segment == _EMPTY:
        return ""
    if segment.startswith(_HASHED):
        return None
    out = bytearray()
    i = 0
    while i < len(segment):
        ch = segment[i]
        if ch == "%":
            out.append(int(segment[i + 1 : i + 3], 16))
            i += 3
        else:
            out.append(ord(ch))
            i += 1
    return out.decode("utf-8")


_HASHED_RE = re.compile(r"~[0-9a-f]{64}")


def is_canonical_segment(segment: str) -> bool:
    """Whether ``segment`` is what :func:`encode_segment` makes of some string: the only segments
    this package writes. A file dropped under ``heads/`` by hand (``README.txt``, ``notes``
    with a dot) is not one.

    >>> [is_canonical_segment(s) for s in ("chat-1", "=", "a%2fb", "README.txt", "notes.md", "")]
    [True, True, True, False, False, False]
    """
    if segment == _EMPTY:
        return True
    if len(segment) <= MAX_SEGMENT_LEN and _SAFE_RE.fullmatch(segment):
        return True  # the common case, without decoding
    if segment.startswith(_HASHED):
        return _HASHED_RE.fullmatch(segment) is not None
    try:
        decoded = decode_segment(segment)
    except (ValueError, UnicodeDecodeError):
        return False
    return decoded is not None and decoded != "" and encode_segment(decoded) == segment


def is_head_key(key: str) -> bool:
    """Whether ``key`` (relative to the store) is ``heads/{T}/{N}`` with both segments as this
    package writes them. Walks over ``heads/`` report any other key there as foreign and never
    read, rewrite or delete it.

    >>> is_head_key(head_key("chat-1", "")), is_head_key("heads/README.txt"), is_head_key("heads/t/=/x")
    (True, False, False)
    """
    parts = key.split("/")
    return len(parts) == 3 and parts[0] == "heads" and is_canonical_segment(parts[1]) and is_canonical_segment(parts[2])


def thread_of_key(key: str) -> str | None:
    """The thread id a ``heads/`` or ``data/`` key belongs to, when its segment says it (None for
    a hashed, over-long id, and for any other key).

    >>> thread_of_key("data/chat-1/=/w/x/y"), thread_of_key("heads/a%2fb/="), thread_of_key("meta/format")
    ('chat-1', 'a/b', None)
    """
    parts = key.split("/")
    if len(parts) < 3 or parts[0] not in ("heads", "data") or not is_canonical_segment(parts[1]):
        return None
    return decode_segment(parts[1]) or None


_DATA_KINDS = {"w": "writes", "s": "segment", "b": "blob", "m": "archive"}
_TEAM_KINDS = {"roster": "roster", "inbox": "inbox", "dead": "dead_letter", "outside": "answer"}
_ROOT_KINDS = {"meta": "meta", "workers": "worker", "memory": "memory", "index": "index"}


def key_kind(key: str) -> str:
    """What a key holds, in a word: ``head``, ``writes``, ``segment``, ``blob``, ``archive``,
    ``meta``, ``worker``, ``roster``, ``inbox``, ``dead_letter``, ``answer``, ``memory``,
    ``index`` or ``other``. Low-cardinality, so a log record or a span can say which kind of
    object a request or a lost compare-and-swap was about without the thread id the key carries
    (a team member's keys are of the kind the same key has at the root).

    >>> key_kind(head_key("chat-1", "")), key_kind(writes_key("t", "", "1ef4f797-8335-6428-8001-8a1503f9b875", "k"))
    ('head', 'writes')
    >>> key_kind("teams/support/members/heads/support%2fa/="), key_kind("teams/support/roster"), key_kind("x/y")
    ('head', 'roster', 'other')
    """
    parts = key.split("/")
    root = parts[0]
    if root == "heads":
        return "head"
    if root == "data":
        return _DATA_KINDS.get(parts[3], "data") if len(parts) > 4 else "data"
    if root == "teams" and len(parts) > 2:
        if parts[2] == "members":
            return key_kind("/".join(parts[3:]))
        return _TEAM_KINDS.get(parts[2], "other")
    return _ROOT_KINDS.get(root, "other")


def validate_thread_id(thread_id: object) -> str:
    """Return ``thread_id`` as the string we store, or raise :class:`InvalidThreadIdError`.

    Non-string ids (ints, UUID objects) are stringified as LangGraph and SqliteSaver do. Any
    non-empty string that is valid Unicode is accepted: ``/``, ``..``, NUL, very long and
    non-ASCII ids are all encoded safely by :func:`encode_segment`.
    """
    if thread_id is None:
        raise InvalidThreadIdError("thread_id is missing: pass config={'configurable': {'thread_id': '...'}}")
    tid = thread_id if isinstance(thread_id, str) else str(thread_id)
    if tid == "":
        raise InvalidThreadIdError("thread_id is empty: use a non-empty string such as a uuid4")
    try:
        tid.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidThreadIdError(
            f"thread_id {tid!r} is not valid Unicode ({exc.reason}); use a UTF-8 encodable string"
        ) from None
    return tid


def validate_namespace(checkpoint_ns: object) -> str:
    """Return the namespace as a string (``None`` means the root ``""``)."""
    if checkpoint_ns is None:
        return ""
    ns = checkpoint_ns if isinstance(checkpoint_ns, str) else str(checkpoint_ns)
    try:
        ns.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidThreadIdError(f"checkpoint_ns {ns!r} is not valid Unicode ({exc.reason})") from None
    return ns


def is_checkpoint_id(value: object) -> bool:
    """True for canonical lowercase uuid strings, the only ids LangGraph generates."""
    return isinstance(value, str) and _UUID_RE.match(value) is not None


def validate_checkpoint_id(value: object) -> str:
    """Return ``value`` if it is a storable checkpoint id, else raise InvalidCheckpointIdError."""
    if not is_checkpoint_id(value):
        raise InvalidCheckpointIdError(
            f"checkpoint id {value!r} is not a canonical lowercase uuid string; LangGraph creates "
            "ids with langgraph.checkpoint.base.id.uuid6() and this saver orders by them"
        )
    return value  # type: ignore[return-value]


def invert_checkpoint_id(checkpoint_id: str) -> str:
    """Order-reversing map of a uuid string: ascending listings of the result go newest first.

    >>> invert_checkpoint_id("00000000-0000-0000-0000-00000000000f")
    'ffffffff-ffff-ffff-ffff-fffffffffff0'
    """
    return validate_checkpoint_id(checkpoint_id).translate(_INVERT)


def checkpoint_id_from_inverted(inverted: str) -> str:
    """Inverse of :func:`invert_checkpoint_id` (the map is its own inverse)."""
    return inverted.translate(_INVERT)


# --------------------------------------------------------------------------------------------------
# Key builders. Callers pass already-validated ids.
# --------------------------------------------------------------------------------------------------


def heads_prefix(thread_id: str | None = None) -> str:
    """``heads/`` (every thread) or ``heads/{T}/`` (every namespace of one thread)."""
    if thread_id is None:
        return "heads/"
    return f"heads/{encode_segment(thread_id)}/"


def head_key(thread_id: str, checkpoint_ns: str) -> str:
    return f"heads/{encode_segment(thread_id)}/{encode_segment(checkpoint_ns)}"


def thread_data_prefix(thread_id: str) -> str:
    return f"data/{encode_segment(thread_id)}/"


def data_prefix(thread_id: str, checkpoint_ns: str) -> str:
    return f"data/{encode_segment(thread_id)}/{encode_segment(checkpoint_ns)}/"


def writes_prefix(thread_id: str, checkpoint_ns: str, checkpoint_id: str | None = None) -> str:
    """All writes of a namespace (newest checkpoint first), or those of one checkpoint."""
    base = data_prefix(thread_id, checkpoint_ns) + "w/"
    if checkpoint_id is None:
        return base
    return base + invert_checkpoint_id(checkpoint_id) + "/"


def writes_key(thread_id: str, checkpoint_ns: str, checkpoint_id: str, task_id: str) -> str:
    return writes_prefix(thread_id, checkpoint_ns, checkpoint_id) + encode_segment(task_id)


@functools.lru_cache(maxsize=16384)
def parse_writes_key(key: str) -> tuple[str, str] | None:
    """``(checkpoint_id, encoded task segment)`` of a writes key, or None if it is not one.
    Memoised: a long thread's history walk lists the same writes keys on every turn."""
    parts = key.rsplit("/", 3)
    if len(parts) != 4 or parts[1] != "w":
        return None
    cid = checkpoint_id_from_inverted(parts[2])
    if not is_checkpoint_id(cid):
        return None
    return cid, parts[3]


def segment_suffix(first_id: str, nonce: str) -> str:
    """Where a sealed segment lives, relative to :func:`data_prefix` (heads list suffixes, so a
    copied thread's manifest needs no rewriting)."""
    return f"s/{invert_checkpoint_id(first_id)}-{nonce}"


def segment_key(thread_id: str, checkpoint_ns: str, suffix: str) -> str:
    return data_prefix(thread_id, checkpoint_ns) + suffix


def archive_suffix(last_id: str, nonce: str) -> str:
    """Where an archive of segment references lives, relative to :func:`data_prefix` (the head
    names it by suffix, as it does its segments, so a copied thread needs no rewriting). It is
    named by the newest checkpoint it covers, so a TTL sweep tells whose it is as it does for a
    segment."""
    return f"m/{invert_checkpoint_id(last_id)}-{nonce}"


def blobs_prefix(thread_id: str, checkpoint_ns: str) -> str:
    return data_prefix(thread_id, checkpoint_ns) + "b/"


def blob_key(thread_id: str, checkpoint_ns: str, origin_id: str, digest: str) -> str:
    """A large value, owned by the checkpoint whose put stored it (``origin_id``).

    Keys name their owner so garbage collection can tell exactly which blobs a removed checkpoint
    leaves behind; within one owner, the digest makes rewrites idempotent.
    """
    return blobs_prefix(thread_id, checkpoint_ns) + f"{invert_checkpoint_id(origin_id)}-{digest}"


def parse_blob_key(key: str) -> str | None:
    """The owner checkpoint id of a blob key, or None if it is not one."""
    name = key.rsplit("/", 1)[-1]
    cid = checkpoint_id_from_inverted(name[:36])
    return cid if is_checkpoint_id(cid) and name[36:37] == "-" else None


FORMAT_MARKER_KEY = "meta/format"

WORKERS_ROOT = "workers/"

#: audited handoffs, ``audit/{yyyy-mm-dd}/{id}`` (:mod:`langgraph_handoff.handoff.audit`)
AUDIT_ROOT = "audit/"


def worker_key(owner: str, incarnation: str) -> str:
    """The liveness record of one incarnation (one process) of session worker ``owner``.

    >>> worker_key("worker-a", "0f3c")
    'workers/worker-a/0f3c'
    """
    return f"{WORKERS_ROOT}{encode_segment(owner)}/{encode_segment(incarnation)}"


# --------------------------------------------------------------------------------------------------
# Agent teams (langgraph_handoff.teams). A member's conversation is the thread "{team}/{member}"
# of a saver on the team's own key space (team_members_prefix), never under the root's heads/ and
# data/, where any thread id a user passes lands. (Up to 0.2 it was; teams.upgrade moves it.)
# --------------------------------------------------------------------------------------------------

TEAMS_ROOT = "teams/"


def team_prefix(team_id: str) -> str:
    return f"{TEAMS_ROOT}{encode_segment(team_id)}/"


def team_members_prefix(team_id: str) -> str:
    """Where the members' conversations of a team live: a whole saver layout (``heads/``,
    ``data/``) under this prefix (:meth:`ObjectStoreSaver.under`).

    >>> team_members_prefix("support")
    'teams/support/members/'
    """
    return team_prefix(team_id) + "members/"


def team_roster_key(team_id: str) -> str:
    return team_prefix(team_id) + "roster"


def team_inbox_prefix(team_id: str, member: str | None = None) -> str:
    """Every inbox of a team, or one member's (message ids are key-safe hex, see teams.model)."""
    base = team_prefix(team_id) + "inbox/"
    return base if member is None else base + encode_segment(member) + "/"


def team_inbox_key(team_id: str, member: str, message_id: str) -> str:
    return team_inbox_prefix(team_id, member) + message_id


def team_dead_prefix(team_id: str, member: str | None = None) -> str:
    base = team_prefix(team_id) + "dead/"
    return base if member is None else base + encode_segment(member) + "/"


def team_outside_prefix(team_id: str, sender: str | None = None, request_id: str | None = None) -> str:
    """Answers for senders outside the team (``Team.request``), under the request they answer.

    >>> team_outside_prefix("t", "ops", "ab12")
    'teams/t/outside/ops/ab12/'
    """
    base = team_prefix(team_id) + "outside/"
    if sender is None:
        return base
    base += encode_segment(sender) + "/"
    return base if request_id is None else base + request_id + "/"


# --------------------------------------------------------------------------------------------------
# Long-term memory (langgraph_handoff.memory). A namespace is a directory of its own; its items
# and its packs sit in two sibling folders, "=k" and "=p". Neither can be an encoded namespace
# segment ("=" alone stands for "" and "%" escapes everything else), so a namespace called "k" or
# "p" never collides with them.
# --------------------------------------------------------------------------------------------------

MEMORY_ROOT = "memory/"
MEMORY_ITEMS = "=k"
MEMORY_PACKS = "=p"


def memory_namespace_prefix(namespace: tuple[str, ...]) -> str:
    """``memory/{NS...}/``: the items and packs of a namespace and of every namespace under it.

    >>> memory_namespace_prefix(("users", "a/b"))
    'memory/users/a%2fb/'
    """
    return MEMORY_ROOT + "".join(encode_segment(p) + "/" for p in namespace)


def memory_item_key(namespace: tuple[str, ...], key: str) -> str:
    """>>> memory_item_key(("users", "u1"), "prefs")
    'memory/users/u1/=k/prefs'
    """
    return f"{memory_namespace_prefix(namespace)}{MEMORY_ITEMS}/{encode_segment(key)}"


def parse_memory_item_key(object_key: str) -> tuple[str, str] | None:
    """``(namespace directory, encoded key segment)`` of an item key, or None if it is not one.

    >>> parse_memory_item_key("memory/users/u1/=k/prefs")
    ('memory/users/u1/', 'prefs')
    >>> parse_memory_item_key("memory/users/u1/=p/0-0-1-00") is None
    True
    """
    head, sep, segment = object_key.rpartition(f"/{MEMORY_ITEMS}/")
    if not sep or not segment or "/" in segment or not head.startswith(MEMORY_ROOT.rstrip("/")):
        return None
    return head + "/", segment


def memory_pack_key(directory: str, level: int, bucket: int, count: int, digest: str) -> str:
    """A pack of one namespace directory: bucket ``bucket`` of ``2**level``, ``count`` items,
    named by the digest of what it holds (so a pack is immutable and its name says whether it is
    current without reading it).

    >>> memory_pack_key("memory/users/u1/", 2, 3, 40, "ab" * 16)
    'memory/users/u1/=p/2-3-40-abababababababababababababababab'
    """
    return f"{directory}{MEMORY_PACKS}/{level}-{bucket}-{count}-{digest}"


def parse_memory_pack_key(object_key: str) -> tuple[str, int, int, int, str] | None:
    """``(directory, level, bucket, count, digest)`` of a pack key, or None if it is not one.

    >>> parse_memory_pack_key("memory/users/u1/=p/2-3-40-" + "ab" * 16)
    ('memory/users/u1/', 2, 3, 40, 'abababababababababababababababab')
    >>> parse_memory_pack_key("memory/users/u1/=k/prefs") is None
    True
    """
    head, sep, name = object_key.rpartition(f"/{MEMORY_PACKS}/")
    parts = name.split("-")
    if not sep or len(parts) != 4 or not all(p.isdigit() for p in parts[:3]) or not head.startswith("memory"):
        return None
    return head + "/", int(parts[0]), int(parts[1]), int(parts[2]), parts[3]
