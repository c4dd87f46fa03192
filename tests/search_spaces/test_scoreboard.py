"""docs/results/SCOREBOARD.md is generated (``scripts/scoreboard.py``) from the published
CSVs and is current, and its verdicts follow from intervals recomputed here."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

from tests.scripts import script

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
board = script("scoreboard")


def test_regenerating_the_scoreboard_changes_nothing() -> None:
    text = board.scoreboard()
    assert text == (RESULTS / "SCOREBOARD.md").read_text()
    readme = (RESULTS / "README.md").read_text()
    assert board.place_opening(readme, board.readme_section(text)) == readme


@pytest.mark.parametrize(
    ("paper", "low", "high", "expected"),
    [
        (0.29, 0.30, 1.70, "same sign"),
        (0.50, 0.30, 1.70, "same sign, inside the CI"),
        (0.29, -1.43, -0.04, "opposite"),
        (0.56, -6.57, 24.41, "undecided"),
    ],
)
def test_the_verdicts(paper: float, low: float, high: float, expected: str) -> None:
    assert board.verdict(paper, low, high) == expected


def test_the_mrc_ner_line_from_its_csvs() -> None:
    frames = [pd.read_csv(RESULTS / f"studyB-conll-mrc-12ep-s{s}-trials.csv") for s in range(5)]
    wide = pd.concat(frames).pivot_table(index="seed", columns="loss_name", values="eval_f1")
    low, high = stats.ttest_rel(wide["dsc"], wide["ce"]).confidence_interval()
    delta = (wide["dsc"] - wide["ce"]).mean()
    line = (
        f"| Table 4, BERT-MRC on CoNLL-2003 (test) | dsc(alpha=0.01,scope=set,smooth=1,square=true)"
        f" (conll2003) | +0.29 | {delta:+.2f} [{low:+.2f}, {high:+.2f}], 5 seeds |"
    )
    assert line in (RESULTS / "SCOREBOARD.md").read_text()
    assert board.verdict(0.29, low, high) == "same sign"
