"""Drive fuzzing children and tabulate what they met: ``python -m tests.fuzz.campaign``.

Cases are numbered; case ``i`` of campaign seed ``S`` is the same mutation in every process
(:func:`tests.fuzz.mutate.make_case`, over the seed store this campaign built and handed to its
children as a file). Children run batches of cases and report each as it ends; a child that
dies (its memory cap) or stops reporting for ``case_timeout`` seconds (a hang) is ended, the
case it was on is recorded as a finding, and a new child takes the rest of the batch. Each
finding is saved with the seed store and the command that replays it.

``scripts/fuzz --minutes N --seed S`` runs this for N minutes; the short run in the test
command (``test_fuzz_short.py``) runs a fixed number of cases of fixed seeds.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: a case (every reader over one mutated object) that reports nothing for this long hangs
CASE_TIMEOUT = 60.0


@dataclass
class Tally:
    """What a campaign met, per object kind and reader."""

    cases: int = 0
    started: float = field(default_factory=time.monotonic)
    #: (label, reader) -> outcome -> count
    cells: dict[tuple[str, str], collections.Counter[str]] = field(
        default_factory=lambda: collections.defaultdict(collections.Counter)
    )
    labels: collections.Counter[str] = field(default_factory=collections.Counter)
    signatures: collections.Counter[str] = field(default_factory=collections.Counter)
    findings: list[dict[str, Any]] = field(default_factory=list)
    slowest: tuple[float, str] = (0.0, "")
    peak_rss_kib: int = 0

    def add(self, report: dict[str, Any], signed: bool) -> None:
        self.cases += 1
        self.labels[report["label"]] += 1
        self.signatures[report["signature"]] += 1
        self.peak_rss_kib = max(self.peak_rss_kib, report.get("rss_kib", 0))
        for reader, result in report["results"].items():
            self.cells[(report["label"], reader)][result["outcome"]] += 1
            if result["seconds"] > self.slowest[0]:
                self.slowest = (result["seconds"], f"{reader} on {report['label']} (case {report['index']})")
            if result["finding"]:
                self.findings.append({**_case_of(report, signed), "reader": reader, "finding": result["finding"]})

    def died(self, index: int, signed: bool, why: str) -> None:
        self.cases += 1
        self.findings.append({"index": index, "signed": signed, "reader": "(the child)", "finding": why})


def _case_of(report: dict[str, Any], signed: bool) -> dict[str, Any]:
    return {k: report[k] for k in ("index", "key", "label", "how", "signature")} | {"signed": signed}


def build_seeds(directory: Path) -> dict[bool, Path]:
    """The seed stores, unsigned and signed, in files a child loads."""
    code = (
        "import sys, pathlib, logging, warnings; logging.disable(logging.CRITICAL); warnings.simplefilter('ignore');"
        "from tests.fuzz import seeds;"
        "[seeds.save(seeds.build(s), pathlib.Path(sys.argv[1]) / f'seed-{int(s)}.msgpack') for s in (False, True)]"
    )
    subprocess.run([sys.executable, "-c", code, str(directory)], check=True, cwd=ROOT, env=_env())
    return {s: directory / f"seed-{int(s)}.msgpack" for s in (False, True)}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


#: how long a child may take to start (imports, the seed store, every reader's baseline)
START_TIMEOUT = 180.0


def _reports(proc: subprocess.Popen[str], timeout: Callable[[], float]) -> Iterator[dict[str, Any] | None]:
    """The child's ``FUZZ`` lines as they come; None when it has said nothing for ``timeout()``."""
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    buffer = ""
    while True:
        if "\n" not in buffer and not sel.select(timeout()):
            yield None
            return
        if "\n" not in buffer:
            chunk = os.read(proc.stdout.fileno(), 1 << 16).decode()
            if not chunk:
                return
            buffer += chunk
            continue
        line, buffer = buffer.split("\n", 1)
        if line.startswith("FUZZ "):
            yield json.loads(line[5:])


def run_batch(
    seed_file: Path, signed: bool, campaign_seed: int, indices: list[int], tally: Tally, *,
    readers: list[str] | None = None, case_timeout: float = CASE_TIMEOUT, memory_cap: int | None = None,
    faults: dict[str, int] | None = None,
) -> None:  # fmt: skip
    """Run ``indices`` in children until each is reported or named as the one a child died on."""
    todo = list(indices)
    while todo:
        request: dict[str, Any] = {"seed_file": str(seed_file), "campaign_seed": campaign_seed, "indices": todo}
        if readers:
            request["readers"] = readers
        if memory_cap:
            request["memory_cap"] = memory_cap
        if faults:
            request["faults"] = faults
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fuzz.child"],
            cwd=ROOT, env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(request))
        proc.stdin.close()
        hung = False
        ready = False
        for report in _reports(proc, lambda: case_timeout if ready else START_TIMEOUT):  # noqa: B023 - now, not then
            if report is None:
                hung = True
                break
            if report.get("ready"):
                ready = True
                continue
            tally.add(report, signed)
            todo.remove(report["index"])
        if hung:
            proc.kill()
        proc.wait()
        stderr = proc.stderr.read() if proc.stderr else ""
        if not todo:
            break
        if not ready:
            raise RuntimeError(f"a fuzzing child failed before its first case:\n{stderr[-3000:]}")
        culprit = todo.pop(0)
        why = f"no report for {case_timeout:.0f} s: a hang" if hung else f"the child died (exit {proc.returncode})"
        tally.died(culprit, signed, f"{why}\n{stderr[-2000:]}")


def table(tally: Tally) -> str:
    """The coverage table: per object kind x reader, cases, outcomes and findings."""
    readers = sorted({r for _, r in tally.cells}, key=_reader_order)
    lines = [
        f"cases: {tally.cases} in {time.monotonic() - tally.started:.0f} s; findings: {len(tally.findings)}; "
        f"signatures: {dict(tally.signatures)}; slowest reader run: {tally.slowest[0]:.2f} s ({tally.slowest[1]}); "
        f"peak RSS of a child: {tally.peak_rss_kib // 1024} MiB",
        "",
        "| object kind | cases | " + " | ".join(readers) + " |",
        "|---|---:|" + "---:|" * len(readers),
    ]
    for label in sorted(tally.labels):
        row = [label, str(tally.labels[label])]
        for reader in readers:
            cell = tally.cells.get((label, reader), collections.Counter())
            refused = sum(n for o, n in cell.items() if o not in ("read", "FINDING"))
            bad = cell.get("FINDING", 0)
            row.append(f"{cell.get('read', 0)}/{refused}" + (f"/**{bad}**" if bad else ""))
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "cells: read without error / refused or reported as damage[/findings]", "", "outcomes:"]
    outcomes: collections.Counter[str] = collections.Counter()
    for cell in tally.cells.values():
        outcomes.update(cell)
    lines += [f"  {n:8d}  {o}" for o, n in outcomes.most_common()]
    return "\n".join(lines)


def readers_names() -> list[str]:
    """The readers a child runs (imported here only when asked: the parent needs no package)."""
    from tests.fuzz.readers import READERS

    return list(READERS)


def _reader_order(name: str) -> int:
    names = readers_names()
    return names.index(name) if name in names else 99


def campaign(
    *, seconds: float | None, cases: int | None, campaign_seed: int, out: Path, batch: int = 50,
    seeds_from: Path | None = None, first: int = 0, kinds: tuple[bool, ...] = (False, True),
    readers: list[str] | None = None, progress: bool = True,
) -> Tally:  # fmt: skip
    """Batches of cases from ``first`` on, unsigned and signed by turns (``kinds``), until
    ``seconds`` pass or ``cases`` have run. The seed stores are built into ``out`` first (or
    taken from ``seeds_from``: a replay), and each finding is appended to
    ``out/findings.jsonl`` as it is met."""
    tally = Tally()
    out.mkdir(parents=True, exist_ok=True)
    if seeds_from is not None:
        seed_files = {s: seeds_from / f"seed-{int(s)}.msgpack" for s in (False, True)}
    else:
        seed_files = build_seeds(out)
    log = out / "findings.jsonl"
    next_index = first
    while (seconds is None or time.monotonic() - tally.started < seconds) and (cases is None or tally.cases < cases):
        n = max(1, (batch if cases is None else min(batch, cases - tally.cases)) // len(kinds))
        for signed in kinds:
            known = len(tally.findings)
            run_batch(seed_files[signed], signed, campaign_seed, list(range(next_index, next_index + n)), tally,
                      readers=readers)  # fmt: skip
            with log.open("a") as f:
                for finding in tally.findings[known:]:
                    f.write(json.dumps({**finding, "campaign_seed": campaign_seed}) + "\n")
                    print(f"[fuzz] FINDING {_replay(campaign_seed, finding, out)}", file=sys.stderr, flush=True)
        next_index += n
        if progress:
            print(f"[fuzz] {tally.cases} cases, {len(tally.findings)} findings, "
                  f"{time.monotonic() - tally.started:.0f} s", file=sys.stderr, flush=True)  # fmt: skip
    return tally


def _replay(campaign_seed: int, finding: dict[str, Any], out: Path) -> str:
    return (
        f"case {finding['index']} ({'signed' if finding['signed'] else 'unsigned'}), {finding['reader']}: "
        f"{finding['finding'].splitlines()[0][:300]}\n  replay: scripts/fuzz --seed {campaign_seed} "
        f"--seeds {out} --first {finding['index']} --cases 1 --signed {'yes' if finding['signed'] else 'no'}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=20.0, help="how long to run (default 20)")
    parser.add_argument("--cases", type=int, default=None, help="stop after this many cases")
    parser.add_argument("--seed", type=int, default=None, help="the campaign seed (default: from the clock, printed)")
    parser.add_argument("--first", type=int, default=0, help="the number of the first case (default 0)")
    parser.add_argument(
        "--signed", choices=["both", "yes", "no"], default="both", help="signed runs, unsigned, or both"
    )
    parser.add_argument("--batch", type=int, default=50, help="cases per child process")
    parser.add_argument("--out", type=Path, default=ROOT / "fuzz-findings", help="where seeds and findings go")
    parser.add_argument("--seeds", type=Path, default=None, help="the seed stores of an earlier run (a replay)")
    parser.add_argument("--report", type=Path, default=None, help="also write the coverage table to this file")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else int(time.time()) % 1_000_000
    print(f"[fuzz] campaign seed {seed}; seed stores and findings in {args.out}", file=sys.stderr, flush=True)
    kinds = {"both": (False, True), "yes": (True,), "no": (False,)}[args.signed]
    tally = campaign(
        seconds=args.minutes * 60, cases=args.cases, campaign_seed=seed, out=args.out, batch=args.batch,
        seeds_from=args.seeds, first=args.first, kinds=kinds,
    )  # fmt: skip
    text = f"fuzzing campaign, seed {seed}, {datetime.date.today().isoformat()}\n\n{table(tally)}\n"
    for finding in tally.findings:
        text += f"\nFINDING {_replay(seed, finding, args.out)}\n{json.dumps(finding)[:3000]}\n"
    print(text)
    if args.report is not None:
        args.report.write_text(text)
    return 1 if tally.findings else 0


if __name__ == "__main__":
    sys.exit(main())
