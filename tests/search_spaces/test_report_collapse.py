"""Collapsed trials and trivial baselines in the paper's tables: a model that predicts
one class for everything, or scores no better than doing so, is flagged and left out
of the means and the tests, never averaged in silently."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from search_spaces.reports import paper_table, to_html, to_json, to_latex, to_markdown
from search_spaces.reports.tables import collapse_reason

ALWAYS_POSITIVE = 81.22  # MRPC's always-positive F1 on some eval set


def trial(loss: str, seed: int, f1: float, distinct: float = 2.0) -> dict[str, object]:
    return {
        "loss": loss,
        "loss_name": loss.split("(")[0],
        "dataset": "mrpc",
        "variant": "original",
        "seed": seed,
        "eval_f1": f1,
        "eval_baseline_f1": ALWAYS_POSITIVE,
        "eval_distinct_predictions": distinct,
    }


@pytest.mark.parametrize(
    ("metrics", "reason"),
    [
        ({"eval_f1": 84.0, "eval_distinct_predictions": 2, "eval_baseline_f1": 81.2}, None),
        (
            {"eval_f1": 81.2, "eval_distinct_predictions": 1, "eval_baseline_f1": 81.2},
            "constant predictions (the same for every input)",
        ),
        (
            {"eval_f1": 80.0, "eval_distinct_predictions": 2, "eval_baseline_f1": 81.2},
            "eval_f1 80.00 at or below the trivial baseline 81.20",
        ),
        (  # NER: finding no entity scores 0
            {"eval_f1": 0.0, "eval_distinct_predictions": 3, "eval_baseline_f1": 0.0},
            "eval_f1 0.00 at or below the trivial baseline 0.00",
        ),
        ({"eval_f1": 84.0}, None),  # a trial from before the sanity metrics
        ({"eval_f1": 84.0, "eval_distinct_predictions": math.nan}, None),
    ],
)
def test_collapse_reason(metrics: dict[str, float], reason: str | None) -> None:
    assert collapse_reason(metrics) == reason


def test_the_baseline_counts_for_f1_only() -> None:
    metrics = {"eval_accuracy": 50.0, "eval_distinct_predictions": 2, "eval_baseline_f1": 81.2}
    assert collapse_reason(metrics, "eval_accuracy") is None


@pytest.fixture
def table() -> pd.DataFrame:
    rows = [
        trial("ce", 0, 84.0),
        trial("ce", 1, 86.0),
        trial("ce", 2, 85.0),
        trial("focal(gamma=2)", 0, 86.0),
        trial("focal(gamma=2)", 1, ALWAYS_POSITIVE, distinct=1),  # collapsed
        trial("focal(gamma=2)", 2, 88.0),
        *(trial("dsc(alpha=0.1)", seed, ALWAYS_POSITIVE, distinct=1) for seed in range(3)),
    ]
    return paper_table(pd.DataFrame(rows), title="collapse")


def test_collapsed_trials_are_left_out_of_the_means_and_counted_in_their_cells(
    table: pd.DataFrame,
) -> None:
    assert table.at["focal(gamma=2)", ("mrpc", "mean")] == pytest.approx(87.0)  # 86, 88
    assert table.at["focal(gamma=2)", ("mrpc", "count")] == 2
    assert math.isnan(table.at["dsc(alpha=0.1)", ("mrpc", "mean")])  # every seed collapsed
    assert table.attrs["collapsed_cells"] == {
        ("focal(gamma=2)", "mrpc"): 1,
        ("dsc(alpha=0.1)", "mrpc"): 3,
    }
    assert table.attrs["baselines"] == {"mrpc": pytest.approx(ALWAYS_POSITIVE)}


def test_every_format_shows_the_baseline_and_the_collapsed_trials(table: pd.DataFrame) -> None:
    markdown = to_markdown(table)
    assert "87.00 ± 1.41 (+2.00) [1 collapsed]" in markdown
    assert "| dsc(alpha=0.1) | [3 collapsed]" in markdown
    assert "Trivial baseline F1 (always positive for PI" in markdown
    assert "mrpc 81.22." in markdown
    assert (
        "- focal(gamma=2) seed=1 on mrpc original: 81.22, constant predictions "
        "(the same for every input)" in markdown
    )
    html = to_html(table)
    assert '<ul class="collapsed">' in html and "[3 collapsed]" in html
    assert '<p class="baselines">' in html
    assert "% Collapsed trials" in to_latex(table)
    payload = json.loads(to_json(table))
    cells = {cell["row"]: cell for cell in payload["cells"]}
    assert cells["dsc(alpha=0.1)"]["collapsed"] == 3 and cells["dsc(alpha=0.1)"]["mean"] is None
    assert len(payload["collapsed"]) == 4 and payload["baselines"] == {"mrpc": ALWAYS_POSITIVE}


def test_a_collapsed_baseline_loss_leaves_no_deltas_rather_than_wrong_ones() -> None:
    rows = [trial("ce", s, ALWAYS_POSITIVE, distinct=1) for s in range(2)]
    rows += [trial("dice", s, 85.0 + s) for s in range(2)]
    table = paper_table(pd.DataFrame(rows))
    assert table.attrs["baseline"] is None
    assert "| ce     | [2 collapsed]" in to_markdown(table)
