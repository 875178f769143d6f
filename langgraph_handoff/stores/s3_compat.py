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
* **Names that change where a request goes.** A bucket or region holding ``:``, ``#`` or ``/``
  becomes part of a host name or path (``https://{bucket}.s3.{region}.amazonaws.com``) and sends
  the signed request elsewhere; an upper-case bucket in a host name is lower-cased into another
  bucket. :func:`check_bucket` and :func:`check_region` refuse such names at construction, by
  the rules botocore checks (its ``validate_bucket_name`` and ``validate_region_name``), for
  every S3 transport; :func:`virtual_hostable` says when a bucket may go into a host name at all.
* **Header values** go out as UTF-8 on every transport (boto3 and obstore do; the loop client
  does the same, since SigV4 signs the UTF-8). Control characters would split or inject header
  lines, so :func:`check_headers` refuses them, and names that are not HTTP tokens.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping

from langgraph_handoff.errors import InvalidConfigError, StoreNotFoundError
from langgraph_handoff.stores.redact import redact_url

__all__ = [
    "EtagQuoting",
    "check_bucket",
    "check_headers",
    "check_region",
    "default_headers",
    "no_such_bucket",
    "strip_etag",
    "virtual_hostable",
]

#: S3's bucket names as botocore accepts them: legacy (us-east-1) names allow upper case and '_'
_BUCKET = re.compile(r"[A-Za-z0-9._-]{1,255}")
#: an access point or Outposts ARN, which boto3 (not obstore) resolves to its own endpoint
_ARN = re.compile(r"arn:aws[a-z-]*:s3(?:-object-lambda|-outposts)?:[a-z0-9-]*:[0-9]{12}:[A-Za-z0-9./:-]+")
#: what may go into a host name (botocore's virtual-hosted rule): 3-63 lower-case letters, digits
#: and '-', starting and ending with a letter or digit, no '.' (it would break the certificate)
_DNS_BUCKET = re.compile(r"[a-z0-9](?:[a-z0-9-]{1,61})[a-z0-9]")
#: a region is one host label: letters, digits and '-', not all digits, not starting or ending with '-'
_REGION = re.compile(r"(?![0-9]+$)(?!-)[A-Za-z0-9-]{1,63}(?<!-)")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def check_bucket(bucket: str, *, arn: bool = False) -> str:
    """``bucket`` if it is an S3 bucket name (or, with ``arn``, an access point ARN), else
    :class:`~langgraph_handoff.errors.InvalidConfigError`.

    >>> check_bucket("agents"), check_bucket("Legacy_Bucket.2014")
    ('agents', 'Legacy_Bucket.2014')
    >>> check_bucket("evil.com#agents")
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidConfigError: S3 bucket name 'evil.com#agents' is not valid: ...
    """
    if _BUCKET.fullmatch(bucket) or (arn and _ARN.fullmatch(bucket)):
        return bucket
    if not arn and _ARN.fullmatch(bucket):
        raise InvalidConfigError(
            f"{bucket!r} is an access point ARN, which only the boto3 transport resolves: use transport=boto3"
        )
    raise InvalidConfigError(
        f"S3 bucket name {bucket!r} is not valid: a bucket name is 1-255 letters, digits, '.', '-' or '_' "
        f"(botocore's rule{'; or an access point ARN' if arn else ''}). Check the bucket in the URL "
        "(s3://BUCKET/prefix): ':', '#', '/' or '@' would send the request to another host or bucket"
    )


def virtual_hostable(bucket: str) -> bool:
    """Whether ``bucket`` may be the first label of a host name (``BUCKET.s3.REGION.amazonaws.com``):
    botocore's rule. Anything else goes path-style (``s3.REGION.amazonaws.com/BUCKET``), as
    botocore's default addressing does; in a host name ``Legacy`` would be read as ``legacy``.

    >>> virtual_hostable("agents"), virtual_hostable("Agents"), virtual_hostable("a.b"), virtual_hostable("ab")
    (True, False, False, False)
    """
    return _DNS_BUCKET.fullmatch(bucket) is not None


def check_region(region: str) -> str:
    """``region`` if it is one host label (botocore's rule), else ``InvalidConfigError``.

    >>> check_region("eu-west-1")
    'eu-west-1'
    >>> check_region("us-east-1.evil.com#")
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidConfigError: S3 region 'us-east-1.evil.com#' is not valid: ...
    """
    if _REGION.fullmatch(region):
        return region
    raise InvalidConfigError(
        f"S3 region {region!r} is not valid: a region is letters, digits and '-' (e.g. eu-west-1), as botocore "
        "checks it; it becomes part of the host name requests go to. Check region / region_name"
    )


def check_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    r"""Extra request headers, checked: names are HTTP tokens, values hold no control characters
    (CR or LF would end the header line and start another). Non-ASCII values are allowed: every
    transport sends and signs them as UTF-8.

    >>> check_headers({"X-Amz-Meta-Note": "café"})
    {'X-Amz-Meta-Note': 'café'}
    >>> check_headers({"X-Note": "a\r\nX-Amz-Acl: public-read"})
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidConfigError: header 'X-Note' has a control character in its value: ...
    """
    checked: dict[str, str] = {}
    for name, value in (headers or {}).items():
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            raise InvalidConfigError(f"header name {name!r} is not an HTTP token (letters, digits, !#$%&'*+.^_`|~-)")
        if not isinstance(value, str):
            raise InvalidConfigError(f"header {name!r}: its value must be a string, not {type(value).__name__}")
        if _CONTROL.search(value):
            raise InvalidConfigError(
                f"header {name!r} has a control character in its value: {value!r}. CR or LF would start another "
                "header line; remove them (a tab is allowed)"
            )
        checked[name] = value
    return checked


#: endpoints (host suffixes) that need a header for conditions to be evaluated consistently
CONSISTENCY_HEADERS = {
    ".tigris.dev": {"X-Tigris-Consistent": "true"},
    "t3.storage.dev": {"X-Tigris-Consistent": "true"},
}


def default_headers(endpoint_url: str | None, headers: dict[str, str] | None = None) -> dict[str, str]:
    """The extra headers every request to ``endpoint_url`` carries: the consistency header its
    service needs (Tigris), then ``headers`` (which win), checked (:func:`check_headers`).

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
    merged.update(check_headers(headers))
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
    where = f" at {redact_url(endpoint_url)}" if endpoint_url else ""
    return StoreNotFoundError(
        f"the S3 bucket {bucket!r} does not exist{where}: create it (create_bucket=True, ensure_bucket(), "
        "or aws s3 mb), or fix the bucket in the URL"
    )
