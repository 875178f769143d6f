"""The fuzzer's short run, part of every test run: a fixed set of cases, unsigned and signed.

Each case mutates one stored object (:mod:`tests.fuzz.mutate`) and reads the store through every
reader (:mod:`tests.fuzz.readers`) in a child process with a 1 GiB address-space cap; a case
that breaks a promise, kills its child or hangs is a finding, printed with how to replay it.
The long run (``scripts/fuzz``) runs the same cases and many more.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fuzz import campaign

#: the campaign seed of the short run, and how many cases each of its two runs takes (about
#: 1.2 s a case on the 2-core CI machine)
SEED, CASES = 20261207, 12


@pytest.mark.heavy
@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "signed"])
def test_no_stored_object_breaks_a_reader(signed: bool, tmp_path: Path) -> None:
    seeds = campaign.build_seeds(tmp_path)
    tally = campaign.Tally()
    campaign.run_batch(seeds[signed], signed, SEED, list(range(CASES)), tally)
    assert tally.cases == CASES
    assert not tally.findings, "\n".join(
        [campaign.table(tally), f"replay: scripts/fuzz --seed {SEED} --cases {2 * CASES}"]
        + [json.dumps(f)[:3000] for f in tally.findings]
    )
    # every reader ran on every case, and some of them met damage (the mutations reach the decoders)
    assert {r for _, r in tally.cells} == {*campaign.readers_names(), "consistency"}
    assert sum(n for cell in tally.cells.values() for o, n in cell.items() if o != "read") > 0


@pytest.mark.heavy
def test_a_case_that_kills_or_hangs_its_child_is_named_and_the_rest_still_run(tmp_path: Path) -> None:
    """The harness: a child that dies (its memory cap) or stops reporting (a hang) is replaced,
    the case it was on is the finding, and every other case of the batch still runs."""
    seeds = campaign.build_seeds(tmp_path)
    tally = campaign.Tally()
    campaign.run_batch(
        seeds[False],
        False,
        SEED,
        list(range(5)),
        tally,
        readers=["verify"],
        case_timeout=5,
        faults={"die": 1, "hang": 3},
    )
    assert tally.cases == 5
    found = {f["index"]: f["finding"].splitlines()[0] for f in tally.findings}
    assert found == {1: "the child died (exit 3)", 3: "no report for 5 s: a hang"}
    assert sum(tally.labels.values()) == 3  # cases 0, 2 and 4 ran and were reported
