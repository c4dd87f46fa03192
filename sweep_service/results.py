"""A sweep's trials as rows, read back from MLflow (pandas; no torch)."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pandas as pd
import yaml
from mlflow.tracking import MlflowClient

from search_spaces.contract import (
    EXPERIMENT,
    FAILURE_TAG,
    LOSS_LABEL_TAG,
    PRECISION_TAG,
    ROLE_TAG,
    STAGE_TAG,
    STOP_TAG,
    SWEEP_TAG,
    dicesweep_experiments,
)
from search_spaces.reports import METRICS
from search_spaces.reports.budget import SCHEDULER_STOP
from search_spaces.setup import columns_from_params, reported_columns


class SweepNotFoundError(LookupError):
    """No MLflow runs carry this sweep id."""


def _value(text: str) -> Any:
    """A param string back to its value (``"0.1"`` -> 0.1, ``"True"`` -> True,
    ``"3e-05"`` -> 3e-05: YAML 1.1 reads an exponent without a dot as text, and
    ``str(float)`` writes small rates that way)."""
    parsed = yaml.safe_load(text)
    if isinstance(parsed, bool | int | float):
        return parsed
    try:
        number = float(text)
    except ValueError:
        return text
    return number if math.isfinite(number) else text


def trial_rows(
    client: MlflowClient, sweep_id: str, experiment_id: str | None = None
) -> pd.DataFrame:
    """One row per trial run of ``sweep_id``: the row shape of ``search_spaces.reports``.
    ``experiment_id``, when the caller has it, spares looking in every dicesweep
    experiment (``contract.dicesweep_experiments``) for the sweep's.

    Raises:
        SweepNotFoundError: no experiment, or no trial run with that sweep id.
    """
    experiments = [experiment_id] if experiment_id else dicesweep_experiments(client)
    if not experiments:
        raise SweepNotFoundError(f"no sweeps tracked yet (no {EXPERIMENT!r} experiment)")
    query = f"tags.`{SWEEP_TAG}` = '{sweep_id}' and tags.`{ROLE_TAG}` = 'trial'"
    runs = client.search_runs(experiments, filter_string=query, max_results=5000)
    if not runs:
        raise SweepNotFoundError(f"no trials found for sweep {sweep_id!r}")
    rows = []
    for run in runs:
        params, tags = run.data.params, run.data.tags
        row: dict[str, Any] = {
            "loss": tags.get(LOSS_LABEL_TAG, params.get("loss")),
            "loss_name": params.get("loss"),
            "dataset": params.get("dataset"),
            "variant": params.get("variant"),
            "seed": int(params.get("seed", 0)),
            "stage": tags.get(STAGE_TAG, "final"),  # a run from before two-stage tuning: final
            "status": run.info.status,
            "failure_reason": tags.get(FAILURE_TAG),
            "stop_reason": tags.get(STOP_TAG),  # FINISHED only: epochs, max_steps, ...
            "run_id": run.info.run_id,
        }
        if tags.get(STOP_TAG) == SCHEDULER_STOP:
            row["stop_rung"] = evaluations(client, run.info.run_id)
        if PRECISION_TAG in tags:  # what it trained in (fp32, bf16, fp16), where it said
            row["precision"] = tags[PRECISION_TAG]
        for param, column in (("loss.", "param_"), ("tuned.", "tuned_")):
            row.update(
                {
                    column + key.removeprefix(param): _value(value)
                    for key, value in params.items()
                    if key.startswith(param)
                }
            )
        row.update({name: run.data.metrics[name] for name in METRICS if name in run.data.metrics})
        row.update(columns_from_params(params))
        row.update(reported_columns(row))
        rows.append(row)
    return pd.DataFrame(rows)


def evaluations(client: MlflowClient, run_id: str) -> int:
    """How many evaluations a trial reported: the points of its ``optimizer_steps``
    history, one per evaluation. For a trial a scheduler stopped, it names the rung it
    reached (rungs are counted in evaluations: halving's at 1, 3, 9, ... by default)."""
    return len({point.step for point in client.get_metric_history(run_id, "optimizer_steps")})


def training_seconds(client: MlflowClient, run_id: str) -> float:
    """The seconds a trial computed: its own clock (``seconds``, from the start of its
    training to each evaluation), summed over the stretches between resumes. A trial
    paused at a scheduler's rung (halving), or restarted from a checkpoint, starts its
    clock again at 0, so each stretch counts its last reading. Left out: the wait while
    paused, during which its MLflow run stays open (run spans count it), and each
    stretch's start-up (data, model, checkpoint)."""
    history = client.get_metric_history(run_id, "seconds")
    readings = [m.value for m in sorted(history, key=lambda m: (m.timestamp, m.step))]
    ends = [before for before, after in itertools.pairwise(readings) if after < before]
    return sum(ends) + (readings[-1] if readings else 0.0)


def merged_rows(client: MlflowClient, sweep_ids: list[str]) -> pd.DataFrame:
    """The trial rows of every sweep in ``sweep_ids``, each with its ``sweep`` id;
    sweeps without trials yet add none."""
    frames = []
    for sweep_id in sweep_ids:
        try:
            frames.append(trial_rows(client, sweep_id).assign(sweep=sweep_id))
        except SweepNotFoundError:
            continue
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["status"])
