"""Run LangGraph's own test suite with our saver and store as extra variants.

LangGraph publishes its tests in its sdist. This script:

1. reads which ``langgraph`` and ``langgraph-checkpoint`` the project's ``.venv`` has;
2. makes ``.venv-lgsuite`` with this package, the same two versions and LangGraph's test
   dependencies (without ``langchain``: with it installed, six of LangGraph's streaming tests
   fail on every saver, its own included), reinstalling only when something changed;
3. downloads both sdists from the package index once (``.langgraph-suite/``) and unpacks their
   ``tests/`` afresh;
4. appends one import to LangGraph's ``tests/conftest.py`` so that its ``sync_checkpointer``,
   ``async_checkpointer``, ``sync_store`` and ``async_store`` fixtures yield our variants
   (``lgh_suite.py``), and runs every test that takes one of them: with pytest-xdist, then the
   few that time stream chunks on the wall clock alone in one process (``lgh_suite.WALL_CLOCK``);
5. runs ``langgraph-checkpoint``'s ``tests/test_store.py`` against ``ObjectStoreMemory``.

The rule it enforces: every test that passes on LangGraph's ``InMemorySaver`` passes on ours.
A test may be left out only with its reason next to it (``lgh_suite.LEFT_OUT``).

Usage: ``scripts/langgraph_suite/run.py [--reference] [--variants a,b] [-- pytest args]``.
``--reference`` adds LangGraph's ``InMemorySaver`` as a variant (the rule's yardstick; CI
skips it for time). ``scripts/test`` runs it with ``S3_ENDPOINT_URL`` set, for ``handoff_s3``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
VENV = ROOT / ".venv-lgsuite"
CACHE = ROOT / ".langgraph-suite"

#: LangGraph's test dependency group, less what only its Docker variants, benchmarks and dev
#: loop use; its conftest imports the Postgres and Redis modules even when they are not used
TEST_DEPS = [
    "pytest>=8",
    "pytest-mock",
    "pytest-xdist",
    "pytest-repeat",
    "pytest-dotenv",
    "syrupy",
    "httpx",
    "pycryptodome",
    "langgraph-checkpoint-sqlite",
    "langgraph-checkpoint-postgres",
    "psycopg[binary]",
    "psycopg-pool",
    "redis",
    "langgraph-prebuilt",
    "langgraph-sdk",
    # langgraph-checkpoint's own test group (test_store.py): its asyncio mode, its embeddings fake
    "pytest-asyncio",
    "numpy",
]

#: the fixtures whose tests are ours to run
FIXTURES = ("sync_checkpointer", "async_checkpointer", "sync_store", "async_store")


def log(msg: str) -> None:
    print(f"[langgraph-suite {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def installed_version(python: Path, dist: str) -> str:
    out = subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def ensure_venv(versions: dict[str, str]) -> Path:
    python = VENV / "bin" / "python"
    uv = ROOT / ".venv" / "bin" / "uv"
    reqs = ["-e", f"{ROOT}[obstore]", *(f"{d}=={v}" for d, v in versions.items()), *TEST_DEPS]
    stamp = hashlib.sha256("\n".join([*reqs, (ROOT / "pyproject.toml").read_text(), sys.version]).encode()).hexdigest()[
        :16
    ]
    stamp_file = VENV / ".lgh-suite-stamp"
    if python.exists() and stamp_file.exists() and stamp_file.read_text() == stamp:
        log(f"{VENV.name}: up to date")
        return python
    log(
        f"{VENV.name}: installing this package, {', '.join(f'{d} {v}' for d, v in versions.items())} and LangGraph's test dependencies"
    )
    if not python.exists():
        if uv.exists():
            subprocess.run([str(uv), "venv", "-q", "-p", str(ROOT / ".venv" / "bin" / "python"), str(VENV)], check=True)
        else:
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    if uv.exists():
        cmd = [str(uv), "pip", "install", "-q", "--compile-bytecode", "--python", str(python), *reqs]
    else:
        cmd = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *reqs]
    subprocess.run(cmd, check=True)
    stamp_file.write_text(stamp)
    return python


def sdist_tests(dist: str, version: str) -> Path:
    """The sdist's unpacked source tree, with a fresh copy of its tests."""
    CACHE.mkdir(exist_ok=True)
    name = dist.replace("-", "_")
    archive = next(iter(sorted(CACHE.glob(f"{name}-{version}.tar.gz"))), None)
    if archive is None:
        log(f"downloading the sdist of {dist} {version}")
        subprocess.run(
            [str(ROOT / ".venv" / "bin" / "python"), "-m", "pip", "download", "-q", "--disable-pip-version-check",
             "--no-deps", "--no-binary", ":all:", "-d", str(CACHE), f"{dist}=={version}"],
            check=True,
        )  # fmt: skip
        archive = next(iter(sorted(CACHE.glob(f"{name}-{version}.tar.gz"))))
    tree = CACHE / f"{name}-{version}"
    shutil.rmtree(tree, ignore_errors=True)
    with tarfile.open(archive) as tar:
        tar.extractall(CACHE, filter="data")
    return tree


def our_files(tests: Path) -> list[str]:
    """LangGraph's test files that take one of the fixtures we provide."""
    pattern = re.compile(r"\b(" + "|".join(FIXTURES) + r")\b")
    return sorted(f"tests/{p.name}" for p in tests.glob("test_*.py") if pattern.search(p.read_text(encoding="utf-8")))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", action="store_true", help="also run LangGraph's InMemorySaver")
    parser.add_argument("--variants", default="handoff_memory,handoff_file,handoff_s3")
    parser.add_argument("--workers", default=os.environ.get("LGH_TEST_WORKERS", "2"))
    parser.add_argument("--no-store-tests", action="store_true", help="skip langgraph-checkpoint's test_store.py")
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()

    main_python = ROOT / ".venv" / "bin" / "python"
    versions = {d: installed_version(main_python, d) for d in ("langgraph", "langgraph-checkpoint")}
    python = ensure_venv(versions)
    variants = args.variants + (",memory" if args.reference else "")
    env = {
        **os.environ,
        "LGH_SUITE_VARIANTS": variants,
        "NO_DOCKER": "true",  # LangGraph's Postgres and Redis variants need Docker
        "PYTHONPATH": str(HERE),
    }
    xdist = ["-n", args.workers] if args.workers != "0" else []
    status = 0

    tree = sdist_tests("langgraph", versions["langgraph"])
    conftest = tree / "tests" / "conftest.py"
    conftest.write_text(
        conftest.read_text(encoding="utf-8")
        + "\n\n# added by langgraph-handoff's scripts/langgraph_suite: our saver and store as variants\n"
        "from lgh_suite import async_checkpointer, async_store, sync_checkpointer, sync_store  # noqa: E402, F811\n",
        encoding="utf-8",
    )
    files = our_files(tree / "tests")
    named = [a for a in args.pytest_args if a.startswith("tests/")]
    if named:  # run only the files (or tests) named on the command line
        files, args.pytest_args = named, [a for a in args.pytest_args if a not in named]
    log(f"langgraph {versions['langgraph']}: {len(files)} files, variants {variants}")
    started = time.monotonic()
    # LangGraph runs its async tests with anyio's plugin; pytest-asyncio is there for the store tests
    pytest = [str(python), "-m", "pytest", "-p", "lgh_suite", "-p", "no:asyncio", "-p", "no:cacheprovider", "-q"]
    if named or not xdist:  # one run, as asked
        status |= subprocess.run([*pytest, *xdist, *files, *args.pytest_args], cwd=tree, env=env).returncode
    else:
        # the tests that time chunks on the wall clock run alone afterwards (lgh_suite.WALL_CLOCK)
        status |= subprocess.run([*pytest, *xdist, *files, *args.pytest_args], cwd=tree,
                                 env={**env, "LGH_SUITE_PHASE": "shared"}).returncode  # fmt: skip
        log("the tests that time stream chunks on the wall clock, alone in one process")
        sys.path.insert(0, str(HERE))
        from lgh_suite import WALL_CLOCK

        alone = [f for f in files if f in {w.split("::", 1)[0] for w in WALL_CLOCK}]
        if alone:
            code = subprocess.run([*pytest, *alone, *args.pytest_args], cwd=tree,
                                  env={**env, "LGH_SUITE_PHASE": "alone"}).returncode  # fmt: skip
            status |= 0 if code == 5 else code  # 5: none of them runs on the variants asked for
    log(f"langgraph's suite: exit {status} in {time.monotonic() - started:.0f} s")

    if not args.no_store_tests:
        tree = sdist_tests("langgraph-checkpoint", versions["langgraph-checkpoint"])
        started = time.monotonic()
        # one process: about a hundred quick tests, fewer than pytest-xdist takes to start
        cmd = [str(python), "-m", "pytest", "-p", "lgh_store_suite", "-p", "no:cacheprovider", "-q", "-q",
               "tests/test_store.py"]  # fmt: skip
        code = subprocess.run(cmd, cwd=tree, env=env).returncode
        log(f"langgraph-checkpoint's test_store.py: exit {code} in {time.monotonic() - started:.0f} s")
        status |= code
    return status


if __name__ == "__main__":
    sys.exit(main())
