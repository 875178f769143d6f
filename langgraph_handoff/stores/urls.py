"""Store URLs: ``memory://``, ``file:///dir``, ``s3://bucket/prefix``, ``az://container/prefix`` and
``gs://bucket/prefix``, and which S3 transport serves them.

:meth:`ObjectStoreSaver.from_url <langgraph_handoff.ObjectStoreSaver.from_url>`, ``ObjectStoreMemory``
and the CLI all take these URLs; this module is the one place that reads them.

**The S3 transport.** ``s3://`` uses :class:`~langgraph_handoff.stores.obstore_s3.ObstoreS3Store`
when the ``obstore`` package is installed (``pip install 'langgraph-handoff[obstore]'``) and
:class:`~langgraph_handoff.stores.s3.S3Store` (boto3) otherwise. Chosen by measurement on Ceph RGW
(README, "Performance"): obstore needs about a tenth of boto3's client CPU per request, answers
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

import importlib.util
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from langgraph_handoff.errors import InvalidConfigError
from langgraph_handoff.stores.base import StoreBase
from langgraph_handoff.stores.local import LocalStore
from langgraph_handoff.stores.memory import MemoryStore

__all__ = ["SCHEMES", "TRANSPORTS", "default_transport", "store_from_url"]

#: the URL schemes :func:`store_from_url` reads
SCHEMES = ("memory", "file", "s3", "az", "gs")
TRANSPORTS = ("obstore", "boto3")

#: ``memory://NAME`` stores, shared by name within the process
_NAMED_MEMORY: dict[str, MemoryStore] = {}


def default_transport() -> str:
    """``"obstore"`` when the obstore package is importable, else ``"boto3"``."""
    return "obstore" if importlib.util.find_spec("obstore") is not None else "boto3"


def store_from_url(url: str, *, transport: str | None = None, **store_kwargs: Any) -> StoreBase:
    """The store a URL names.

    * ``memory://`` (a fresh store) or ``memory://NAME`` (shared in this process by name);
    * ``file:///abs/dir`` or ``file://./relative/dir``: a :class:`LocalStore`;
    * ``s3://bucket/prefix``: S3 with credentials from the boto3 chain. Query parameters
      ``endpoint_url``, ``region``, ``transport`` (``obstore`` or ``boto3``) and, for obstore,
      ``async_io`` (``loop``, ``threads`` or ``auto``) are read, e.g.
      ``s3://agents/prod?endpoint_url=http://127.0.0.1:7480``.
    * ``az://container/prefix``: Azure Blob Storage; query parameters ``account_name`` (or
      ``account``) and ``endpoint_url`` are read, e.g.
      ``az://agents/prod?account_name=devstoreaccount1&endpoint_url=http://127.0.0.1:10000/devstoreaccount1``.
      Keys and tokens never go in the URL: pass them as keyword arguments or in the environment
      (``AZURE_STORAGE_ACCOUNT_KEY``, ``AZURE_STORAGE_SAS_TOKEN``, ``AZURE_STORAGE_CONNECTION_STRING``, ...).
    * ``gs://bucket/prefix``: Google Cloud Storage with Application Default Credentials; query
      parameters ``endpoint_url`` (an emulator, then anonymous; ``STORAGE_EMULATOR_HOST`` works
      too) and ``project`` are read, e.g. ``gs://agents/prod?endpoint_url=http://127.0.0.1:4443``.

    ``store_kwargs`` go to the store's constructor.

    >>> type(store_from_url("memory://")).__name__
    'MemoryStore'
    >>> store_from_url("s3://agents/prod?transport=ftp")
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidConfigError: unknown S3 transport 'ftp': use one of ('obstore', 'boto3')
    >>> store_from_url("gs:///prod")
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidConfigError: GCS URL 'gs:///prod' names no bucket: use gs://bucket/prefix
    """
    parsed = urlparse(url)
    scheme = parsed.scheme.lower()
    query = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
    if scheme == "memory":
        name = parsed.netloc + parsed.path
        return _NAMED_MEMORY.setdefault(name, MemoryStore()) if name else MemoryStore()
    if scheme == "file":
        path = unquote(parsed.netloc + parsed.path)
        if not path:
            raise InvalidConfigError(f"file URL {url!r} names no directory: use file:///abs/dir")
        return LocalStore(path, **store_kwargs)
    if scheme == "s3":
        chosen = transport or query.get("transport") or ("boto3" if "client" in store_kwargs else default_transport())
        if chosen not in TRANSPORTS:
            raise InvalidConfigError(f"unknown S3 transport {chosen!r}: use one of {TRANSPORTS}")
        if not parsed.netloc:
            raise InvalidConfigError(f"S3 URL {url!r} names no bucket: use s3://bucket/prefix")
        kwargs = dict(store_kwargs)
        if "endpoint_url" in query:
            kwargs.setdefault("endpoint_url", query["endpoint_url"])
        if "region" in query:
            kwargs.setdefault("region_name", query["region"])
        if chosen == "obstore":
            if "async_io" in query:
                kwargs.setdefault("async_io", query["async_io"])
            from langgraph_handoff.stores.obstore_s3 import ObstoreS3Store

            return ObstoreS3Store(parsed.netloc, parsed.path.strip("/"), **kwargs)
        from langgraph_handoff.stores.s3 import S3Store

        return S3Store(parsed.netloc, parsed.path.strip("/"), **kwargs)
    if scheme == "az":
        if not parsed.netloc:
            raise InvalidConfigError(f"Azure URL {url!r} names no container: use az://container/prefix")
        kwargs = dict(store_kwargs)
        for name, arg in (
            ("account_name", "account_name"),
            ("account", "account_name"),
            ("endpoint_url", "endpoint_url"),
        ):
            if name in query:
                kwargs.setdefault(arg, query[name])
        from langgraph_handoff.stores.obstore_azure import AzureBlobStore

        return AzureBlobStore(parsed.netloc, parsed.path.strip("/"), **kwargs)
    if scheme == "gs":
        if not parsed.netloc:
            raise InvalidConfigError(f"GCS URL {url!r} names no bucket: use gs://bucket/prefix")
        kwargs = dict(store_kwargs)
        for name in ("endpoint_url", "project"):
            if name in query:
                kwargs.setdefault(name, query[name])
        from langgraph_handoff.stores.gcs import GCSStore

        return GCSStore(parsed.netloc, parsed.path.strip("/"), **kwargs)
    raise InvalidConfigError(
        f"unsupported store URL {url!r}: use memory://, file:///dir, s3://bucket/prefix, az://container/prefix "
        "or gs://bucket/prefix"
    )
