"""The API's JSON as pandas DataFrames for ``sweep_service.Client``: a sweep's trials,
its table's cells, its budget curves, and its MLflow runs read with MLflow's client.
Numbers are typed (float, or int where whole), text stays text."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from search_spaces.contract import SWEEP_TAG, dicesweep_experiments

# A trial's text fields; everything in ``metrics``, ``params`` and ``tuned`` is a column too.
TRIAL_FIELDS = (
    "run_id",
    "status",
    "loss",
    "loss_name",
    "dataset",
    "variant",
    "seed",
    "stage",
    "failure_reason",
    "degenerate_reason",
    "stop_reason",
    "mlflow_run",
)
CURVE_COLUMNS = ("curve", "trials", "mean", "std")
# A table cell's intervals: ``[low, high]`` or None each, kept so rather than made NaN.
INTERVALS = ("ci", "resolvable_range")


def _numeric(frame: pd.DataFrame, columns: Iterable[str]) -> pd.DataFrame:
    """``columns`` of ``frame`` as numbers where every value is one (None: NaN)."""
    for column in columns:
        converted = pd.to_numeric(frame[column], errors="coerce")
        if converted.notna().sum() == frame[column].notna().sum():
            frame[column] = converted
    return frame


def trials_frame(trials: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per trial (``GET /v1/sweeps/{id}/trials``' ``data``): ``TRIAL_FIELDS``,
    ``degenerate`` (bool: its predictions show it learned nothing), each loss parameter
    as ``param_<name>``, each tuned setting as ``tuned_<name>``, each setup field as
    ``setup_<field>`` (text) and each metric under its name (``eval_f1``,
    ``optimizer_steps``, ...), numbers typed."""
    records = [
        {
            **{name: trial.get(name) for name in TRIAL_FIELDS},
            "degenerate": trial.get("degenerate_reason") is not None,
            **{f"param_{k}": v for k, v in (trial.get("params") or {}).items()},
            **{f"tuned_{k}": v for k, v in (trial.get("tuned") or {}).items()},
            **{f"setup_{k}": v for k, v in (trial.get("setup") or {}).items()},
            **(trial.get("metrics") or {}),
        }
        for trial in trials
    ]
    empty = pd.DataFrame(columns=[*TRIAL_FIELDS, "degenerate"])
    frame = pd.DataFrame.from_records(records) if records else empty
    numeric = [
        c
        for c in frame.columns
        if c not in TRIAL_FIELDS and c != "degenerate" and not c.startswith("setup_")
    ]
    frame = _numeric(frame, [*numeric, "seed"])
    return frame.astype({"degenerate": bool})


def grid_frame(table: Mapping[str, Any]) -> pd.DataFrame:
    """One row per cell of a table (``GET .../grid`` JSON): the rows key's and the
    columns key's values under their names (``loss``, ``dataset``), then ``mean``,
    ``std``, ``count`` (runs), ``seeds`` (distinct), ``delta``, ``p_value``,
    ``resolvable`` and the cell's flags (``degenerate``: how many of its trials are),
    numbers typed, and ``INTERVALS`` as the API gives them (``[low, high]`` or None);
    where the rows are losses of a two-stage sweep, each setting stage 1 chose as
    ``tuned_<name>``. ``attrs`` keeps the table's other fields (``metric``,
    ``rows_key``, ``cols_key``, ``baseline``, ``title``, ``seeds``, ``failed``...)."""
    rows_key, cols_key = table["rows_key"], table["cols_key"]
    records = [
        {rows_key: cell["row"], cols_key: cell["column"]}
        | {k: v for k, v in cell.items() if k not in ("row", "column")}
        for cell in table["cells"]
    ]
    frame = pd.DataFrame.from_records(records)
    numeric = [c for c in frame.columns if c not in (rows_key, cols_key, *INTERVALS)]
    frame = _numeric(frame, numeric)
    tuned = (table.get("tuned") or {}) if rows_key == "loss" else {}
    for label, settings in tuned.items():
        for name, value in settings.items():
            frame.loc[frame[rows_key] == label, f"tuned_{name}"] = value
    frame.attrs = {key: value for key, value in table.items() if key != "cells"}
    return frame


def budget_frame(table: Mapping[str, Any]) -> pd.DataFrame:
    """A two-stage sweep's budget curves as its table carries them: one row per curve
    point, ``CURVE_COLUMNS`` (``trials``: stage-1 trials drawn; ``mean``, ``std``: the
    expected best of the metric); no rows for a sweep without stage 1. ``attrs`` keeps
    ``metric``, ``random_sampling`` and ``reading`` (the curves in words)."""
    budget = table.get("budget") or {}
    frame = pd.DataFrame.from_records(budget.get("curves") or [], columns=list(CURVE_COLUMNS))
    frame = _numeric(frame, CURVE_COLUMNS[1:])
    frame.attrs = {key: value for key, value in budget.items() if key != "curves"}
    return frame


def runs_frame(sweep_id: str, tracking_uri: str | None) -> pd.DataFrame:
    """Every MLflow run of ``sweep_id`` (its parent run and each trial's), read with
    ``mlflow.tracking.MlflowClient`` from ``tracking_uri`` (None: MLflow's and
    dicesweep's default, ``DICESWEEP_MLFLOW_TRACKING_URI``), in ``mlflow.search_runs``'
    columns: ``run_id``, ``experiment_id``, ``status``, ``start_time``, ``end_time``,
    ``metrics.<name>``, ``params.<name>``, ``tags.<name>``."""
    from mlflow.tracking import MlflowClient

    if tracking_uri is None:
        from search_spaces.settings import DicesweepSettings

        tracking_uri = str(DicesweepSettings().mlflow_tracking_uri)
    client = MlflowClient(tracking_uri=tracking_uri)
    experiments = dicesweep_experiments(client)
    if not experiments:  # nothing tracked in this store yet
        return pd.DataFrame(columns=["run_id", "experiment_id", "status"])
    runs = client.search_runs(
        experiments, filter_string=f"tags.`{SWEEP_TAG}` = '{sweep_id}'", max_results=5000
    )
    records = [
        {
            "run_id": run.info.run_id,
            "experiment_id": run.info.experiment_id,
            "status": run.info.status,
            "start_time": pd.to_datetime(run.info.start_time, unit="ms", utc=True),
            "end_time": pd.to_datetime(run.info.end_time, unit="ms", utc=True),
            **{f"metrics.{k}": v for k, v in run.data.metrics.items()},
            **{f"params.{k}": v for k, v in run.data.params.items()},
            **{f"tags.{k}": v for k, v in run.data.tags.items()},
        }
        for run in runs
    ]
    return pd.DataFrame.from_records(records)
