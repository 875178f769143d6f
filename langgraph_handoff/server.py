"""Factories for LangGraph Agent Server (``langgraph dev``, ``langgraph up``, LangSmith Deployment).

The server builds its own checkpointer and store from ``langgraph.json``; a saver passed to
``compile(checkpointer=...)`` is overridden. Point both keys at this module::

    {
      "graphs": {"agent": "./graph.py:graph"},
      "checkpointer": {"path": "langgraph_handoff.server.checkpointer"},
      "store": {"path": "langgraph_handoff.server.store"}
    }

Write the module path with dots. The server splits a path that contains neither ``/`` nor
``.py:`` at its *last dot*, so ``langgraph_handoff.server:checkpointer`` (the colon form, used for
graphs) is not found. ``examples/agent_server/README.md`` lists the forms that work, as measured.

**Configuration is by environment**, read each time the server enters a factory:

``LANGGRAPH_HANDOFF_URL``
    the store both factories use: ``s3://bucket/prefix?endpoint_url=...``,
    ``az://container/prefix``, ``gs://bucket/prefix``, ``file:///abs/dir`` or ``memory://NAME``.
    Default ``file://./.langgraph_handoff`` (:data:`DEFAULT_URL`), a directory under the server's
    working directory. Checkpoints and long-term memories share it (their keys do not overlap).
``LANGGRAPH_HANDOFF_ENCRYPTION``
    ``none`` (the default) or ``aes``: checkpoints, metadata and pending writes go through
    LangGraph's ``EncryptedSerializer.from_pycryptodome_aes``, keyed by ``LANGGRAPH_AES_KEY``
    (16, 24 or 32 bytes; LangGraph's own convention, the key the server uses for its own
    encryption too). Needs ``pycryptodome``. Long-term memory items are *not* encrypted: the
    store saves them as JSON.

**Why refuse a bare ``memory://``.** The server enters a factory once per event loop (its
comment: connection pools are scoped to one loop), so one process may hold several savers.
Each entry of ``memory://`` would make a new, empty store, and a run could miss the state another
loop wrote. ``memory://NAME`` is one store per process, shared by name, so it is accepted (for
tests; it still dies with the process). ``s3://``, ``az://``, ``gs://`` and ``file://`` are shared by
construction.

**TTL.** Threads expire when a TTL is configured, either in ``langgraph.json`` as the server
documents it (``"checkpointer": {"path": ..., "ttl": {"strategy": "delete", "default_ttl": 60,
"sweep_interval_minutes": 10}}``, which the server hands to its process as
``LANGGRAPH_CHECKPOINTER``, or ``LANGGRAPH_THREAD_TTL``), or by environment:

``LANGGRAPH_HANDOFF_TTL_MINUTES``
    thread TTL in minutes (overrides ``checkpointer.ttl``'s ``default_ttl``);
``LANGGRAPH_HANDOFF_TTL_REFRESH``
    ``true`` to refresh a thread's TTL when a run or ``get_state`` reads it;
``LANGGRAPH_HANDOFF_SWEEP_INTERVAL_MINUTES``
    how often to sweep (default ``sweep_interval_minutes``, else 5).

The server does not sweep a custom checkpointer itself (``langgraph dev``'s thread sweep is a
no-op), so :func:`checkpointer` runs the sweep: a background task on the server's loop that
calls :meth:`~langgraph_handoff.ObjectStoreSaver.asweep` every interval, cancelled when the server
leaves the factory. The sweep is safe with workers writing, and with several sweepers at once
(every deletion is a compare-and-swap). Likewise ``"store": {"path": ..., "ttl": {...}}``
(``LANGGRAPH_STORE``) or ``LANGGRAPH_HANDOFF_STORE_TTL_MINUTES`` give long-term memories a TTL,
and :func:`store` runs their sweep, which the server skips for a custom store.

**Semantic search.** ``"store": {"path": "langgraph_handoff.server.store", "index": {"embed":
"./embeddings.py:embeddings", "dims": 384, "fields": ["text"]}}`` gives :func:`store` an index:
the server passes the section on as ``LANGGRAPH_STORE`` (it hands a custom store nothing else).
``embed`` takes what the server's own store takes: ``"./path/to/file.py:name"`` (an
``Embeddings`` or an embedding function in that file, relative to the server's working
directory; ``examples/agent_server/embeddings.py`` holds the offline ``[e5]`` encoder) or
``"provider:model"`` (LangChain's ``init_embeddings``, with the provider's package and key).
Measured with ``langgraph dev``: the server loads ``store.index.embed`` itself at startup even
for a custom store, so a name only this package knows (``"e5:multilingual-e5-small"``) stops it
there; the file form works for both.

Each ``checkpointer()`` entry calls :meth:`~langgraph_handoff.ObjectStoreSaver.asetup` once
(the server never calls ``setup``): the first one on a store probes it and writes the format
marker, later ones cost one GET. On exit the store's clients are closed.

Example, with an explicit environment instead of ``os.environ``:

>>> import asyncio
>>> env = {"LANGGRAPH_HANDOFF_URL": "memory://server-doc"}
>>> async def demo():
...     async with checkpointer(env) as saver, store(env) as memory:
...         await memory.aput(("users", "u1"), "prefs", {"contact": "email"})
...         item = await memory.aget(("users", "u1"), "prefs")
...         return type(saver).__name__, item.value
>>> asyncio.run(demo())
('ObjectStoreSaver', {'contact': 'email'})
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import urlparse

from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_handoff.checkpoint.saver import ObjectStoreSaver
from langgraph_handoff.checkpoint.signed_store import FROM_ENVIRONMENT, signed_store
from langgraph_handoff.checkpoint.ttl import TTLSettings
from langgraph_handoff.errors import InvalidConfigError
from langgraph_handoff.memory import ObjectStoreMemory
from langgraph_handoff.stores import urls
from langgraph_handoff.stores.base import StoreBase
from langgraph_handoff.stores.redact import redact_url
from langgraph_handoff.stores.urls import SCHEMES, store_from_url

__all__ = [
    "DEFAULT_URL",
    "ENV_AES_KEY",
    "ENV_ENCRYPTION",
    "ENV_STORE_TTL_MINUTES",
    "ENV_SWEEP_INTERVAL",
    "ENV_TTL_MINUTES",
    "ENV_TTL_REFRESH",
    "ENV_URL",
    "ServerSettings",
    "checkpointer",
    "store",
]

ENV_URL = "LANGGRAPH_HANDOFF_URL"
ENV_ENCRYPTION = "LANGGRAPH_HANDOFF_ENCRYPTION"
ENV_TTL_MINUTES = "LANGGRAPH_HANDOFF_TTL_MINUTES"
ENV_TTL_REFRESH = "LANGGRAPH_HANDOFF_TTL_REFRESH"
ENV_SWEEP_INTERVAL = "LANGGRAPH_HANDOFF_SWEEP_INTERVAL_MINUTES"
ENV_STORE_TTL_MINUTES = "LANGGRAPH_HANDOFF_STORE_TTL_MINUTES"
#: what the Agent Server sets from ``langgraph.json`` (and its own thread TTL variable)
ENV_SERVER_CHECKPOINTER = "LANGGRAPH_CHECKPOINTER"
ENV_SERVER_STORE = "LANGGRAPH_STORE"
ENV_SERVER_THREAD_TTL = "LANGGRAPH_THREAD_TTL"
#: LangGraph's own variable for ``EncryptedSerializer.from_pycryptodome_aes``
ENV_AES_KEY = "LANGGRAPH_AES_KEY"
#: relative to the server's working directory, beside ``langgraph dev``'s own ``.langgraph_api``
DEFAULT_URL = "file://./.langgraph_handoff"

_ENCRYPTIONS = ("none", "aes")


@dataclass(frozen=True)
class ServerSettings:
    """What the factories read from the environment, checked before anything is built.

    >>> ServerSettings.from_env({})
    ServerSettings(url='file://./.langgraph_handoff', encryption='none', ttl=None, store_ttl=None, sweep_interval=None, store_index=None)
    >>> ServerSettings.from_env({"LANGGRAPH_HANDOFF_TTL_MINUTES": "90", "LANGGRAPH_HANDOFF_TTL_REFRESH": "true"}).ttl
    TTLSettings(default_ttl=90.0, refresh_on_read=True, sweep_interval_minutes=None, sweep_limit=None, strategy='delete')

    ``checkpointer.ttl`` from ``langgraph.json``, as the server passes it on:

    >>> conf = '{"path": "langgraph_handoff.server.checkpointer", "ttl": {"default_ttl": 30, "sweep_interval_minutes": 2}}'
    >>> s = ServerSettings.from_env({"LANGGRAPH_CHECKPOINTER": conf})
    >>> s.ttl.default_ttl, s.ttl.sweep_interval_minutes
    (30.0, 2.0)
    >>> ServerSettings.from_env({"LANGGRAPH_STORE": '{"ttl": {"default_ttl": 5}}'}).store_ttl
    {'default_ttl': 5}
    >>> conf = '{"path": "langgraph_handoff.server.store", "index": {"embed": "./embeddings.py:embeddings", "dims": 384}}'
    >>> ServerSettings.from_env({"LANGGRAPH_STORE": conf}).store_index
    {'embed': './embeddings.py:embeddings', 'dims': 384}
    >>> ServerSettings.from_env({"LANGGRAPH_STORE": '{"index": {"embed": "./embeddings.py:embeddings"}}'})
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidConfigError: store.index in langgraph.json (LANGGRAPH_STORE): dims must be the positive int the embedder returns (384 for the [e5] extra), got None
    >>> ServerSettings.from_env({"LANGGRAPH_HANDOFF_TTL_MINUTES": "soon"})
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidConfigError: LANGGRAPH_HANDOFF_TTL_MINUTES='soon' is not a number of minutes
    >>> ServerSettings.from_env({"LANGGRAPH_HANDOFF_URL": "s3://agents/prod?endpoint_url=http://127.0.0.1:7480"}).url
    's3://agents/prod?endpoint_url=http://127.0.0.1:7480'

    A bare ``memory://`` would be a different empty store for every event loop the server runs:

    >>> ServerSettings.from_env({"LANGGRAPH_HANDOFF_URL": "memory://"})
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidConfigError: LANGGRAPH_HANDOFF_URL='memory://' ...: use s3://bucket/prefix or file:///dir, or memory://NAME ...
    >>> ServerSettings.from_env({"LANGGRAPH_HANDOFF_URL": "postgres://db"})
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidConfigError: LANGGRAPH_HANDOFF_URL='postgres://db' is not a store URL: use s3://bucket/prefix?endpoint_url=..., az://container/prefix, gs://bucket/prefix, file:///abs/dir or memory://NAME
    >>> ServerSettings.from_env({"LANGGRAPH_HANDOFF_URL": "s3://agents/prod?endpoint=http://127.0.0.1:7480"})
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidConfigError: LANGGRAPH_HANDOFF_URL: s3:// URL 's3://agents/prod' has an unknown parameter 'endpoint': did you mean 'endpoint_url'? ...
    >>> ServerSettings.from_env({"LANGGRAPH_HANDOFF_ENCRYPTION": "rot13"})
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidConfigError: LANGGRAPH_HANDOFF_ENCRYPTION='rot13' is not one of ('none', 'aes')
    >>> ServerSettings.from_env({"LANGGRAPH_HANDOFF_ENCRYPTION": "aes", "LANGGRAPH_AES_KEY": "short"})
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidConfigError: LANGGRAPH_AES_KEY is 5 bytes long: AES needs a key of 16, 24 or 32 bytes
    """

    url: str
    encryption: str
    #: thread TTL (None: threads never expire)
    ttl: TTLSettings | None = None
    #: long-term memory TTL (LangGraph's TTLConfig; None: memories never expire)
    store_ttl: dict[str, Any] | None = None
    #: LANGGRAPH_HANDOFF_SWEEP_INTERVAL_MINUTES, for both sweepers
    sweep_interval: float | None = None
    #: ``store.index`` from ``langgraph.json``, as JSON gives it (``embed`` still a string)
    store_index: dict[str, Any] | None = None

    def __repr__(self) -> str:
        """The settings with the URL redacted: a store URL may carry a SAS token or other secret
        in its query, and this repr ends up in logs and tracebacks.

        >>> ServerSettings.from_env({"LANGGRAPH_HANDOFF_URL": "s3://agents/prod?endpoint_url=http://10.0.0.5:7480"})
        ServerSettings(url='s3://agents/prod?endpoint_url=***', encryption='none', ttl=None, store_ttl=None, sweep_interval=None, store_index=None)
        """
        shown = (
            f"{f.name}={redact_url(self.url) if f.name == 'url' else getattr(self, f.name)!r}" for f in fields(self)
        )
        return f"ServerSettings({', '.join(shown)})"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ServerSettings:
        env = os.environ if environ is None else environ
        url = env.get(ENV_URL, "").strip() or DEFAULT_URL
        parsed = urlparse(url)
        if parsed.scheme.lower() not in SCHEMES:
            raise InvalidConfigError(
                f"{ENV_URL}={redact_url(url)!r} is not a store URL: use s3://bucket/prefix?endpoint_url=..., "
                "az://container/prefix, gs://bucket/prefix, file:///abs/dir or memory://NAME"
            )
        if parsed.scheme.lower() == "memory" and not (parsed.netloc + parsed.path).strip("/"):
            raise InvalidConfigError(
                f"{ENV_URL}={redact_url(url)!r} would give every event loop of the server its own empty store: "
                "use s3://bucket/prefix or file:///dir, or memory://NAME (one store per process, for tests)"
            )
        try:
            urls.parse(url)  # a mistyped query parameter fails here, at startup, not at the first request
        except InvalidConfigError as exc:
            raise InvalidConfigError(f"{ENV_URL}: {exc}") from None
        encryption = env.get(ENV_ENCRYPTION, "").strip().lower() or "none"
        if encryption not in _ENCRYPTIONS:
            raise InvalidConfigError(f"{ENV_ENCRYPTION}={env[ENV_ENCRYPTION]!r} is not one of {_ENCRYPTIONS}")
        if encryption == "aes":
            _aes_key(env)  # refuse a missing or malformed key now, not at the first put
        interval = _env_minutes(env, ENV_SWEEP_INTERVAL)
        return cls(
            url=url,
            encryption=encryption,
            ttl=_thread_ttl(env),
            store_ttl=_store_ttl(env),
            sweep_interval=interval,
            store_index=_store_index(env),
        )

    def serde(self, environ: Mapping[str, str] | None = None) -> SerializerProtocol | None:
        """The saver's serializer: None (the saver's default) or LangGraph's AES one.

        >>> env = {"LANGGRAPH_HANDOFF_ENCRYPTION": "aes", "LANGGRAPH_AES_KEY": "0123456789abcdef"}
        >>> serde = ServerSettings.from_env(env).serde(env)
        >>> serde.dumps_typed({"secret": 1})[0]
        'msgpack+aes'
        >>> serde.loads_typed(serde.dumps_typed({"secret": 1}))
        {'secret': 1}
        """
        if self.encryption == "none":
            return None
        from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

        return EncryptedSerializer.from_pycryptodome_aes(key=_aes_key(os.environ if environ is None else environ))

    def object_store(self) -> StoreBase:
        """A new client on :attr:`url`; a bad URL is reported against ``LANGGRAPH_HANDOFF_URL``."""
        try:
            store = store_from_url(self.url)
        except InvalidConfigError as exc:
            raise InvalidConfigError(f"{ENV_URL}: {exc}") from None
        return signed_store(store, FROM_ENVIRONMENT)  # LANGGRAPH_HANDOFF_SIGNING_KEYS


def _env_minutes(env: Mapping[str, str], name: str) -> float | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    try:
        minutes = float(raw)
    except ValueError:
        minutes = -1.0
    if not 0 < minutes < float("inf"):
        raise InvalidConfigError(f"{name}={raw!r} is not a number of minutes")
    return minutes


def _server_json(env: Mapping[str, str], name: str) -> dict[str, Any]:
    """The JSON config the Agent Server passes its process (``LANGGRAPH_CHECKPOINTER``,
    ``LANGGRAPH_STORE``: the ``langgraph.json`` sections), or {}."""
    raw = env.get(name, "").strip()
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise InvalidConfigError(f"{name} is not JSON ({exc})") from None
    return value if isinstance(value, dict) else {}


def _thread_ttl(env: Mapping[str, str]) -> TTLSettings | None:
    """Our variables first, else the server's own thread TTL (``LANGGRAPH_THREAD_TTL``, a number
    of minutes or a JSON object, else ``checkpointer.ttl``)."""
    raw = env.get(ENV_SERVER_THREAD_TTL, "").strip()
    if raw.startswith("{"):
        base = _server_json(env, ENV_SERVER_THREAD_TTL)
    elif raw:
        base = {"default_ttl": raw}
    else:
        base = dict(_server_json(env, ENV_SERVER_CHECKPOINTER).get("ttl") or {})
    minutes = _env_minutes(env, ENV_TTL_MINUTES)
    if minutes is not None:
        base["default_ttl"] = minutes
    refresh = env.get(ENV_TTL_REFRESH, "").strip().lower()
    if refresh:
        if refresh not in ("1", "true", "yes", "0", "false", "no"):
            raise InvalidConfigError(f"{ENV_TTL_REFRESH}={refresh!r}: use true or false")
        base["refresh_on_read"] = refresh in ("1", "true", "yes")
    try:
        return TTLSettings.parse(base) if base else None
    except InvalidConfigError as exc:
        raise InvalidConfigError(f"thread TTL: {exc}") from None


def _store_ttl(env: Mapping[str, str]) -> dict[str, Any] | None:
    base = dict(_server_json(env, ENV_SERVER_STORE).get("ttl") or {})
    minutes = _env_minutes(env, ENV_STORE_TTL_MINUTES)
    if minutes is not None:
        base["default_ttl"] = minutes
    return base or None


def _store_index(env: Mapping[str, str]) -> dict[str, Any] | None:
    """``store.index``, its shape checked now (the embedder is loaded by :func:`store`, so that the
    checkpointer factory never needs an embedding provider's package or key)."""
    index = _server_json(env, ENV_SERVER_STORE).get("index")
    if not index:
        return None
    where = f"store.index in langgraph.json ({ENV_SERVER_STORE})"
    if not isinstance(index, dict):
        raise InvalidConfigError(f"{where} must be an object with embed, dims and fields, got {index!r}")
    unknown = sorted(set(index) - {"embed", "dims", "fields"})
    if unknown:
        raise InvalidConfigError(f"{where}: unknown keys {unknown}; use embed, dims and fields")
    if not isinstance(index.get("embed"), str) or not index["embed"].strip():
        raise InvalidConfigError(
            f"{where}: embed must be './file.py:name' (an Embeddings or a function in that file) or "
            f"'provider:model', got {index.get('embed')!r}"
        )
    dims = index.get("dims")
    if isinstance(dims, bool) or not isinstance(dims, int) or dims < 1:
        raise InvalidConfigError(
            f"{where}: dims must be the positive int the embedder returns (384 for the [e5] extra), got {dims!r}"
        )
    fields = index.get("fields")
    if fields is not None and (not isinstance(fields, list) or not all(isinstance(f, str) and f for f in fields)):
        raise InvalidConfigError(f'{where}: fields must be a list of JSON paths such as ["text"], got {fields!r}')
    return dict(index)


def load_embed(embed: str) -> Any:
    """``store.index.embed`` as the Agent Server reads it for its own store: a string containing
    ``.py:`` names an attribute of a Python file (relative to the working directory); anything
    else is passed on as is (``"provider:model"``, ``"e5:multilingual-e5-small"``)."""
    if ".py:" not in embed:
        return embed
    path, _, name = embed.rpartition(":")
    module_name = "langgraph_handoff_embed_" + hashlib.sha256(path.encode()).hexdigest()[:16]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None or not os.path.isfile(path):
        raise InvalidConfigError(f"store.index.embed={embed!r}: no such file {path!r} (relative to {os.getcwd()})")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        return getattr(module, name)
    except AttributeError:
        raise InvalidConfigError(f"store.index.embed={embed!r}: {path!r} defines no {name!r}") from None


def _aes_key(env: Mapping[str, str]) -> bytes:
    if importlib.util.find_spec("Crypto") is None:
        raise InvalidConfigError(
            f"{ENV_ENCRYPTION}=aes needs pycryptodome: pip install pycryptodome (or unset {ENV_ENCRYPTION})"
        )
    raw = env.get(ENV_AES_KEY)
    if not raw:
        raise InvalidConfigError(
            f"{ENV_ENCRYPTION}=aes but {ENV_AES_KEY} is not set: set it to a 16, 24 or 32 byte key"
        )
    key = raw.encode()
    if len(key) not in (16, 24, 32):
        raise InvalidConfigError(f"{ENV_AES_KEY} is {len(key)} bytes long: AES needs a key of 16, 24 or 32 bytes")
    return key


@contextlib.asynccontextmanager
async def checkpointer(environ: Mapping[str, str] | None = None) -> AsyncIterator[ObjectStoreSaver]:
    """An :class:`~langgraph_handoff.ObjectStoreSaver` on ``LANGGRAPH_HANDOFF_URL``, set up.

    For ``"checkpointer": {"path": "langgraph_handoff.server.checkpointer"}``. The server calls it
    with no argument; ``environ`` replaces ``os.environ`` (tests, examples). Each entry builds its
    own client, so entering it once per event loop is safe.

    >>> import asyncio
    >>> async def latest(env):
    ...     async with checkpointer(env) as saver:
    ...         return await saver.aget_tuple({"configurable": {"thread_id": "nobody"}})
    >>> asyncio.run(latest({"LANGGRAPH_HANDOFF_URL": "memory://server-doc-saver"})) is None
    True
    """
    settings = ServerSettings.from_env(environ)
    saver = ObjectStoreSaver(settings.object_store(), serde=settings.serde(environ), ttl=settings.ttl)
    async with saver:
        await saver.asetup()
        if settings.ttl is not None:
            await saver.astart_ttl_sweeper(settings.sweep_interval)
        try:
            yield saver
        finally:
            await saver.astop_ttl_sweeper()


@contextlib.asynccontextmanager
async def store(environ: Mapping[str, str] | None = None) -> AsyncIterator[ObjectStoreMemory]:
    """An :class:`~langgraph_handoff.memory.ObjectStoreMemory` on ``LANGGRAPH_HANDOFF_URL``.

    For ``"store": {"path": "langgraph_handoff.server.store"}``; nodes get it as
    ``runtime.store`` and the ``/store`` endpoints use it. ``LANGGRAPH_HANDOFF_ENCRYPTION`` does not
    apply to it (memories are stored as JSON). Closes its client on exit.

    >>> import asyncio
    >>> async def keys(env):
    ...     async with store(env) as memory:
    ...         await memory.aput(("docs",), "a", {"n": 1})
    ...         return [item.key for item in await memory.asearch(("docs",))]
    >>> asyncio.run(keys({"LANGGRAPH_HANDOFF_URL": "memory://server-doc-store"}))
    ['a']
    """
    settings = ServerSettings.from_env(environ)
    index = settings.store_index
    if index is not None:
        index = {**index, "embed": load_embed(index["embed"])}
    objects = settings.object_store()
    try:
        memory = ObjectStoreMemory(objects, ttl=settings.store_ttl, index=index)  # type: ignore[arg-type]
    except InvalidConfigError as exc:
        await objects.aclose()
        raise InvalidConfigError(f"the store section of langgraph.json ({ENV_SERVER_STORE}): {exc}") from None
    except BaseException:
        await objects.aclose()
        raise
    try:
        if settings.store_ttl and settings.store_ttl.get("default_ttl") is not None:
            await memory.astart_ttl_sweeper(settings.sweep_interval)
        yield memory
    finally:
        await memory.astop_ttl_sweeper()
        await objects.aclose()
