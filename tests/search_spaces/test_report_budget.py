"""Budget curves: the estimator against values computed by hand, ties included, and the
curves and their reading from stage-1 rows."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from search_spaces.reports.budget import (
    budget_curves,
    budget_lines,
    expected_best,
    reading,
    stage_one_is_random,
    with_budget_curves,
)

# [1, 2, 3]: the best of n draws is 3 with probability 1 - (2/3)^n, 2 with
# (2/3)^n - (1/3)^n, 1 with (1/3)^n.
#   n = 1: E = 2,               E[X^2] = 14/3,    var = 14/3 - 4 = 2/3
#   n = 2: weights 1/9, 3/9, 5/9:  E = 22/9,  E[X^2] = 58/9,  var = 58/9 - 484/81 = 38/81
#   n = 3: weights 1/27, 7/27, 19/27: E = 72/27 = 8/3, E[X^2] = 200/27, var = 8/27
ONE_TWO_THREE = [(2.0, 2 / 3), (22 / 9, 38 / 81), (8 / 3, 8 / 27)]
# [1, 1, 2] (a tie): the best is 2 with probability 1 - (2/3)^n, else 1.
#   n = 1: E = 4/3,  E[X^2] = 2,      var = 2 - 16/9 = 2/9
#   n = 2: E = 14/9, E[X^2] = 24/9,   var = 24/9 - 196/81 = 20/81
#   n = 3: E = 46/27, E[X^2] = 84/27, var = 84/27 - 2116/729 = 152/729
WITH_A_TIE = [(4 / 3, 2 / 9), (14 / 9, 20 / 81), (46 / 27, 152 / 729)]


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ([1, 2, 3], ONE_TWO_THREE),
        ([3, 1, 2], ONE_TWO_THREE),  # the order of the trials does not matter
        ([1, 1, 2], WITH_A_TIE),
        ([2, 1, 1], WITH_A_TIE),
        ([5.0], [(5.0, 0.0)]),  # one score: itself, no spread
        ([7, 7, 7], [(7.0, 0.0)] * 3),  # all tied
    ],
)
def test_expected_best_matches_hand_computed_values(
    scores: list[float], expected: list[tuple[float, float]]
) -> None:
    curve = expected_best(scores)
    assert len(curve) == len(expected)
    for (mean, std), (want_mean, want_variance) in zip(curve, expected, strict=True):
        assert mean == pytest.approx(want_mean, abs=1e-12)
        assert std == pytest.approx(math.sqrt(want_variance), abs=1e-12)


def test_expected_best_rises_towards_the_best_score() -> None:
    curve = expected_best([70.0, 80.0, 85.0, 86.0, 90.0])
    means = [mean for mean, _ in curve]
    assert means == sorted(means) and means[0] == pytest.approx(82.2)
    assert means[-1] < 90.0


@pytest.mark.parametrize("scores", [[], [1.0, math.nan], [math.inf]])
def test_expected_best_refuses_no_or_non_finite_scores(scores: list[float]) -> None:
    with pytest.raises(ValueError, match="score"):
        expected_best(scores)


def _rows(scores: dict[str, list[float]], stage: str = "tune") -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "loss": loss,
                "loss_name": loss,
                "dataset": "mrpc",
                "variant": "original",
                "seed": 0,
                "stage": stage,
                "tuned_learning_rate": 10 ** -(4 + i % 3),
                "eval_f1": score,
            }
            for loss, values in scores.items()
            for i, score in enumerate(values)
        ]
    )


def test_curves_come_from_the_stage_one_rows_only() -> None:
    rows = pd.concat(
        [_rows({"ce": [1, 2, 3], "dsc": [1, 1, 2]}), _rows({"ce": [99.0]}, stage="final")]
    )
    curves = budget_curves(rows, "eval_f1")
    assert list(curves["curve"]) == ["ce"] * 3 + ["dsc"] * 3
    assert list(curves["trials"]) == [1, 2, 3] * 2
    assert curves["mean"].tolist() == pytest.approx([m for m, _ in ONE_TWO_THREE + WITH_A_TIE])


def test_no_stage_one_rows_no_curves() -> None:
    final_only = _rows({"ce": [80.0, 81.0]}, stage="final")
    assert budget_curves(final_only, "eval_f1").empty
    assert budget_curves(final_only.drop(columns="stage"), "eval_f1").empty


def test_one_curve_per_loss_and_data_set_where_stage_one_covered_several() -> None:
    rows = _rows({"ce": [1, 2], "dsc": [2, 3]})
    rows.loc[[1, 3], "dataset"] = "qqp"
    labels = list(dict.fromkeys(budget_curves(rows, "eval_f1")["curve"]))
    assert labels == ["ce on mrpc", "ce on qqp", "dsc on mrpc", "dsc on qqp"]


def _curves(means: dict[str, list[float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"curve": label, "trials": n, "mean": mean, "std": 0.0}
            for label, values in means.items()
            for n, mean in enumerate(values, start=1)
        ]
    )


@pytest.mark.parametrize(
    ("means", "sentence"),
    [
        (
            {"ce": [80, 82, 83, 84, 85], "dsc": [75, 79, 82.5, 84.5, 86]},
            "dsc overtakes ce at 4 trials.",
        ),
        (
            {"ce": [80, 82, 83], "focal": [79, 81, 82]},
            "ce stays ahead of focal at every budget (1–3 trials).",
        ),
        ({"ce": [80, 82], "dice": [81, 83]}, "dice is ahead of ce at every budget (1–2 trials)."),
        ({"ce": [80, 82, 83], "dice": [81, 81, 82]}, "ce overtakes dice at 2 trials."),
        (
            {"ce": [80, 82, 84], "dsc": [81, 81, 85]},
            "dsc and ce cross more than once (dsc ahead at 1, 3 trials).",
        ),
        ({"ce": [80, 82], "dsc": [80, 82]}, "dsc and ce are even at every budget (1–2 trials)."),
    ],
)
def test_the_reading_says_when_a_loss_overtakes_ce(
    means: dict[str, list[float]], sentence: str
) -> None:
    assert reading(_curves(means)) == sentence


def test_the_reading_compares_every_loss_against_ce_over_the_shorter_curve() -> None:
    curves = _curves({"dsc": [70, 90, 91], "ce": [80, 85], "focal": [81, 86, 87]})
    assert reading(curves) == (
        "dsc overtakes ce at 2 trials; focal is ahead of ce at every budget (1–2 trials)."
    )


def test_the_reading_compares_losses_within_one_data_set() -> None:
    curves = _curves(
        {
            "ce on mrpc": [80, 82],
            "dsc on mrpc": [81, 83],
            "ce on qqp": [70, 75],
            "dsc on qqp": [60, 74],
        }
    )
    assert reading(curves) == (
        "dsc on mrpc is ahead of ce on mrpc at every budget (1–2 trials); "
        "ce on qqp stays ahead of dsc on qqp at every budget (1–2 trials)."
    )
    assert reading(_curves({"ce": [80.0]})) == ""


def test_stage_one_is_random_unless_it_runs_its_lists_grid() -> None:
    drawn = {"tune": {"learning_rate": {"loguniform": [1e-5, 1e-4]}, "trials_per_loss": 6}}
    assert stage_one_is_random(drawn)
    # Two learning rates, a budget of two: the grid; of six: draws from the list.
    assert not stage_one_is_random({"tune": {"learning_rate": [1e-5, 3e-5], "trials_per_loss": 2}})
    assert stage_one_is_random({"tune": {"learning_rate": [1e-5, 3e-5], "trials_per_loss": 6}})
    untuned = {"learning_rate": [1e-5, 3e-5], "warmup_ratio": None, "trials_per_loss": 2}
    assert not stage_one_is_random({"tune": untuned})  # a stored spec's nulls are left out
    assert not stage_one_is_random({})


def _table() -> pd.DataFrame:
    table = pd.DataFrame()
    table.attrs = {"metric": "eval_f1"}
    return table


def test_a_table_carries_the_curves_and_its_lines_say_how_to_read_them() -> None:
    rows = _rows({"ce": [1, 2, 3], "dsc": [1, 1, 2]})
    table = with_budget_curves(_table(), rows, random_sampling=True)
    budget = table.attrs["budget"]
    assert budget["random_sampling"] is True
    # Gaps of 0.33-1 against stds of 0.5-0.8: no lead is claimed.
    reading_line = (
        "dsc and ce differ by less than 2 stds of their bests at every budget (1–3 trials)"
    )
    assert budget["reading"] == f"{reading_line}: not resolved."
    assert budget["curves"][0] == {
        "curve": "ce",
        "trials": 1,
        "mean": 2.0,
        "std": pytest.approx(math.sqrt(2 / 3)),
    }
    lines = budget_lines(table)
    assert lines[0].startswith(
        "Budget curves: the expected best eval_f1 of n stage-1 tuning trials"
    )
    assert lines[1] == "- ce: 2.00 ± 0.82, 2.44 ± 0.68, 2.67 ± 0.54"
    assert lines[2] == "- dsc: 1.33 ± 0.47, 1.56 ± 0.50, 1.70 ± 0.46"
    assert lines[3] == f"Reading: {reading_line}: not resolved."
    assert len(lines) == 4
    grid = with_budget_curves(_table(), rows, random_sampling=False)
    assert budget_lines(grid)[-1].startswith("Stage 1 ran a grid, not random draws")
    unknown = with_budget_curves(_table(), rows, random_sampling=None)
    assert budget_lines(unknown)[-1] == (
        "The estimator assumes stage 1 drew its settings at random; "
        "for a grid, these curves resample the grid's scores."
    )


def test_without_stage_one_rows_the_table_carries_nothing() -> None:
    table = with_budget_curves(_table(), _rows({"ce": [1.0]}, stage="final"), True)
    assert "budget" not in table.attrs
    assert budget_lines(table) == []


def test_the_reading_claims_a_lead_only_where_the_gap_is_resolved() -> None:
    # As reported: ce 0.4-0.6 above dsc with stds of 12-25 at every budget.
    curves = pd.DataFrame(
        [
            {"curve": label, "trials": n, "mean": mean + gap, "std": std}
            for label, gap in (("ce", 0.5), ("dsc", 0.0))
            for n, (mean, std) in enumerate([(40.0, 25.0), (50.0, 18.0), (55.0, 12.0)], start=1)
        ]
    )
    assert reading(curves) == (
        "dsc and ce differ by less than 2 stds of their bests at every budget (1–3 trials):"
        " not resolved."
    )
    # The same gap with bests that hardly vary is resolved.
    assert reading(curves.assign(std=0.1)) == "ce stays ahead of dsc at every budget (1–3 trials)."
    # Resolved only from the third budget on (the stds shrink): the lead starts there.
    shrinking = curves.assign(std=[25.0, 18.0, 0.1] * 2)
    assert reading(shrinking) == "ce overtakes dsc at 3 trials."
