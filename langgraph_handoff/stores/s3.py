"""``S3Store``: AWS S3 and S3-compatible servers (Ceph RGW, MinIO, R2, ...) through boto3.

Conditional writes need ``boto3>=1.35.69`` (the first release with ``IfMatch`` on PutObject).

Server deviations this adapter absorbs (measured, see docs/deploy.md):

* **ETag quoting.** ETags are returned quoted (``"abc"``). Ceph RGW only matches an *unquoted*
  ``If-Match``; AWS documents the quoted form. We send unquoted first; if a server answers 412 while
  a HEAD shows the very ETag we sent, it wants quotes, and we switch for the rest of the session.
* **Lost races.** 412 PreconditionFailed and 409 ConditionalRequestConflict both mean "the condition
  did not hold" -> :class:`PreconditionFailedError`. So does 404 on ``If-Match`` against a missing key
  (moto 5); RGW answers 412 there.
* **Unknown outcomes.** RGW answers many race losers with HTTP 500. A 5xx (or a dropped connection)
  on a *conditional* write is reported as :class:`UnknownOutcomeError`: the caller re-reads and
  decides from what is stored. It is never retried blindly.
* **Throttling.** botocore's standard retry mode backs off on SlowDown/503; idempotent operations
  get a few more jittered retries here before :class:`StoreUnavailableError`.
* **Conditional delete** is ignored by RGW 16, so the saver never relies on it.

One boto3 client (thread-safe) and one thread pool serve every call, sync or async: the async
methods run the blocking call in that pool (``StoreBase._executor``). We measured this against per-operation aioboto3
clients (3-6x slower in the peer survey) and it avoids aiobotocore's tight botocore pin.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from langgraph_handoff.errors import (
    MissingCredentialsError,
    PreconditionFailedError,
    StoreError,
    StoreNotFoundError,
    UnknownOutcomeError,
)
from langgraph_handoff.stores.base import (
    ListResult,
    ObjectInfo,
    StoreBase,
    StoredObject,
    checked_page,
    read_bounded,
    validate_key,
    validate_prefix,
)
from langgraph_handoff.stores.credentials import missing_credentials
from langgraph_handoff.stores.iothreads import IoThreads
from langgraph_handoff.stores.redact import redact_urls
from langgraph_handoff.stores.s3_compat import EtagQuoting, check_bucket, check_region, default_headers, no_such_bucket
from langgraph_handoff.stores.s3_compat import strip_etag as _strip
from langgraph_handoff.stores.timeouts import RetryBudget, Timeouts

__all__ = ["S3Store"]

T = TypeVar("T")

_RACE_CODES = {"PreconditionFailed", "ConditionalRequestConflict", "412", "409"}
_MISSING_CODES = {"NoSuchKey", "404", "NotFound"}
_RETRYABLE_STATUS = {500, 502, 503, 504}
_THROTTLE_CODES = {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequests"}


class S3Store(StoreBase):
    """Objects in an S3 bucket under ``prefix``.

    Args:
        bucket: bucket name (it must exist, or pass ``create_bucket=True``).
        prefix: key prefix for everything this store writes, e.g. ``"prod/agents"``.
        client: a boto3 S3 client. Built from the default credential chain when omitted
            (environment, ``~/.aws``, instance role); ``endpoint_url`` and ``region_name`` then
            apply, and ``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL`` are honoured by boto3 itself.
        endpoint_url: an S3-compatible server (when ``client`` is omitted); default AWS.
        region_name: the region (when ``client`` is omitted); default boto3's.
        max_workers: size of the thread pool that runs parallel and async requests.
        create_bucket: create the bucket now if it does not exist (idempotent).
        etag_quoting: ``"auto"`` (detect), ``"unquoted"`` (RGW) or ``"quoted"``.
        extra_retries: how many times an idempotent request is retried, within ``deadline``.
        headers: extra HTTP headers sent with every request. Tigris endpoints get
            ``X-Tigris-Consistent: true`` without asking, so conditions are evaluated on the leader.
        connect_timeout: seconds (or a duration such as ``"5s"``) to connect; default 5.
        timeout: seconds (or a duration) for one request's answer; default 15.
        deadline: seconds (or a duration) for one operation with its retries; default 30
            (:mod:`langgraph_handoff.stores.timeouts`). botocore's own retries are off: this
            store retries idempotent requests itself within the deadline, and never re-sends a
            conditional PUT (botocore re-sent one whose answer it lost, and the server then
            answered 412 to the write it had applied). The three timeouts are ignored when
            ``client`` is given.

    Example (needs a reachable server)::

        store = S3Store("agents", prefix="prod", endpoint_url="http://127.0.0.1:7480")
        saver = ObjectStoreSaver(store)
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        client: Any | None = None,
        *,
        endpoint_url: str | None = None,
        region_name: str | None = None,
        max_workers: int = 32,
        create_bucket: bool = False,
        etag_quoting: str = "auto",
        extra_retries: int = 4,
        headers: dict[str, str] | None = None,
        connect_timeout: float | str | None = None,
        timeout: float | str | None = None,
        deadline: float | str | None = None,
    ) -> None:
        self.timeouts = Timeouts.of(connect_timeout, timeout, deadline)
        self.bucket = check_bucket(bucket, arn=True)  # botocore would only refuse it at the first request
        if region_name is not None:
            check_region(region_name)
        prefix = prefix.strip("/")
        self.prefix = validate_prefix(prefix + "/") if prefix else ""
        self._owns_client = client is None
        if client is None:
            import boto3
            from botocore.config import Config

            client = boto3.client(
                "s3",
                endpoint_url=endpoint_url,
                region_name=region_name,
                config=Config(
                    max_pool_connections=max_workers,
                    connect_timeout=self.timeouts.connect,
                    read_timeout=self.timeouts.request,
                    retries={"mode": "standard", "total_max_attempts": 1},
                ),
            )
        self.client = client
        self.headers = default_headers(endpoint_url or getattr(client.meta, "endpoint_url", None), headers)
        if self.headers:
            client.meta.events.register("before-sign.s3", self._add_headers)
        self._pool = IoThreads(max_workers=max_workers, thread_name_prefix="s3store")
        self._executor = self._pool  # the async API runs the sync calls here
        self.quoting = EtagQuoting(etag_quoting)
        self._extra_retries = extra_retries
        self._closed = False
        if create_bucket:
            self.ensure_bucket()

    def __repr__(self) -> str:
        return f"S3Store(bucket={self.bucket!r}, prefix={self.prefix!r})"

    def trust_scope(self) -> tuple[str, ...]:
        """One probe verdict per server, bucket and prefix, whichever S3 transport reaches them."""
        return ("s3", str(self.client.meta.endpoint_url), self.bucket, self.prefix)

    def _add_headers(self, request: Any, **_: Any) -> None:
        for name, value in self.headers.items():
            request.headers[name] = value

    # -- setup -----------------------------------------------------------------------------------
    def ensure_bucket(self) -> None:
        """Create the bucket if it does not exist (idempotent). Both requests are retried as any
        idempotent one is: a reset or a 5xx ends in ``StoreUnavailableError``, never botocore's
        own exception (the fault campaign saw a racing worker die of one while starting)."""
        from botocore.exceptions import ClientError

        def exists() -> bool:
            try:
                self.client.head_bucket(Bucket=self.bucket)
            except ClientError as exc:
                if _status(exc) in (404, 400, 301, 403) or _code(exc) in ("NoSuchBucket", "404"):
                    return False
                raise
            return True

        def create() -> None:
            try:
                self.client.create_bucket(Bucket=self.bucket)
            except ClientError as exc:
                if _code(exc) not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                    raise

        if not self._retry_idempotent(f"HEAD bucket {self.bucket!r}", exists):
            self._retry_idempotent(f"create bucket {self.bucket!r}", create)

    # -- helpers ---------------------------------------------------------------------------------
    def _no_bucket(self) -> StoreNotFoundError:
        return no_such_bucket(self.bucket, self.client.meta.endpoint_url)

    def _no_credentials(self, exc: Exception) -> MissingCredentialsError:
        return missing_credentials("s3", f"S3 bucket {self.bucket!r}", redact_urls(str(exc)))

    def _full(self, key: str) -> str:
        return self.prefix + validate_key(key)

    def _retry_idempotent(self, what: str, fn: Callable[[], T]) -> T:
        """Run an idempotent request, backing off on throttling, 5xx and connection errors, within
        ``extra_retries`` and the deadline (:class:`~langgraph_handoff.stores.timeouts.RetryBudget`)."""
        import urllib3
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError

        budget = RetryBudget(self.timeouts, attempts=self._extra_retries + 1)
        while True:
            try:
                return fn()
            except ClientError as exc:
                if _code(exc) == "NoSuchBucket":
                    raise self._no_bucket() from None
                retryable = _status(exc) in _RETRYABLE_STATUS or _code(exc) in _THROTTLE_CODES
                if not retryable:  # e.g. 403: retrying will not help, and the caller gets a typed error
                    hint = " (check the credentials and the bucket policy)" if _status(exc) in (401, 403) else ""
                    raise StoreError(f"S3 {what} failed: {redact_urls(str(exc))}{hint}") from exc
                last: Exception = exc
            except (NoCredentialsError, PartialCredentialsError) as exc:
                raise self._no_credentials(exc) from None  # retrying cannot find what is not configured
            except (BotoCoreError, urllib3.exceptions.HTTPError) as exc:
                # connection errors and timeouts; urllib3's own when a body is cut off while
                # botocore's stream reads it (outside botocore's wrapping)
                last = exc
            pause = budget.pause()
            if pause is None:
                raise budget.spent(f"S3 {what}", redact_urls(str(last))) from last
            time.sleep(pause)

    # -- primitives ------------------------------------------------------------------------------
    def get(self, key: str) -> StoredObject | None:
        from botocore.exceptions import ClientError

        full = self._full(key)

        def call() -> StoredObject | None:
            try:
                resp = self.client.get_object(Bucket=self.bucket, Key=full)
            except ClientError as exc:
                if _code(exc) != "NoSuchBucket" and (_code(exc) in _MISSING_CODES or _status(exc) == 404):
                    return None
                raise
            stream = resp["Body"]
            try:
                body = read_bounded(stream.read, self.max_object_bytes, f"S3 GET {full}", resp.get("ContentLength"))
            finally:
                stream.close()
            return StoredObject(key=key, body=body, etag=_strip(resp["ETag"]))

        return self._retry_idempotent(f"GET {full}", call)

    def put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        full = self._full(key)
        if if_match is None and not if_none_match:
            resp = self._retry_idempotent(
                f"PUT {full}", lambda: self.client.put_object(Bucket=self.bucket, Key=full, Body=body)
            )
            return _strip(resp["ETag"])
        return self._conditional_put(key, full, body, if_match, if_none_match)

    def _conditional_put(self, key: str, full: str, body: bytes, if_match: str | None, if_none_match: bool) -> str:
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError

        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": full, "Body": body}
        if if_none_match:
            kwargs["IfNoneMatch"] = "*"
        for _ in range(2):  # the second pass only after learning the server's ETag quoting
            if if_match is not None:
                kwargs["IfMatch"] = self.quoting.form(if_match)
            try:
                resp = self.client.put_object(**kwargs)
                if if_match is not None:
                    self.quoting.matched()
                return _strip(resp["ETag"])
            except ClientError as exc:
                code, status = _code(exc), _status(exc)
                if code == "NoSuchBucket":
                    raise self._no_bucket() from None
                if code in _RACE_CODES or status in (409, 412):
                    # only a 412 can mean "the other quoting": a 409 is a concurrent conditional write
                    if (
                        if_match is not None
                        and status == 412
                        and self.quoting.learn(if_match, lambda: self._head_etag(full))
                    ):
                        continue
                    raise PreconditionFailedError(key, f"HTTP {status} {code}") from None
                if if_match is not None and (code in _MISSING_CODES or status == 404):
                    raise PreconditionFailedError(key, "key missing") from None
                if status in _RETRYABLE_STATUS or code in _THROTTLE_CODES:
                    raise UnknownOutcomeError(key, f"HTTP {status} {code}") from None
                raise StoreError(f"conditional PUT of {full!r} failed: {redact_urls(str(exc))}") from exc
            except (NoCredentialsError, PartialCredentialsError) as exc:
                raise self._no_credentials(exc) from None  # raised before signing: nothing was sent
            except BotoCoreError as exc:
                raise UnknownOutcomeError(key, f"{type(exc).__name__}: {redact_urls(str(exc))}") from None
        raise PreconditionFailedError(key, "ETag differs")

    def _head_etag(self, full: str) -> str | None:
        """The object's ETag, to tell a 412 caused by ETag quoting from a lost race; None when it
        cannot be had now (missing, or the request failed: the 412 then stands as a lost race,
        which the caller re-reads, and the next 412 asks again). A reset here once let botocore's
        ``ConnectionClosedError`` out of a conditional put (the fault campaign's racing processes)."""
        import urllib3
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return _strip(self.client.head_object(Bucket=self.bucket, Key=full)["ETag"])
        except (ClientError, BotoCoreError, urllib3.exceptions.HTTPError):
            return None

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        from botocore.exceptions import ClientError

        full = self._full(key)
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": full}
        if if_match is not None:
            kwargs["IfMatch"] = self.quoting.form(if_match)

        def call() -> None:
            try:
                self.client.delete_object(**kwargs)
            except ClientError as exc:
                code, status = _code(exc), _status(exc)
                if code in _MISSING_CODES or status == 404:
                    return
                if code in _RACE_CODES or status in (409, 412):
                    raise PreconditionFailedError(key, f"HTTP {status} {code}") from None
                raise

        self._retry_idempotent(f"DELETE {full}", call)

    def delete_many(self, keys: Sequence[str]) -> None:
        """Unconditional batch delete (DeleteObjects, 1000 keys per request)."""
        fulls = [self._full(k) for k in keys]
        for i in range(0, len(fulls), 1000):
            chunk = [{"Key": k} for k in fulls[i : i + 1000]]
            request = {"Objects": chunk, "Quiet": True}
            resp: dict[str, Any] = self._retry_idempotent(
                "DeleteObjects", functools.partial(self.client.delete_objects, Bucket=self.bucket, Delete=request)
            )
            errors = [e for e in resp.get("Errors", []) if e.get("Code") != "NoSuchKey"]
            if errors:
                raise StoreError(f"DeleteObjects failed for {len(errors)} keys, e.g. {errors[0]}")

    def list_page(self, prefix: str, *, start_after: str | None = None, max_keys: int = 1000) -> ListResult:
        validate_prefix(prefix)
        kwargs: dict[str, Any] = {
            "Bucket": self.bucket,
            "Prefix": self.prefix + prefix,
            "MaxKeys": max_keys,
        }
        if start_after is not None:
            kwargs["StartAfter"] = self.prefix + start_after
        resp = self._retry_idempotent(f"LIST {self.prefix + prefix}", lambda: self.client.list_objects_v2(**kwargs))
        n = len(self.prefix)
        items = [
            ObjectInfo(key=o["Key"][n:], etag=_strip(o.get("ETag", "")), size=int(o.get("Size", 0)))
            for o in resp.get("Contents", [])
        ]
        return checked_page(
            ListResult(items=items, truncated=bool(resp.get("IsTruncated"))),
            max_keys,
            f"S3 LIST {self.prefix + prefix}",
        )

    # -- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pool.shutdown(wait=True)
        if self._owns_client:
            close = getattr(self.client, "close", None)
            if close is not None:
                close()


def _code(exc: Any) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _status(exc: Any) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
