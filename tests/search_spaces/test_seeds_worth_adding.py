"""Which cells more seeds could decide (scripts/seeds_worth_adding.py), by hand and on
study 1's published trials."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from search_spaces.reports.resolution import resolvable_difference, seeds_to_resolve
from tests.scripts import script

ROOT = Path(__file__).resolve().parents[2]
verdict = script("seeds_worth_adding").verdict

# Study 2's eight variant shards, as docs/results/study2-mrpc.md merges them.
STUDY_2 = [
    f"study2-mrpc-variants-{part}"
    for part in ("ce", "focal-a", "focal-b", "dice-a", "dice-b", "dice-c", "dsc-a", "dsc-b")
]


def _table(*shards: str) -> str:
    """What scripts/seeds_worth_adding.py prints for these published shards."""
    result = subprocess.run(
        [sys.executable, "scripts/seeds_worth_adding.py", *shards],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


def test_the_seeds_a_difference_needs_at_a_given_spread() -> None:
    # At k seeds a paired test resolves (t(.975) + t(.80)) * s / sqrt(k): the fewest k
    # with that within |delta|, and not one fewer.
    k = seeds_to_resolve(1.0, 1.5)
    assert k is not None
    assert resolvable_difference(1.0, k) <= 1.5 < resolvable_difference(1.0, k - 1)
    assert seeds_to_resolve(1.0, -1.5) == k  # the sign does not matter
    assert seeds_to_resolve(1.0, 0.0) is None
    assert seeds_to_resolve(1.0, 0.01, most=50) is None  # not within 50 seeds


@pytest.mark.parametrize(
    ("delta", "resolves", "expected"),
    [
        (-2.0, 1.0, "resolved"),
        (-2.0, 3.9, "worth more seeds"),
        (2.0, 4.1, "not at this spread"),
        (2.0, float("nan"), "no test"),
    ],
)
def test_the_verdict_at_a_factor_of_two(delta: float, resolves: float, expected: str) -> None:
    assert verdict(delta, resolves, factor=2.0) == expected


def test_study_1_names_tversky_alone_as_worth_more_seeds() -> None:
    shards = ["study1-conll-ce", "study1-conll-dsc-tversky", "study1-conll-wce-focal"]
    stdout = _table(*shards, "study1-conll-dice")
    verdicts = {
        line.split(" | ")[0].strip("| "): line.split(" | ")[7] for line in stdout.splitlines()[2:]
    }
    assert verdicts == {
        "dice(smooth=1)": "resolved",
        "dsc(alpha=0.01,classes=sum,scope=example,smooth=1,square=true)": "resolved",
        "focal(gamma=2)": "not at this spread",
        "tversky(alpha=0.3,beta=0.7,scope=set)": "worth more seeds",
        "wce(k=1)": "resolved",
    }


def test_study_2_names_dsc_on_two_variants_as_worth_more_seeds() -> None:
    """docs/results/README.md's study C: the two cells, and the seeds each needs."""
    stdout = _table(*STUDY_2)
    worth = {
        (cells[0], cells[1]): cells[8]
        for line in stdout.splitlines()[2:]
        if (cells := [cell.strip() for cell in line.strip("|").split("|")])[7] == "worth more seeds"
    }
    dsc = "dsc(alpha=0.01,classes=sum,scope=example,smooth=1,square=true)"
    assert worth == {(dsc, "+negative"): "4", (dsc, "+positive&negative"): "6"}


def test_seed_3_resolves_dsc_on_plus_negative_as_predicted() -> None:
    """Study C's first extension: with seed 3 of ce and dsc, the +negative cell is resolved."""
    stdout = _table(*STUDY_2, "studyC-mrpc-negative-ce-seed3", "studyC-mrpc-negative-dsc-seed3")
    dsc = "| dsc(alpha=0.01,classes=sum,scope=example,smooth=1,square=true) | +negative | "
    assert f"{dsc}4 | -29.43 | 0.022 | 27.92 | 0.9 | resolved | 4 |" in stdout


def test_study_1s_tversky_cell_rerun_on_the_whole_file_is_resolved() -> None:
    """Study C's third extension: ce and tversky at seeds 0-3 on the whole file. With its two
    constant seeds counted at F1 0 the cell resolves; left out, two seeds remain."""
    shards = ("studyC-conll-ce-seeds0-3", "studyC-conll-tversky-seeds0-3")
    tversky = "| tversky(alpha=0.3,beta=0.7,scope=set) | conll2003 | "
    assert f"{tversky}4 | -71.05 | 0.007 | 45.30 | 0.6 | resolved | 3 |" in _table(*shards)
    assert f"{tversky}2 | -52.20 | 0.001 | 0.93 | 0.0 | resolved | 2 |" in _table(
        *shards, "--without-flagged"
    )
