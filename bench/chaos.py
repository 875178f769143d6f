"""A larger chaos run for the README figures (the CI test is integration_tests/test_chaos.py).

source /tmp/devrgw.env   # or any S3 endpoint in S3_ENDPOINT_URL / AWS_* variables
.venv/bin/python bench/chaos.py --workers 4 --conversations 100 --turns 5
.venv/bin/python bench/chaos.py --local /tmp/chaos-store    # the embedded local store
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.chaos_harness import RunConfig, check, run


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--conversations", type=int, default=100)
    p.add_argument("--turns", type=int, default=5)
    p.add_argument("--ttl", type=float, default=1.5)
    p.add_argument("--seconds", type=float, default=600)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--local", type=Path, default=None, help="use a LocalStore directory instead of S3")
    args = p.parse_args()
    if args.local is not None:
        store = {"kind": "local", "path": str(args.local)}
    else:
        endpoint = os.environ.get("S3_ENDPOINT_URL")
        if not endpoint:
            p.error("set S3_ENDPOINT_URL (source /tmp/devrgw.env) or pass --local DIR")
        bucket = os.environ.get("LGH_TEST_BUCKET", "lgh-tests")
        from langgraph_handoff.stores import S3Store

        prefix = f"chaos-bench-{uuid.uuid4().hex}"
        S3Store(bucket, prefix=prefix, endpoint_url=endpoint, create_bucket=True).close()
        store = {"kind": "s3", "bucket": bucket, "prefix": prefix, "endpoint_url": endpoint}
    logdir = Path(tempfile.mkdtemp(prefix="chaos-logs-"))
    cfg = RunConfig(
        store=store,
        logdir=logdir,
        workers=args.workers,
        conversations=args.conversations,
        turns=args.turns,
        ttl=args.ttl,
        seconds=args.seconds,
        seed=args.seed,
    )
    figures = check(cfg, run(cfg))
    print(json.dumps(figures, indent=1))
    print(f"logs in {logdir}", file=sys.stderr)
    return 0 if not figures["violations"] and figures["finished"] == cfg.conversations else 1


if __name__ == "__main__":
    sys.exit(main())
