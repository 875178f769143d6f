"""S3's GET, PUT (plain, create-only, compare-and-swap), DELETE and LIST as coroutines that run
on the event loop: SigV4 (:mod:`.sigv4`) over :class:`~.loop_http.HttpPool`, no threads.

:class:`~langgraph_handoff.stores.obstore_s3.ObstoreS3Store` uses this for its async API when no
HTTP proxy applies to the endpoint (``async_io="auto"``), and obstore for everything else: the
sync API, batch deletes, bucket creation. Measured on Ceph RGW (docs/performance.md): a
request costs about half the process CPU of obstore through a thread pool, because nothing
crosses a thread.

The outcomes are exactly :class:`~langgraph_handoff.stores.s3.S3Store`'s and ``ObstoreS3Store``'s:

* a missing key is ``None`` on GET and no error on DELETE; a missing bucket is
  :class:`~langgraph_handoff.errors.StoreNotFoundError` on every request;
* 412 and 409 on a conditional PUT are a lost race, and so is 404 on ``If-Match`` (moto 5);
  a 412 on ``If-Match`` while the object has the very ETag we sent means the server wants the
  other quoting (:class:`~.s3_compat.EtagQuoting`), learnt once, then the PUT is sent again;
* idempotent requests are retried on 5xx, 429, throttling codes and dropped connections, with
  backoff from 50 ms to 2 s, then :class:`~langgraph_handoff.errors.StoreUnavailableError`;
* a conditional PUT is never retried once it may have reached the server: a 5xx, a timeout or
  a connection lost after sending is :class:`~langgraph_handoff.errors.UnknownOutcomeError`,
  which the saver settles by re-reading; a connection that failed before anything was sent is
  tried again;
* 3xx (a wrong region or endpoint), 401 and 403 are :class:`~langgraph_handoff.errors.StoreError`
  saying what to check;
* a response the HTTP client refuses to read (:class:`~.loop_http.MalformedResponse`: bad
  framing, a head over 64 KiB) is never retried, since the same server would answer the same:
  :class:`~langgraph_handoff.errors.StoreError` for an idempotent request, and
  :class:`~langgraph_handoff.errors.UnknownOutcomeError` for a conditional PUT (it was sent);
* every response's body is bounded (:class:`~.loop_http.ResponseTooLarge`): an object's by
  ``max_object_bytes`` (:data:`MAX_OBJECT_BYTES` by default), a listing's by what ``max_keys``
  entries can take (:func:`list_body_limit`), anything else (a PUT's, a DELETE's, an error
  document) by :data:`~.loop_http.MAX_BODY` or less. A larger one, and a listing page with more
  keys than ``max_keys``, is :class:`~langgraph_handoff.errors.ResponseTooLargeError`, not
  retried (a conditional PUT's is an unknown outcome, as above).
"""

from __future__ import annotations

import asyncio
import hashlib
import html
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from typing import Any, Protocol
from urllib.parse import urlsplit

from langgraph_handoff.errors import (
    PreconditionFailedError,
    ResponseTooLargeError,
    StoreError,
    UnknownOutcomeError,
)
from langgraph_handoff.stores.base import (
    MAX_OBJECT_BYTES,
    ListResult,
    ObjectInfo,
    StoredObject,
    checked_page,
    validate_key,
    validate_prefix,
    validate_start_after,
)
from langgraph_handoff.stores.loop_http import (
    MAX_BODY,
    ConnectionFailed,
    HttpPool,
    MalformedResponse,
    Origin,
    Response,
    ResponseTooLarge,
)
from langgraph_handoff.stores.s3_compat import (
    EtagQuoting,
    check_bucket,
    check_headers,
    check_region,
    no_such_bucket,
    strip_etag,
    virtual_hostable,
)
from langgraph_handoff.stores.sigv4 import EMPTY_SHA256, UNSIGNED, Keys, canonical_query, quote_path, sign
from langgraph_handoff.stores.timeouts import DEFAULT, RetryBudget, Timeouts

__all__ = ["MAX_OBJECT_BYTES", "KeySource", "LoopS3", "StaticKeys", "list_body_limit", "proxy_applies"]

#: what one ``<Contents>`` entry of a listing can take at most: a key of S3's 1,024 bytes, each
#: escaped as a character reference, and the entry's other elements (time, ETag, size,
#: checksums, owner, storage class)
_LIST_ENTRY_BYTES = 8 * 1024


def list_body_limit(max_keys: int) -> int:
    """The most bytes a ListObjectsV2 answer of ``max_keys`` entries can take (with room for its
    root element and flags): 8 MiB for a page of 1,000. A real page of 1,000 keys of this
    package is about 300 KB.

    >>> list_body_limit(1000)
    8257536
    """
    return MAX_BODY // 16 + max_keys * _LIST_ENTRY_BYTES


_RETRYABLE_STATUS = {500, 502, 503, 504, 429}
_THROTTLE_CODES = {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequests"}
_CODE_RE = re.compile(rb"<Code>([^<]{1,64})</Code>")
_S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


def error_code(body: bytes) -> str:
    """The ``<Code>`` of an S3 error document, or ``""``.

    >>> error_code(b"<?xml version='1.0'?><Error><Code>NoSuchBucket</Code></Error>")
    'NoSuchBucket'
    """
    match = _CODE_RE.search(body[:4096])
    return match.group(1).decode("ascii", "replace") if match else ""


def proxy_applies(url: str) -> bool:
    """True when the environment sends requests to ``url`` through an HTTP proxy
    (``HTTPS_PROXY``/``HTTP_PROXY``/``ALL_PROXY``, not bypassed by ``NO_PROXY``): the loop client does not
    speak to proxies, so the store keeps its thread-pool path there."""
    from urllib.request import getproxies, proxy_bypass

    parts = urlsplit(url)
    proxies = getproxies()
    if not (proxies.get(parts.scheme) or proxies.get("all")):  # ALL_PROXY too, as obstore reads it
        return False
    return not proxy_bypass(parts.hostname or "")


#: entries a :class:`ListedMemo` holds before it starts again empty: a thread of 2,000 turns
#: with a ``DeltaChannel`` lists about 2,000 writes keys a turn; at about 300 bytes an entry,
#: 16,384 of them hold about 5 MiB
LISTED_MAX = 1 << 14

#: a listing entry as the regular expression found it (key, ETag and size, raw) -> what it reads as
ListedMemo = dict[tuple[bytes, bytes, bytes], ObjectInfo]


def parse_list(body: bytes, strip: int, memo: ListedMemo | None = None) -> ListResult:
    """A ListObjectsV2 response as a page of keys, ``strip`` leading characters (the store's
    prefix) removed from each. Anything but a ``ListBucketResult`` document is an error, never
    an empty page: an empty page would read as a thread without checkpoints.

    ``memo``: the entries of earlier pages of the same store (same ``strip``), reused when an
    entry's raw key, ETag and size are the very bytes listed before. A long ``DeltaChannel``
    thread lists the same thousand writes keys on every turn; building a thousand new entries a
    turn was a thousand objects more for Python's collector, and the decoding (turns 901-1000
    of the long-threads bench on RGW: 12 % fewer young collections, 2026-12-04).

    >>> xml = (b'<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><IsTruncated>true'
    ...        b'</IsTruncated><Contents><Key>p/a</Key><ETag>&quot;e1&quot;</ETag><Size>3</Size></Contents>'
    ...        b'</ListBucketResult>')
    >>> parse_list(xml, 2)
    ListResult(items=[ObjectInfo(key='a', etag='e1', size=3)], truncated=True)
    >>> parse_list(b"<Error><Code>InternalError</Code></Error>", 2)
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.StoreError: not a ListObjectsV2 listing (root element 'Error')
    """
    page = _parse_plain_list(body, strip, memo)
    return page if page is not None else _parse_list_tree(body, strip)


_LIST_ROOT = re.compile(rb"\A\s*(?:<\?xml[^>]*\?>\s*)?<ListBucketResult(?:\s[^>]*)?>")
_LIST_KEY = re.compile(rb"<Key>([^<]*)</Key>")
_LIST_ETAG = re.compile(rb"<ETag>([^<]*)</ETag>")
_LIST_SIZE = re.compile(rb"<Size>([0-9]{1,20})</Size>")
#: one ``<Contents>`` entry in the form S3 servers write it (AWS, Ceph RGW, MinIO): the key, the
#: time, the quoted ETag, maybe simple elements (checksums), the size, simple elements up to its
#: own ``</Contents>``; an entry in any other form (a nested element) is read block by block
_LIST_ENTRY = re.compile(
    rb"<Contents><Key>([^<]*)</Key>(?:<LastModified>[^<]*</LastModified>)?"
    rb"<ETag>&quot;([^<&]*)&quot;</ETag>(?:<(?!ETag>|Size>)[A-Za-z]+>[^<]*</[A-Za-z]+>)*"
    rb"<Size>([0-9]{1,20})</Size>(?:<[A-Za-z]+>[^<]*</[A-Za-z]+>)*</Contents>"
)
_TRUNCATED = re.compile(rb"<IsTruncated>\s*([A-Za-z]*)\s*</IsTruncated>")


def _xml_text(raw: bytes) -> str:
    text = raw.decode("utf-8")
    return html.unescape(text) if "&" in text else text  # XML's five entities and &#...; only


def _listed_etag(raw: bytes) -> str:
    if raw.startswith(b"&quot;") and raw.endswith(b"&quot;") and raw.count(b"&") == 2:
        return raw[6:-6].decode("utf-8")  # the usual form, in short
    return strip_etag(_xml_text(raw))


def _parse_plain_list(body: bytes, strip: int, memo: ListedMemo | None = None) -> ListResult | None:
    """:func:`parse_list` for a listing in the plain form S3 servers send (no CDATA, comments or
    prefixed element names), with byte searches: ElementTree took 9.7 ms of CPU for a page of
    1,000 keys, and a long ``DeltaChannel`` thread lists about 2,000 a turn. None for anything
    else, which the tree parser then reads (or refuses). In well-formed XML a ``<`` in text is
    escaped, so the tags found here are elements, never a key's characters."""
    if not _LIST_ROOT.match(body) or not body.rstrip().endswith(b"</ListBucketResult>"):
        return None
    if b"<![CDATA[" in body or b"<!--" in body or b"<Contents " in body:
        return None
    try:
        # The usual form in one pass of one regular expression (C, not a Python loop per key);
        # kept only if it took every <Contents> block, else the block-by-block reading below.
        # It cannot skip an ETag or Size to take a later one (the first is the one that counts)
        # nor end an entry anywhere but at its own </Contents>.
        found = _LIST_ENTRY.findall(body)
        if len(found) == body.count(b"<Contents>"):
            if memo is None:
                memo = {}
            items = []
            room = False  # whether this page's new entries were given room
            for entry in found:
                info = memo.get(entry)
                if info is None:
                    if not room:
                        room = True
                        if len(memo) + len(found) > LISTED_MAX:
                            memo.clear()  # start again, keeping this page whole (one dict operation)
                    k, e, n = entry
                    info = memo[entry] = ObjectInfo(
                        key=(k.decode("utf-8") if b"&" not in k else _xml_text(k))[strip:],
                        etag=e.decode("utf-8"),
                        size=int(n),
                    )
                items.append(info)
            flag = _TRUNCATED.search(body)
            if flag is None:
                return None
            return ListResult(items=items, truncated=flag.group(1).lower() == b"true")
    except (UnicodeDecodeError, ValueError):
        return None
    blocks = body.split(b"<Contents>")
    try:
        items = []
        for part in blocks[1:]:
            end = part.find(b"</Contents>")
            if end < 0:
                return None
            block = part[:end]
            key, etag, size = _LIST_KEY.search(block), _LIST_ETAG.search(block), _LIST_SIZE.search(block)
            if key is None or etag is None or size is None:
                return None
            items.append(
                ObjectInfo(
                    key=_xml_text(key.group(1))[strip:], etag=_listed_etag(etag.group(1)), size=int(size.group(1))
                )
            )
        flag = _TRUNCATED.search(body)
        if flag is None:
            return None
        truncated = flag.group(1).lower() == b"true"
    except (UnicodeDecodeError, ValueError):
        return None
    return ListResult(items=items, truncated=truncated)


def _parse_list_tree(body: bytes, strip: int) -> ListResult:
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise StoreError(f"unreadable ListObjectsV2 listing: {exc}") from None
    ns, _, name = root.tag.rpartition("}")
    if name != "ListBucketResult":
        raise StoreError(f"not a ListObjectsV2 listing (root element {name!r})")
    ns = ns + "}" if ns else ""
    items = [
        ObjectInfo(
            key=(entry.findtext(f"{ns}Key") or "")[strip:],
            etag=strip_etag(entry.findtext(f"{ns}ETag") or ""),
            size=int(entry.findtext(f"{ns}Size") or 0),
        )
        for entry in root.iterfind(f"{ns}Contents")
    ]
    truncated = (root.findtext(f"{ns}IsTruncated") or "").strip().lower() == "true"
    return ListResult(items=items, truncated=truncated)


class KeySource(Protocol):
    """Where :class:`LoopS3` gets its credentials: ``cached()`` without blocking (None when
    they must be fetched again), ``keys()`` possibly blocking (STS, IMDS, SSO,
    ``credential_process``), so it is called in a worker thread, never on the loop."""

    def cached(self) -> Keys | None: ...

    def keys(self) -> Keys: ...


class StaticKeys:
    """Fixed credentials as a :class:`KeySource`.

    >>> StaticKeys(Keys("AKID", "secret")).cached()
    Keys(access_key='AKID', secret_key=<hidden>, token=None)
    """

    def __init__(self, keys: Keys) -> None:
        self._keys = keys

    def cached(self) -> Keys:
        return self._keys

    def keys(self) -> Keys:
        return self._keys


class LoopS3:
    """The async S3 primitives of one bucket and prefix, on the running event loop.

    Args:
        bucket: the bucket.
        prefix: the store's key prefix (``""`` or ending in ``/``), put before every key.
        endpoint_url: an S3-compatible server (path-style addressing), or None for AWS
            (virtual-hosted addressing, ``https://BUCKET.s3.REGION.amazonaws.com``, for the
            buckets a host name can carry; path-style for the others, as botocore does).
        region: the signing region.
        keys: the credentials to sign with (:class:`KeySource`; renewed by their owner, fetched
            in a worker thread when due, so no refresh ever blocks the loop).
        quoting: the store's ETag quoting, shared with its sync path.
        headers: extra headers on every request (signed too).
        max_retries: retries of an idempotent request.
        timeout: seconds for one request's whole response.
        connect_timeout: seconds to open a connection.
        deadline: seconds for one operation with its retries (a retry starts only if it can end
            in time; :class:`~langgraph_handoff.stores.timeouts.RetryBudget`).
        max_object_bytes: the largest object a GET reads (:data:`MAX_OBJECT_BYTES` by default);
            a larger one is :class:`~langgraph_handoff.errors.ResponseTooLargeError`.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str,
        *,
        endpoint_url: str | None,
        region: str,
        keys: KeySource,
        quoting: EtagQuoting,
        headers: Mapping[str, str] | None = None,
        max_retries: int = 4,
        timeout: float = 30.0,
        max_connections: int = 64,
        idle_seconds: float = 15.0,
        max_object_bytes: int = MAX_OBJECT_BYTES,
        connect_timeout: float = DEFAULT.connect,
        deadline: float | None = None,
    ) -> None:
        # a ':' '#' or '/' in either would send the signed request to another host or bucket
        self.bucket = check_bucket(bucket)
        self.prefix = prefix
        self.region = check_region(region)
        self.endpoint_url = endpoint_url
        self._keys = keys
        self.quoting = quoting
        self.max_retries = max_retries
        self.timeout = timeout
        self.timeouts = Timeouts(
            connect_timeout, timeout, deadline if deadline is not None else max(DEFAULT.deadline, timeout)
        )
        self.max_object_bytes = max_object_bytes
        if endpoint_url:
            base = endpoint_url.rstrip("/")
            self._root = quote_path(urlsplit(base).path + "/" + bucket)  # path-style: /[base/]bucket
        elif not virtual_hostable(bucket):  # dotted (the wildcard certificate), upper case, '_': path-style
            base = f"https://s3.{region}.amazonaws.com"
            self._root = quote_path("/" + bucket)
        else:
            base = f"https://{bucket}.s3.{region}.amazonaws.com"
            self._root = ""
        self.origin = Origin.from_url(base, idle_seconds=idle_seconds)
        self._https = self.origin.scheme == "https"
        self._extra = {k.lower(): v for k, v in check_headers(headers).items()}
        self.pool = HttpPool(self.origin, max_connections=max_connections, connect_timeout=connect_timeout)
        self._listed: ListedMemo = {}  # see parse_list

    def __repr__(self) -> str:
        return f"LoopS3(bucket={self.bucket!r}, prefix={self.prefix!r}, origin={self.origin.host_header!r})"

    # -- one signed request ----------------------------------------------------------------------
    async def _send(
        self,
        method: str,
        key: str | None,
        *,
        query: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        body: bytes = b"",
        max_body: int = MAX_BODY,
    ) -> Response:
        path = self._root + "/" + quote_path(self.prefix + key) if key is not None else (self._root or "/")
        canonical = canonical_query(query) if query else ""
        if self._https:
            payload = UNSIGNED
        else:
            payload = hashlib.sha256(body).hexdigest() if body else EMPTY_SHA256
        wanted = {**self._extra, **headers} if headers else self._extra
        keys = self._keys.cached()
        if keys is None:
            keys = await asyncio.to_thread(self._keys.keys)
        signed = sign(keys, self.region, method, self.origin.host_header, path, canonical, wanted, payload)
        del signed["host"]  # the pool writes it
        target = f"{path}?{canonical}" if canonical else path
        return await self.pool.request(method, target, signed, body, timeout=self.timeout, max_body=max_body)

    async def _idempotent(self, what: str, call: Callable[[], Any], ok: Callable[[Response], bool]) -> Response:
        """``call()`` until a response that ``ok`` accepts or that retrying cannot change."""
        budget = RetryBudget(self.timeouts, attempts=self.max_retries + 1)
        last = ""
        while True:
            try:
                response: Response = await call()
            except MalformedResponse as exc:
                raise StoreError(
                    f"S3 {what}: the server's response cannot be read ({exc}); check that the endpoint is an "
                    "S3 server (a proxy, or a TLS port spoken to in plain HTTP, answers like this). Not retried."
                ) from None
            except ResponseTooLarge as exc:
                raise self._too_large(what, exc) from None
            except ConnectionFailed as exc:
                last = str(exc)
            else:
                if ok(response):
                    return response
                code = error_code(response.body)
                if code == "NoSuchBucket":
                    raise no_such_bucket(self.bucket, self.endpoint_url)
                if response.status not in _RETRYABLE_STATUS and code not in _THROTTLE_CODES:
                    raise self._refused(what, response, code)
                last = f"HTTP {response.status} {code}".strip()
            pause = budget.pause()
            if pause is None:
                raise budget.spent(f"S3 {what}", last)
            await asyncio.sleep(pause)

    def _too_large(self, what: str, exc: ResponseTooLarge) -> ResponseTooLargeError:
        if what.startswith("GET ") and 200 <= exc.status < 300:
            return ResponseTooLargeError(
                f"S3 {what}: the object is larger than max_object_bytes={self.max_object_bytes} ({exc}). "
                "Not read. If objects this large are expected, raise max_object_bytes (an ObstoreS3Store "
                "argument, or ?max_object_bytes= in the store URL)"
            )
        return ResponseTooLargeError(
            f"S3 {what}: the server answered with more than such a request reads ({exc}). Not retried: check "
            "that the endpoint is an S3 server, not a proxy or a service answering something else"
        )

    @staticmethod
    def _refused(what: str, response: Response, code: str) -> StoreError:
        status = response.status
        if status in (401, 403):
            return StoreError(
                f"S3 {what} was refused (HTTP {status} {code}): check the credentials and the bucket policy"
            )
        if 300 <= status < 400:
            where = response.header("location") or response.header("x-amz-bucket-region")
            return StoreError(
                f"S3 {what} was redirected (HTTP {status} {code} {where}): set the bucket's region "
                "(region_name) or the right endpoint_url"
            )
        return StoreError(f"S3 {what} failed: HTTP {status} {code}")

    # -- the primitives --------------------------------------------------------------------------
    async def get(self, key: str) -> StoredObject | None:
        validate_key(key)
        response = await self._idempotent(
            f"GET {self.prefix}{key}",
            lambda: self._send("GET", key, max_body=self.max_object_bytes),
            lambda r: r.status == 200 or (r.status == 404 and error_code(r.body) != "NoSuchBucket"),
        )
        if response.status == 404:
            return None
        return StoredObject(key=key, body=response.body, etag=strip_etag(response.header("etag")))

    async def head_etag(self, key: str) -> str | None:
        """The object's ETag, or None when a HEAD does not say (missing, or it failed)."""
        try:
            response = await self._send("HEAD", key)
        except ConnectionFailed:
            return None
        return strip_etag(response.header("etag")) if response.status == 200 else None

    async def put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        validate_key(key)
        if if_match is None and not if_none_match:
            response = await self._idempotent(
                f"PUT {self.prefix}{key}", lambda: self._send("PUT", key, body=body), lambda r: r.status == 200
            )
            return self._etag(response, key)
        for _ in range(2):  # the second pass only after learning the server's ETag quoting
            condition = {"if-none-match": "*"} if if_none_match else {"if-match": self.quoting.form(if_match or "")}
            response = await self._conditional(key, body, condition)
            if response.status == 200:
                if if_match is not None:
                    self.quoting.matched()
                return self._etag(response, key)
            code = error_code(response.body)
            status = response.status
            if code == "NoSuchBucket":
                raise no_such_bucket(self.bucket, self.endpoint_url)
            if status in (409, 412):
                # only a 412 can mean "the other quoting": a 409 is a concurrent conditional write
                if status == 412 and if_match is not None and self.quoting.detect:
                    current = await self.head_etag(key)
                    if self.quoting.learn(if_match, lambda current=current: current):  # type: ignore[misc]
                        continue
                raise PreconditionFailedError(key, f"HTTP {status} {code}".strip())
            if if_match is not None and status == 404:
                raise PreconditionFailedError(key, "key missing")
            if status in _RETRYABLE_STATUS or code in _THROTTLE_CODES:
                raise UnknownOutcomeError(key, f"HTTP {status} {code}".strip())
            raise self._refused(f"conditional PUT of {self.prefix}{key}", response, code)
        raise PreconditionFailedError(key, "ETag differs")

    async def _conditional(self, key: str, body: bytes, condition: dict[str, str]) -> Response:
        """One conditional PUT, sent again only when it certainly did not reach the server."""
        budget = RetryBudget(self.timeouts, attempts=self.max_retries + 1)
        while True:
            try:
                return await self._send("PUT", key, headers=condition, body=body)
            except ConnectionFailed as exc:
                if exc.sent:
                    raise UnknownOutcomeError(key, str(exc)) from None
                pause = budget.pause()
                if pause is None:
                    raise budget.spent(f"S3 conditional PUT of {self.prefix}{key} (could not connect)", exc) from None
                await asyncio.sleep(pause)

    def _etag(self, response: Response, key: str) -> str:
        etag = response.header("etag")
        if not etag:
            raise StoreError(f"the server stored {key!r} but returned no ETag: it cannot carry compare-and-swap")
        return strip_etag(etag)

    async def delete(self, key: str) -> None:
        validate_key(key)
        await self._idempotent(
            f"DELETE {self.prefix}{key}",
            lambda: self._send("DELETE", key),
            lambda r: r.status in (200, 204) or (r.status == 404 and error_code(r.body) != "NoSuchBucket"),
        )

    async def list_page(self, prefix: str, *, start_after: str | None = None, max_keys: int = 1000) -> ListResult:
        validate_prefix(prefix)
        query = {"list-type": "2", "prefix": self.prefix + prefix, "max-keys": str(max_keys)}
        if start_after is not None:
            query["start-after"] = self.prefix + validate_start_after(start_after)
        limit = list_body_limit(max_keys)
        budget = RetryBudget(self.timeouts, attempts=self.max_retries + 1)
        while True:
            response = await self._idempotent(
                f"LIST {self.prefix}{prefix}",
                lambda: self._send("GET", None, query=query, max_body=limit),
                lambda r: r.status == 200,
            )
            # a listing cut short under a Content-Length that says so (a proxy, a server bug)
            # lacks its closing tag: read again rather than call the server's answer unreadable
            if response.body.rstrip().endswith(b"</ListBucketResult>"):
                break
            pause = budget.pause()
            if pause is None:
                raise budget.spent(f"S3 LIST {self.prefix}{prefix}", "the listing arrived cut short")
            await asyncio.sleep(pause)
        try:
            page = parse_list(response.body, len(self.prefix), self._listed)
        except (ET.ParseError, ValueError) as exc:
            raise StoreError(f"S3 LIST {self.prefix}{prefix} returned an unreadable listing: {exc}") from None
        return checked_page(page, max_keys, f"S3 LIST {self.prefix}{prefix}")

    # -- lifecycle -------------------------------------------------------------------------------
    async def aclose(self) -> None:
        await self.pool.aclose()

    def close(self) -> None:
        self.pool.close()
