"""The interaction of a loss's Δ between two set-ups (search_spaces.reports.interaction,
scripts/interaction.py), and which trials had levelled off (reports.plateau,
scripts/merge_study.py's section)."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

from search_spaces.reports.interaction import interaction, interaction_markdown, per_seed_deltas
from search_spaces.reports.plateau import plateau_markdown, plateau_table

ROOT = Path(__file__).resolve().parents[2]
# The two set-ups' official dsc recipes carry different parameters: labels differ.
TAGGER_DSC = "dsc(alpha=0.01,classes=sum,scope=example,smooth=1,square=true)"
MRC_DSC = "dsc(alpha=0.01,scope=set,smooth=1,square=true)"


def _rows(scores: dict[tuple[str, str], list[float]], **extra: list) -> pd.DataFrame:
    """Final-stage rows: {(loss label, loss_name): F1 per seed 0, 1, ...}."""
    lines = [
        {
            "loss": label,
            "loss_name": name,
            "dataset": "conll2003",
            "variant": "original",
            "seed": seed,
            "stage": "final",
            "eval_f1": value,
        }
        for (label, name), values in scores.items()
        for seed, value in enumerate(values)
    ]
    rows = pd.DataFrame(lines)
    for column, values in extra.items():
        rows[column] = values
    return rows


TAGGER = _rows({("ce", "ce"): [90.0, 91.0, 92.0], (TAGGER_DSC, "dsc"): [88.0, 89.5, 89.0]})
MRC = _rows({("ce", "ce"): [85.0, 86.0, 87.0], (MRC_DSC, "dsc"): [86.0, 86.0, 88.0]})


def test_the_deltas_pair_by_seed_and_match_recipes_by_loss_name() -> None:
    # A tuning trial and a seed that ran one loss only are left out.
    tune = pd.DataFrame(
        [
            {"loss": "ce", "loss_name": "ce", "seed": 0, "stage": "tune", "eval_f1": 10.0},
            {"loss": "ce", "loss_name": "ce", "seed": 7, "stage": "final", "eval_f1": 50.0},
        ]
    )
    deltas = per_seed_deltas(pd.concat([TAGGER, tune], ignore_index=True), "dsc")
    assert deltas.to_dict() == {0: -2.0, 1: -1.5, 2: -3.0}
    with pytest.raises(ValueError, match="'focal' is not among"):
        per_seed_deltas(TAGGER, "focal")


def test_the_interaction_is_welchs_test_on_the_two_sets_of_deltas() -> None:
    found = interaction(TAGGER, MRC, "dsc")
    tagger, mrc = [-2.0, -1.5, -3.0], [1.0, 0.0, 1.0]
    assert found.difference == pytest.approx(sum(mrc) / 3 - sum(tagger) / 3)  # 2.8333
    # By hand: variances 0.5833 and 0.3333 over 3 seeds each.
    error = math.sqrt(0.58333333 / 3 + 0.33333333 / 3)
    dof = error**4 / ((0.58333333 / 3) ** 2 / 2 + (0.33333333 / 3) ** 2 / 2)
    assert found.degrees_of_freedom == pytest.approx(dof, rel=1e-6)
    assert found.p_value == pytest.approx(stats.ttest_ind(mrc, tagger, equal_var=False).pvalue)
    expected = (stats.t.ppf(0.975, dof) + stats.t.ppf(0.80, dof)) * error
    assert found.resolvable == pytest.approx(expected, rel=1e-6)
    assert found.resolvable_low < found.resolvable < found.resolvable_high
    half = stats.t.ppf(0.975, dof) * error
    assert (found.ci_low, found.ci_high) == pytest.approx(
        (found.difference - half, found.difference + half), rel=1e-6
    )
    text = interaction_markdown(found, "tagger", "MRC-NER")
    assert "Interaction (Δ in MRC-NER − Δ in tagger): **+2.83**" in text
    assert "| tagger | 3 | -2.17 | 0.76 | 0: -2.00, 1: -1.50, 2: -3.00 |" in text
    assert f"95% CI {found.ci_low:+.2f} to {found.ci_high:+.2f} (Welch)" in text
    assert "resolved" not in text and "names no cause" in text


def test_a_difference_below_the_seeds_reach_is_evidence_neither_way() -> None:
    close = _rows({("ce", "ce"): [85.0, 86.0, 87.0], (MRC_DSC, "dsc"): [82.0, 85.0, 84.0]})
    found = interaction(TAGGER, close, "dsc")
    assert found.p_value > 0.05 and found.ci_low < 0 < found.ci_high
    assert "not significant" in interaction_markdown(found, "tagger", "MRC-NER")
    one_seed = interaction(TAGGER, close[close["seed"] == 0], "dsc")
    assert math.isnan(one_seed.p_value) and "no test" in interaction_markdown(one_seed, "a", "b")


def test_the_script_prints_and_writes_the_section(tmp_path: Path) -> None:
    TAGGER.to_csv(tmp_path / "b-tagger-trials.csv", index=False)
    MRC.to_csv(tmp_path / "b-mrc-trials.csv", index=False)
    names = ["--names", "tagger", "MRC-NER", "--page", "studyB"]
    command = [sys.executable, "scripts/interaction.py", "--results", str(tmp_path)]
    result = subprocess.run(
        [*command, "--first", "b-tagger", "--second", "b-mrc", "--loss", "dsc", *names],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "**+2.83**" in result.stdout
    page = (tmp_path / "studyB.md").read_text()
    assert "## The interaction" in page and "**+2.83**" in page
    wrong = subprocess.run(
        [*command, "--first", "b-tagger", "--second", "b-mrc", "--loss", "dice"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert wrong.returncode != 0 and "'dice' is not among" in wrong.stderr


def test_a_trial_is_flat_where_its_last_evaluations_lie_within_its_cells_spread() -> None:
    rows = _rows(
        {("ce", "ce"): [84.0, 85.0, 86.0], ("dice", "dice"): [80.0]},
        last_evaluations=[
            "100:83.5 200:83.9 300:84.0",  # range 0.5 within ce's std 1.0
            "100:82.0 200:84.0 300:85.0",  # range 3.0, rising
            "100:87.0 200:86.5 300:86.0",  # range 1.0: within (equal to) the spread
            "100:79.0 200:79.5 300:80.0",  # one seed: no spread
        ],
        last_evaluations_range=[0.5, 3.0, 1.0, 1.0],
    )
    table = plateau_table(rows).set_index(["loss", "seed"])
    assert table["verdict"].to_dict() == {
        ("ce", 0): "flat",
        ("ce", 1): "rising",
        ("ce", 2): "flat",
        ("dice", 0): "one seed: no spread to compare",
    }
    assert table.loc[("ce", 1), "cell_std"] == pytest.approx(1.0)
    falling = rows.assign(
        last_evaluations=rows["last_evaluations"].where(rows.index != 1, "100:85.0 300:82.0")
    )
    assert plateau_table(falling).set_index(["loss", "seed"]).at[("ce", 1), "verdict"] == "falling"
    assert "2 of 4 final-stage trials flat" in plateau_markdown(plateau_table(rows))
    assert plateau_table(rows.drop(columns=["last_evaluations"])).empty


def test_merging_shards_that_carry_last_evaluations_adds_the_section(tmp_path: Path) -> None:
    shard = "study6-parity-conll-12ep-fp32"  # published with its last evaluations
    shutil.copy(ROOT / "docs" / "results" / f"{shard}-trials.csv", tmp_path)
    result = subprocess.run(
        [sys.executable, "scripts/merge_study.py", "merged", shard, "--results", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    page = (tmp_path / "merged.md").read_text()
    assert "## The last evaluations" in page
    # ce's seeds 0 and 2 rose by more than ce's seed spread (0.37) over their last three.
    assert (
        "| ce | conll2003 | 0 | 1250:84.3188 1375:84.5995 1500:84.7344 | 0.42 | 0.37 | rising |"
        in page
    )
    assert "4 of 6 final-stage trials flat" in page
