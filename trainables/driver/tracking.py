"""MLflow lineage: one parent run per sweep, one nested run per trial, written by the
sweep's driver from what the trials report to Ray Tune.

A trial's run is found by its tags (sweep id and Ray trial id) before one is
created, so a retried or resumed trial keeps writing to its own run and never
makes a duplicate. Metrics are logged with the optimiser step as MLflow's step.
The workers stay free of MLflow (its import and store set-up cost seconds of a
trial's CPU), and a remote GPU worker needs no route to the tracking server.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import cloudpickle
from ray.tune import Callback
from ray.tune.result import AUTO_RESULT_KEYS

from search_spaces.contract import (
    ATTEMPT_TAG,
    DATASET_COUNT_TAG,
    DEGENERATE_TAG,
    FAILURE_TAG,
    HOSTNAME_TAG,
    NODE_IP_TAG,
    NODE_TAG,
    PRECISION_TAG,
    RETRIED_AFTER_TAG,
    STOP_TAG,
    SWEEP_TAG,
    TRIAL_TAG,
)
from search_spaces.flags import degenerate_reason
from search_spaces.sections import TrackingLink
from trainables.driver.outage import WriteQueue
from trainables.driver.trial_runs import find_run, trial_params, trial_run_name, trial_tags


class TrialLogger(Callback):  # type: ignore[misc]
    """Logs every trial of a sweep to its nested MLflow run, from the driver: a Ray
    Tune callback. Workers never import MLflow.

    A trial's run is opened when its worker starts (so it shows RUNNING at once) or
    at its first result: found by tags, or created with its params and attempt 1. A
    run this driver finds already there (a resumed sweep), and every recovery of a
    failed worker, count one more attempt. A step at or before the last one the run
    holds is never logged again: a trial restored from an older checkpoint reports
    those steps a second time.

    Tune's hooks only queue the writes (``later``): one thread of the logger's own
    makes them, in the order the hooks came, through an outage of the tracking store
    of up to ``outage_s`` (``trainables.driver.outage``). ``flush`` (and the end of the
    experiment) waits until every queued write is made. What is still missing at the
    end (an outage longer than that, a driver that died with
    writes queued) is written by ``backfill`` from Tune's own results and the reports
    each trial's latest checkpoint carries.
    """

    def __init__(self, link: TrackingLink, client: Any = None, outage_s: float = 3600) -> None:
        self.link = link
        self.outage_s = outage_s
        self._client = client
        self._runs: dict[str, str] = {}  # Ray trial id -> MLflow run id
        self._last_step: dict[str, int] = {}
        self._nodes: dict[str, str] = {}  # Ray trial id -> the node its run is tagged with
        self._several_datasets: bool | None = None  # read from the parent on first use
        self._writes = WriteQueue(outage_s)

    @property
    def client(self) -> Any:
        if self._client is None:
            from mlflow.tracking import MlflowClient

            self._client = MlflowClient(tracking_uri=self.link.tracking_uri)
        return self._client

    def __getstate__(self) -> dict[str, Any]:
        # Tune keeps its callbacks with the experiment; a resumed driver gets this one
        # back and reopens the runs (and the client) itself.
        return {
            "link": self.link,
            "_client": None,
            "_runs": {},
            "_last_step": {},
            "_nodes": {},
            "_several_datasets": None,
            "outage_s": self.outage_s,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _writes=WriteQueue(state["outage_s"]))

    def later(self, write: Callable[[], object]) -> None:
        """Queue ``write`` for the logger's thread (``WriteQueue``)."""
        self._writes.later(write)

    def flush(self) -> None:
        """Wait until every queued write has been made (or has failed and been logged)."""
        self._writes.flush()

    def several_datasets(self) -> bool:
        """Whether the sweep covers more than one data set, as its parent run says (a
        parent without the tag, from an older driver, counts as several)."""
        if self._several_datasets is None:
            tags = self.client.get_run(self.link.parent_run_id).data.tags
            self._several_datasets = tags.get(DATASET_COUNT_TAG) != "1"
        return self._several_datasets

    def run_id(self, trial_id: str, config: Mapping[str, Any]) -> str:
        """The trial's run, opened on first use in this driver."""
        known = self._runs.get(trial_id)
        if known is not None:
            return known
        from mlflow.entities import Param
        from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

        from trainables.train import parse_config

        trial = parse_config(dict(config))
        identity = {SWEEP_TAG: trial.sweep_id, TRIAL_TAG: trial_id}
        existing = find_run(self.client, self.link.experiment_id, identity)
        if existing is None:
            tags = trial_tags(trial, trial_id)
            tags[MLFLOW_PARENT_RUN_ID] = self.link.parent_run_id
            tags[MLFLOW_RUN_NAME] = trial_run_name(trial, self.several_datasets())
            tags[ATTEMPT_TAG] = "1"
            run_id = str(self.client.create_run(self.link.experiment_id, tags=tags).info.run_id)
            params = [Param(k, v) for k, v in trial_params(trial).items()]
            self.client.log_batch(run_id, params=params)
            self._last_step[trial_id] = -1
        else:
            run_id = existing
            self._last_step[trial_id] = self._logged_step(run_id)
            self._next_attempt(run_id)
        self._runs[trial_id] = run_id
        return run_id

    def _logged_step(self, run_id: str) -> int:
        history = self.client.get_metric_history(run_id, "step")
        return max((int(metric.step) for metric in history), default=-1)

    def _next_attempt(self, run_id: str) -> None:
        from mlflow.entities import RunStatus

        attempt = int(self.client.get_run(run_id).data.tags.get(ATTEMPT_TAG, "1")) + 1
        self.client.set_tag(run_id, ATTEMPT_TAG, str(attempt))
        self.client.update_run(run_id, status=RunStatus.to_string(RunStatus.RUNNING))

    def log_result(
        self, trial_id: str, config: Mapping[str, Any], result: Mapping[str, Any]
    ) -> None:
        """Log what the trial reported (Tune's own fields left out) at its step."""
        run_id = self.run_id(trial_id, config)
        step = int(result.get("step", 0))
        if step <= self._last_step.get(trial_id, -1):
            return
        self._log_metrics(run_id, step, result)
        self._last_step[trial_id] = step
        self.log_node(trial_id, run_id, result)

    def _log_metrics(self, run_id: str, step: int, result: Mapping[str, Any]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch = [
            Metric(key, float(value), now, step)
            for key, value in result.items()
            if key not in AUTO_RESULT_KEYS  # what Tune adds to every result
            and isinstance(value, int | float)
            and not isinstance(value, bool)
            and value == value  # a NaN cell of Tune's results table: not reported
        ]
        self.client.log_batch(run_id, metrics=batch)

    def log_node(self, trial_id: str, run_id: str, result: Mapping[str, Any]) -> None:
        """Tag the run with the Ray node (id, host name, IP) that reported ``result`` and
        the precision the trial trains in there, when the node is new for the trial: a
        trial retried elsewhere shows its latest node."""
        node = {
            NODE_TAG: str(result.get("node_id", "")),
            HOSTNAME_TAG: str(result.get("hostname", "")),
            NODE_IP_TAG: str(result.get("node_ip", "")),
            # What the trial trains in on that node (a string: never a metric).
            PRECISION_TAG: str(result.get("precision", "")),
        }
        if not node[NODE_TAG] or self._nodes.get(trial_id) == node[NODE_TAG]:
            return
        from mlflow.entities import RunTag

        self.client.log_batch(run_id, tags=[RunTag(k, v) for k, v in node.items() if v])
        self._nodes[trial_id] = node[NODE_TAG]

    def recovered(self, trial_id: str, reason: str | None = None) -> None:
        """The trial's worker failed and Tune retries it: one more attempt, its run
        tagged with why (``dicesweep.failure``) while the retry runs."""
        if trial_id in self._runs:
            self._next_attempt(self._runs[trial_id])
            if reason:
                self.client.set_tag(self._runs[trial_id], FAILURE_TAG, reason)

    def finish(
        self,
        trial_id: str,
        config: Mapping[str, Any],
        status: str,
        reason: str | None = None,
        degenerate: str | None = None,
        stopped: str | None = None,
    ) -> None:
        """End the trial's run: FAILED with its ``reason``, or FINISHED (a scheduler's
        stop too) with why it ``stopped``, tagged ``degenerate`` with why when its dev
        predictions show that its model learned nothing."""
        run_id = self.run_id(trial_id, config)
        if reason is not None:
            self.client.set_tag(run_id, FAILURE_TAG, reason)
        elif FAILURE_TAG in (tags := self.client.get_run(run_id).data.tags):
            # An earlier attempt's failure: the trial finished on a retry after all; why
            # it needed one stays on the run.
            self.client.set_tag(run_id, RETRIED_AFTER_TAG, tags[FAILURE_TAG])
            self.client.delete_tag(run_id, FAILURE_TAG)
        if stopped is not None:
            self.client.set_tag(run_id, STOP_TAG, stopped)
        if degenerate is not None:
            self.client.set_tag(run_id, DEGENERATE_TAG, degenerate)
        self.client.set_terminated(run_id, status=status)

    def backfill(self, results: Any) -> int:
        """Make each ended trial's run whole from Tune's results (a ``ResultGrid``):
        the evaluations it lacks, then its final status where it has none. Every run is
        checked, those this driver closed too: an earlier driver that died with writes
        queued lost them, and a trial it left running may since have ended under this
        one; so may a trial whose writes were given up (an outage longer than
        ``outage_s``). Returns how many runs were repaired.

        Raises:
            MlflowException: the tracking store did not answer (the sweep's driver then
                fails, is resubmitted and backfills again).
        """
        repaired = 0
        for result in results:
            trial_id = str((result.metrics or {}).get("trial_id", ""))
            if not trial_id:
                continue
            run_id = self._existing_run(trial_id, result.config)
            missing = self._unlogged(run_id, reported_results(result))
            ended = self.client.get_run(run_id).info.status in ("FINISHED", "FAILED")
            if not missing and ended:
                continue
            for reported in missing:
                self._log_metrics(run_id, int(reported["step"]), reported)
            repaired += 1
            if ended:  # closed with its tags already; only evaluations were missing
                continue
            if result.error is not None:
                from trainables.driver.reports import failure_reason

                self.finish(trial_id, result.config, "FAILED", failure_reason(result.error))
            else:
                degenerate = degenerate_reason(result.metrics or {})
                self.finish(trial_id, result.config, "FINISHED", degenerate=degenerate)
        return repaired

    def _existing_run(self, trial_id: str, config: Mapping[str, Any]) -> str:
        """The trial's run, found without counting an attempt (a repair is none), or
        opened when the tracking store never got it."""
        from trainables.train import parse_config

        identity = {SWEEP_TAG: parse_config(dict(config)).sweep_id, TRIAL_TAG: trial_id}
        run_id = self._runs.get(trial_id) or find_run(
            self.client, self.link.experiment_id, identity
        )
        if run_id is None:
            return self.run_id(trial_id, config)
        self._runs[trial_id] = run_id
        return run_id

    def _unlogged(self, run_id: str, reported: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The results in ``reported`` whose step the run does not hold."""
        if not reported:
            return []
        logged = {int(m.step) for m in self.client.get_metric_history(run_id, "step")}
        return [row for row in reported if int(row["step"]) not in logged]

    # Ray Tune's hooks: each queues its write (``later``).

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        trial_id, config = trial.trial_id, dict(trial.config)
        self.later(lambda: self.run_id(trial_id, config))

    def on_trial_result(
        self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any], **info: Any
    ) -> None:
        trial_id, config, reported = trial.trial_id, dict(trial.config), dict(result)
        self.later(lambda: self.log_result(trial_id, config, reported))

    def on_trial_recover(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        from trainables.driver.reports import failure_reason

        trial_id, error = trial.trial_id, latest_error(trial)
        reason = failure_reason(error) if error is not None else None
        self.later(lambda: self.recovered(trial_id, reason))

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        trial_id, config, last = trial.trial_id, dict(trial.config), trial.last_result or {}
        degenerate = degenerate_reason(last)
        # The trainable's last report says why it stopped; without one, the scheduler
        # stopped it after an earlier evaluation.
        stopped = str(last.get("stop_reason") or "scheduler")
        self.later(
            lambda: self.finish(
                trial_id, config, "FINISHED", degenerate=degenerate, stopped=stopped
            )
        )

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        from trainables.driver.reports import failure_reason

        trial_id, config = trial.trial_id, dict(trial.config)
        reason = failure_reason(latest_error(trial))
        self.later(lambda: self.finish(trial_id, config, "FAILED", reason))

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        self.flush()


def reported_results(result: Any) -> list[dict[str, Any]]:
    """Every evaluation a trial's ``Result`` holds, one a step, oldest first: the rows of
    Tune's results table, then those only its latest checkpoint carries (reported after
    a killed driver last saved the table, and never again by the trial resumed past
    them)."""
    from trainables.train import checkpoint_reports

    frame = result.metrics_dataframe
    rows = [] if frame is None or frame.empty else frame.to_dict(orient="records")
    by_step: dict[int, dict[str, Any]] = {}
    for row in [*rows, *checkpoint_reports(result.checkpoint)]:
        if row.get("step") is not None and row["step"] == row["step"]:  # NaN: no step
            by_step.setdefault(int(row["step"]), row)
    return [by_step[step] for step in sorted(by_step)]


def latest_error(trial: Any) -> BaseException | str | None:
    """The error the trial just raised: Ray writes it beside the trial on this node
    before the hook runs and copies it to the storage path later. Ray pickles only
    its task and actor errors (an ``OutOfMemoryError`` it writes as text alone), and
    keeps a pickle from an earlier try: the pickle counts only where it is the error
    the text file ends with, else that last failure's text is the error."""
    text_file = trial.error_file
    latest = None
    if text_file and Path(text_file).exists():
        # "Failure # 2 (occurred at ...)\n<str(error)>\n", appended at every failure
        latest = Path(text_file).read_text().rsplit("Failure # ", 1)[-1].partition("\n")[2]
    local = trial.pickled_error_file
    if local and Path(local).exists():
        error: BaseException = cloudpickle.loads(Path(local).read_bytes())
        if latest is None or str(error).strip() in latest:
            return error
    if latest:
        return latest
    return trial.get_pickled_error() or trial.get_error()
