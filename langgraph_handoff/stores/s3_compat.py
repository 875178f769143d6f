"""What S3-compatible servers do differently, absorbed once for both S3 transports.

Both :class:`~langgraph_handoff.stores.s3.S3Store` (boto3) and
:class:`~langgraph_handoff.stores.obstore_s3.ObstoreS3Store` (obstore) use this, because these
deviations are the servers', not the client libraries':

* **ETag quoting.** Servers return ETags quoted (``"abc"``), AWS documents a quoted ``If-Match``,
  and Ceph RGW only matches an *unquoted* one. A server that wants the other form answers 412
  although the object's ETag is exactly what we sent; that is the one case where switching forms
  and retrying once is safe (:class:`EtagQuoting`).
* **Where conditions are evaluated.** Tigris evaluates ``If-Match``/``If-None-Match`` on the
  region's leader only when the request carries ``X-Tigris-Consistent: true``; without it a
  condition may be checked against a stale replica. :func:`default_headers` adds it for Tigris
  endpoints.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from langgraph_handoff.errors import StoreNotFoundError

__all__ = ["EtagQuoting", "default_headers", "no_such_bucket", "strip_etag"]

#: endpoints (host suffixes) that need a header for conditions to be evaluated consistently
CONSISTENCY_HEADERS = {
    ".tigris.dev": {"X-Tigris-Consistent": "true"},
    "t3.storage.dev": {"X-Tigris-Consistent": "true"},
}


def default_headers(endpoint_url: str | None, headers: dict[str, str] | None = None) -> dict[str, str]:
    """The extra headers every request to ``endpoint_url`` carries: the consistency header its
    service needs (Tigris), then ``headers`` (which win).

    >>> default_headers("https://fly.storage.tigris.dev")
    {'X-Tigris-Consistent': 'true'}
    >>> default_headers("http://127.0.0.1:7480", {"X-Custom": "1"})
    {'X-Custom': '1'}
    """
    from urllib.parse import urlparse

    host = (urlparse(endpoint_url).hostname or "") if endpoint_url else ""
    merged: dict[str, str] = {}
    for suffix, extra in CONSISTENCY_HEADERS.items():
        if host == suffix.lstrip(".") or host.endswith(suffix):
            merged.update(extra)
    merged.update(headers or {})
    return merged


def strip_etag(etag: str) -> str:
    """``W/"abc"`` or ``"abc"`` -> ``abc``: the form every store in this package returns."""
    etag = etag.strip()
    if etag.startswith("W/"):
        etag = etag[2:]
    return etag.strip('"')


class EtagQuoting:
    """Which ``If-Match`` form this server matches: ``"auto"`` (learn it), ``"quoted"`` or
    ``"unquoted"`` (the first guess of ``"auto"``, right for RGW and accepted by AWS).

    >>> q = EtagQuoting("auto")
    >>> q.form("abc")
    'abc'
    >>> q.learn("abc", current=lambda: "abc")  # 412, yet the object has the ETag we sent
    True
    >>> q.form("abc"), q.learn("abc", current=lambda: "abc")  # learnt once, never flips back
    ('"abc"', False)
    """

    def __init__(self, mode: str = "auto") -> None:
        if mode not in ("auto", "quoted", "unquoted"):
            raise ValueError("etag_quoting must be 'auto', 'quoted' or 'unquoted'")
        self.quoted = mode == "quoted"
        self.detect = mode == "auto"
        self._lock = threading.Lock()

    def form(self, etag: str) -> str:
        """The ``If-Match`` value to send for ``etag``."""
        return f'"{etag}"' if self.quoted else etag

    def matched(self) -> None:
        """A conditional write with this form succeeded: nothing is left to learn."""
        self.detect = False

    def learn(self, sent: str, current: Callable[[], str | None]) -> bool:
        """After a 412 on ``If-Match: sent``: if ``current()`` (the object's ETag, stripped, or None)
        equals ``sent``, the server wants the other form. Switch once and return True so the caller
        retries; otherwise it was a real lost race (False)."""
        if not self.detect:
            return False
        if current() != sent:
            return False
        with self._lock:
            if not self.detect:
                return False
            self.quoted = not self.quoted
            self.detect = False
        return True


def no_such_bucket(bucket: str, endpoint_url: str | None) -> StoreNotFoundError:
    """The error for S3's ``NoSuchBucket``, whichever request met it. Without it a mistyped bucket
    reads as an empty thread and a conditional write as a lost race, or as a store that refuses
    conditions."""
    where = f" at {endpoint_url}" if endpoint_url else ""
    return StoreNotFoundError(
        f"the S3 bucket {bucket!r} does not exist{where}: create it (create_bucket=True, ensure_bucket(), "
        "or aws s3 mb), or fix the bucket in the URL"
    )
