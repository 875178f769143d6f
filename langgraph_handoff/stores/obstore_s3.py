"""``ObstoreS3Store``: the S3 transport on ``obstore`` (Rust ``object_store``), a tenth of boto3's CPU.

Why a second S3 transport: boto3 spends about 1.5-2 ms of client CPU per request on signing, event
hooks and XML parsing. On the same Ceph RGW, obstore's conditional PUT and its GET each cost about
0.15 ms of CPU. The figures and the choice of default are in docs/performance.md.

What every obstore store shares (the two clients, error classification, async through the
store's thread pool and why, listing) is in :mod:`~langgraph_handoff.stores.obstore_base`; this
module holds only what is S3's.

Same semantics as :class:`~langgraph_handoff.stores.s3.S3Store`, and the same server deviations:

* **Credentials come from boto3's chain** (environment, ``~/.aws`` profiles, SSO, assumed roles,
  instance roles): a boto3 session's credentials are handed to obstore as plain keys. Refreshable
  ones are re-read every few minutes and the obstore clients rebuilt with them. (Not through
  obstore's ``credential_provider`` callback: a Python callable called from obstore's runtime
  threads made 3 of 16 processes abort at exit after async use.)
* **ETag quoting** is learned exactly as ``S3Store`` does (:mod:`~langgraph_handoff.stores.s3_compat`).
* **Conditional writes are never retried by the client**, as on every obstore store: RGW answers
  many race losers with 500, which is :class:`~langgraph_handoff.errors.UnknownOutcomeError`.
* **Bucket creation** (``create_bucket=True``) goes through boto3: obstore cannot create buckets.
* **The async API runs on the event loop** (``async_io="loop"``, the default unless an HTTP proxy
  applies to the endpoint): GET, PUT, DELETE and LIST are signed and sent by
  :mod:`~langgraph_handoff.stores.s3_loop` over keep-alive connections of the running loop, with
  the same outcomes as the sync API. Through obstore and a thread pool a request cost about
  twice the process CPU, four thread hand-offs per request on a 2-core machine (docs/performance.md,
  "Performance"). ``async_io="threads"`` keeps the thread-pool path; batch deletes always use it.
* **The sync API's LISTs go through the same loop client** (with ``async_io="loop"``), on an
  event loop thread of the store's own (:class:`~langgraph_handoff.stores.iothreads.LoopThread`):
  obstore sends no ``max-keys``, so S3 answered every sync LIST with up to 1,000 keys however
  small the page (see :meth:`ObstoreS3Store.list_page`). GET and PUT stay on obstore.

Install with ``pip install 'langgraph-handoff[obstore]'``.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import timedelta
from typing import Any

from langgraph_handoff.errors import InvalidConfigError, StoreError
from langgraph_handoff.stores.base import ListResult, StoredObject, validate_prefix
from langgraph_handoff.stores.credentials import missing_credentials
from langgraph_handoff.stores.iothreads import LoopThread
from langgraph_handoff.stores.obstore_base import ObstoreBase, client_options, import_obstore, retry_config
from langgraph_handoff.stores.s3_compat import EtagQuoting, check_bucket, check_region, default_headers, no_such_bucket
from langgraph_handoff.stores.s3_loop import MAX_OBJECT_BYTES, LoopS3, proxy_applies
from langgraph_handoff.stores.sigv4 import Keys
from langgraph_handoff.stores.timeouts import Timeouts, seconds

__all__ = ["BotoCredentials", "ObstoreS3Store"]

#: how long obstore may keep one set of credentials before asking boto3 again. botocore refreshes
#: temporary credentials once fewer than 10 minutes remain (15 advisory), so what it hands out is
#: valid for at least 10 more minutes: 5 keeps a margin for clock skew and slow requests.
CREDENTIAL_TTL = timedelta(minutes=5)


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
            raise missing_credentials("s3", "S3", "none found in the boto3 chain: environment, ~/.aws, SSO, roles")
        self._credentials = credentials
        self._refreshable = hasattr(credentials, "refresh_needed")
        #: monotonic time after which :meth:`config` should be asked again (None: never)
        self.renew_at: float | None = None
        # the loop client's keys keep their own renewal time: when either consumer refreshes,
        # the other must still see that its own copy (obstore's clients, or these) is due
        self._keys: Keys | None = None
        self._keys_renew_at: float | None = None

    def config(self) -> dict[str, Any]:
        """The current keys, as obstore ``S3Config`` entries; sets :attr:`renew_at`."""
        frozen = self._credentials.get_frozen_credentials()
        if self._refreshable:
            self.renew_at = time.monotonic() + CREDENTIAL_TTL.total_seconds()
        keys = {"access_key_id": frozen.access_key, "secret_access_key": frozen.secret_key}
        if frozen.token:
            keys["session_token"] = frozen.token
        return keys

    def keys(self) -> Keys:
        """The current keys for signing a request on the event loop (:mod:`.s3_loop`), read again
        from boto3 every :data:`CREDENTIAL_TTL` for refreshable credentials, as :meth:`config`.

        >>> import boto3
        >>> BotoCredentials(boto3.Session(aws_access_key_id="AKID", aws_secret_access_key="s")).keys()
        Keys(access_key='AKID', secret_key=<hidden>, token=None)
        """
        cached = self.cached()
        if cached is None:
            frozen = self._credentials.get_frozen_credentials()
            cached = self._keys = Keys(frozen.access_key, frozen.secret_key, frozen.token or None)
            if self._refreshable:
                self._keys_renew_at = time.monotonic() + CREDENTIAL_TTL.total_seconds()
        return cached

    def cached(self) -> Keys | None:
        """The keys of the last :meth:`keys`, or None when they are due to be read again: the
        loop client calls :meth:`keys` in a worker thread then, since boto3 may refresh (STS,
        IMDS, ``credential_process``) synchronously."""
        cached = self._keys
        if cached is None or (self._keys_renew_at is not None and time.monotonic() >= self._keys_renew_at):
            return None
        return cached


class ObstoreS3Store(ObstoreBase):
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
        create_bucket: create the bucket now if it does not exist (through boto3: obstore
            cannot create buckets).
        timeout: seconds or a duration (``"15s"``) for one request's whole answer; default 15.
        connect_timeout: seconds or a duration to connect; default 5.
        deadline: seconds or a duration for one operation with its retries; default 30
            (:mod:`langgraph_handoff.stores.timeouts`). All three apply on both async paths too.
        max_workers: threads for parallel requests and for the async API.
        headers: extra HTTP headers sent with every request. Tigris endpoints get
            ``X-Tigris-Consistent: true`` without asking, so conditions are evaluated on the leader.
        async_io: how the async API reaches S3: ``"loop"`` (requests on the event loop, no
            threads), ``"threads"`` (obstore's sync calls in the store's thread pool), or
            ``"auto"``: ``"loop"`` unless ``HTTPS_PROXY``/``HTTP_PROXY`` applies to the endpoint
            (the loop client speaks to no proxy).
        idle_timeout: how long a connection may sit unused before it is closed instead of reused,
            on both paths (obstore's ``pool_idle_timeout``, the loop client's idle limit).
            Default ``"15s"``: under the idle timeouts S3 servers and load balancers commonly
            close at (20 s and more), and longer than an LLM call, so an agent whose nodes wait
            5-10 s between saver calls keeps its connection instead of paying a new TCP and TLS
            handshake at nearly every step (the loop client's limit was 4 s). Lower it for a
            server that closes idle connections sooner.
        max_object_bytes: the largest object a GET reads, sync or async (default 1 GiB,
            :data:`~langgraph_handoff.stores.base.MAX_OBJECT_BYTES`); a larger body is
            refused as soon as it is announced or passes the limit, so a server streaming without
            end costs the limit, not the memory until the timeout. An int, or its digits (a URL's
            ``?max_object_bytes=``).

    Example (needs a reachable server)::

        store = ObstoreS3Store("agents", prefix="prod", endpoint_url="http://127.0.0.1:7480")
        saver = ObjectStoreSaver(store)
    """

    _service = "S3"
    _refused_hint = "check the credentials and the bucket policy"
    _bulk_delete = "DeleteObjects"

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
        timeout: float | str | None = None,
        max_workers: int = 32,
        headers: dict[str, str] | None = None,
        async_io: str = "auto",
        idle_timeout: str = "15s",
        max_object_bytes: int | str = MAX_OBJECT_BYTES,
        connect_timeout: float | str | None = None,
        deadline: float | str | None = None,
    ) -> None:
        self.timeouts = Timeouts.of(connect_timeout, timeout, deadline)
        if async_io not in ("auto", "loop", "threads"):
            raise InvalidConfigError(f"async_io must be 'auto', 'loop' or 'threads', not {async_io!r}")
        obs = import_obstore()
        import boto3

        self.bucket = check_bucket(bucket)
        prefix = prefix.strip("/")
        self.prefix = validate_prefix(prefix + "/") if prefix else ""
        self.quoting = EtagQuoting(etag_quoting)
        self.session = session or boto3.Session(profile_name=profile_name)
        self.endpoint_url = endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        self.region_name = check_region(region_name or self.session.region_name or "us-east-1")
        self._credentials = BotoCredentials(self.session)
        # like botocore: over HTTPS the body is not hashed into the signature (TLS protects it, and
        # every object carries its own checksum); over plain HTTP it is
        https = not self.endpoint_url or self.endpoint_url.startswith("https://")
        config: dict[str, Any] = {"region": self.region_name, "unsigned_payload": https}
        if self.endpoint_url:
            config["endpoint"] = self.endpoint_url
            config["virtual_hosted_style_request"] = False
        idle_seconds = seconds(idle_timeout, "idle_timeout")
        options = client_options(self.endpoint_url, self.timeouts, default_headers(self.endpoint_url, headers))
        options["pool_idle_timeout"] = idle_timeout

        self._start(obs, max_workers=max_workers, thread_name_prefix="obstore-s3")
        self._settings = (bucket, prefix or None, config, options, max_retries)
        self._renew_lock = threading.Lock()
        self._clients = self._build_clients()
        endpoint = self.endpoint_url or f"https://s3.{self.region_name}.amazonaws.com"
        if async_io == "auto":
            async_io = "threads" if proxy_applies(endpoint) else "loop"
        self.max_object_bytes = _byte_count(max_object_bytes, "max_object_bytes")
        #: the async API's requests on the event loop (None: through the thread pool), and the
        #: sync API's LISTs on a loop of their own (see list_page)
        self._wire: LoopS3 | None = None
        self._lister = LoopThread("obstore-s3-list")
        if async_io == "loop":
            self._wire = LoopS3(
                bucket,
                self.prefix,
                endpoint_url=self.endpoint_url,
                region=self.region_name,
                keys=self._credentials,
                quoting=self.quoting,
                headers=options.get("default_headers"),
                max_retries=max_retries,
                timeout=self.timeouts.request,
                connect_timeout=self.timeouts.connect,
                deadline=self.timeouts.deadline,
                max_connections=max_workers,
                idle_seconds=idle_seconds,
                max_object_bytes=self.max_object_bytes,
            )
        if create_bucket:
            self.ensure_bucket()

    def __repr__(self) -> str:
        return f"ObstoreS3Store(bucket={self.bucket!r}, prefix={self.prefix!r})"

    def trust_scope(self) -> tuple[str, ...]:
        """One probe verdict per server, bucket and prefix, whichever S3 transport reaches them."""
        return ("s3", self.endpoint_url or f"https://s3.{self.region_name}.amazonaws.com", self.bucket, self.prefix)

    # -- the two obstore clients -----------------------------------------------------------------
    def _build_clients(self) -> tuple[Any, Any]:
        """One client whose idempotent requests obstore retries, one for conditional PUTs that is
        never retried behind our back; both signed with the current credentials."""
        bucket, prefix, config, options, max_retries = self._settings
        config = {**config, **self._credentials.config()}

        def make(retries: int) -> Any:
            return self._obs.store.S3Store(
                bucket,
                prefix=prefix,
                config=config,
                client_options=options,
                retry_config=retry_config(retries, self.timeouts),
            )

        return make(max_retries), make(0)

    def _current(self) -> tuple[Any, Any]:
        renew_at = self._credentials.renew_at
        if renew_at is not None and time.monotonic() >= renew_at:
            with self._renew_lock:
                if self._credentials.renew_at == renew_at:
                    self._clients = self._build_clients()
        return self._clients

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

    # -- the sync API's LIST, on the loop client ------------------------------------------------
    def list_page(self, prefix: str, *, start_after: str | None = None, max_keys: int = 1000) -> ListResult:
        """One page of keys, through the loop client (in :class:`LoopThread`) when there is one.

        obstore sends no ``max-keys``: S3 answers every LIST with up to 1,000 keys whatever the
        page asked for. A ``DeltaChannel`` history walk asks for about the writes of the
        checkpoints it crosses (86 keys a LIST at turns 901-1000 of the long-threads bench), and
        through obstore each such LIST cost 3.2-3.7 ms of client CPU on RGW; the loop client asks
        for ``max-keys`` and the same LISTs cost 1.2-1.4 ms (replayed alone, 2026-12-03).
        """
        if self._wire is None:
            return super().list_page(prefix, start_after=start_after, max_keys=max_keys)
        return self._lister.run(self._wire.list_page(prefix, start_after=start_after, max_keys=max_keys))

    # -- the async API on the event loop (see the module docstring) ------------------------------
    async def aget(self, key: str) -> StoredObject | None:
        if self._wire is None:
            return await super().aget(key)
        return await self._wire.get(key)

    async def aput(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        if self._wire is None:
            return await super().aput(key, body, if_match=if_match, if_none_match=if_none_match)
        return await self._wire.put(key, body, if_match=if_match, if_none_match=if_none_match)

    async def adelete(self, key: str, *, if_match: str | None = None) -> None:
        if self._wire is None:
            return await super().adelete(key, if_match=if_match)
        await self._wire.delete(self._deletable(key, if_match))

    async def alist_page(self, prefix: str, *, start_after: str | None = None, max_keys: int = 1000) -> ListResult:
        if self._wire is None:
            return await super().alist_page(prefix, start_after=start_after, max_keys=max_keys)
        return await self._wire.list_page(prefix, start_after=start_after, max_keys=max_keys)

    @property
    def _ops_in_threads(self) -> bool:
        return self._wire is None  # on the loop, arun and arun_many await the primitives above

    async def aclose(self) -> None:
        if self._wire is not None:
            await self._wire.aclose()
        await super().aclose()

    def close(self) -> None:
        if self._wire is not None:
            self._lister.close(self._wire.pool.aclose)
            self._wire.close()
        super().close()

    # -- S3's quirks -----------------------------------------------------------------------------
    def _store_missing(self, exc: BaseException) -> StoreError | None:
        """obstore reports S3's ``NoSuchBucket`` as a missing object (or, on a compare-and-swap,
        a failed precondition); only the XML body in its message tells the two apart."""
        return no_such_bucket(self.bucket, self.endpoint_url) if "<Code>NoSuchBucket</Code>" in str(exc) else None

    # -- ETag quoting, learnt as S3Store learns it ------------------------------------------------
    def _if_match_form(self, etag: str) -> str:
        return self.quoting.form(etag)

    def _another_form(self, if_match: str, path: str) -> bool:
        return self.quoting.learn(if_match, lambda: self._head_etag(path))

    def _matched(self) -> None:
        self.quoting.matched()


def _byte_count(value: int | str, name: str) -> int:
    """A positive number of bytes, given as an int or (from a URL) its decimal digits. The value
    is not repeated in the error: it may come from a URL.

    >>> _byte_count("2147483648", "max_object_bytes"), _byte_count(1024, "max_object_bytes")
    (2147483648, 1024)
    >>> _byte_count("2GB", "max_object_bytes")
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidConfigError: max_object_bytes must be a positive whole number of bytes, e.g. 2147483648 for 2 GiB
    """
    if isinstance(value, str) and value.strip().isdigit() and value.strip().isascii():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidConfigError(f"{name} must be a positive whole number of bytes, e.g. 2147483648 for 2 GiB")
    return value
