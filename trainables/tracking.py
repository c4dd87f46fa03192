"""MLflow lineage: one parent run per sweep, one nested run per trial.

A trial's run is found by its tags (sweep id and Ray trial id) before one is
created, so a retried or resumed trial keeps writing to its own run and never
makes a duplicate. Metrics are logged with the optimiser step as MLflow's step.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from search_spaces.lineage import ATTEMPT_TAG, LOSS_LABEL_TAG, ROLE_TAG, SWEEP_TAG, TRIAL_TAG
from search_spaces.reports import loss_label
from search_spaces.sections import TrackingLink, TrialConfig
from trainables.loop import Reporter


def trial_tags(trial: TrialConfig, trial_id: str) -> dict[str, str]:
    """The tags that identify a trial's run and let the MLflow UI group them."""
    loss = trial.loss.model_dump(exclude_none=True, exclude_unset=True)
    return {
        SWEEP_TAG: trial.sweep_id,
        TRIAL_TAG: trial_id,
        ROLE_TAG: "trial",
        "dicesweep.loss": str(loss["name"]),
        LOSS_LABEL_TAG: loss_label(loss),
        "dicesweep.seed": str(trial.seed),
        "dicesweep.dataset": trial.dataset,
        "dicesweep.variant": trial.variant,
        "dicesweep.model": trial.model,
    }


def trial_params(trial: TrialConfig) -> dict[str, str]:
    """Flat params: ``loss`` and ``loss.<param>``, the data, the seed and the training set-up."""
    loss = trial.loss.model_dump(exclude_none=True)
    params = {"loss": str(loss.pop("name"))}
    params.update({f"loss.{key}": str(value) for key, value in loss.items()})
    params.update(dataset=trial.dataset, variant=trial.variant, model=trial.model)
    params["seed"] = str(trial.seed)
    for key, value in trial.training.model_dump().items():
        params[f"training.{key}"] = str(value)
    return params


def find_run(client: Any, experiment_id: str, tags: Mapping[str, str]) -> str | None:
    """The id of the run carrying all ``tags``, or None."""
    query = " and ".join(f"tags.`{key}` = '{value}'" for key, value in tags.items())
    runs = client.search_runs([experiment_id], filter_string=query, max_results=1)
    return runs[0].info.run_id if runs else None


class TrialRun:
    """The nested MLflow run of one trial (created once, reopened on retries)."""

    def __init__(self, link: TrackingLink, trial: TrialConfig, trial_id: str) -> None:
        # MLflow is imported here, not at module level: a trial opens its run in a
        # thread while its data loads, and the import is most of the cost.
        from mlflow.entities import Param, RunStatus
        from mlflow.tracking import MlflowClient
        from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

        self.client = MlflowClient(tracking_uri=link.tracking_uri)
        identity = {SWEEP_TAG: trial.sweep_id, TRIAL_TAG: trial_id}
        existing = find_run(self.client, link.experiment_id, identity)
        if existing is None:
            tags = trial_tags(trial, trial_id)
            tags[MLFLOW_PARENT_RUN_ID] = link.parent_run_id
            tags[MLFLOW_RUN_NAME] = f"{tags[LOSS_LABEL_TAG]} seed={trial.seed}"
            tags[ATTEMPT_TAG] = "1"
            run = self.client.create_run(link.experiment_id, tags=tags)
            self.run_id = run.info.run_id
            params = [Param(k, v) for k, v in trial_params(trial).items()]
            self.client.log_batch(self.run_id, params=params)
        else:
            # A retry (the worker died) or a resumed sweep: same run, one more attempt.
            self.run_id = existing
            attempt = int(self.client.get_run(existing).data.tags.get(ATTEMPT_TAG, "1")) + 1
            self.client.set_tag(self.run_id, ATTEMPT_TAG, str(attempt))
            self.client.update_run(self.run_id, status=RunStatus.to_string(RunStatus.RUNNING))

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch = [Metric(key, float(value), now, step) for key, value in metrics.items()]
        self.client.log_batch(self.run_id, metrics=batch)

    def finish(self, status: str) -> None:
        self.client.set_terminated(self.run_id, status=status)


class TrackedReporter:
    """Forwards to another reporter and logs every evaluation to the trial's run
    (``run`` may still be opening: the first report waits for it)."""

    def __init__(self, inner: Reporter, run: Future[TrialRun]) -> None:
        self.inner = inner
        self.run = run

    def latest_checkpoint(self) -> Path | None:
        return self.inner.latest_checkpoint()

    def report(self, metrics: dict[str, float], checkpoint_dir: Path) -> None:
        # Checkpoint first: a worker lost in between leaves no metric in MLflow that the
        # resumed trial would log a second time.
        self.inner.report(metrics, checkpoint_dir)
        self.run.result().log_metrics(metrics, step=int(metrics.get("step", 0)))

    def progress(self, step: int, total: int, loss: float) -> None:
        self.inner.progress(step, total, loss)
