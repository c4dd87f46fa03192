"""The 2 × 2 factorial of a loss's Δ against the baseline (search_spaces.reports.factorial,
scripts/factorial.py): both main effects and the interaction over four cells of
per-seed Δs, each against arithmetic done by hand."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

from search_spaces.reports.factorial import factorial, factorial_markdown

ROOT = Path(__file__).resolve().parents[2]
LEVELS = (("tagger", "MRC-NER"), ("per position", "set-level"))


def _cells(values: dict[tuple[int, int], list[float]]) -> dict[tuple[int, int], pd.Series]:
    return {key: pd.Series(deltas, index=range(len(deltas))) for key, deltas in values.items()}


# Cell means -1, 0 (tagger), 1, 3 (MRC-NER); spreads differ, seeds differ.
CELLS = _cells(
    {
        (0, 0): [-2.0, -1.0, 0.0],  # mean -1, var 1
        (0, 1): [-1.0, 1.0, 0.0, 0.0],  # mean 0, var 2/3
        (1, 0): [1.0, 1.0, 1.5, 0.5],  # mean 1, var 1/6
        (1, 1): [1.0, 5.0, 3.0],  # mean 3, var 4
    }
)


def test_the_contrasts_are_the_cell_means_combined_by_hand() -> None:
    found = factorial(CELLS, ("formulation", "recipe"), LEVELS).contrasts
    assert found["first"].estimate == pytest.approx(((1 + 3) - (-1 + 0)) / 2)  # 2.5
    assert found["second"].estimate == pytest.approx(((0 + 3) - (-1 + 1)) / 2)  # 1.5
    assert found["interaction"].estimate == pytest.approx((3 - 1) - (0 - -1))  # 1.0
    # Var/n per cell: 1/3, (2/3)/4, (1/6)/4, 4/3; the interaction weighs each by 1.
    parts = [1 / 3, 1 / 6, 1 / 24, 4 / 3]
    error = math.sqrt(sum(parts))
    dof = sum(parts) ** 2 / (
        parts[0] ** 2 / 2 + parts[1] ** 2 / 3 + parts[2] ** 2 / 3 + parts[3] ** 2 / 2
    )
    interaction = found["interaction"]
    assert interaction.standard_error == pytest.approx(error)
    assert interaction.degrees_of_freedom == pytest.approx(dof)
    assert interaction.p_value == pytest.approx(2 * stats.t.sf(1.0 / error, dof))
    half = stats.t.ppf(0.975, dof) * error
    assert (interaction.ci_low, interaction.ci_high) == pytest.approx((1 - half, 1 + half))
    # A main effect weighs each cell by 1/4: its variance is a quarter of the interaction's.
    assert found["first"].standard_error == pytest.approx(error / 2)
    assert found["first"].degrees_of_freedom == pytest.approx(dof)


def test_equal_cells_give_the_pooled_t_test_degrees_of_freedom() -> None:
    """With equal seeds and spreads Welch–Satterthwaite's ν is the pooled 4(n − 1), and a
    main effect is the two-sample t-test of the two halves' means."""
    base = [0.0, 1.0, 2.0, 3.0, 4.0]
    cells = _cells({(i, j): [v + 2 * i + j for v in base] for i in (0, 1) for j in (0, 1)})
    found = factorial(cells, ("a", "b"), LEVELS).contrasts
    assert found["first"].degrees_of_freedom == pytest.approx(16)
    assert found["first"].estimate == pytest.approx(2.0)
    assert found["second"].estimate == pytest.approx(1.0)
    assert found["interaction"].estimate == pytest.approx(0.0)
    assert found["interaction"].p_value == pytest.approx(1.0)
    # SE of a main effect: s²/n · (4 · 1/4) = 2.5/5; t = 2/√0.5.
    assert found["first"].p_value == pytest.approx(2 * stats.t.sf(2 / math.sqrt(0.5), 16))


def test_a_cell_not_run_yet_leaves_the_contrasts_of_the_others() -> None:
    three = {key: deltas for key, deltas in CELLS.items() if key != (1, 1)}
    found = factorial(three, ("formulation", "recipe"), LEVELS)
    assert sorted(found.contrasts) == ["first@0", "second@0"]
    assert found.missing == ((1, 1),)
    # The recipe's effect in the tagger: cell (0, 1) less cell (0, 0), Welch's test.
    recipe = found.contrasts["second@0"]
    assert recipe.estimate == pytest.approx(0 - -1)
    welch = stats.ttest_ind(CELLS[(0, 1)], CELLS[(0, 0)], equal_var=False)
    assert recipe.p_value == pytest.approx(welch.pvalue)
    text = factorial_markdown(found)
    assert "| recipe: set-level − per position, in tagger | +1.00 |" in text
    assert "Not run yet: MRC-NER × set-level; the contrasts that need it wait for it." in text
    assert "interaction" not in text


def test_a_cell_of_one_seed_or_outside_the_four_is_refused() -> None:
    with pytest.raises(ValueError, match=r"cell \(0, 0\) has 1 seed"):
        factorial({**CELLS, (0, 0): pd.Series([1.0])}, ("a", "b"), LEVELS)
    with pytest.raises(ValueError, match=r"got \[\(2, 0\)\]"):
        factorial({**CELLS, (2, 0): pd.Series([1.0, 2.0])}, ("a", "b"), LEVELS)


def test_the_markdown_names_each_cell_and_contrast() -> None:
    text = factorial_markdown(factorial(CELLS, ("formulation", "dsc recipe"), LEVELS))
    assert "| MRC-NER | set-level | 3 | +3.00 | 2.00 | 0: +1.00, 1: +5.00, 2: +3.00 |" in text
    assert "| formulation: MRC-NER − tagger, averaged over dsc recipe | +2.50 |" in text
    assert "| interaction: (dsc recipe's effect in MRC-NER) − (in tagger) | +1.00 |" in text


def _shard(results: Path, name: str, scores: dict[str, list[float]], label: str) -> None:
    lines = [
        {
            "loss": label if loss != "ce" else "ce",
            "loss_name": loss,
            "dataset": "conll2003",
            "variant": "original",
            "seed": seed,
            "stage": "final",
            "eval_f1": value,
        }
        for loss, values in scores.items()
        for seed, value in enumerate(values)
    ]
    pd.DataFrame(lines).to_csv(results / f"{name}-trials.csv", index=False)


def _factorial(results: Path, cells: list[list[str]], *rest: str) -> subprocess.CompletedProcess:
    """scripts/factorial.py over ``results`` with study D's factors and levels."""
    command = [sys.executable, str(ROOT / "scripts" / "factorial.py"), "--results", str(results)]
    command += ["--factors", "formulation", "dsc recipe", "--levels", "tagger", "MRC-NER"]
    command += ["--levels", "per position", "set-level", "--loss", "dsc", *rest]
    for cell in cells:
        command += ["--cell", *cell]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT)


def test_the_script_takes_each_cells_loss_and_baseline_from_their_own_shards(
    tmp_path: Path,
) -> None:
    # The tagger shard holds ce and the per-position dsc; the set-level dsc ran apart.
    _shard(tmp_path, "tagger", {"ce": [90, 91, 92], "dsc": [88, 90, 92]}, "dsc(scope=example)")
    _shard(tmp_path, "tagger-set", {"dsc": [89, 91, 92]}, "dsc(scope=set)")
    _shard(tmp_path, "mrc", {"ce": [80, 81, 82], "dsc": [81, 83, 83]}, "dsc(scope=set)")
    _shard(tmp_path, "mrc-pos", {"dsc": [78, 80, 80]}, "dsc(scope=example)")
    cells = [
        ["tagger", "per position", "tagger", "tagger"],
        ["tagger", "set-level", "tagger-set", "tagger"],
        ["MRC-NER", "set-level", "mrc", "mrc"],
        ["MRC-NER", "per position", "mrc-pos", "mrc"],
    ]
    run = _factorial(tmp_path, cells, "--page", "factorial")
    assert run.returncode == 0, run.stderr
    # Δs: tagger -2, -1, 0 (per position), -1, 0, 0 (set-level); MRC-NER 1, 2, 1 (set-level),
    # -2, -1, -2 (per position).
    assert "| tagger | per position | 3 | -1.00 |" in run.stdout
    assert "| tagger | set-level | 3 | -0.33 |" in run.stdout
    assert "| MRC-NER | per position | 3 | -1.67 |" in run.stdout
    assert "| interaction: (dsc recipe's effect in MRC-NER) − (in tagger) | +2.33 |" in run.stdout
    page = (tmp_path / "factorial.md").read_text()
    assert "## The factorial" in page and "| MRC-NER | set-level | 3 | +1.33 |" in page


def test_the_script_names_a_level_it_does_not_know(tmp_path: Path) -> None:
    run = _factorial(tmp_path, [["tagger", "sets", "a", "b"]])
    assert run.returncode == 2
    assert "--cell: dsc recipe 'sets' is not one of its levels ('per position', 'set-level')" in (
        run.stderr
    )
