"""The two marks at their edges (``search_spaces.flags``): the constant threshold (99%)
against the dev set's own majority share, the no-skill rule on the sweep's metric for
the trials that are not constant, and the trials recorded before the prediction
shares (judged by what they did report). The rule on
real predictions and the tables' rendering: tests/trainables/test_degenerate_trials.py."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from search_spaces.flags import below_no_skill_reason, degenerate_reason
from search_spaces.reports import paper_table, to_markdown
from search_spaces.reports.tables import no_skill_baselines

MRPC = {"eval_baseline_f1": 81.22, "eval_baseline_accuracy": 68.38}  # MRPC dev's rules


@pytest.mark.parametrize(
    ("metrics", "constant", "below"),
    [
        # PI: 404 of 408 pairs positive (99.0%) is constant; 403 (98.8%) is not, and
        # its F1 is above always-positive's; 92% is neither.
        (
            {
                **MRPC,
                "eval_f1": 81.3,
                "eval_top_prediction_share": 99.02,
                "eval_positive_prediction_share": 99.02,
            },
            "predicts positive for 99.0% of pairs",
            None,
        ),
        (
            {
                **MRPC,
                "eval_f1": 81.8,
                "eval_top_prediction_share": 98.77,
                "eval_positive_prediction_share": 98.77,
            },
            None,
            None,
        ),
        (
            {
                **MRPC,
                "eval_f1": 84.0,
                "eval_top_prediction_share": 92.0,
                "eval_positive_prediction_share": 92.0,
            },
            None,
            None,
        ),
        # A constant trial is never also below no-skill, whatever it scores.
        (
            {
                **MRPC,
                "eval_f1": 0.0,
                "eval_top_prediction_share": 100.0,
                "eval_positive_prediction_share": 0.0,
            },
            "predicts negative for 100.0% of pairs",
            None,
        ),
        # Tagging on a set whose dev words are 97% O: 99.5% O is judged by its F1 ...
        (
            {
                "eval_f1": 41.0,
                "eval_baseline_f1": 0.0,
                "eval_baseline_accuracy": 97.0,
                "eval_top_prediction_share": 99.5,
            },
            None,
            None,
        ),
        # ... and 99.8% O is constant (under a tenth of the dev set's other tags).
        (
            {
                "eval_f1": 3.0,
                "eval_baseline_f1": 0.0,
                "eval_baseline_accuracy": 97.0,
                "eval_top_prediction_share": 99.8,
            },
            "gives one prediction to 99.8% of words",
            None,
        ),
        # MRC: the same answer to 99% of the questions, or no better than the first k words.
        (
            {
                "eval_f1": 9.5,
                "eval_baseline_f1": 5.9,
                "eval_baseline_exact_match": 0.9,
                "eval_top_prediction_share": 99.0,
            },
            "gives one prediction to 99.0% of questions",
            None,
        ),
        (
            {
                "eval_f1": 5.2,
                "eval_baseline_f1": 5.9,
                "eval_baseline_exact_match": 0.9,
                "eval_top_prediction_share": 1.0,
            },
            None,
            "eval_f1 5.20 ≤ no-skill 5.90",
        ),
        # NER: finding no entity scores 0, as the all-O rule does.
        (
            {
                "eval_f1": 0.0,
                "eval_baseline_f1": 0.0,
                "eval_baseline_accuracy": 83.0,
                "eval_top_prediction_share": 90.0,
            },
            None,
            "eval_f1 0.00 ≤ no-skill 0.00",
        ),
        # Trials from before the prediction shares: the distinct predictions they reported.
        (
            {"eval_f1": 81.2, "eval_distinct_predictions": 1, "eval_baseline_f1": 81.2},
            "constant predictions (the same for every input)",
            None,
        ),
        ({"eval_f1": 84.0, "eval_distinct_predictions": 2, "eval_baseline_f1": 81.2}, None, None),
        ({"eval_f1": 84.0}, None, None),  # a trial from before any of it
        ({"eval_f1": 84.0, "eval_top_prediction_share": math.nan}, None, None),
    ],
)
def test_the_two_marks(metrics: dict[str, float], constant: str | None, below: str | None) -> None:
    assert degenerate_reason(metrics) == constant
    assert below_no_skill_reason(metrics) == below


def test_the_no_skill_rule_is_read_for_the_sweeps_metric() -> None:
    metrics = {**MRPC, "eval_f1": 70.0, "eval_accuracy": 72.0, "eval_top_prediction_share": 60.0}
    assert below_no_skill_reason(metrics) == "eval_f1 70.00 ≤ no-skill 81.22"
    assert below_no_skill_reason(metrics, "eval_accuracy") is None  # above 68.38
    assert below_no_skill_reason(metrics, "eval_precision") is None  # no rule scores it
    assert degenerate_reason(metrics) is None


def legacy_trial(loss: str, seed: int, f1: float, distinct: float) -> dict[str, object]:
    return {
        "loss": loss,
        "loss_name": loss,
        "dataset": "mrpc",
        "variant": "original",
        "seed": seed,
        "eval_f1": f1,
        "eval_baseline_f1": 81.22,
        "eval_distinct_predictions": distinct,
    }


def test_old_trials_render_with_what_they_reported() -> None:
    rows = [legacy_trial("ce", s, 81.22, distinct=1) for s in range(2)]
    rows += [legacy_trial("dice", s, 85.0 + s, distinct=2) for s in range(2)]
    rows.append(legacy_trial("focal", 0, 80.0, distinct=2))  # below no-skill, in the mean
    rows.append(legacy_trial("focal", 1, 86.0, distinct=2))
    table = paper_table(pd.DataFrame(rows))
    # Every ce seed is constant: no Δ and no test stand against it.
    assert table.attrs["baseline"] is None and "significance" not in table.attrs
    markdown = to_markdown(table).replace("\\[", "[").replace("\\]", "]")  # escaped or not
    assert "| ce     | [2/2 constant]" in markdown
    assert "| dice   | **85.50 ± 0.71**" in markdown
    assert "| focal  | 83.00 ± 4.24 [1/2 below no-skill]" in markdown
    assert "- focal seed=0 on mrpc original: 80.00, eval_f1 80.00 ≤ no-skill 81.22" in markdown
    assert no_skill_baselines(pd.DataFrame(rows)) == {"mrpc": {"f1": pytest.approx(81.22)}}
