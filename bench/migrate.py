"""``langgraph-handoff migrate`` over many old threads on a real S3 server, for the README figures.

    source /tmp/devrgw.env          # or any S3 endpoint in S3_ENDPOINT_URL / AWS_* variables
    .venv/bin/python bench/migrate.py --threads 1000 --concurrency 16

1. **Old data, written by the old release.** A git worktree of commit 8bb5b2f (the last release
   writing storage format 1) writes ``--threads`` conversations of the v1 graph from
   tests/checkpoint/test_migrations.py (state schema 0): two turns each, every tenth stopped at an
   interrupt, every tenth with a pending write to a channel the migrations rename.
2. **Expected state.** Every thread is read with the current code and the v3 migrations (upgraded
   in memory): every checkpoint, value, metadata and pending write.
3. **Dry run** through a counting HTTP proxy (bench/proxy.py): requests and time.
4. **Migration under load, killed and rerun.** Writer threads (current code, straight to the
   server) take turns on random threads of their own (up to 3 per thread) the whole time. The real CLI runs as a subprocess through
   the proxy, is SIGKILLed after ``--kill-after`` threads are reported, and is run again to the end.
5. **Checks.** A third run finds every thread current; every thread untouched by the writers reads
   exactly as in step 2 (one migration stamp per checkpoint); every writer turn is there once, in
   order, after the thread's old history; every object's format and every record's schema is current.

Prints one JSON document with the figures. Timings include the proxy hop.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FORMAT1_COMMIT = "8bb5b2f"


def generate(root: str, endpoint: str, bucket: str, prefix: str, threads: int) -> None:
    """Runs inside the old release's worktree (its langgraph_handoff is first on sys.path)."""
    sys.path.insert(0, root)
    from langgraph_handoff import ObjectStoreSaver, envelope  # the old release's layout
    from langgraph_handoff.stores import S3Store
    from tests.checkpoint.test_migrations import v1_graph

    assert envelope.FORMAT_VERSION == 1, envelope.__file__
    saver = ObjectStoreSaver(S3Store(bucket, prefix=prefix, endpoint_url=endpoint, create_bucket=True))
    saver.setup()

    def one(n: int) -> None:
        cfg = {"configurable": {"thread_id": f"conv-{n:05d}"}}
        if n % 10 == 3:
            v1_graph(saver, ask=True).invoke({"log": [f"hello {n}"]}, cfg)
            return
        graph = v1_graph(saver)
        graph.invoke({"log": [f"hello {n}"]}, cfg)
        graph.invoke({"log": [f"again {n}"]}, cfg)
        if n % 10 == 7:
            latest = saver.get_tuple(cfg)
            saver.put_writes(latest.config, [("topic", "exchange")], "late-task")

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(one, range(threads)))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=1000)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--writers", type=int, default=4, help="writer threads taking turns during the migration")
    p.add_argument("--kill-after", type=int, default=300, help="SIGKILL the first run after this many threads")
    p.add_argument("--generate", nargs=4, metavar=("ROOT", "ENDPOINT", "BUCKET", "PREFIX"), help=argparse.SUPPRESS)
    args = p.parse_args()
    endpoint = os.environ.get("S3_ENDPOINT_URL")
    bucket = os.environ.get("LGH_TEST_BUCKET", "lgh-tests")
    if args.generate:
        root, endpoint, bucket, prefix = args.generate
        generate(root, endpoint, bucket, prefix, args.threads)
        return 0
    if not endpoint:
        p.error("set S3_ENDPOINT_URL (source /tmp/devrgw.env)")

    sys.path.insert(0, str(ROOT))
    from langgraph_handoff import ObjectStoreSaver
    from langgraph_handoff._format import envelope
    from langgraph_handoff.inspection import verify_store
    from langgraph_handoff.stores import S3Store
    from tests.checkpoint.test_migrate import schemas, stamped
    from tests.checkpoint.test_migrations import v3_graph
    from tests.support.migrate_helpers import formats, seen

    figures: dict[str, Any] = {"threads": args.threads, "concurrency": args.concurrency}
    prefix = f"migrate-bench-{uuid.uuid4().hex[:12]}"
    work = Path(tempfile.mkdtemp(prefix="migrate-bench-"))
    tree = work / "format1"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(tree), FORMAT1_COMMIT], check=True)
    proxy = None
    try:
        started = time.monotonic()
        subprocess.run(
            [sys.executable, str(ROOT / "bench" / "migrate.py"), "--threads", str(args.threads), "--generate",
             str(tree), endpoint, bucket, prefix],
            check=True, cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
        )  # fmt: skip
        figures["generate_seconds"] = round(time.monotonic() - started, 1)
        store = S3Store(bucket, prefix=prefix, endpoint_url=endpoint)
        found = formats(store)
        figures["objects_before"] = sum(1 for _ in store.list(""))
        assert found["HEAD"] == {1} and found["WRITES"] == {1}, found
        reader = ObjectStoreSaver(store, migrations=stamped())
        threads = reader.thread_ids()
        assert len(threads) == args.threads
        started = time.monotonic()
        expected = seen(reader, threads)
        figures["lazy_read_all_seconds"] = round(time.monotonic() - started, 1)

        proxy = subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "proxy.py"), "--upstream", endpoint],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,  # resets from the killed run
        )  # fmt: skip
        assert proxy.stdout is not None
        port = int(proxy.stdout.readline().split()[1])
        via = f"http://127.0.0.1:{port}"

        def phase(name: str) -> None:
            urllib.request.urlopen(f"{via}/__bench/phase?name={name}", timeout=10).read()

        url = f"s3://{bucket}/{prefix}?endpoint_url={via}"
        cli = [sys.executable, "-m", "langgraph_handoff.cli", "migrate", url, "--json"]
        cli += ["--concurrency", str(args.concurrency), "--migrations", "tests.checkpoint.test_migrate:MIGRATIONS"]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}

        def run_cli(name: str, extra: list[str]) -> dict[str, Any]:
            phase(name)
            out = subprocess.run(cli + extra, capture_output=True, text=True, env=env, timeout=3600)
            assert out.returncode == 0, out.stderr[-2000:]
            return json.loads(out.stdout.splitlines()[-1])["summary"]

        figures["dry_run"] = run_cli("dry-run", ["--dry-run"])
        assert figures["dry_run"]["migrated"] == args.threads and formats(store)["HEAD"] == {1}

        # writers: current code, straight to the server, turns on random threads throughout
        stop = threading.Event()
        written: dict[str, list[str]] = {}
        lock = threading.Lock()
        errors: list[str] = []

        def writer(seed: int) -> None:
            rng = random.Random(seed)
            graph = v3_graph(ObjectStoreSaver(S3Store(bucket, prefix=prefix, endpoint_url=endpoint),
                                              migrations=stamped()))  # fmt: skip
            turn = 0
            mine = [t for t in threads if int(t[-5:]) % args.writers == seed and int(t[-5:]) % 10 != 3]
            while not stop.is_set():
                # each writer its own threads (two writers on one thread is a race the saver refuses,
                # which is not what this measures); not the interrupted ones
                thread = rng.choice(mine)
                with lock:
                    if thread in written and len(written[thread]) >= 3:
                        continue
                    written.setdefault(thread, [])
                text = f"writer {seed} turn {turn}"
                try:
                    graph.invoke({"log": [text]}, {"configurable": {"thread_id": thread}})
                except Exception as exc:  # noqa: BLE001 - reported in the figures
                    errors.append(f"{type(exc).__name__}: {exc}")
                    continue
                with lock:
                    written[thread].append(text)
                turn += 1

        workers = [threading.Thread(target=writer, args=(i,)) for i in range(args.writers)]
        for w in workers:
            w.start()
        phase("killed-run")
        started = time.monotonic()
        proc = subprocess.Popen(cli, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        assert proc.stdout is not None
        reported = [json.loads(proc.stdout.readline()) for _ in range(args.kill_after)]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        figures["killed_run"] = {
            "seconds_until_kill": round(time.monotonic() - started, 1),
            "threads_reported": len(reported),
            "retries": sum(r["retries"] for r in reported),
            "failed": sum(r["status"] == "failed" for r in reported),
        }
        figures["rerun"] = run_cli("rerun", [])
        stop.set()
        for w in workers:
            w.join()
        figures["final_pass"] = run_cli("final", [])
        counts = json.load(urllib.request.urlopen(f"{via}/__bench/counts", timeout=30))
        figures["requests"] = {k: counts["counts"].get(k, {}) for k in ("dry-run", "killed-run", "rerun", "final")}
        figures["http_errors"] = counts["errors"]
        figures["writers"] = {
            "threads_written": len(written),
            "turns": sum(len(v) for v in written.values()),
            "errors": errors[:5],
            "error_count": len(errors),
        }

        # checks
        fresh = ObjectStoreSaver(S3Store(bucket, prefix=prefix, endpoint_url=endpoint), migrations=stamped())
        after = seen(fresh, threads)
        untouched = [t for t in threads if t not in written]
        mismatched = [t for t in untouched if after[t] != expected[t]]
        lost_turns = []
        for t, texts in written.items():
            log = fresh.get_tuple({"configurable": {"thread_id": t}}).checkpoint["channel_values"]["log"]
            if [x for x in log if x.startswith("writer ")] != texts:
                lost_turns.append(t)
            if not all(row in after[t] for row in expected[t]):
                lost_turns.append(f"{t} (old history)")
        figures["checks"] = {
            "untouched_threads_equal_to_lazy_reads": f"{len(untouched) - len(mismatched)}/{len(untouched)}",
            "threads_with_lost_or_repeated_turns": lost_turns[:10],
            "record_schemas": sorted(schemas(fresh, threads)),
            "formats": {k: sorted(v) for k, v in formats(store).items()},
            "final_pass_all_current": figures["final_pass"]["current"] == args.threads,
            "objects_after": sum(1 for _ in store.list("")),
        }
        report = verify_store(fresh)
        figures["checks"]["verify_problems"] = [p.as_dict() for p in report.problems][:5]
        figures["checks"]["unreferenced_objects"] = len(report.unreferenced)
        ok = (
            not mismatched
            and not lost_turns
            and figures["checks"]["record_schemas"] == [3]
            and figures["checks"]["final_pass_all_current"]
            and figures["rerun"]["failed"] == 0
            and not errors
            and not report.problems
        )
        figures["ok"] = ok
        figures["format"] = envelope.FORMAT_VERSION
        print(json.dumps(figures, indent=1))
        return 0 if ok else 1
    finally:
        if proxy is not None:
            proxy.terminate()
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)


if __name__ == "__main__":
    sys.exit(main())
