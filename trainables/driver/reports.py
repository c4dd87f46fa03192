"""The sweep's table, tests and plot: built from its trials' results and written as
artifacts of its parent run."""

from __future__ import annotations

import json
import math
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from search_spaces.contract import said
from search_spaces.flags import constant_choices
from search_spaces.reports import (
    final_rows,
    paired_test,
    paper_table,
    row_from_trial,
    to_csv,
    to_html,
    to_json,
    to_latex,
    to_markdown,
    to_png,
    with_failures,
)
from search_spaces.reports.budget import budget_frame, with_budget_curves
from search_spaces.reports.formats import format_value
from search_spaces.reports.tables import loss_label
from trainables.driver.oom import memory_reason, worker_death_reason

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
    # A generic actor death otherwise: what to act on is the memory.
    oom = memory_reason(error) or worker_death_reason(error)
    if oom:
        return oom[:REASON_LIMIT]
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
    name: str | None = None,
    random_sampling: bool = False,
) -> str:
    """Attach the table of ``metric`` over ``rows`` in the paper's layout (Markdown, CSV,
    LaTeX, HTML, JSON, PNG; titled ``name``), the paired tests against the baseline and
    the rows themselves, and log the table's numbers and the best cell of each row as
    metrics of the parent run (``table_metrics``); returns the table as Markdown
    (empty when it could not be rendered: ``write_renderings``).
    Stage-1 rows (a two-stage sweep's) are left out of the table and give its budget
    curves instead (``budget_curves.csv``, and under the table in every format), read
    as random draws where ``random_sampling``."""
    table = paper_table(final_rows(rows), metric, title=name)
    table = with_failures(with_budget_curves(table, rows, random_sampling), failed)
    rows_key, cols_key = table.attrs["rows_key"], table.attrs["cols_key"]
    baseline = table.attrs["baseline"]
    tests = paired_test(rows, rows_key, cols_key, metric, baseline) if baseline else pd.DataFrame()
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        for failure in write_renderings(table, out):
            print(f"report file not written: {failure}", file=sys.stderr)
        markdown = (out / "grid.md").read_text() if (out / "grid.md").exists() else ""
        curves = budget_frame(table)
        if not curves.empty:
            curves.to_csv(out / "budget_curves.csv", index=False)
        tests.to_csv(out / "paired_tests.csv", index=False)
        rows.to_csv(out / "trials.csv", index=False)
        client.log_artifacts(run_id, folder, artifact_path="report")
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    batch = [Metric(key, value, now, 0) for key, value in table_metrics(table).items()]
    for start in range(0, len(batch), 1000):  # MLflow's batch limit
        client.log_batch(run_id, metrics=batch[start : start + 1000])
    return markdown


# The table's renderings attached to the parent run: each file and what renders it.
RENDERINGS: tuple[tuple[str, Callable[[pd.DataFrame], str | bytes]], ...] = (
    ("grid.md", to_markdown),
    ("grid.csv", to_csv),
    ("grid.tex", to_latex),
    ("grid.html", to_html),
    ("grid.json", to_json),
    ("grid.png", to_png),
)


def write_renderings(table: pd.DataFrame, out: Path) -> list[str]:
    """Each of ``RENDERINGS`` of ``table`` written under ``out``; returns one line per
    rendering that failed (``"grid.png: ValueError: ..."``). A report that cannot be
    drawn never fails the sweep that produced it: the other files, the tests, the
    trials' rows and the table's metrics are attached all the same."""
    failures = []
    for name, render in RENDERINGS:
        try:
            content = render(table)
        except Exception as error:  # a name or a value a renderer cannot take
            lines = str(error).strip().splitlines()
            failures.append(f"{name}: {type(error).__name__}: {lines[0] if lines else ''}")
            continue
        if isinstance(content, bytes):
            (out / name).write_bytes(content)
        else:
            (out / name).write_text(content)
    return failures


def tuned_by_label(chosen: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each loss's chosen settings keyed by its table label (``"dsc(alpha=0.1)"``)
    rather than by ``search_spaces.tuning.loss_key``."""
    return {loss_label(json.loads(key)): settings for key, settings in chosen.items()}


def announce_choices(
    sweep_id: str, chosen: dict[str, dict[str, Any]], stage_one: Iterable[Any]
) -> dict[str, dict[str, Any]]:
    """``tuned_by_label(chosen)``, once a line on standard error has named each loss
    whose every scored stage-1 trial (Tune results: ``config``, ``metrics``,
    ``error``) is constant: stage 2 runs it at the best of them
    (``tuning.choose_settings``)."""
    rows = [
        {**(r.metrics or {}), "loss": loss_label(r.config["loss"]), "stage": "tune"}
        for r in stage_one
        if not r.error
    ]
    for label in constant_choices(rows):
        print(
            said(
                sweep_id,
                f"every stage-1 trial of {label} is constant (one prediction for ≥ 99% of "
                "the tuning split); stage 2 runs it at the best of them",
            ),
            file=sys.stderr,
        )
    return tuned_by_label(chosen)


def table_metrics(table: pd.DataFrame) -> dict[str, float]:
    """The table as MLflow metrics of the parent run, so the runs list compares sweeps:
    ``best_<metric>/<row>`` (the row's best cell mean among its cells without
    degenerate trials, e.g. a loss's best over the variants; none where every cell
    holds one) and ``grid/<row>/<column>/<mean|std|delta>`` for every cell that has a
    value, ``grid/<row>/<column>/degenerate`` for every cell with constant seeds (out
    of its mean); labels are made metric-name safe (``metric_key``)."""
    metric = table.attrs["metric"]
    degenerate = table.attrs.get("degenerate_cells") or {}
    metrics: dict[str, float] = {
        f"grid/{metric_key(row)}/{metric_key(column)}/degenerate": float(count)
        for (row, column), count in degenerate.items()
    }
    for row in table.index:
        means = table.loc[row].xs("mean", level="stat").astype(float)
        learned = means[[(row, column) not in degenerate for column in means.index]]
        if learned.notna().any():
            metrics[f"best_{metric}/{metric_key(row)}"] = float(learned.max())
        for column in means.index:
            for stat in ("mean", "std", "delta"):
                value = float(table.at[row, (column, stat)])
                if not math.isnan(value):
                    key = f"grid/{metric_key(row)}/{metric_key(column)}/{stat}"
                    metrics[key] = value
    return metrics


_KEY_WORDS = {"+": "plus_", "&": "_and_", "=": "", ",": "_", "(": "_", ")": ""}


def metric_key(label: Any) -> str:
    """A table label as a piece of an MLflow metric name (letters, digits, ``_ - .``):
    ``"dsc(alpha=0.1)"`` -> ``"dsc_alpha0.1"``, ``"+positive&negative"`` ->
    ``"plus_positive_and_negative"``."""
    text = "".join(_KEY_WORDS.get(char, char) for char in format_value(label))
    return re.sub(r"[^\w.\-]+", "_", text).strip("_") or "_"
