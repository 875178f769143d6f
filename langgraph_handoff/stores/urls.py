"""Store URLs: ``memory://``, ``file:///dir``, ``s3://bucket/prefix``, ``az://container/prefix`` and
``gs://bucket/prefix``, and which S3 transport serves them.

:meth:`ObjectStoreSaver.from_url <langgraph_handoff.ObjectStoreSaver.from_url>`, ``ObjectStoreMemory``,
the Agent Server factories and the CLI all take these URLs; this module is the one place that reads them.

**Nothing in a URL is repeated that could be a secret.** Every message shows the URL as
:attr:`StoreUrl.shown` (no query) or :func:`~langgraph_handoff.stores.redact.redact_url` (query
values, user info and fragment as ``***``): a parameter's name may be echoed, never its value.
User info (``s3://KEY:SECRET@bucket``) is refused: credentials never go in a store URL.

**Nothing in a URL is ignored.** A query parameter a scheme does not read, an empty or repeated
one, and a keyword argument the store's constructor does not take are refused with
:class:`~langgraph_handoff.errors.InvalidConfigError`, naming the close matches and the accepted
ones. A typo must not pass silently: ``s3://agents/prod?endpoint=http://127.0.0.1:7480`` (for
``endpoint_url``) would otherwise talk to AWS, where ``prune``, ``delete`` or ``migrate`` could act
on a bucket of the same name.

**The S3 transport.** ``s3://`` uses :class:`~langgraph_handoff.stores.obstore_s3.ObstoreS3Store`
when the ``obstore`` package is installed (``pip install 'langgraph-handoff[obstore]'``) and
:class:`~langgraph_handoff.stores.s3.S3Store` (boto3) otherwise. Chosen by measurement on Ceph RGW
(docs/performance.md): obstore needs about a tenth of boto3's client CPU per request, answers
sooner, and is natively async; both keep boto3's credential chain and the same guarantees.
``?transport=boto3`` (or ``transport="boto3"``) picks boto3 explicitly, e.g. for a server that
needs conditional deletes, and passing a boto3 ``client=`` implies it.

**Azure Blob.** ``az://container/prefix`` is
:class:`~langgraph_handoff.stores.obstore_azure.AzureBlobStore` (obstore only; the same extra),
with credentials from its arguments or the standard ``AZURE_STORAGE_*`` environment.

**Google Cloud Storage.** ``gs://bucket/prefix`` is :class:`~langgraph_handoff.stores.gcs.GCSStore`
(``google-cloud-storage``; the ``gcs`` extra), with Application Default Credentials; an emulator
comes from ``?endpoint_url=`` or ``STORAGE_EMULATOR_HOST``.
"""

from __future__ import annotations

import difflib
import importlib.util
import inspect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlparse

from langgraph_handoff.errors import InvalidConfigError
from langgraph_handoff.stores.base import StoreBase
from langgraph_handoff.stores.credentials import WHERE
from langgraph_handoff.stores.local import LocalStore
from langgraph_handoff.stores.memory import MemoryStore
from langgraph_handoff.stores.redact import redact_url

__all__ = ["QUERY_PARAMETERS", "SCHEMES", "TRANSPORTS", "StoreUrl", "default_transport", "parse", "store_from_url"]

#: the URL schemes :func:`store_from_url` reads
SCHEMES = ("memory", "file", "s3", "az", "gs")
TRANSPORTS = ("obstore", "boto3")

#: every remote store's time limits (:mod:`langgraph_handoff.stores.timeouts`), on every transport
TIME_LIMITS = {"connect_timeout": "connect_timeout", "timeout": "timeout", "deadline": "deadline"}

#: the query parameters each scheme reads, and the constructor argument each one sets
#: (``transport`` picks the class; ``async_io``, ``idle_timeout`` and ``max_object_bytes`` are the
#: obstore transport's only)
QUERY_PARAMETERS: dict[str, dict[str, str]] = {
    "memory": {},
    "file": {"mode": "mode"},
    "s3": {
        "endpoint_url": "endpoint_url",
        "region": "region_name",
        "transport": "transport",
        "async_io": "async_io",
        "idle_timeout": "idle_timeout",
        "max_object_bytes": "max_object_bytes",
        **TIME_LIMITS,
    },
    "az": {"account_name": "account_name", "account": "account_name", "endpoint_url": "endpoint_url", **TIME_LIMITS},
    "gs": {"endpoint_url": "endpoint_url", "project": "project", **TIME_LIMITS},
}

#: where each scheme's credentials go instead of the URL's user info
_CREDENTIALS = WHERE

#: ``memory://NAME`` stores, shared by name within the process
_NAMED_MEMORY: dict[str, MemoryStore] = {}


def default_transport() -> str:
    """``"obstore"`` when the obstore package is importable, else ``"boto3"``."""
    return "obstore" if importlib.util.find_spec("obstore") is not None else "boto3"


def _suggest(name: str, accepted: Iterable[str]) -> str:
    """``: did you mean 'x'?`` for the close matches of ``name`` among ``accepted``, else ``""``."""
    close = difflib.get_close_matches(name, list(accepted), n=3, cutoff=0.6)
    return f": did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


@dataclass(frozen=True)
class StoreUrl:
    """A store URL, read and checked: no network, no store built.

    >>> parse("s3://agents/prod?endpoint_url=http://127.0.0.1:7480&region=eu-west-1")
    StoreUrl(scheme='s3', location='agents', path='prod', query={'endpoint_url': 'http://127.0.0.1:7480', 'region': 'eu-west-1'})
    """

    scheme: str
    #: the bucket or container (``s3``, ``az``, ``gs``), the host part of ``file://``, a memory name
    location: str
    path: str
    query: dict[str, str]

    @property
    def shown(self) -> str:
        """The URL without its query, for messages (a query may hold what should not be logged)."""
        if self.scheme in ("memory", "file") or not self.path:
            return f"{self.scheme}://{self.location}{self.path}"
        return f"{self.scheme}://{self.location}/{self.path}"


def parse(url: str) -> StoreUrl:
    """Read ``url`` and check its scheme and query parameters, without building anything.

    >>> parse("s3://agents/prod?endpoint=http://127.0.0.1:7480")
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidConfigError: s3:// URL 's3://agents/prod' has an unknown parameter 'endpoint': did you mean 'endpoint_url'? s3:// URLs accept: async_io, connect_timeout, deadline, endpoint_url, idle_timeout, max_object_bytes, region, timeout, transport
    >>> parse("file:///var/lib/agents?fsync=0")
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidConfigError: file:// URL 'file:///var/lib/agents' has an unknown parameter 'fsync'. file:// URLs accept: mode
    """
    parsed = urlparse(url)
    scheme = parsed.scheme.lower()
    if scheme not in SCHEMES:
        azure = ".blob.core.windows.net" in (parsed.hostname or "") if "//" in url else False
        hint = (
            ". An Azure Blob URL is az://container/prefix?account_name=ACCOUNT, its SAS token in sas_token= or "
            "AZURE_STORAGE_SAS_TOKEN, never in the URL"
            if azure
            else ""
        )
        raise InvalidConfigError(
            f"unsupported store URL {redact_url(url)!r}: use memory://, file:///dir, s3://bucket/prefix, "
            f"az://container/prefix or gs://bucket/prefix{hint}"
        )
    # an AWS secret may hold '/', which ends the host part early (s3://KEY:SEC/RET@bucket): for
    # the object stores, whose buckets and prefixes never hold '@', any '@' before the query counts
    if "@" in parsed.netloc or (scheme in _CREDENTIALS and "@" in url.partition("?")[0]):
        where = _CREDENTIALS.get(scheme)
        raise InvalidConfigError(
            f"{scheme}:// URL {redact_url(url)!r} holds user info (user:password@): credentials never go in a "
            "store URL, where logs and error messages would show them. "
            + (f"Give them through {where}" if where else "Remove it")
        )
    found = StoreUrl(scheme, parsed.netloc, parsed.path if scheme in ("memory", "file") else parsed.path.strip("/"), {})
    known = QUERY_PARAMETERS[scheme]
    for name, value in parse_qsl(parsed.query, keep_blank_values=True):
        if name not in known:
            accepted = f"accept: {', '.join(sorted(known))}" if known else "take no parameters"
            raise InvalidConfigError(
                f"{scheme}:// URL {found.shown!r} has an unknown parameter {name!r}"
                f"{_suggest(name, known) or '.'} {scheme}:// URLs {accepted}"
            )
        if not value:
            raise InvalidConfigError(
                f"{scheme}:// URL {found.shown!r}: parameter {name!r} is empty: give it a value or leave it out"
            )
        if found.query.get(name, value) != value:  # the values are not shown: either may be a secret
            raise InvalidConfigError(
                f"{scheme}:// URL {found.shown!r} gives {name!r} twice, with different values: keep one"
            )
        found.query[name] = value
    return found


def _constructor_arguments(cls: type, filled: tuple[str, ...]) -> list[str]:
    """The keyword arguments ``cls`` takes, less those the URL itself fills (bucket, prefix)."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    params = inspect.signature(cls.__init__).parameters.values()  # type: ignore[misc]
    return [p.name for p in params if p.kind in kinds and p.name != "self" and p.name not in filled]


def _check_arguments(url: StoreUrl, cls: type, given: dict[str, Any], filled: tuple[str, ...] = ()) -> None:
    """Refuse a keyword argument ``cls`` does not take (a bare ``TypeError`` at best; a store
    that drops it, at worst), and one that contradicts the URL's query."""
    accepted = _constructor_arguments(cls, filled)
    for name in given:
        if name not in accepted:
            takes = f"It takes: {', '.join(sorted(accepted))}" if accepted else "It takes no arguments"
            raise InvalidConfigError(
                f"{cls.__name__} (for {url.shown!r}) has no argument {name!r}{_suggest(name, accepted) or '.'} {takes}"
            )
    for param, value in url.query.items():
        arg = QUERY_PARAMETERS[url.scheme][param]
        if arg in given and given[arg] != value:
            raise InvalidConfigError(
                f"{url.shown!r}: the argument {arg}= contradicts the URL's {param}= (the values are not shown): "
                "give it once"
            )


def store_from_url(url: str, *, transport: str | None = None, **store_kwargs: Any) -> StoreBase:
    """The store a URL names.

    * ``memory://`` (a fresh store) or ``memory://NAME`` (shared in this process by name); no
      parameters, no arguments;
    * ``file:///abs/dir`` or ``file://./relative/dir``: a :class:`LocalStore`; query parameter
      ``mode`` (what new directories are made with, ``0700`` by default: ``?mode=0750`` lets a
      group read), ``fsync=`` as a keyword argument;
    * ``s3://bucket/prefix``: S3 with credentials from the boto3 chain. Query parameters
      ``endpoint_url``, ``region``, ``transport`` (``obstore`` or ``boto3``) and, for obstore,
      ``async_io`` (``loop``, ``threads`` or ``auto``), e.g.
      ``s3://agents/prod?endpoint_url=http://127.0.0.1:7480``.
    * ``az://container/prefix``: Azure Blob Storage; query parameters ``account_name`` (or
      ``account``) and ``endpoint_url``, e.g.
      ``az://agents/prod?account_name=devstoreaccount1&endpoint_url=http://127.0.0.1:10000/devstoreaccount1``.
      Keys and tokens never go in the URL: pass them as keyword arguments or in the environment
      (``AZURE_STORAGE_ACCOUNT_KEY``, ``AZURE_STORAGE_SAS_TOKEN``, ``AZURE_STORAGE_CONNECTION_STRING``, ...).
    * ``gs://bucket/prefix``: Google Cloud Storage with Application Default Credentials; query
      parameters ``endpoint_url`` (an emulator, then anonymous; ``STORAGE_EMULATOR_HOST`` works
      too) and ``project``, e.g. ``gs://agents/prod?endpoint_url=http://127.0.0.1:4443``.

    ``store_kwargs`` go to the store's constructor. Any other query parameter, and any keyword
    argument the store does not take, is refused (:func:`parse`).

    >>> type(store_from_url("memory://")).__name__
    'MemoryStore'
    >>> store_from_url("s3://agents/prod?transport=ftp")
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidConfigError: unknown S3 transport in the URL: use one of ('obstore', 'boto3')
    >>> store_from_url("gs:///prod")
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidConfigError: GCS URL 'gs:///prod' names no bucket: use gs://bucket/prefix
    >>> store_from_url("memory://", create_bucket=True)
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidConfigError: MemoryStore (for 'memory://') has no argument 'create_bucket'. It takes no arguments
    """
    parsed = parse(url)
    scheme, query = parsed.scheme, parsed.query
    if transport is not None and scheme != "s3":
        raise InvalidConfigError(f"transport={transport!r} applies to s3:// URLs only, not {parsed.shown!r}")
    if scheme == "memory":
        _check_arguments(parsed, MemoryStore, store_kwargs)
        name = parsed.location + parsed.path
        return _NAMED_MEMORY.setdefault(name, MemoryStore()) if name else MemoryStore()
    if scheme == "file":
        path = unquote(parsed.location + parsed.path)
        if not path:
            raise InvalidConfigError(f"file URL {parsed.shown!r} names no directory: use file:///abs/dir")
        _check_arguments(parsed, LocalStore, store_kwargs, ("root",))
        return LocalStore(path, **{**query, **store_kwargs})
    if scheme == "s3":
        if transport is not None and query.get("transport", transport) != transport:
            raise InvalidConfigError(
                f"{parsed.shown!r}: transport={transport!r} contradicts the URL's transport parameter: give it once"
            )
        chosen = transport or query.get("transport") or ("boto3" if "client" in store_kwargs else default_transport())
        if chosen not in TRANSPORTS:
            named = repr(chosen) if transport else "in the URL"  # a URL's value is not shown
            raise InvalidConfigError(f"unknown S3 transport {named}: use one of {TRANSPORTS}")
        if not parsed.location:
            raise InvalidConfigError(f"S3 URL {parsed.shown!r} names no bucket: use s3://bucket/prefix")
        if chosen == "boto3" and "async_io" in query:
            raise InvalidConfigError(
                f"{parsed.shown!r}: async_io applies to the obstore transport only (boto3's async API always "
                "runs in the store's thread pool): drop it, or use transport=obstore"
            )
        if chosen == "boto3" and "idle_timeout" in query:
            raise InvalidConfigError(
                f"{parsed.shown!r}: idle_timeout applies to the obstore transport only (boto3 keeps its "
                "connections as urllib3 does): drop it, or use transport=obstore"
            )
        if chosen == "boto3" and "max_object_bytes" in query:
            raise InvalidConfigError(
                f"{parsed.shown!r}: max_object_bytes applies to the obstore transport only (the limit of its "
                "event-loop client): drop it, or use transport=obstore"
            )
        if chosen == "obstore":
            from langgraph_handoff.stores.obstore_s3 import ObstoreS3Store as cls
        else:
            from langgraph_handoff.stores.s3 import S3Store as cls  # type: ignore[assignment]
        return _build(parsed, cls, store_kwargs, ("bucket", "prefix"), skip=("transport",))
    if scheme == "az":
        if not parsed.location:
            raise InvalidConfigError(f"Azure URL {parsed.shown!r} names no container: use az://container/prefix")
        if query.get("account_name", query.get("account")) != query.get("account", query.get("account_name")):
            raise InvalidConfigError(f"{parsed.shown!r}: account and account_name differ: give one")
        from langgraph_handoff.stores.obstore_azure import AzureBlobStore

        return _build(parsed, AzureBlobStore, store_kwargs, ("container", "prefix"))
    if not parsed.location:
        raise InvalidConfigError(f"GCS URL {parsed.shown!r} names no bucket: use gs://bucket/prefix")
    from langgraph_handoff.stores.gcs import GCSStore

    return _build(parsed, GCSStore, store_kwargs, ("bucket", "prefix"))


def _build(
    parsed: StoreUrl, cls: type, store_kwargs: dict[str, Any], filled: tuple[str, ...], skip: tuple[str, ...] = ()
) -> StoreBase:
    """``cls(location, path, **arguments)``: the caller's arguments, and the URL's parameters."""
    _check_arguments(parsed, cls, store_kwargs, filled)
    kwargs = dict(store_kwargs)
    for param, value in parsed.query.items():
        if param not in skip:
            kwargs.setdefault(QUERY_PARAMETERS[parsed.scheme][param], value)
    return cls(parsed.location, parsed.path, **kwargs)  # type: ignore[no-any-return]
