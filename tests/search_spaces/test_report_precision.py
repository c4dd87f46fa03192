"""The precision a sweep's trials trained in: carried from each trial's report into its
row, counted on the table and said in the notes under it (Markdown and HTML)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from search_spaces.reports import paper_table, row_from_trial, to_html, to_markdown
from search_spaces.reports.captions import notes

TRIAL = {"sweep_id": "sw-1", "model": "tiny-bert", "training": {}}


def trial_rows(precisions: list[str | None]) -> pd.DataFrame:
    """ce and dice on conll2003, one trial per precision and seed (None: a trial from
    before trials reported their precision)."""
    rows = []
    for seed, precision in enumerate(precisions):
        for offset, loss in enumerate(({"name": "ce"}, {"name": "dice"})):
            config = {
                **TRIAL,
                "dataset": "conll2003",
                "variant": "original",
                "loss": loss,
                "seed": seed,
            }
            metrics: dict[str, Any] = {"eval_f1": 80.0 + offset + seed / 10}
            if precision is not None:
                metrics["precision"] = precision
            rows.append(row_from_trial(config, metrics))
    return pd.DataFrame(rows)


def test_one_precision_is_said_once_under_the_table() -> None:
    table = paper_table(trial_rows(["bf16", "bf16", "bf16"]))
    assert table.attrs["precision"] == {"bf16": 6}
    assert "Trained in bf16 autocast (losses in fp32)." in notes(table)
    assert "Trained in bf16 autocast (losses in fp32)." in to_markdown(table)
    assert '<p class="precision">Trained in bf16 autocast (losses in fp32).</p>' in to_html(table)
    assert "Trained in fp32." in notes(paper_table(trial_rows(["fp32", "fp32"])))


def test_several_precisions_are_counted_and_unrecorded_trials_named() -> None:
    table = paper_table(trial_rows(["fp32", "bf16", None]))
    assert table.attrs["precision"] == {"bf16": 2, "fp32": 2, "unrecorded": 2}
    assert (
        "Trained in several precisions, trials in each: bf16 autocast 2, fp32 2, unrecorded 2"
        " (losses in fp32)." in notes(table)
    )


def test_trials_that_never_reported_a_precision_add_no_line() -> None:
    rows = trial_rows([None, None])
    assert "precision" not in rows
    table = paper_table(rows)
    assert "precision" not in table.attrs
    assert not [line for line in notes(table) if line.startswith("Trained")]
