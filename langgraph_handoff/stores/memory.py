"""``MemoryStore``: a linearizable in-process store for tests and examples."""

from __future__ import annotations

import bisect
import hashlib
import threading

from langgraph_handoff.errors import PreconditionFailedError
from langgraph_handoff.stores.base import (
    ListResult,
    ObjectInfo,
    StoreBase,
    StoredObject,
    validate_key,
    validate_prefix,
)

__all__ = ["MemoryStore"]


def content_etag(body: bytes) -> str:
    """ETag of a body: a content hash, so equal bodies have equal ETags exactly as on S3."""
    return hashlib.blake2b(body, digest_size=16).hexdigest()


class MemoryStore(StoreBase):
    """Objects in a dict behind one lock: every operation is atomic and linearizable.

    Conditional puts follow S3 semantics: ``if_none_match=True`` fails if the key exists,
    ``if_match=etag`` fails if the key is missing or has another ETag.

    >>> store = MemoryStore()
    >>> etag = store.put("a/b", b"one", if_none_match=True)
    >>> store.get("a/b").body
    b'one'
    >>> try:
    ...     store.put("a/b", b"two", if_match="not-the-etag")
    ... except PreconditionFailedError as exc:
    ...     print(exc)
    conditional write to 'a/b' lost a race (ETag differs); re-read the object and retry the decision
    >>> store.put("a/b", b"two", if_match=etag) != etag
    True
    """

    lists_in_process = True  # see StoreBase

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[str, tuple[bytes, str]] = {}
        self._keys: list[str] = []  # kept sorted for ordered listing

    def trust_scope(self) -> None:
        """Nothing to probe: this package implements this store's conditional writes itself."""
        return None

    def __repr__(self) -> str:
        return f"MemoryStore({len(self._objects)} objects)"

    def get(self, key: str) -> StoredObject | None:
        validate_key(key)
        with self._lock:
            found = self._objects.get(key)
        if found is None:
            return None
        return StoredObject(key=key, body=found[0], etag=found[1])

    def put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        validate_key(key)
        body = bytes(body)
        etag = content_etag(body)
        with self._lock:
            current = self._objects.get(key)
            if if_none_match and current is not None:
                raise PreconditionFailedError(key, "key exists")
            if if_match is not None and (current is None or current[1] != if_match):
                raise PreconditionFailedError(key, "key missing" if current is None else "ETag differs")
            if current is None:
                bisect.insort(self._keys, key)
            self._objects[key] = (body, etag)
        return etag

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        validate_key(key)
        with self._lock:
            current = self._objects.get(key)
            if current is None:
                return
            if if_match is not None and current[1] != if_match:
                raise PreconditionFailedError(key, "ETag differs")
            del self._objects[key]
            del self._keys[bisect.bisect_left(self._keys, key)]

    def list_page(self, prefix: str, *, start_after: str | None = None, max_keys: int = 1000) -> ListResult:
        validate_prefix(prefix)
        with self._lock:
            lo = bisect.bisect_left(self._keys, prefix)
            if start_after is not None and start_after >= prefix:
                lo = max(lo, bisect.bisect_right(self._keys, start_after))
            items: list[ObjectInfo] = []
            i = lo
            while i < len(self._keys) and len(items) < max_keys:
                k = self._keys[i]
                if not k.startswith(prefix):
                    break
                body, etag = self._objects[k]
                items.append(ObjectInfo(key=k, etag=etag, size=len(body)))
                i += 1
            truncated = i < len(self._keys) and self._keys[i].startswith(prefix)
        return ListResult(items=items, truncated=truncated)

    # No blocking I/O: the async forms call the sync ones directly instead of using a thread.
    async def aget(self, key: str) -> StoredObject | None:
        return self.get(key)

    async def aput(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        return self.put(key, body, if_match=if_match, if_none_match=if_none_match)

    async def adelete(self, key: str, *, if_match: str | None = None) -> None:
        self.delete(key, if_match=if_match)

    async def alist_page(self, prefix: str, *, start_after: str | None = None, max_keys: int = 1000) -> ListResult:
        return self.list_page(prefix, start_after=start_after, max_keys=max_keys)

    async def adelete_many(self, keys) -> None:  # type: ignore[no-untyped-def]
        self.delete_many(keys)

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)

    def total_bytes(self) -> int:
        """Sum of stored body sizes (for benchmarks and tests)."""
        with self._lock:
            return sum(len(b) for b, _ in self._objects.values())
