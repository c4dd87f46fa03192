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
    with_failures,
)

REASON_LIMIT = 500  # characters of a failure reason kept in MLflow and the table


def failure_reason(error: BaseException | str | None) -> str:
    """One line saying why a trial failed: the message of the trial's own exception
    (``TrialDiverged``: "diverged at step 12 (training loss nan)"), not Ray's wrapper
    or traceback."""
    if error is None:
        return "failed (no error recorded)"
    cause = getattr(error, "cause", None)  # a RayTaskError wraps the trial's exception
    if isinstance(cause, BaseException):
        error = cause
    if isinstance(error, BaseException):
        lines = str(error).strip().splitlines()
        message = lines[0] if lines else ""
        reason = message if type(error).__name__ == "TrialDiverged" else None
        reason = reason or f"{type(error).__name__}: {message}".rstrip(": ")
    else:
        lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
        reason = lines[-1] if lines else "failed (no error recorded)"
    return reason[:REASON_LIMIT]


def collect_rows(results: Iterable[Any]) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """One row per trial that finished, and one per trial that failed with its
    ``reason``. A failed trial's earlier evaluations are never averaged in."""
    rows, failed = [], []
    for result in results:
        if result.error is not None:
            row = row_from_trial(result.config, {})
            failed.append({**row, "reason": failure_reason(result.error)})
        elif result.metrics and "eval_f1" in result.metrics:
            rows.append(row_from_trial(result.config, result.metrics))
    return pd.DataFrame(rows), failed


def write_reports(
    client: Any,  # an mlflow.tracking.MlflowClient
    run_id: str,
    rows: pd.DataFrame,
    metric: str,
    failed: Iterable[dict[str, Any]] = (),
) -> str:
    """Attach the table of ``metric`` over ``rows`` in the paper's layout (Markdown, CSV,
    LaTeX, JSON, PNG), the paired tests against the baseline and the rows themselves;
    returns the table as Markdown."""
    rows_key, cols_key, baseline = infer_layout(rows)
    table = with_failures(pivot_table(rows, rows_key, cols_key, metric, baseline), failed)
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
