"""``ObstoreS3Store``: the S3 transport on ``obstore`` (Rust ``object_store``), a tenth of boto3's CPU.

Why a second S3 transport: boto3 spends about 1.5-2 ms of client CPU per request on signing, event
hooks and XML parsing. On the same Ceph RGW, obstore's conditional PUT and its GET each cost about
0.15 ms of CPU. The figures and the choice of default are in the README's "Performance" section.

**Why the async API uses obstore's sync calls in a thread pool, not obstore's own async.** obstore's
coroutines are completed from its Rust runtime threads, which call back into the event loop
(``call_soon_threadsafe``). When a process ends right after its last await, such a callback can
still be running during interpreter shutdown; CPython then exits that thread with
``pthread_exit``, which Rust cannot unwind through, and the whole process aborts (SIGABRT, exit
134; seen in gdb). Measured here with a script doing 800 async GETs and exiting: 3 of 16 runs
aborted when obstore also called a Python credential provider, 2 of about 80 without one; 0 of 16
with the pool, at the same client CPU per invoke. obstore's sync calls release the GIL, so the
pool overlaps requests as well as the event loop would.

Same semantics as :class:`~langgraph_handoff.stores.s3.S3Store`, and the same server deviations:

* **Credentials come from boto3's chain** (environment, ``~/.aws`` profiles, SSO, assumed roles,
  instance roles): a boto3 session's credentials are handed to obstore as plain keys. Refreshable
  ones are re-read every few minutes and the obstore clients rebuilt with them. (Not through
  obstore's ``credential_provider`` callback: a Python callable called from obstore's runtime
  threads made 3 of 16 processes abort at exit after async use, measured here.)
* **ETag quoting** is learned exactly as ``S3Store`` does (:mod:`~langgraph_handoff.stores.s3_compat`).
* **Conditional writes are never retried by the client.** They go through a second obstore client
  with retries off: a retried create-only PUT whose first try landed would come back 412 and turn
  our own win into a "lost race". A 5xx (RGW answers many race losers with 500), a timeout or a
  dropped connection on a conditional PUT is :class:`~langgraph_handoff.errors.UnknownOutcomeError`,
  for the caller to settle by re-reading. Idempotent requests use obstore's retries (5xx,
  throttling, connection errors) and then fail with
  :class:`~langgraph_handoff.errors.StoreUnavailableError`.
* **Conditional delete** is not offered by obstore; nothing in this package needs it (RGW ignores
  it anyway), and asking for one raises instead of silently deleting unconditionally.

Install with ``pip install 'langgraph-handoff[obstore]'``.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from langgraph_handoff.errors import (
    InvalidConfigError,
    LangGraphHandoffError,
    PreconditionFailedError,
    StoreError,
    StoreUnavailableError,
    UnknownOutcomeError,
)
from langgraph_handoff.stores.base import (
    ListResult,
    ObjectInfo,
    Op,
    StoreBase,
    StoredObject,
    validate_key,
    validate_prefix,
)
from langgraph_handoff.stores.s3_compat import EtagQuoting, default_headers, strip_etag

__all__ = ["BotoCredentials", "ObstoreS3Store"]

#: how long obstore may keep one set of credentials before asking boto3 again. botocore refreshes
#: temporary credentials once fewer than 10 minutes remain (15 advisory), so what it hands out is
#: valid for at least 10 more minutes: 5 keeps a margin for clock skew and slow requests.
CREDENTIAL_TTL = timedelta(minutes=5)

_STATUS_RE = re.compile(r"status code: (\d{3})")


def _import_obstore() -> Any:
    try:
        import obstore
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise InvalidConfigError(
            "the obstore transport needs the obstore package: pip install 'langgraph-handoff[obstore]' "
            "(or use transport='boto3')"
        ) from exc
    return obstore


class BotoCredentials:
    """A boto3 session's credentials as obstore configuration, renewed when they may go stale.

    Every boto3 credential source keeps working: environment, shared files and profiles, SSO,
    ``credential_process``, assumed roles, container and instance roles. Static credentials are
    read once. Refreshable ones are read again every :data:`CREDENTIAL_TTL`; boto3 decides when
    to actually refresh them.

    >>> import boto3
    >>> creds = BotoCredentials(boto3.Session(aws_access_key_id="AKID", aws_secret_access_key="secret"))
    >>> creds.config()["access_key_id"], creds.renew_at is None
    ('AKID', True)
    """

    def __init__(self, session: Any) -> None:
        credentials = session.get_credentials()
        if credentials is None:
            raise InvalidConfigError(
                "no AWS credentials found in the boto3 chain (environment, ~/.aws profiles, SSO, roles): "
                "configure one, or pass a boto3 session that has credentials"
            )
        self._credentials = credentials
        self._refreshable = hasattr(credentials, "refresh_needed")
        #: monotonic time after which :meth:`config` should be asked again (None: never)
        self.renew_at: float | None = None

    def config(self) -> dict[str, Any]:
        """The current keys, as obstore ``S3Config`` entries; sets :attr:`renew_at`."""
        frozen = self._credentials.get_frozen_credentials()
        if self._refreshable:
            self.renew_at = time.monotonic() + CREDENTIAL_TTL.total_seconds()
        keys = {"access_key_id": frozen.access_key, "secret_access_key": frozen.secret_key}
        if frozen.token:
            keys["session_token"] = frozen.token
        return keys


def _status(exc: BaseException) -> int | None:
    """The HTTP status in an obstore error's message (obstore carries no status attribute)."""
    match = _STATUS_RE.search(str(exc))
    return int(match.group(1)) if match else None


def _brief(exc: BaseException) -> str:
    """The first line of an obstore error: its debug dump follows and is not for users."""
    return str(exc).split("\n", 1)[0][:300]


class ObstoreS3Store(StoreBase):
    """Objects in an S3 bucket under ``prefix``, through obstore.

    Args:
        bucket: bucket name (it must exist, or pass ``create_bucket=True``).
        prefix: key prefix for everything this store writes, e.g. ``"prod/agents"``.
        endpoint_url: an S3-compatible server; default ``AWS_ENDPOINT_URL_S3`` or
            ``AWS_ENDPOINT_URL`` from the environment, else AWS. Path-style addressing is used
            whenever an endpoint is given.
        region_name: default: the boto3 session's region, else ``us-east-1``.
        session: a ``boto3.Session`` whose credentials to use; default ``boto3.Session(profile_name=...)``.
        profile_name: the ``~/.aws`` profile, when no session is given.
        etag_quoting: ``"auto"`` (detect), ``"unquoted"`` (RGW) or ``"quoted"``.
        max_retries: obstore's retries for idempotent requests (conditional writes get none).
        timeout: per-request timeout, e.g. ``"30s"``.
        max_workers: threads for the parallel requests of the *sync* API (async needs none).
        headers: extra HTTP headers sent with every request. Tigris endpoints get
            ``X-Tigris-Consistent: true`` without asking, so conditions are evaluated on the leader.

    Example (needs a reachable server)::

        store = ObstoreS3Store("agents", prefix="prod", endpoint_url="http://127.0.0.1:7480")
        saver = ObjectStoreSaver(store)
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region_name: str | None = None,
        session: Any | None = None,
        profile_name: str | None = None,
        create_bucket: bool = False,
        etag_quoting: str = "auto",
        max_retries: int = 4,
        timeout: str = "30s",
        max_workers: int = 32,
        headers: dict[str, str] | None = None,
    ) -> None:
        obs = _import_obstore()
        import boto3

        self.bucket = bucket
        prefix = prefix.strip("/")
        self.prefix = validate_prefix(prefix + "/") if prefix else ""
        self.quoting = EtagQuoting(etag_quoting)
        self.session = session or boto3.Session(profile_name=profile_name)
        self.endpoint_url = endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        self.region_name = region_name or self.session.region_name or "us-east-1"
        self._credentials = BotoCredentials(self.session)
        config: dict[str, Any] = {"region": self.region_name}
        if self.endpoint_url:
            config["endpoint"] = self.endpoint_url
            config["virtual_hosted_style_request"] = False
        client_options: dict[str, Any] = {"timeout": timeout, "connect_timeout": "5s"}
        if self.endpoint_url and self.endpoint_url.startswith("http://"):
            client_options["allow_http"] = True
        extra_headers = default_headers(self.endpoint_url, headers)
        if extra_headers:
            client_options["default_headers"] = extra_headers

        self._obs = obs
        #: what obstore raises: its own errors, and OSError subclasses (FileNotFoundError, ...)
        self._errors: tuple[type[BaseException], ...] = (obs.exceptions.BaseError, OSError)
        self._settings = (bucket, prefix or None, config, client_options, max_retries)
        self._renew_lock = threading.Lock()
        self._clients = self._build_clients()
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="obstore-s3")
        self._executor = self._pool  # the async API runs the sync calls here: see the module docstring
        self._closed = False
        if create_bucket:
            self.ensure_bucket()

    def __repr__(self) -> str:
        return f"ObstoreS3Store(bucket={self.bucket!r}, prefix={self.prefix!r})"

    # -- the two obstore clients -----------------------------------------------------------------
    def _build_clients(self) -> tuple[Any, Any]:
        """One client whose idempotent requests obstore retries, one for conditional PUTs that is
        never retried behind our back; both signed with the current credentials."""
        bucket, prefix, config, client_options, max_retries = self._settings
        config = {**config, **self._credentials.config()}
        backoff = {"init_backoff": timedelta(milliseconds=50), "max_backoff": timedelta(seconds=2), "base": 2.0}

        def make(retries: int) -> Any:
            return self._obs.store.S3Store(
                bucket,
                prefix=prefix,
                config=config,
                client_options=client_options,
                retry_config={"max_retries": retries, "backoff": backoff, "retry_timeout": timedelta(seconds=60)},
            )

        return make(max_retries), make(0)

    def _current(self) -> tuple[Any, Any]:
        renew_at = self._credentials.renew_at
        if renew_at is not None and time.monotonic() >= renew_at:
            with self._renew_lock:
                if self._credentials.renew_at == renew_at:
                    self._clients = self._build_clients()
        return self._clients

    @property
    def _store(self) -> Any:
        return self._current()[0]

    @property
    def _cas(self) -> Any:
        return self._current()[1]

    # -- setup -----------------------------------------------------------------------------------
    def ensure_bucket(self) -> None:
        """Create the bucket if it does not exist (idempotent). obstore cannot create buckets, so
        this one-time call goes through boto3 with the same session and endpoint."""
        from langgraph_handoff.stores.s3 import S3Store

        client = self.session.client("s3", endpoint_url=self.endpoint_url, region_name=self.region_name)
        boto_store = S3Store(self.bucket, client=client, max_workers=1)
        try:
            boto_store.ensure_bucket()
        finally:
            boto_store.close()

    # -- error mapping (shared by the sync and async twins) ---------------------------------------
    def _unavailable(self, exc: BaseException, what: str) -> StoreError:
        """An idempotent request failed after obstore's own retries."""
        status = _status(exc)
        if isinstance(exc, self._obs.exceptions.PermissionDeniedError | self._obs.exceptions.UnauthenticatedError):
            return StoreError(f"S3 {what} was refused ({_brief(exc)}): check the credentials and the bucket policy")
        if status is None or status >= 500 or status == 429:
            return StoreUnavailableError(
                f"S3 {what} kept failing: {_brief(exc)}. Check the endpoint and credentials, or retry later."
            )
        return StoreError(f"S3 {what} failed: {_brief(exc)}")

    def _conditional_failure(self, exc: BaseException, key: str, if_match: str | None) -> LangGraphHandoffError | None:
        """What a failed conditional PUT means; None for "412 on If-Match": maybe the quoting."""
        errors = self._obs.exceptions
        status = _status(exc)
        if isinstance(exc, errors.AlreadyExistsError):
            return PreconditionFailedError(key, "HTTP 412 (object exists)")
        if isinstance(exc, errors.PreconditionError) or status == 412:
            return None if if_match is not None else PreconditionFailedError(key, "HTTP 412")
        if status == 409:  # AWS ConditionalRequestConflict: a concurrent conditional write
            return PreconditionFailedError(key, "HTTP 409")
        if if_match is not None and (isinstance(exc, FileNotFoundError) or status == 404):
            return PreconditionFailedError(key, "key missing")
        if status is None or status >= 500 or status == 429:  # the write may or may not have landed
            return UnknownOutcomeError(key, _brief(exc))
        return StoreError(f"conditional PUT of {key!r} failed: {_brief(exc)}")

    @staticmethod
    def _mode(if_match: str | None, if_none_match: bool, quoting: EtagQuoting) -> Any:
        return "create" if if_none_match else {"e_tag": quoting.form(if_match or "")}

    @staticmethod
    def _etag(result: Any, key: str) -> str:
        etag = result.get("e_tag") if isinstance(result, dict) else None
        if not etag:
            raise StoreError(f"the server stored {key!r} but returned no ETag: it cannot carry compare-and-swap")
        return strip_etag(etag)

    # -- sync primitives -------------------------------------------------------------------------
    def get(self, key: str) -> StoredObject | None:
        path = validate_key(key)
        try:
            result = self._obs.get(self._store, path)
            body = result.bytes().to_bytes()
        except FileNotFoundError:
            return None
        except self._errors as exc:
            raise self._unavailable(exc, f"GET {self.prefix}{key}") from None
        return StoredObject(key=key, body=body, etag=strip_etag(result.meta["e_tag"] or ""))

    def put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        path = validate_key(key)
        if if_match is None and not if_none_match:
            try:
                return self._etag(self._obs.put(self._store, path, body, use_multipart=False), key)
            except self._errors as exc:
                raise self._unavailable(exc, f"PUT {self.prefix}{key}") from None
        for _ in range(2):  # the second pass only after learning the server's ETag quoting
            mode = self._mode(if_match, if_none_match, self.quoting)
            try:
                result = self._obs.put(self._cas, path, body, mode=mode, use_multipart=False)
            except self._errors as exc:
                failure = self._conditional_failure(exc, key, if_match)
                if failure is not None:
                    raise failure from None
                assert if_match is not None
                if self.quoting.learn(if_match, lambda: self._head_etag(path)):
                    continue
                raise PreconditionFailedError(key, "HTTP 412") from None
            if if_match is not None:
                self.quoting.matched()
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
        except FileNotFoundError:
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

    def delete_many(self, keys: Sequence[str]) -> None:
        """Unconditional batch delete (DeleteObjects, 1000 keys per request)."""
        paths = [validate_key(k) for k in keys]
        if not paths:
            return
        try:
            self._obs.delete(self._store, paths)
        except self._errors as exc:
            raise self._unavailable(exc, f"DeleteObjects ({len(paths)} keys)") from None

    def list_page(self, prefix: str, *, start_after: str | None = None, max_keys: int = 1000) -> ListResult:
        base, page = self._list_start(prefix, start_after, max_keys)
        try:
            stream = self._obs.list(self._store, base, offset=page.offset, chunk_size=max_keys)
            for chunk in stream:
                if page.feed(chunk):
                    break
        except self._errors as exc:
            raise self._unavailable(exc, f"LIST {self.prefix}{prefix}") from None
        return page.result()

    def _list_start(self, prefix: str, start_after: str | None, max_keys: int) -> tuple[str | None, _Page]:
        """obstore lists whole path segments: ``a/b`` means everything under ``a/b/``. A prefix that
        ends mid-segment (``a/b``) is listed from its parent and filtered; the saver's own prefixes
        all end in ``/`` and need no filtering."""
        validate_prefix(prefix)
        if start_after is not None:
            validate_key(start_after)
        if prefix == "" or prefix.endswith("/"):
            return (prefix.rstrip("/") or None), _Page(prefix, start_after, max_keys)
        parent = prefix.rsplit("/", 1)[0] if "/" in prefix else None
        return parent, _Page(prefix, start_after, max_keys)

    # -- parallel --------------------------------------------------------------------------------
    def run_many(self, ops: Sequence[Op], *, return_exceptions: bool = False) -> list[Any]:
        """Parallel batch: obstore releases the GIL, so the pool overlaps the requests."""
        return self._run_many_in(self._pool, ops, return_exceptions)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pool.shutdown(wait=True)


class _Page:
    """One listing page being collected from obstore's chunks: keys under ``prefix``, strictly
    after ``start_after``, at most ``max_keys``."""

    def __init__(self, prefix: str, start_after: str | None, max_keys: int) -> None:
        self.prefix = prefix
        self.max_keys = max_keys
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
