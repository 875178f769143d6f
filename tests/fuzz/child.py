"""The process that runs cases: ``python -m tests.fuzz.child`` with a JSON request on stdin.

It caps its own address space (``RLIMIT_AS``) and sets ``LANGGRAPH_HANDOFF_MAX_OBJECT_BYTES``
low before importing the package, so the cap is many times the largest object a reader must
accept: a reader that allocates past that bound dies here, not on a developer's machine. Each
case's result is one ``FUZZ {json}`` line on stdout, written as soon as the case ends, so the
parent knows which case a death or a hang belongs to (the first one not reported).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
import traceback
from typing import Any

#: the largest object a reader accepts while fuzzing (the cap below is 32 times it)
MAX_OBJECT_BYTES = 32 << 20
#: a reader that takes longer than this over one case is a finding (it takes well under a second
#: on the seed store; the parent ends a child that reports no case for ``CASE_TIMEOUT``)
SLOW_READER = 20.0
#: the address space of a child (the interpreter with everything imported takes about 0.6 GiB)
MEMORY_CAP = 1 << 30


def _cap_memory(limit: int) -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def run(request: dict[str, Any]) -> None:
    from langgraph_handoff.errors import LangGraphHandoffError
    from tests.fuzz import mutate, readers, seeds

    seed = seeds.load(__import__("pathlib").Path(request["seed_file"]))
    chosen = request.get("readers") or list(readers.READERS)
    clean = readers.Target(seed, {})
    baselines = {}
    for name in chosen:
        baselines[name] = view = readers.READERS[name](clean)
        assert not view.errors and not view.damaged, (name, view)
    _emit({"ready": True, "rss_kib": _rss()})
    # the harness's own test makes a child die or hang on a chosen case (test_fuzz_short.py)
    faults = request.get("faults", {})
    for index in request["indices"]:
        if index == faults.get("die"):
            os._exit(3)
        if index == faults.get("hang"):
            time.sleep(3600)
        case = mutate.make_case(seed, index, request["campaign_seed"])
        target = readers.Target(seed, {case.key: case.data})
        results: dict[str, Any] = {}
        views: dict[str, Any] = {}
        group = readers.group_of(case.key)
        for name in chosen:
            started = time.perf_counter()
            finding = None
            try:
                views[name] = view = readers.READERS[name](target)
                readers.check(name, case.key, view, baselines[name], refused=case.refused)
                result = readers.outcome(view)
            except readers.Finding as exc:
                result, finding = "FINDING", str(exc)
            except LangGraphHandoffError as exc:
                if group == "*" and isinstance(exc, readers.EnvelopeError):
                    result = f"{type(exc).__name__}({getattr(exc, 'reason', '')})"
                else:
                    result, finding = "FINDING", f"{name} stopped: {type(exc).__name__}: {exc}"
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt):
                    raise
                tb = "".join(traceback.format_exception(exc, limit=-6))
                result, finding = "FINDING", f"{name}: {type(exc).__name__}: {exc}\n{tb}"[:4000]
            seconds = time.perf_counter() - started
            if seconds > SLOW_READER and finding is None:
                result, finding = "FINDING", f"{name} took {seconds:.1f} s (more than {SLOW_READER:.0f} s)"
            results[name] = {"outcome": result, "finding": finding, "seconds": round(seconds, 3)}
        try:
            readers.cross_check(case.key, views)
            results["consistency"] = {"outcome": "read", "finding": None, "seconds": 0.0}
        except readers.Finding as exc:
            results["consistency"] = {"outcome": "FINDING", "finding": str(exc), "seconds": 0.0}
        _emit(
            {
                "index": index,
                "key": case.key,
                "label": case.label,
                "how": case.how[:300],
                "signature": case.signature,
                "results": results,
                "rss_kib": _rss(),
            }
        )


def _rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write("FUZZ " + json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> None:
    request = json.loads(sys.stdin.read())
    os.environ["LANGGRAPH_HANDOFF_MAX_OBJECT_BYTES"] = str(request.get("max_object_bytes", MAX_OBJECT_BYTES))
    _cap_memory(request.get("memory_cap", MEMORY_CAP))
    import logging

    logging.disable(logging.CRITICAL)  # damage is logged as it is reported: thousands of lines
    import warnings

    warnings.simplefilter("ignore")
    run(request)


if __name__ == "__main__":
    main()
