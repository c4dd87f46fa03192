"""The test-split scores beside a table of dev scores: each cell's mean of the
``test_<name>`` metric its trials report (``training.score_test``: the reported
checkpoint, the best evaluation's with ``checkpoint: best``, scored on the test split).

A table ranks and compares on the evaluation split; the test split is only reported,
never chosen on (stage 1 of a two-stage sweep never reads it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from search_spaces.plural import counted


def tested_metric(metric: str) -> str:
    """The test split's name of an evaluation metric: ``eval_f1`` -> ``test_f1``."""
    return "test_" + metric.removeprefix("eval_")


def tested_scores(
    rows: pd.DataFrame, rows_key: str, cols_key: str, metric: str
) -> list[dict[str, Any]]:
    """One entry per cell whose trials reported ``tested_metric(metric)``: its ``row``,
    ``column``, ``mean``, ``std`` (n-1; None for one trial) and ``trials``, in row then
    column order of first appearance; [] where no trial scored the test split."""
    name = tested_metric(metric)
    if name not in rows or rows[name].isna().all():
        return []
    scored = rows.dropna(subset=[name])
    cells = scored.groupby([rows_key, cols_key], sort=False)[name]
    return [
        {
            "row": row,
            "column": column,
            "mean": float(values.mean()),
            "std": float(values.std(ddof=1)) if len(values) > 1 else None,
            "trials": len(values),
        }
        for (row, column), values in cells
    ]


def tested_line(table: pd.DataFrame, label: Callable[[Any], str]) -> str | None:
    """``Test split (the reported checkpoint): ce on conll2003 80.12; ...``: the
    table's ``attrs["test"]`` (``tested_scores``) in a sentence, or None without them."""
    scores = table.attrs.get("test") or []
    if not scores:
        return None
    name = tested_metric(str(table.attrs.get("metric", "eval_f1")))

    def shown(entry: dict[str, Any]) -> str:
        spread = "" if entry["std"] is None else f" ± {entry['std']:.2f}"
        where = f"{label(entry['row'])} on {label(entry['column'])}"
        trials = counted(entry["trials"], "trial")
        return f"{where} {entry['mean']:.2f}{spread} ({trials})"

    return f"Test split, the reported checkpoint ({name}): " + "; ".join(map(shown, scores)) + "."
