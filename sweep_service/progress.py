"""A sweep's progress read from MLflow: its trials by state, the best trial so far and
the MLflow ids to link to.

The reconciler reads it once a pass for each active sweep and stores it
(``store.record_progress``), so ``GET /v1/sweeps/{id}`` answers from one indexed read
of the store however often clients poll, at most one reconciler interval behind.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
from mlflow.tracking import MlflowClient

from search_spaces.contract import FAILURE_TAG, ROLE_TAG, SWEEP_TAG, dicesweep_experiments
from search_spaces.flags import constant_choices
from search_spaces.reports import degenerate_reason, final_rows
from search_spaces.reports.notes import tuned_settings
from sweep_service.api.trials import count_states
from sweep_service.results import SweepNotFoundError, trial_rows
from sweep_service.store import TrialProgress

BEST_BY = "eval_f1"  # what "best trial" means, whatever metric the search ranked by


def read_progress(
    client: MlflowClient,
    sweep_id: str,
    parent_run_id: str | None = None,
    experiment_id: str | None = None,
) -> TrialProgress:
    """The progress of ``sweep_id`` as MLflow holds it now; ``parent_run_id`` and
    ``experiment_id``, when already known, spare the searches for them (the reconciler
    reads every active sweep each pass: one request per sweep, not three).

    Raises:
        mlflow.exceptions.MlflowException: the tracking store did not answer.
    """
    if experiment_id is None:  # its owner's: the sweep's parent run says which
        parent = (
            None if parent_run_id else _parent_run(client, dicesweep_experiments(client), sweep_id)
        )
        if parent is not None:
            experiment_id, parent_run_id = str(parent.info.experiment_id), str(parent.info.run_id)
    try:  # without an experiment id, in every dicesweep experiment
        rows = trial_rows(client, sweep_id, experiment_id)
    except SweepNotFoundError:
        rows = pd.DataFrame(columns=["status"])
    counts = count_states([str(status) for status in rows["status"]], total=0)
    return TrialProgress(
        running=counts.running,
        done=counts.done,
        failed=counts.failed,
        stopped=counts.stopped,
        best_trial=best_trial(final_rows(rows)),
        tuning=tuning_state(rows),
        mlflow_experiment_id=experiment_id,
        mlflow_parent_run_id=parent_run_id
        or (_parent_run_id(client, experiment_id, sweep_id) if experiment_id else None),
        rows=json.loads(rows.to_json(orient="records")),  # NaN as null: JSON for the store
    )


def tuning_state(rows: pd.DataFrame) -> dict[str, Any] | None:
    """A two-stage sweep's ``{"stage": "tune" | "final", "chosen": {loss label:
    {setting: value}}, "constant": [loss label]}`` as its trial runs show it (``chosen``
    is filled once stage 2 has started; ``constant`` names the losses whose every
    stage-1 trial is constant, chosen among them: ``flags.constant_choices``); None
    for a sweep without ``tune`` (or before its first trial run)."""
    if "stage" not in rows or not any(c.startswith("tuned_") for c in rows.columns):
        return None
    final = rows[rows["stage"] == "final"]
    return {
        "stage": "final" if len(final) else "tune",
        "chosen": tuned_settings(final),
        "constant": constant_choices(rows.to_dict("records"), BEST_BY) if len(final) else [],
    }


def best_trial(rows: pd.DataFrame) -> dict[str, Any] | None:
    """The trial with the highest ``eval_f1`` so far among the finished ones (MLflow's
    FINISHED: a running or killed trial's metric is a mid-run one, not its score) whose
    predictions are not degenerate (``degenerate_reason``), as the API's ``BestTrial``;
    None when no finished trial reported one, or every one that did is degenerate
    (then no trial learned). The caller leaves out the stage-1 trials of a two-stage
    sweep (scored on the tuning split, not on dev)."""
    if BEST_BY not in rows.columns:
        return None
    scored = rows[rows["status"] == "FINISHED"].dropna(subset=[BEST_BY])
    learned = scored[[degenerate_reason(row, BEST_BY) is None for _, row in scored.iterrows()]]
    if learned.empty:
        return None
    best = learned.loc[learned[BEST_BY].idxmax()]
    return {
        "run_id": str(best["run_id"]),
        "loss": str(best["loss"]),
        "seed": int(best["seed"]),
        "dataset": str(best["dataset"]),
        "variant": str(best["variant"]),
        "eval_f1": float(best[BEST_BY]),
    }


def _parent_run(client: MlflowClient, experiment_ids: list[str], sweep_id: str) -> Any:
    """The sweep's parent run in one of ``experiment_ids``, or None."""
    if not experiment_ids:
        return None
    query = f"tags.`{SWEEP_TAG}` = '{sweep_id}' and tags.`{ROLE_TAG}` = 'sweep'"
    runs = client.search_runs(experiment_ids, query, max_results=1)
    return runs[0] if runs else None


def _parent_run_id(client: MlflowClient, experiment_id: str, sweep_id: str) -> str | None:
    parent = _parent_run(client, [experiment_id], sweep_id)
    return str(parent.info.run_id) if parent is not None else None


def close_open_runs(client: MlflowClient, sweep_id: str, status: str, reason: str) -> int:
    """Mark the sweep's runs still RUNNING in MLflow (its parent and trials) as
    ``status`` (KILLED, FAILED) with ``reason`` in ``dicesweep.failure``: a driver that
    was stopped or died cannot close them itself. Returns how many were closed."""
    experiments = dicesweep_experiments(client)
    if not experiments:
        return 0
    query = f"tags.`{SWEEP_TAG}` = '{sweep_id}' and attributes.status = 'RUNNING'"
    runs = client.search_runs(experiments, query, max_results=10_000)
    for run in runs:
        client.set_tag(run.info.run_id, FAILURE_TAG, reason[:500])
        client.set_terminated(run.info.run_id, status)
    return len(runs)
