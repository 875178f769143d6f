"""AWS Signature Version 4 for S3 requests, as pure functions of the request and the keys.

The loop-native S3 client (:mod:`.s3_loop`) signs its own requests: botocore's signer costs about
a millisecond of CPU per request (it builds an ``AWSRequest``, runs event hooks and copies
headers), while the signature itself is two SHA-256 digests and five HMACs. The signing key
depends only on the secret, the day, the region and the service, so it is derived once a day
and the per-request cost is one canonical request, one digest and one HMAC.

What is signed (the S3 flavour of SigV4): the method; the path, percent-encoded once per segment
(S3 does not double-encode); the query string, sorted; every header that is sent except
``Content-Length`` (``host``, ``x-amz-*``, conditional and content headers); and the payload's
SHA-256, or ``UNSIGNED-PAYLOAD`` over HTTPS, where TLS already protects the body (as botocore
does for S3).

>>> keys = Keys("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
>>> headers = sign(keys, "us-east-1", "GET", "examplebucket.s3.amazonaws.com", "/test.txt", "",
...                {"range": "bytes=0-9"}, EMPTY_SHA256, amz_date="20130524T000000Z")
>>> headers["authorization"].split(", ")[1]
'SignedHeaders=host;range;x-amz-content-sha256;x-amz-date'
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import quote

__all__ = ["EMPTY_SHA256", "UNSIGNED", "Keys", "amz_now", "canonical_query", "quote_path", "sign"]

#: the SHA-256 of an empty payload (GET, DELETE, LIST)
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
#: the payload hash sent over HTTPS: the body is not hashed into the signature
UNSIGNED = "UNSIGNED-PAYLOAD"

_ALGORITHM = "AWS4-HMAC-SHA256"
_UNRESERVED = re.compile(r"[A-Za-z0-9._~/=-]*")
#: (secret, day, region, service) -> signing key; one entry per day and region in practice
_KEY_CACHE: dict[tuple[str, str, str, str], bytes] = {}


@dataclass(frozen=True)
class Keys:
    """One set of credentials: access key id, secret, and the session token of temporary ones.

    Its ``repr`` (and ``str``) shows the access key id and hides the secret and the token, as
    botocore's and obstore's credentials do: keys end up in tracebacks, debug logs and
    ``repr(store)``, and the id alone names which credentials were used without granting anything.

    >>> Keys("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG", "FwoGZXIvYXdzEJr")
    Keys(access_key='AKIDEXAMPLE', secret_key=<hidden>, token=<hidden>)
    """

    access_key: str
    secret_key: str = field(repr=False)
    token: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        token = "None" if self.token is None else "<hidden>"
        return f"Keys(access_key={self.access_key!r}, secret_key=<hidden>, token={token})"


def amz_now(now: float | None = None) -> str:
    """The ``x-amz-date`` value for ``now`` (default: the current time), e.g. ``20130524T000000Z``.

    >>> amz_now(0)
    '19700101T000000Z'
    """
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))


def quote_path(path: str) -> str:
    """A path as S3 signs and sends it: every byte outside ``A-Za-z0-9-._~/`` percent-encoded.
    Most of this package's keys need no encoding at all, so they are only checked.

    >>> quote_path("/bucket/a b/c=d"), quote_path("/bucket/heads/t-1")
    ('/bucket/a%20b/c%3Dd', '/bucket/heads/t-1')
    """
    if _UNRESERVED.fullmatch(path):
        return path.replace("=", "%3D")  # '=' ends many of this package's keys
    return quote(path, safe="/~")


def canonical_query(params: Mapping[str, str]) -> str:
    """The query string in SigV4's canonical form (sorted, both sides percent-encoded); the same
    string is sent, so what is signed is exactly what the server sees.

    >>> canonical_query({"prefix": "p/", "list-type": "2", "start-after": "p/a b"})
    'list-type=2&prefix=p%2F&start-after=p%2Fa%20b'
    """
    return "&".join(f"{quote(k, safe='~')}={quote(v, safe='~')}" for k, v in sorted(params.items()))


def _signing_key(secret: str, day: str, region: str, service: str) -> bytes:
    cached = _KEY_CACHE.get((secret, day, region, service))
    if cached is None:
        key = hmac.digest(("AWS4" + secret).encode(), day.encode(), "sha256")
        for part in (region, service, "aws4_request"):
            key = hmac.digest(key, part.encode(), "sha256")
        if len(_KEY_CACHE) > 64:  # many regions or rotated secrets: start over rather than grow
            _KEY_CACHE.clear()
        cached = _KEY_CACHE[(secret, day, region, service)] = key
    return cached


def sign(
    keys: Keys,
    region: str,
    method: str,
    host: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    payload_hash: str,
    *,
    amz_date: str | None = None,
    service: str = "s3",
) -> dict[str, str]:
    """The headers to send: ``headers`` (names lower-cased) plus ``host``, ``x-amz-date``,
    ``x-amz-content-sha256``, ``x-amz-security-token`` for temporary keys, and ``authorization``.

    ``path`` is already percent-encoded (:func:`quote_path`) and ``query`` canonical
    (:func:`canonical_query`); ``host`` includes a non-default port.
    """
    amz_date = amz_date or amz_now()
    day = amz_date[:8]
    # canonical values: trimmed, inner runs of spaces folded to one (what the server computes)
    signed = {k.lower(): " ".join(str(v).split()) for k, v in headers.items()}
    signed["host"] = host
    signed["x-amz-date"] = amz_date
    signed["x-amz-content-sha256"] = payload_hash
    if keys.token:
        signed["x-amz-security-token"] = keys.token
    names = sorted(signed)
    header_block = "".join(f"{name}:{signed[name]}\n" for name in names)
    signed_names = ";".join(names)
    canonical = f"{method}\n{path}\n{query}\n{header_block}\n{signed_names}\n{payload_hash}"
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = f"{_ALGORITHM}\n{amz_date}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    signature = hmac.new(_signing_key(keys.secret_key, day, region, service), to_sign.encode(), "sha256").hexdigest()
    signed["authorization"] = (
        f"{_ALGORITHM} Credential={keys.access_key}/{scope}, SignedHeaders={signed_names}, Signature={signature}"
    )
    return signed
