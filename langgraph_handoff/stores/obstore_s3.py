"""``ObstoreS3Store``: the S3 transport on ``obstore`` (Rust ``object_store``), a tenth of boto3's CPU.

Why a second S3 transport: boto3 spends about 1.5-2 ms of client CPU per request on signing, event
hooks and XML parsing. On the same Ceph RGW, obstore's conditional PUT and its GET each cost about
0.15 ms of CPU. The figures and the choice of default are in the README's "Performance" section.

What every obstore store shares (the two clients, error classification, async through the
store's thread pool and why, listing) is in :mod:`~langgraph_handoff.stores.obstore_base`; this
module holds only what is S3's.

Same semantics as :class:`~langgraph_handoff.stores.s3.S3Store`, and the same server deviations:

* **Credentials come from boto3's chain** (environment, ``~/.aws`` profiles, SSO, assumed roles,
  instance roles): a boto3 session's credentials are handed to obstore as plain keys. Refreshable
  ones are re-read every few minutes and the obstore clients rebuilt with them. (Not through
  obstore's ``credential_provider`` callback: a Python callable called from obstore's runtime
  threads made 3 of 16 processes abort at exit after async use, measured here.)
* **ETag quoting** is learned exactly as ``S3Store`` does (:mod:`~langgraph_handoff.stores.s3_compat`).
* **Conditional writes are never retried by the client**, as on every obstore store: RGW answers
  many race losers with 500, which is :class:`~langgraph_handoff.errors.UnknownOutcomeError`.
* **Bucket creation** (``create_bucket=True``) goes through boto3: obstore cannot create buckets.

Install with ``pip install 'langgraph-handoff[obstore]'``.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import timedelta
from typing import Any

from langgraph_handoff.errors import InvalidConfigError, StoreError
from langgraph_handoff.stores.base import validate_prefix
from langgraph_handoff.stores.obstore_base import ObstoreBase, client_options, import_obstore, retry_config
from langgraph_handoff.stores.s3_compat import EtagQuoting, default_headers, no_such_bucket

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
        timeout: per-request timeout, e.g. ``"30s"``.
        max_workers: threads for parallel requests and for the async API.
        headers: extra HTTP headers sent with every request. Tigris endpoints get
            ``X-Tigris-Consistent: true`` without asking, so conditions are evaluated on the leader.

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
        timeout: str = "30s",
        max_workers: int = 32,
        headers: dict[str, str] | None = None,
    ) -> None:
        obs = import_obstore()
        import boto3

        self.bucket = bucket
        prefix = prefix.strip("/")
        self.prefix = validate_prefix(prefix + "/") if prefix else ""
        self.quoting = EtagQuoting(etag_quoting)
        self.session = session or boto3.Session(profile_name=profile_name)
        self.endpoint_url = endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        self.region_name = region_name or self.session.region_name or "us-east-1"
        self._credentials = BotoCredentials(self.session)
        # like botocore: over HTTPS the body is not hashed into the signature (TLS protects it, and
        # every object carries its own checksum); over plain HTTP it is
        https = not self.endpoint_url or self.endpoint_url.startswith("https://")
        config: dict[str, Any] = {"region": self.region_name, "unsigned_payload": https}
        if self.endpoint_url:
            config["endpoint"] = self.endpoint_url
            config["virtual_hosted_style_request"] = False
        options = client_options(self.endpoint_url, timeout, default_headers(self.endpoint_url, headers))

        self._start(obs, max_workers=max_workers, thread_name_prefix="obstore-s3")
        self._settings = (bucket, prefix or None, config, options, max_retries)
        self._renew_lock = threading.Lock()
        self._clients = self._build_clients()
        if create_bucket:
            self.ensure_bucket()

    def __repr__(self) -> str:
        return f"ObstoreS3Store(bucket={self.bucket!r}, prefix={self.prefix!r})"

    # -- the two obstore clients -----------------------------------------------------------------
    def _build_clients(self) -> tuple[Any, Any]:
        """One client whose idempotent requests obstore retries, one for conditional PUTs that is
        never retried behind our back; both signed with the current credentials."""
        bucket, prefix, config, options, max_retries = self._settings
        config = {**config, **self._credentials.config()}

        def make(retries: int) -> Any:
            return self._obs.store.S3Store(
                bucket, prefix=prefix, config=config, client_options=options, retry_config=retry_config(retries)
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
