"""What every store on ``obstore`` (Rust ``object_store``) shares, whatever the cloud behind it.

:class:`~langgraph_handoff.stores.obstore_s3.ObstoreS3Store` and
:class:`~langgraph_handoff.stores.obstore_azure.AzureBlobStore` differ only in how they build
their obstore clients (credentials, endpoints) and in their servers' quirks. Everything else is
written once here:

* **Two clients.** Idempotent requests go through a client whose requests obstore retries (5xx,
  throttling, dropped connections), then fail with
  :class:`~langgraph_handoff.errors.StoreUnavailableError`. Conditional PUTs go through a second
  client with retries off: a retried create-only PUT whose first try landed would come back as a
  conflict and turn our own win into a "lost race". A 5xx, a timeout or a dropped connection on a
  conditional PUT is :class:`~langgraph_handoff.errors.UnknownOutcomeError`, for the caller to
  settle by re-reading.
* **Error classification.** obstore raises its own exception classes and ``OSError`` subclasses
  (``FileNotFoundError``) and carries the HTTP status only in the message; :meth:`ObstoreBase._unavailable`
  and :meth:`ObstoreBase._conditional_failure` turn them into the package's typed errors.
* **Async through a thread pool, not obstore's own coroutines.** obstore completes its coroutines
  from its Rust runtime threads, which call back into the event loop. When a process ends right
  after its last await, such a callback can still be running during interpreter shutdown; CPython
  then exits that thread with ``pthread_exit``, which Rust cannot unwind through, and the process
  aborts (SIGABRT, exit 134; measured on the S3 transport: 2 of about 80 runs, 0 of 16 with the
  pool). obstore's sync calls release the GIL, so the pool overlaps requests as well as the event
  loop would, and ``run_many`` (``StoreBase``) uses the same pool for the sync API.
* **Listing.** obstore lists whole path segments and its ``offset`` is not honoured by every
  server (Azurite ignores Azure's ``startFrom``); :class:`_Page` collects a page and filters both
  the prefix and ``start_after`` on the client, so every store lists exactly like S3.
* **Conditional delete** is not offered by obstore; nothing in this package needs it, and asking
  for one raises instead of silently deleting unconditionally.

Subclasses set :attr:`ObstoreBase._clients` (or override :meth:`ObstoreBase._current`) and call
:meth:`ObstoreBase._start` from their constructor.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from langgraph_handoff.errors import (
    InvalidConfigError,
    LangGraphHandoffError,
    MissingCredentialsError,
    PreconditionFailedError,
    StoreError,
    StoreUnavailableError,
    UnknownOutcomeError,
)
from langgraph_handoff.stores.base import (
    ListResult,
    ObjectInfo,
    StoreBase,
    StoredObject,
    too_large,
    validate_key,
    validate_prefix,
    validate_start_after,
)
from langgraph_handoff.stores.iothreads import IoThreads
from langgraph_handoff.stores.redact import redact_urls
from langgraph_handoff.stores.s3_compat import strip_etag
from langgraph_handoff.stores.timeouts import DEFAULT, RetryBudget, Timeouts, as_duration

__all__ = ["ObstoreBase", "client_options", "import_obstore", "retry_config"]

_STATUS_RE = re.compile(r"status code: (\d{3})")


def import_obstore() -> Any:
    """The ``obstore`` module, or a typed error saying how to install it."""
    try:
        import obstore
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise InvalidConfigError(missing_obstore(sys.version_info[:2])) from exc
    return obstore


def missing_obstore(python: tuple[int, int]) -> str:
    """What to do without obstore: install it, or, on a Python it does not install on (it
    needs 3.11+, and the extra installs nothing below), move to a newer Python.

    >>> missing_obstore((3, 10))[:74]
    'the obstore transport (az://, and S3 with transport=obstore) needs Python '
    """
    if python < (3, 11):
        return (
            "the obstore transport (az://, and S3 with transport=obstore) needs Python 3.11+ "
            f"(this is {python[0]}.{python[1]}): obstore installs on 3.11+ only. Run on Python 3.11 or "
            "newer for az://; for S3 use transport='boto3', which works here"
        )
    return (
        "the obstore transport needs the obstore package: pip install 'langgraph-handoff[obstore]' "
        "(or use transport='boto3' for S3)"
    )


def retry_config(max_retries: int, timeouts: Timeouts = DEFAULT) -> dict[str, Any]:
    """obstore's retry settings: ``max_retries`` tries with backoff from 50 ms to 2 s, none
    started past the deadline less one request's time-out (obstore starts a retry while its
    ``retry_timeout`` has not passed, and the retry may take a whole request time-out), so a
    stuck server fails an operation within the deadline. The conditional-PUT client gets
    ``retry_config(0)``.

    >>> retry_config(4, Timeouts(request=10.0, deadline=30.0))["retry_timeout"]
    datetime.timedelta(seconds=20)
    """
    backoff = {"init_backoff": timedelta(milliseconds=50), "max_backoff": timedelta(seconds=2), "base": 2.0}
    window = max(timeouts.deadline - timeouts.request, 0.001)
    return {"max_retries": max_retries, "backoff": backoff, "retry_timeout": timedelta(seconds=window)}


def client_options(endpoint_url: str | None, timeouts: Timeouts, headers: Mapping[str, str] | None) -> dict[str, Any]:
    """obstore's HTTP client settings: the request and connect time-outs, plain HTTP allowed for
    an ``http://`` endpoint (emulators, local servers), and headers sent with every request.

    >>> client_options("http://127.0.0.1:10000", Timeouts(request=30.0), {"X-A": "1"})
    {'timeout': '30000ms', 'connect_timeout': '5000ms', 'allow_http': True, 'default_headers': {'X-A': '1'}}
    """
    options: dict[str, Any] = {
        "timeout": as_duration(timeouts.request),
        "connect_timeout": as_duration(timeouts.connect),
    }
    if endpoint_url and endpoint_url.startswith("http://"):
        options["allow_http"] = True
    if headers:
        options["default_headers"] = dict(headers)
    return options


def status_of(exc: BaseException) -> int | None:
    """The HTTP status in an obstore error's message (obstore carries no status attribute)."""
    match = _STATUS_RE.search(str(exc))
    return int(match.group(1)) if match else None


def brief(exc: BaseException) -> str:
    """The first line of an obstore error: its debug dump follows and is not for users. URLs in
    it are redacted: obstore names the request's URL, with the SAS token of an Azure store."""
    return redact_urls(str(exc).split("\n", 1)[0][:300])


T = TypeVar("T")


class ObstoreBase(StoreBase):
    """The four primitives, batch delete, listing and parallel batches over an obstore store."""

    #: the time limits (subclasses set theirs from their arguments)
    timeouts: Timeouts = DEFAULT
    #: sends of a request obstore does not retry itself (see :meth:`_retried`)
    _attempts = 5

    #: the service's name in error messages ("S3", "Azure Blob")
    _service = "object store"
    #: what to check when a request is refused (401/403)
    _refused_hint = "check the credentials"
    #: the batch delete request's name in error messages
    _bulk_delete = "batch DELETE"
    #: the idempotent client and the never-retried client for conditional PUTs
    _clients: tuple[Any, Any]
    prefix: str

    def _start(self, obs: Any, *, max_workers: int, thread_name_prefix: str) -> None:
        """Common construction: the error classes to catch and the thread pool."""
        self._obs = obs
        #: what obstore raises: its own errors, and OSError subclasses (FileNotFoundError, ...)
        self._errors: tuple[type[BaseException], ...] = (obs.exceptions.BaseError, OSError)
        self._pool = IoThreads(max_workers=max_workers, thread_name_prefix=thread_name_prefix)
        self._executor = self._pool  # the async API runs the sync calls here: see the module docstring
        self._closed = False

    # -- the two obstore clients -----------------------------------------------------------------
    def _current(self) -> tuple[Any, Any]:
        """The clients to use now (a subclass may rebuild them, e.g. with renewed credentials)."""
        return self._clients

    @property
    def _store(self) -> Any:
        return self._current()[0]

    @property
    def _cas(self) -> Any:
        return self._current()[1]

    # -- hooks for the services' quirks ----------------------------------------------------------
    def _store_missing(self, exc: BaseException) -> StoreError | None:
        """An error saying the bucket or container itself is missing, when ``exc`` (a 404) means
        that rather than a missing key; None otherwise."""
        return None

    def _credentials_missing(self, exc: BaseException) -> MissingCredentialsError | None:
        """An error saying no credentials were found, when ``exc`` means that (obstore found none
        to sign with, so nothing was sent); None otherwise."""
        return None

    def _if_match_form(self, etag: str) -> str:
        """The ``If-Match`` value to send for ``etag`` (stored without quotes)."""
        return etag

    def _another_form(self, if_match: str, path: str) -> bool:
        """After a 412 on ``If-Match``: True when the server may want the ETag in the other quoting
        and the PUT should be tried once more."""
        return False

    def _matched(self) -> None:
        """A compare-and-swap succeeded with the current ``If-Match`` form."""

    # -- error mapping (shared by the sync and async twins) ---------------------------------------
    def _unavailable(self, exc: BaseException, what: str) -> StoreError | MissingCredentialsError:
        """An idempotent request failed after obstore's own retries."""
        missing = self._store_missing(exc) or self._credentials_missing(exc)
        if missing is not None:
            return missing
        status = status_of(exc)
        if isinstance(exc, self._obs.exceptions.PermissionDeniedError | self._obs.exceptions.UnauthenticatedError):
            return StoreError(f"{self._service} {what} was refused ({brief(exc)}): {self._refused_hint}")
        if status is None or status >= 500 or status == 429:
            return StoreUnavailableError(
                f"{self._service} {what} kept failing: {brief(exc)}. Check the endpoint and credentials, or retry later."
            )
        return StoreError(f"{self._service} {what} failed: {brief(exc)}")

    def _conditional_failure(self, exc: BaseException, key: str, if_match: str | None) -> LangGraphHandoffError | None:
        """What a failed conditional PUT means; None for "412 on If-Match" (maybe the quoting)."""
        missing = self._store_missing(exc) or self._credentials_missing(exc)
        if missing is not None:
            return missing
        errors = self._obs.exceptions
        status = status_of(exc)
        if isinstance(exc, errors.AlreadyExistsError):  # S3: 412; Azure: 409 BlobAlreadyExists
            return PreconditionFailedError(key, f"HTTP {status or 412} (object exists)")
        if isinstance(exc, errors.PreconditionError) or status == 412:
            return None if if_match is not None else PreconditionFailedError(key, "HTTP 412")
        if status == 409:  # AWS ConditionalRequestConflict: a concurrent conditional write
            return PreconditionFailedError(key, "HTTP 409")
        if if_match is not None and (isinstance(exc, FileNotFoundError) or status == 404):
            return PreconditionFailedError(key, "key missing")
        # the write may or may not have landed; 501 Not Implemented is an answer: nothing applied
        if status is None or (status >= 500 and status != 501) or status == 429:
            return UnknownOutcomeError(key, brief(exc))
        return StoreError(f"conditional PUT of {key!r} failed: {brief(exc)}")

    def _mode(self, if_match: str | None, if_none_match: bool) -> Any:
        return "create" if if_none_match else {"e_tag": self._if_match_form(if_match or "")}

    @staticmethod
    def _etag(result: Any, key: str) -> str:
        etag = result.get("e_tag") if isinstance(result, dict) else None
        if not etag:
            raise StoreError(f"the server stored {key!r} but returned no ETag: it cannot carry compare-and-swap")
        return strip_etag(etag)

    # -- sync primitives -------------------------------------------------------------------------
    def get(self, key: str) -> StoredObject | None:
        path = validate_key(key)
        for fresh in (True, False):
            try:
                result = self._obs.get(self._store, path)
                size = result.meta["size"]
                if size > self.max_object_bytes:
                    raise too_large(f"GET {self.prefix}{key}", self.max_object_bytes, size)
                body = result.bytes().to_bytes()
            except FileNotFoundError as exc:
                missing = self._store_missing(exc)
                if missing is not None:
                    raise missing from None
                return None
            except self._errors as exc:
                # obstore resumes a body cut off with a Range request, which the server answers
                # 416 when the object changed meanwhile: start over, once, from its first byte
                if fresh and status_of(exc) == 416:
                    continue
                raise self._unavailable(exc, f"GET {self.prefix}{key}") from None
            return StoredObject(key=key, body=body, etag=strip_etag(result.meta["e_tag"] or ""))
        raise AssertionError("unreachable")

    def put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        path = validate_key(key)
        if if_match is None and not if_none_match:
            try:
                return self._etag(self._obs.put(self._store, path, body, use_multipart=False), key)
            except self._errors as exc:
                raise self._unavailable(exc, f"PUT {self.prefix}{key}") from None
        for _ in range(2):  # the second pass only after learning the server's ETag quoting
            mode = self._mode(if_match, if_none_match)
            try:
                result = self._obs.put(self._cas, path, body, mode=mode, use_multipart=False)
            except self._errors as exc:
                failure = self._conditional_failure(exc, key, if_match)
                if failure is not None:
                    raise failure from None
                assert if_match is not None
                if self._another_form(if_match, path):
                    continue
                raise PreconditionFailedError(key, "HTTP 412") from None
            if if_match is not None:
                self._matched()
            return self._etag(result, key)
        raise PreconditionFailedError(key, "ETag differs")

    def _head_etag(self, path: str) -> str | None:
        try:
            return strip_etag(self._obs.head(self._store, path)["e_tag"] or "")
        except self._errors:  # a failed HEAD just means "nothing learnt"
            return None

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        path = self._deletable(key, if_match)
        try:
            self._obs.delete(self._store, path)
        except FileNotFoundError as exc:
            missing = self._store_missing(exc)
            if missing is not None:
                raise missing from None
            return
        except self._errors as exc:
            raise self._unavailable(exc, f"DELETE {self.prefix}{key}") from None

    def _deletable(self, key: str, if_match: str | None) -> str:
        if if_match is not None:
            raise StoreError(
                "conditional delete is not available on the obstore transport (and Ceph RGW ignores it): "
                "delete unconditionally, or use transport='boto3'"
            )
        return validate_key(key)

    def _retried(self, what: str, call: Callable[[], T]) -> T:
        """``call()``, an idempotent request obstore does not retry itself (a batch delete is a
        POST; a listing cut off mid-body fails its stream), sent again on a transient failure
        within the store's attempts and deadline (:class:`~langgraph_handoff.stores.timeouts.RetryBudget`)."""
        budget = RetryBudget(self.timeouts, attempts=self._attempts)
        while True:
            try:
                return call()
            except self._errors as exc:
                failure = self._unavailable(exc, what)
                if not isinstance(failure, StoreUnavailableError):
                    raise failure from None
                pause = budget.pause()
                if pause is None:
                    raise budget.spent(what, brief(exc)) from None
                time.sleep(pause)

    def delete_many(self, keys: Sequence[str]) -> None:
        """Unconditional batch delete in obstore's batches (S3 DeleteObjects: 1000 keys per request)."""
        paths = [validate_key(k) for k in keys]
        if not paths:
            return
        self._retried(f"{self._bulk_delete} ({len(paths)} keys)", lambda: self._obs.delete(self._store, paths))

    def list_page(self, prefix: str, *, start_after: str | None = None, max_keys: int = 1000) -> ListResult:
        def listed() -> ListResult:
            base, page = self._list_start(prefix, start_after, max_keys)
            for chunk in self._obs.list(self._store, base, offset=page.offset, chunk_size=max_keys):
                if page.feed(chunk):
                    break
            return page.result()

        return self._retried(f"LIST {self.prefix}{prefix}", listed)

    def _list_start(self, prefix: str, start_after: str | None, max_keys: int) -> tuple[str | None, _Page]:
        """obstore lists whole path segments: ``a/b`` means everything under ``a/b/``. A prefix that
        ends mid-segment (``a/b``) is listed from its parent and filtered; the saver's own prefixes
        all end in ``/`` and need no filtering."""
        validate_prefix(prefix)
        if start_after is not None:
            validate_start_after(start_after)
        if prefix == "" or prefix.endswith("/"):
            return (prefix.rstrip("/") or None), _Page(prefix, start_after, max_keys)
        parent = prefix.rsplit("/", 1)[0] if "/" in prefix else None
        return parent, _Page(prefix, start_after, max_keys)

    # -- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pool.shutdown(wait=True)


class _Page:
    """One listing page being collected from obstore's chunks: keys under ``prefix``, strictly
    after ``start_after``, at most ``max_keys``.

    ``start_after`` is also enforced here, not only sent as obstore's ``offset``: Azurite ignores
    the ``startFrom`` obstore sends for it and lists from the first key.

    >>> page = _Page("p/", "p/b", 2)
    >>> page.feed([{"path": k, "e_tag": '"e"', "size": 1} for k in ["p/a", "p/b", "p/c", "p/d", "p/e"]])
    True
    >>> [(i.key, i.etag) for i in page.result().items], page.truncated
    ([('p/c', 'e'), ('p/d', 'e')], True)
    """

    def __init__(self, prefix: str, start_after: str | None, max_keys: int) -> None:
        self.prefix = prefix
        self.max_keys = max_keys
        self.start_after = start_after
        self.items: list[ObjectInfo] = []
        self.truncated = False
        # obstore's offset is exclusive, like S3's StartAfter; a mid-segment prefix starts just
        # before its first possible key
        lower = prefix[:-1] if prefix and not prefix.endswith("/") else None
        self.offset: str | None = start_after if start_after is not None else lower
        if start_after is not None and lower is not None and start_after < lower:
            self.offset = lower
        self._filter = bool(prefix) and not prefix.endswith("/")

    def feed(self, chunk: list[dict[str, Any]]) -> bool:
        """Take one chunk; True when the page is complete."""
        for meta in chunk:
            key = str(meta["path"])
            if self.start_after is not None and key <= self.start_after:
                continue  # a server that ignored the offset
            if self._filter and not key.startswith(self.prefix):
                if key > self.prefix:
                    return True  # past the prefix's range: nothing more can match
                continue
            if len(self.items) == self.max_keys:
                self.truncated = True
                return True
            self.items.append(ObjectInfo(key=key, etag=strip_etag(meta.get("e_tag") or ""), size=int(meta["size"])))
        if len(self.items) == self.max_keys:
            self.truncated = True  # more keys may follow; the caller asks again from the last one
            return True
        return False

    def result(self) -> ListResult:
        return ListResult(items=self.items, truncated=self.truncated)
