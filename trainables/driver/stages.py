"""A sweep's ``Tuner``s: the one of a plain sweep, or the two stages of a spec with
``tune`` (``search_spaces.tuning``), each with its own experiment folder,
``<sweep id>/tune`` and ``<sweep id>/final``, so each is resumed on its own. A
finished stage 1's results are read back from its folder (never run again) and each
loss's choice recomputed from them; the parent run's tag ``dicesweep.stage`` says
which stage runs, ``dicesweep.tuned`` what stage 1 chose.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from search_spaces.contract import STAGE_TAG, TUNE_METHOD_TAG, TUNED_TAG, said
from search_spaces.plural import counted
from search_spaces.resolve import stage_counts, trial_count
from search_spaces.settings import DicesweepSettings
from search_spaces.spec import SweepSpec
from search_spaces.tuning import Stage, choose_settings, stage_one_settings, tune_method
from trainables.driver.cluster import count_unfinished, with_configs
from trainables.driver.placement import OomRetryPlacement
from trainables.driver.progress import SweepProgress
from trainables.driver.recovery import CheckpointRepair
from trainables.driver.reports import announce_choices


def build_tuner(
    spec: SweepSpec,
    sweep_id: str,
    logger: Any,
    storage: str,
    started_at: float,
    stage: Stage | None = None,
    chosen: dict[str, dict[str, Any]] | None = None,
) -> Any:
    """The ``Tuner`` of a sweep (of one ``stage`` of a spec with ``tune``, stage 2 at
    the ``chosen`` settings); restored from ``experiment_path`` (a folder or an
    ``s3://`` URI) when it exists.
    Either way ``logger`` logs its trials to MLflow; the progress display of a new
    sweep counts time from ``started_at`` (seconds since the epoch); a restored one
    keeps the start it was given first."""
    from ray import tune

    from trainables.driver.tune_search import stage_param_space, to_param_space

    path = experiment_path(storage, sweep_id, stage)
    if tune.Tuner.can_restore(path):
        return restored_tuner(spec, sweep_id, path)
    if stage is None:
        param_space = to_param_space(spec, sweep_id=sweep_id)
    else:
        param_space = stage_param_space(spec, stage, sweep_id=sweep_id, chosen=chosen)
    total = trial_count(spec) if stage is None else stage_counts(spec)[stage]
    folder = (sweep_id, storage) if stage is None else (stage, f"{storage}/{sweep_id}")
    return new_tuner(spec, param_space, folder, total, logger, started_at, stage or "final")


def restored_tuner(spec: SweepSpec, sweep_id: str, path: str) -> Any:
    """The ``Tuner`` of the experiment at ``path``, with its callbacks (the progress
    display with the sweep's first start, the trial logger)."""
    from ray import tune

    without_tensorboard()
    print(f"resuming sweep {sweep_id} from {path}", file=sys.stderr)
    # Tune leaves a trial errored only once it used up its retries (max_failures;
    # a retry in progress is pending): its failure is final, a resumed driver's
    # too, and it keeps its error (Tune's default, resume_errored=False).
    return tune.Tuner.restore(path, trainable=trainable_of(spec))


def new_tuner(
    spec: SweepSpec,
    param_space: dict[str, Any],
    folder: tuple[str, str],
    total: int,
    logger: Any,
    started_at: float,
    stage: Stage,
) -> Any:
    """A new ``Tuner`` over ``param_space`` in ``folder`` (its name and the storage it
    is under), its ``total`` trials counted by the progress display, scheduled as
    ``stage``'s trials are (``tune_config_kwargs``)."""
    from ray import tune
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

    from trainables.driver.tune_search import tune_config_kwargs

    without_tensorboard()
    name, storage_path = folder
    run_config = tune.RunConfig(
        name=name,
        storage_path=storage_path,
        failure_config=tune.FailureConfig(max_failures=spec.max_failures),
        checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
        callbacks=[
            SweepProgress(spec.search.metric, total, started_at),
            logger,
            CheckpointRepair(),
            OomRetryPlacement(),
            CSVLoggerCallback(),
            JsonLoggerCallback(),
        ],
        verbose=0,
    )
    return tune.Tuner(
        trainable_of(spec),
        param_space=param_space,
        # Trials of a sweep need the same resources: a finished trial's worker process
        # takes the next one, so torch, transformers and MLflow are imported once per
        # worker rather than once per trial.
        tune_config=tune.TuneConfig(**tune_config_kwargs(spec, stage), reuse_actors=True),
        run_config=run_config,
    )


def without_tensorboard() -> None:
    """Tune's own result files (CSV, JSON), without its TensorBoard logger: tensorboardX
    imports torch, which the driver otherwise never loads (the trials' workers do)."""
    os.environ["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] = "1"


def trainable_of(spec: SweepSpec) -> Any:
    """``train`` with the resources a trial of ``spec`` reserves."""
    from ray import tune

    from trainables.driver.tune_search import trial_resources
    from trainables.train import train

    return tune.with_resources(train, trial_resources(spec))


def experiment_path(storage: str, sweep_id: str, stage: Stage | None = None) -> str:
    """Where Tune keeps the experiment: ``<storage>/<sweep id>``, or one folder per
    stage under it for a spec with ``tune``."""
    return f"{storage}/{sweep_id}" if stage is None else f"{storage}/{sweep_id}/{stage}"


class StageInterrupted(Exception):
    """A stage's ``Tuner`` returned with trials unfinished (Ctrl-C, a stop request)."""

    def __init__(self, unfinished: int) -> None:
        super().__init__(f"{counted(unfinished, 'trial')} unfinished")
        self.unfinished = unfinished


def run_stage_one(
    spec: SweepSpec,
    sweep_id: str,
    logger: Any,
    settings: DicesweepSettings,
    started_at: float,
    client: Any,
    parent: str,
) -> Any:
    """Stage 1's results: read back from its experiment folder when it already ran to
    the end (a resumed sweep never runs it again), else run (or resumed) here.

    Raises:
        StageInterrupted: stage 1 stopped with trials unfinished.
    """
    from ray import tune

    assert spec.tune is not None  # only a spec with tune has stages
    path = experiment_path(settings.storage_path, sweep_id, "tune")
    expected = stage_counts(spec)["tune"]
    if tune.Tuner.can_restore(path) and not count_unfinished(path, expected):
        print(said(sweep_id, f"stage 1 done, read back from {path}"), file=sys.stderr)
        restored = tune.Tuner.restore(path, trainable=trainable_of(spec)).get_results()
        return with_configs(restored, path)
    mark_stage(client, parent, "tune")
    client.set_tag(parent, TUNE_METHOD_TAG, tune_method(spec.tune))
    tuner = build_tuner(spec, sweep_id, logger, settings.storage_path, started_at, "tune")
    results = tuner.fit()
    logger.flush()
    unfinished = count_unfinished(path, expected)
    if unfinished:
        raise StageInterrupted(unfinished)
    return with_configs(results, path)


def mark_stage(
    client: Any, parent: str, stage: Stage, tuned: dict[str, dict[str, Any]] | None = None
) -> None:
    """Tag the parent run with the stage that runs and, once known, each loss's
    chosen settings (JSON, keyed by the loss's table label)."""
    client.set_tag(parent, STAGE_TAG, stage)
    if tuned is not None:
        client.set_tag(parent, TUNED_TAG, json.dumps(tuned, sort_keys=True))


def run_tuning(
    spec: SweepSpec,
    sweep_id: str,
    logger: Any,
    settings: DicesweepSettings,
    started_at: float,
    client: Any,
    parent: str,
) -> tuple[list[Any], dict[str, dict[str, Any]]]:
    """Stage 1 of a spec with ``tune`` (``run_stage_one``): its results, and the settings
    each loss chose from them (keyed by the loss's table label), announced on stderr
    and on the parent run, which is marked as running stage 2.

    Raises:
        StageInterrupted: stage 1 stopped with trials unfinished.
    """
    assert spec.tune is not None  # only a spec with tune has stages
    stage_one = run_stage_one(spec, sweep_id, logger, settings, started_at, client, parent)
    chosen = choose_settings(
        ((r.config, None if r.error else r.metrics) for r in stage_one),
        stage_one_settings(spec.tune, spec.seed_list[0]),
        spec.search.metric,
    )
    mark_stage(client, parent, "final", announce_choices(sweep_id, chosen, stage_one))
    return stage_one, chosen
