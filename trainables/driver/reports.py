"""The sweep's table, tests and plot: built from its trials' results and written as
artifacts of its parent run."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from search_spaces.reports import (
    infer_layout,
    paired_test,
    pivot_table,
    row_from_trial,
    to_csv,
    to_json,
    to_latex,
    to_markdown,
    to_png,
)


def collect_rows(results: Iterable[Any]) -> tuple[pd.DataFrame, int]:
    """One row per trial that reported, and the number of trials that failed."""
    rows, failed = [], 0
    for result in results:
        failed += result.error is not None
        if result.metrics and "eval_f1" in result.metrics:
            rows.append(row_from_trial(result.config, result.metrics))
    return pd.DataFrame(rows), failed


def write_reports(
    client: Any,  # an mlflow.tracking.MlflowClient
    run_id: str,
    rows: pd.DataFrame,
    metric: str,
) -> str:
    """Attach the table of ``metric`` over ``rows`` in the paper's layout (Markdown, CSV,
    LaTeX, JSON, PNG), the paired tests against the baseline and the rows themselves;
    returns the table as Markdown."""
    rows_key, cols_key, baseline = infer_layout(rows)
    table = pivot_table(rows, rows_key, cols_key, metric, baseline)
    tests = paired_test(rows, rows_key, cols_key, metric, baseline) if baseline else pd.DataFrame()
    kind = "line" if str(table.index.name or "").startswith("param_") else "heatmap"
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        (out / "grid.md").write_text(to_markdown(table))
        (out / "grid.csv").write_text(to_csv(table))
        (out / "grid.tex").write_text(to_latex(table))
        (out / "grid.json").write_text(to_json(table))
        (out / "grid.png").write_bytes(to_png(table, kind=kind))
        tests.to_csv(out / "paired_tests.csv", index=False)
        rows.to_csv(out / "trials.csv", index=False)
        client.log_artifacts(run_id, folder, artifact_path="report")
    return to_markdown(table)
