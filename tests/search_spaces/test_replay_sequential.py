"""scripts/replay_sequential.py on the published trials of studies B and 2: the paired
differences recomputed from the CSVs here, and the verdicts it prints."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from scipy import stats

from search_spaces.sequential import SeedsUntilDecided, Verdict, design
from tests.scripts import script

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
replay_sequential = script("replay_sequential")
RULE = SeedsUntilDecided(delta_min=0.5)


@pytest.fixture(scope="module")
def cells() -> dict[tuple[str, str, str], Any]:
    return {
        (cell.setup, cell.loss.split("(")[0], cell.column): cell
        for cell in replay_sequential.replay(RULE)
    }


def _f1(shard: str) -> pd.DataFrame:
    rows = pd.read_csv(RESULTS / f"{shard}-trials.csv")
    return rows[rows["stage"] == "final"]


def test_mrc_ner_at_12_epochs_is_not_decided_by_seed_5(
    cells: dict[tuple[str, str, str], Any],
) -> None:
    # dsc − ce at seeds 0..4, read from each seed's shard here.
    expected = []
    for seed in range(5):
        rows = _f1(f"studyB-conll-mrc-12ep-s{seed}").set_index("loss_name")["eval_f1"]
        expected.append(rows["dsc"] - rows["ce"])
    cell = cells[("MRC-NER, 12 epochs", "dsc", "conll2003")]
    assert cell.differences == pytest.approx(expected)
    assert all(d > 0 for d in cell.differences)  # ahead at every seed ...
    first, second = cell.looks
    assert (first.verdict, second.verdict) == (Verdict.CONTINUE, Verdict.CONTINUE)
    # ... yet at look 2 |t| is under 6.61: mean ± c_2^t · s/√5 still holds 0.
    mean, sd = float(pd.Series(expected).mean()), float(pd.Series(expected).std(ddof=1))
    half = design(RULE).t[1] * sd / math.sqrt(5)
    assert (second.ci_low, second.ci_high) == pytest.approx((mean - half, mean + half))
    assert second.mean == pytest.approx(1.00, abs=0.005)
    assert second.ci_low < 0 < second.ci_high and second.p_value > 0.05
    assert cell.seeds_needed(RULE) == 7 and cell.saved(RULE) == -2


def test_the_tagger_is_not_decided_by_seed_5(cells: dict[tuple[str, str, str], Any]) -> None:
    wide = _f1("studyB-conll-tagger-s0-4").pivot_table(
        index="seed", columns="loss_name", values="eval_f1"
    )
    expected = (wide["dsc"] - wide["ce"]).sort_index().tolist()
    cell = cells[("tagger", "dsc", "conll2003")]
    assert cell.differences == pytest.approx(expected)
    assert cell.looks[-1].verdict is Verdict.CONTINUE
    assert cell.looks[-1].mean == pytest.approx(-0.74, abs=0.005)


@pytest.mark.parametrize(
    ("loss", "variant"), [("dice", "+positive"), ("focal", "+positive"), ("dsc", "-negative")]
)
def test_three_of_study_2s_cells_are_futile_at_seed_3(
    cells: dict[tuple[str, str, str], Any], loss: str, variant: str
) -> None:
    ce = _f1("study2-mrpc-variants-ce")
    ce = ce[ce["variant"] == variant].set_index("seed")["eval_f1"]
    cell = cells[("pair classifier", loss, variant)]
    (look,) = cell.looks
    assert look.verdict is Verdict.FUTILE and look.seeds == 3
    # Conditional power recomputed: T_1 = d̄/(s/√3), CP under the current trend.
    diffs = pd.Series(cell.differences)
    t_stat = diffs.mean() / (diffs.std(ddof=1) / math.sqrt(3))
    trend, last = t_stat / math.sqrt(0.3), design(RULE).t[-1]
    power = stats.norm.cdf((trend - last) / math.sqrt(0.7)) + stats.norm.cdf(
        (-trend - last) / math.sqrt(0.7)
    )
    assert look.conditional_power == pytest.approx(power) and power < 0.10
    assert len(ce) == 3 and cell.saved(RULE) == 0


def test_study_2s_cells_extended_by_study_c_carry_their_new_seeds(
    cells: dict[tuple[str, str, str], Any],
) -> None:
    negative = cells[("pair classifier", "dsc", "+negative")]
    both = cells[("pair classifier", "dsc", "+positive&negative")]
    assert (negative.seeds_run, both.seeds_run) == (4, 6)
    assert [look.seeds for look in both.looks] == [3, 5]
    assert both.looks[-1].verdict is Verdict.CONTINUE


def test_the_script_prints_every_cell_and_leaves_the_docs_alone() -> None:
    before = (ROOT / "docs" / "benchmarks.md").read_text()
    printed = subprocess.run(
        [sys.executable, "scripts/replay_sequential.py", "--no-docs"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = [
        line for line in printed.splitlines() if line.startswith("| B ") or line.startswith("| 2 ")
    ]
    assert len(rows) == 17
    assert sum("**futile**" in row for row in rows) == 3
    assert "Of 17 cells the rule ends 3 within their published seeds (3 futile)" in printed
    assert (ROOT / "docs" / "benchmarks.md").read_text() == before
