"""``GCSStore``: Google Cloud Storage through its native JSON API (``gs://bucket/prefix``).

Compare-and-swap on GCS rests on the object **generation**, a number GCS gives every write of an
object (a new one even for the same bytes). This store uses it as the ETag of the store protocol:

* create-only is ``ifGenerationMatch=0``; compare-and-swap is ``ifGenerationMatch=<generation>``,
  which also fails (412) when the object is missing. An ETag that is not a generation (GCS
  generations are positive 64-bit integers, in practice microsecond timestamps) can match no
  object; it is still sent, as generation 1, which no GCS object has, so the server and not this
  client refuses it, and ``doctor`` keeps measuring the server;
* ETags in listings are generations too, so a listing and a GET agree.

**Why the official SDK.** ``google-cloud-storage`` (the ``gcs`` extra) over ``obstore``: obstore
writes through GCS's XML API, which no emulator installable here implements, so an obstore store
could not be tested at all; the SDK's JSON API runs against fake-gcs-server, which enforces
generation preconditions atomically (raced in ``integration_tests/test_gcs_store.py``). The SDK
costs more client CPU per request than obstore (``bench/gcs_rate.py cpu``; figures in docs/performance.md),
which matters little next to GCS's own per-object write limit (below).

**Retries.** The SDK retries uploads by default; a retried conditional write whose first try
landed comes back as 412 and would turn our own win into a lost race. So:

* conditional writes are sent **once** (``retry=None``). 412 (and 409, a conflicting concurrent
  request) is :class:`~langgraph_handoff.errors.PreconditionFailedError`; a 5xx, a timeout or a
  dropped connection is :class:`~langgraph_handoff.errors.UnknownOutcomeError`, for the caller to
  settle by re-reading;
* **429** (GCS's rate limit, in practice about one write per second to one object name) is
  refused before the write is applied, so its outcome *is* known: the store backs off and sends
  the same conditional write again, up to ``throttle_timeout`` seconds, then raises
  :class:`~langgraph_handoff.errors.StoreUnavailableError` (nothing was written). It is never a
  lost race: even a 412 that answers such a repeat is reported as
  :class:`~langgraph_handoff.errors.UnknownOutcomeError`, so the caller re-reads rather than
  trust that the throttled try applied nothing;
* reads, listings, deletes and unconditional writes keep the SDK's retries (429, 5xx, connection
  errors; back-off from 50 ms), then raise :class:`~langgraph_handoff.errors.StoreUnavailableError`.

**Conditional delete** is not offered: fake-gcs-server ignores ``ifGenerationMatch`` on DELETE (it
deleted an object on a stale generation), so it could not be tested, and nothing in this package
needs it. Asking for one raises instead of deleting unconditionally, and ``doctor`` reports
``not offered``.

**Async** runs the SDK's blocking calls in the store's thread pool (``StoreBase._executor``): the
SDK has no general async client. ``run_many`` overlaps requests in the same pool.

**The per-object write limit.** Every checkpoint rewrites its thread's head object, so one thread
is throttled above about one checkpoint per second on real GCS (``bench/gcs_rate.py`` and the
docs/deploy.md measure and explain it).

Credentials: Application Default Credentials (``GOOGLE_APPLICATION_CREDENTIALS``, ``gcloud auth
application-default login``, the metadata server on GCE/GKE/Cloud Run), or ``credentials=``, or a
ready ``client=``. With ``endpoint_url=`` or ``STORAGE_EMULATOR_HOST`` (an emulator), requests are
anonymous unless ``credentials=`` says otherwise.

>>> store = GCSStore("agents", "prod", endpoint_url="http://127.0.0.1:4443")  # doctest: +SKIP
>>> _generation("1700000000000001"), _generation("0"), _generation('"abc"')
(1700000000000001, None, None)
"""

from __future__ import annotations

import http.client
import os
import random
import re
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from langgraph_handoff.errors import (
    InvalidConfigError,
    MissingCredentialsError,
    MissingExtraError,
    PreconditionFailedError,
    StoreError,
    StoreNotFoundError,
    StoreUnavailableError,
    UnknownOutcomeError,
)
from langgraph_handoff.stores.base import (
    BoundedSink,
    ListResult,
    ObjectInfo,
    StoreBase,
    StoredObject,
    checked_page,
    validate_key,
    validate_prefix,
    validate_start_after,
)
from langgraph_handoff.stores.credentials import missing_credentials
from langgraph_handoff.stores.iothreads import IoThreads
from langgraph_handoff.stores.redact import redact_url, redact_urls
from langgraph_handoff.stores.timeouts import RetryBudget, Timeouts

__all__ = ["GCSStore", "import_gcs"]

T = TypeVar("T")

_GENERATION_RE = re.compile(r"^[1-9][0-9]{0,18}$")
_MAX_GENERATION = 2**63 - 1
#: the generation sent for an ETag that is not one: no GCS object has generation 1
_NO_GENERATION = 1
#: keys deleted side by side by ``delete_many``
_DELETE_FANOUT = 16


def _generation(etag: str) -> int | None:
    """The generation an ETag names, or None when it names none (0 would mean create-only)."""
    if not _GENERATION_RE.match(etag):
        return None
    value = int(etag)
    return value if value <= _MAX_GENERATION else None


def import_gcs() -> Any:
    """The ``google.cloud.storage`` module, or :class:`~langgraph_handoff.errors.MissingExtraError`
    saying how to install it."""
    try:
        with warnings.catch_warnings():
            # google-auth and google-api-core warn at import about the installed grpcio (a gRPC
            # transport this store never uses); every gs:// command would print it otherwise
            warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\.")
            from google.cloud import storage
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingExtraError("gcs", "google-cloud-storage", "GCSStore (gs:// URLs)") from exc
    return storage


def _status(exc: BaseException) -> int | None:
    code = getattr(exc, "code", None)
    return code if isinstance(code, int) else None


def _brief(exc: BaseException) -> str:
    """The first line of an SDK error (its messages can carry whole response bodies)."""
    return redact_urls(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300])


class GCSStore(StoreBase):
    """Objects in a Google Cloud Storage bucket under ``prefix``, through ``google-cloud-storage``.

    Args:
        bucket: the bucket (it must exist, or pass ``create_bucket=True``).
        prefix: object-name prefix for everything this store writes, e.g. ``"prod/agents"``.
        client: a ready ``google.cloud.storage.Client``; built when omitted (then ``project``,
            ``credentials`` and ``endpoint_url`` apply).
        project: the project (only needed by ``create_bucket``); default: from the credentials.
        credentials: ``google.auth`` credentials; default: Application Default Credentials, or
            anonymous with an emulator endpoint.
        endpoint_url: the API endpoint, for an emulator (``http://127.0.0.1:4443``); default
            ``STORAGE_EMULATOR_HOST``, else GCS itself.
        create_bucket: create the bucket if it does not exist.
        max_workers: threads for parallel requests and for the async API (and HTTP connections).
        timeout: seconds or a duration (``"15s"``) for one request's answer; default 15.
        connect_timeout: seconds or a duration to connect; default 5.
        deadline: seconds or a duration for one operation with its retries; default 30
            (:mod:`langgraph_handoff.stores.timeouts`): the SDK retries an idempotent request
            (reads, lists, deletes, unconditional writes) until the deadline, then
            :class:`StoreUnavailableError`.
        retry_timeout: the deadline's former name (it wins when given).
        throttle_timeout: seconds a conditional write answered 429 is retried with back-off
            before :class:`StoreUnavailableError` (a 429 means it was not applied).

    Building a store sends no request (the bucket is first touched by the first operation):

    >>> store = GCSStore("agents", "prod/support", endpoint_url="http://127.0.0.1:4443")
    >>> store
    GCSStore(bucket='agents', prefix='prod/support/', endpoint='http://127.0.0.1:4443')
    >>> store.close()

    With a server (here fake-gcs-server on loopback; on GCS, leave ``endpoint_url`` out)::

        store = GCSStore("agents", prefix="prod", endpoint_url="http://127.0.0.1:4443", create_bucket=True)
        saver = ObjectStoreSaver(store)
        saver.setup()  # probes the conditions once, then records the pass
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        client: Any | None = None,
        project: str | None = None,
        credentials: Any | None = None,
        endpoint_url: str | None = None,
        create_bucket: bool = False,
        max_workers: int = 32,
        timeout: float | str | None = None,
        retry_timeout: float | None = None,
        throttle_timeout: float = 30.0,
        connect_timeout: float | str | None = None,
        deadline: float | str | None = None,
    ) -> None:
        self.timeouts = Timeouts.of(connect_timeout, timeout, retry_timeout if retry_timeout is not None else deadline)
        storage = import_gcs()
        from google.api_core import exceptions as api_exceptions
        from google.cloud.storage.retry import DEFAULT_RETRY

        if not bucket:
            raise InvalidConfigError("GCSStore needs a bucket name: gs://bucket/prefix")
        self.bucket_name = bucket
        prefix = prefix.strip("/")
        self.prefix = validate_prefix(prefix + "/") if prefix else ""
        self._api = api_exceptions
        #: requests' (connect, read) time-outs, as requests takes them
        self._timeout = (self.timeouts.connect, self.timeouts.request)
        self._throttle_timeout = throttle_timeout
        #: the SDK's predicate (429, 5xx, connection errors), faster back-off, a bounded total
        self._retry = DEFAULT_RETRY.with_delay(initial=0.05, maximum=2.0, multiplier=2.0).with_timeout(
            max(self.timeouts.deadline - self.timeouts.request, 0.001)
        )
        endpoint = endpoint_url or os.environ.get("STORAGE_EMULATOR_HOST") or None
        if endpoint and "://" not in endpoint:
            endpoint = "http://" + endpoint
        self.endpoint_url = endpoint.rstrip("/") if endpoint else None
        self._owns_client = client is None
        if client is None:
            kwargs: dict[str, Any] = {"project": project, "credentials": credentials}
            if self.endpoint_url:
                from google.auth.credentials import AnonymousCredentials

                kwargs["client_options"] = {"api_endpoint": self.endpoint_url}
                kwargs["credentials"] = credentials or AnonymousCredentials()  # type: ignore[no-untyped-call]
                kwargs["project"] = project or "langgraph-handoff"
            try:
                client = storage.Client(**kwargs)
            except Exception as exc:  # google.auth's, imported with the SDK (the gcs extra)
                if type(exc).__name__ != "DefaultCredentialsError":
                    raise
                raise missing_credentials("gs", f"GCS bucket {bucket!r}", _brief(exc)) from None
            _size_connection_pool(client, max_workers)
            _skip_bucket_metadata_fetch(client)
        self.client = client
        self._bucket = client.bucket(bucket)
        self._errors = _transport_errors()
        self._pool = IoThreads(max_workers=max_workers, thread_name_prefix="gcsstore")
        self._executor = self._pool  # the async API runs the sync calls here
        self._fanout: ThreadPoolExecutor | None = None  # delete_many's own threads, made on first use
        self._fanout_lock = threading.Lock()
        #: whether a 404 on GET may still mean a missing bucket (checked once, on the first one)
        self._bucket_unchecked = True
        self._closed = False
        if create_bucket:
            self.ensure_bucket()

    def __repr__(self) -> str:
        where = f", endpoint={redact_url(self.endpoint_url)!r}" if self.endpoint_url else ""
        return f"GCSStore(bucket={self.bucket_name!r}, prefix={self.prefix!r}{where})"

    def trust_scope(self) -> tuple[str, ...]:
        """One probe verdict per endpoint, bucket and prefix."""
        return ("gs", self.endpoint_url or "https://storage.googleapis.com", self.bucket_name, self.prefix)

    # -- setup -----------------------------------------------------------------------------------
    def ensure_bucket(self) -> None:
        """Create the bucket if it does not exist (idempotent); needs ``storage.buckets.create``."""
        try:
            self.client.create_bucket(self.bucket_name, timeout=self._timeout, retry=self._retry)
        except self._api.Conflict:
            return  # it exists (ours or someone else's: the first request will tell)
        except self._errors as exc:
            raise self._failure(exc, f"creating bucket {self.bucket_name!r}") from None

    # -- error mapping ---------------------------------------------------------------------------
    def _bucket_missing(self, exc: BaseException) -> StoreError | None:
        """A 404 that names the bucket (GCS: "The specified bucket does not exist.")."""
        if _status(exc) == 404 and "bucket does not exist" in str(exc).lower():
            return self._no_bucket()
        return None

    def _no_bucket(self) -> StoreNotFoundError:
        return StoreNotFoundError(
            f"the GCS bucket {self.bucket_name!r} does not exist"
            + (f" at {redact_url(self.endpoint_url)}" if self.endpoint_url else "")
            + ": create it (gcloud storage buckets create gs://NAME), or pass create_bucket=True"
        )

    def _failure(self, exc: BaseException, what: str) -> StoreError | MissingCredentialsError:
        """An idempotent request failed after the SDK's retries."""
        missing = self._bucket_missing(exc)
        if missing is not None:
            return missing
        if isinstance(exc, self._api.RetryError) and exc.cause is not None:
            exc = exc.cause
        status = _status(exc)
        if type(exc).__name__ == "DefaultCredentialsError":
            return missing_credentials("gs", f"GCS bucket {self.bucket_name!r}", _brief(exc))
        if status in (401, 403) or type(exc).__name__ == "RefreshError":
            return StoreError(
                f"GCS {what} was refused ({_brief(exc)}): check the credentials and their role on the bucket "
                "(roles/storage.objectUser is enough)"
            )
        if status is None or status >= 500 or status == 429:
            return StoreUnavailableError(
                f"GCS {what} kept failing: {_brief(exc)}. Check the endpoint and credentials, or retry later."
            )
        return StoreError(f"GCS {what} failed: {_brief(exc)}")

    def _idempotent(self, what: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except self._errors as exc:
            raise self._failure(exc, what) from None

    # -- primitives ------------------------------------------------------------------------------
    def get(self, key: str) -> StoredObject | None:
        name = self.prefix + validate_key(key)
        blob = self._bucket.blob(name)
        try:
            body = self._download(blob, name)
        except self._api.NotFound as exc:
            missing = self._bucket_missing(exc)
            if missing is not None:
                raise missing from None
            if self._bucket_unchecked:
                self._check_bucket()
            return None
        except self._errors as exc:
            raise self._failure(exc, f"GET {name}") from None
        return StoredObject(key=key, body=body, etag=self._etag(blob, key))

    def _download(self, blob: Any, name: str) -> bytes:
        """The object's body, downloaded again when it arrives damaged: the SDK checks each
        download's checksum and raises ``DataCorruption`` on a body cut off or altered in
        transit, which its retry does not cover; the object itself is fine."""
        from google.resumable_media.common import DataCorruption

        budget = RetryBudget(self.timeouts, attempts=5)
        while True:
            sink = BoundedSink(self.max_object_bytes, f"GCS GET {name}")
            try:
                blob.download_to_file(sink, timeout=self._timeout, retry=self._retry)
                return sink.getvalue()
            except DataCorruption as exc:
                pause = budget.pause()
                if pause is None:
                    raise budget.spent(f"GCS GET {name}", str(exc).split("\n", 1)[0]) from None
                time.sleep(pause)

    def _check_bucket(self) -> None:
        """After the first missing object: is the bucket itself there? One request per store, so
        that a mistyped bucket is not read as an empty store (fake-gcs-server, unlike GCS, answers
        a download from a missing bucket like a missing object). Without ``storage.buckets.get``
        (403) nothing is learnt and the bucket is assumed present."""
        try:
            exists = self._bucket.exists(timeout=self._timeout, retry=self._retry)
        except self._errors:
            exists = True
        self._bucket_unchecked = False
        if not exists:
            self._bucket_unchecked = True  # still unchecked once it is created
            raise self._no_bucket()

    @staticmethod
    def _etag(blob: Any, key: str) -> str:
        if not blob.generation:
            raise StoreError(f"GCS returned no generation for {key!r}: it cannot carry compare-and-swap")
        return str(blob.generation)

    def put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        name = self.prefix + validate_key(key)
        blob = self._bucket.blob(name)
        if if_match is None and not if_none_match:

            def upload() -> None:
                blob.upload_from_string(
                    body, content_type="application/octet-stream", timeout=self._timeout, retry=self._retry
                )

            try:
                upload()
            except self._api.NotFound:
                raise self._no_bucket() from None
            except self._errors as exc:
                raise self._failure(exc, f"PUT {name}") from None
            return self._etag(blob, key)
        generation = 0 if if_match is None else (_generation(if_match) or _NO_GENERATION)
        self._conditional_upload(key, blob, body, generation)
        return self._etag(blob, key)

    def _conditional_upload(self, key: str, blob: Any, body: bytes, generation: int) -> None:
        """One conditional upload, never retried by the SDK; a 429 (refused, so not applied) is
        sent again after a back-off until ``throttle_timeout``.

        A 412 or 409 that answers such a repeat is reported as an unknown outcome, not a lost race:
        it is one only if the 429 really applied nothing, and the caller's re-read costs one GET,
        while a false "lost" would hide our own write."""
        deadline = time.monotonic() + self._throttle_timeout
        delay = 0.5
        throttled = 0
        while True:
            try:
                blob.upload_from_string(
                    body,
                    content_type="application/octet-stream",
                    if_generation_match=generation,
                    timeout=self._timeout,
                    retry=None,
                )
                return
            except self._api.TooManyRequests as exc:
                wait = _retry_after(exc) or delay * (0.5 + random.random() / 2)
                if time.monotonic() + wait > deadline:
                    raise StoreUnavailableError(
                        f"GCS kept throttling writes to {blob.name!r} (429) for {self._throttle_timeout:g} s; "
                        "nothing was written. GCS allows about one write per second to one object name: "
                        "see docs/deploy.md"
                    ) from None
                time.sleep(wait)
                delay = min(delay * 2, 8.0)
                throttled += 1
            except (self._api.PreconditionFailed, self._api.Conflict) as exc:
                if throttled:
                    raise UnknownOutcomeError(key, f"HTTP {exc.code} after {throttled} throttled tries (429)") from None
                raise PreconditionFailedError(key, f"HTTP {exc.code}") from None
            except self._api.NotFound:  # a missing object gives 412, so 404 is the bucket
                raise self._no_bucket() from None
            except self._errors as exc:
                status = _status(exc)
                # the write may or may not have landed; 501 Not Implemented is an answer
                if status is None or (status >= 500 and status != 501):
                    raise UnknownOutcomeError(key, _brief(exc)) from None
                raise self._failure(exc, f"conditional PUT of {blob.name!r}") from None

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        if if_match is not None:
            raise StoreError(
                "conditional delete is not offered by GCSStore (fake-gcs-server ignores it, so it is "
                "untested, and nothing in this package needs it): delete unconditionally"
            )
        name = self.prefix + validate_key(key)
        try:
            self._bucket.blob(name).delete(timeout=self._timeout, retry=self._retry)
        except self._api.NotFound as exc:  # gone already (or a retried delete that had landed)
            missing = self._bucket_missing(exc)
            if missing is not None:
                raise missing from None
        except self._errors as exc:
            raise self._failure(exc, f"DELETE {name}") from None

    def delete_many(self, keys: Sequence[str]) -> None:
        """Unconditional delete of ``keys``, up to 16 side by side (in threads of their own, so a
        call from the store's pool never waits on that pool). The JSON batch API is not used:
        fake-gcs-server does not implement it, so it could not be tested here."""
        for key in keys:
            validate_key(key)
        if len(keys) <= 1:
            for key in keys:
                self.delete(key)
            return
        with self._fanout_lock:
            if self._fanout is None:
                self._fanout = ThreadPoolExecutor(max_workers=_DELETE_FANOUT, thread_name_prefix="gcsstore-delete")
            fanout = self._fanout
        errors = [f.exception() for f in [fanout.submit(self.delete, key) for key in keys]]
        for error in errors:
            if error is not None:
                raise error

    def list_page(self, prefix: str, *, start_after: str | None = None, max_keys: int = 1000) -> ListResult:
        validate_prefix(prefix)
        full = self.prefix + prefix
        kwargs: dict[str, Any] = {"prefix": full, "max_results": max_keys, "page_size": min(max_keys, 1000)}
        if start_after is not None:
            # GCS's startOffset is inclusive. Keys use only characters from "%" (0x25) up
            # (validate_key), so start_after + "!" (0x21) sorts after start_after and before
            # every longer key that extends it: exactly "strictly after", one request per page.
            # (A stray key someone else wrote may hold " " or "!" after start_after: such a key
            # could be skipped; ours never are.)
            kwargs["start_offset"] = self.prefix + validate_start_after(start_after) + "!"

        def call() -> tuple[list[Any], bool]:
            iterator = self.client.list_blobs(
                self._bucket,
                fields="items(name,generation,size),nextPageToken",
                timeout=self._timeout,
                retry=self._retry,
                **kwargs,
            )
            blobs = list(iterator)
            return blobs, iterator.next_page_token is not None

        try:
            blobs, more = call()
        except self._api.NotFound:
            raise self._no_bucket() from None
        except self._errors as exc:
            raise self._failure(exc, f"LIST {full}") from None
        n = len(self.prefix)
        items = [ObjectInfo(key=b.name[n:], etag=str(b.generation or ""), size=int(b.size or 0)) for b in blobs]
        return checked_page(ListResult(items=items, truncated=more), max_keys, f"GCS LIST {full}")

    # -- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pool.shutdown(wait=True)
        if self._fanout is not None:
            self._fanout.shutdown(wait=True)
        if self._owns_client:
            close = getattr(self.client, "close", None)
            if close is not None:
                close()


def _retry_after(exc: BaseException) -> float | None:
    """Seconds from a ``Retry-After`` header (GCS rarely sends one), capped at 8."""
    response = getattr(exc, "response", None)
    value = getattr(response, "headers", {}).get("Retry-After") if response is not None else None
    try:
        return min(max(float(value), 0.0), 8.0) if value is not None else None
    except ValueError:
        return None


def _size_connection_pool(client: Any, max_workers: int) -> None:
    """Give the client's HTTP session as many pooled connections as the store has threads
    (requests keeps 10 per host, so 32 threads would open and drop connections)."""
    import requests.adapters

    session = client._http  # the SDK's AuthorizedSession (a requests.Session), built on first use
    if hasattr(session, "mount"):
        for scheme in ("https://", "http://"):
            session.mount(scheme, requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=max_workers))


def _skip_bucket_metadata_fetch(client: Any) -> None:
    """google-cloud-storage 3.x fetches each bucket's metadata once per client, from a background
    thread on the first request (a GET of the bucket, needing ``storage.buckets.get``), only to
    label OpenTelemetry spans. Without tracing that request is pure overhead, so a client this
    store builds skips it unless the SDK's tracing is on (``ENABLE_GCS_PYTHON_CLIENT_OTEL_TRACES``)."""
    try:
        from google.cloud.storage import _opentelemetry_tracing as tracing

        tracing_on = bool(tracing.enable_otel_traces and tracing.HAS_OPENTELEMETRY)
    except (ImportError, AttributeError):  # pragma: no cover - other SDK versions
        tracing_on = False
    if not tracing_on and getattr(client, "_bucket_metadata_cache", None) is not None:
        client._bucket_metadata_cache = None


def _transport_errors() -> tuple[type[BaseException], ...]:
    """What the SDK and its HTTP stack raise: API errors, retry exhaustion, auth and transport."""
    import requests
    import urllib3
    from google.api_core import exceptions as api_exceptions
    from google.auth import exceptions as auth_exceptions

    errors: list[type[BaseException]] = [
        api_exceptions.GoogleAPIError,
        auth_exceptions.GoogleAuthError,
        requests.RequestException,
        urllib3.exceptions.HTTPError,
        http.client.HTTPException,
        OSError,
    ]
    try:
        from google.cloud.storage.exceptions import InvalidResponse

        errors.append(InvalidResponse)
    except ImportError:  # pragma: no cover - older SDKs
        pass
    return tuple(errors)
