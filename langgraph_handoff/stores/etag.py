"""ETags on S3-compatible servers: stripping them, and learning which ``If-Match`` form a server wants.

Both S3 transports (:class:`~langgraph_handoff.stores.s3.S3Store` on boto3 and
:class:`~langgraph_handoff.stores.obstore_s3.ObstoreS3Store` on obstore) share this, because the
deviation is the server's, not the client library's: servers return ETags quoted (``"abc"``),
AWS documents a quoted ``If-Match``, and Ceph RGW only matches an *unquoted* one. A server that
wants the other form answers 412 although the object's ETag is exactly what we sent; that is the
one case where switching forms and retrying once is safe.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["EtagQuoting", "strip_etag"]


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
