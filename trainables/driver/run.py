"""The sweep driver: one spec, one Ray Tune ``Tuner``, one MLflow parent run.

    python -m trainables.driver SPEC.yaml [--sweep-id ID]     # resolves the spec here
    python -m trainables.driver --preset smoke
    python -m trainables.driver --resolved-spec spec.json --sweep-id ID

The service resolves and validates a submitted spec once and stores it; its Ray Job
carries that resolved spec as ``spec.json`` in the job's working folder, and the
driver validates it again without applying presets (``validate_spec``). Runs on the
Ray cluster at ``DICESWEEP_RAY_ADDRESS`` (a local head when unset), logs to
``DICESWEEP_MLFLOW_TRACKING_URI``, and keeps Tune's experiment state in
``DICESWEEP_STORAGE_PATH/<sweep id>``. Run again with the same sweep id to resume:
finished trials are not rerun. The table is printed at the end and attached,
with the other report formats and a plot, to the parent run.

A spec with ``tune`` (``search_spaces.tuning``) runs two ``Tuner``s in turn, each with
its own experiment folder, ``<sweep id>/tune`` and ``<sweep id>/final``, so each is
resumed on its own: on a restart, a finished stage 1's results are read back from
its folder (never run again) and each loss's choice recomputed from them; the
parent run's tag ``dicesweep.stage`` says which stage runs, ``dicesweep.tuned`` what
stage 1 chose.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd

from search_spaces.checks import dataset_issues, local_file_issues, model_folder, model_issues
from search_spaces.data_roots import allowed_roots
from search_spaces.dataset_refs import LocalDataset
from search_spaces.errors import SpecError
from search_spaces.lineage import (
    EXPERIMENT,
    STAGE_TAG,
    TUNE_METHOD_TAG,
    TUNED_TAG,
)
from search_spaces.reports.budget import stage_one_is_random
from search_spaces.resolve import resolve_spec, stage_counts, trial_count, validate_spec
from search_spaces.settings import DicesweepSettings
from search_spaces.spec import SweepSpec
from search_spaces.spec_file import SpecFileError, read_spec_file
from search_spaces.tuning import Stage, choose_settings, stage_one_settings, tune_method
from search_spaces.versions import submitter_skew
from trainables.driver.cluster import await_capacity, count_unfinished, start_ray
from trainables.driver.parent import open_tracking, stop_running_trial_runs
from trainables.driver.progress import SweepProgress, ray_log_file
from trainables.driver.recovery import CheckpointRepair
from trainables.driver.reports import announce_choices, collect_rows, write_reports

# Ray Tune's classic console output, silenced by verbose=0: the progress display
# of SweepProgress replaces it.
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")


def new_sweep_id(spec: SweepSpec) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"{spec.name or 'sweep'}-{stamp}-{uuid.uuid4().hex[:6]}"


# On a sweep's parent run while its driver waits for a node (``wait_for_cluster``).
WAITING_TAG = "dicesweep.waiting"


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
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

    from search_spaces.tune_search import stage_param_space, to_param_space, tune_config_kwargs

    # Tune's own result files (CSV, JSON), without its TensorBoard logger: tensorboardX
    # imports torch, which the driver otherwise never loads (the trials' workers do).
    os.environ["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] = "1"

    trainable = trainable_of(spec)
    path = experiment_path(storage, sweep_id, stage)
    if tune.Tuner.can_restore(path):
        # The experiment keeps its callbacks: the progress display (with the sweep's
        # first start) and the trial logger.
        print(f"resuming sweep {sweep_id} from {path}", file=sys.stderr)
        # An errored trial runs again only where the spec allows a retry: with
        # max_failures 0 its one failure is final, a resumed driver's too.
        retry = spec.max_failures > 0
        return tune.Tuner.restore(path, trainable=trainable, resume_errored=retry)
    if stage is None:
        param_space = to_param_space(spec, sweep_id=sweep_id)
    else:
        param_space = stage_param_space(spec, stage, sweep_id=sweep_id, chosen=chosen)
    total = trial_count(spec) if stage is None else stage_counts(spec)[stage]
    run_config = tune.RunConfig(
        name=sweep_id if stage is None else stage,
        storage_path=storage if stage is None else f"{storage}/{sweep_id}",
        failure_config=tune.FailureConfig(max_failures=spec.max_failures),
        checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
        callbacks=[
            SweepProgress(spec.search.metric, total, started_at),
            logger,
            CheckpointRepair(),
            CSVLoggerCallback(),
            JsonLoggerCallback(),
        ],
        verbose=0,
    )
    return tune.Tuner(
        trainable,
        param_space=param_space,
        # Trials of a sweep need the same resources: a finished trial's worker process
        # takes the next one, so torch, transformers and MLflow are imported once per
        # worker rather than once per trial.
        tune_config=tune.TuneConfig(
            **tune_config_kwargs(spec, stage or "final"), reuse_actors=True
        ),
        run_config=run_config,
    )


def trainable_of(spec: SweepSpec) -> Any:
    """``train`` with the resources a trial of ``spec`` reserves."""
    from ray import tune

    from search_spaces.tune_search import trial_resources
    from trainables.train import train

    return tune.with_resources(train, trial_resources(spec))


def experiment_path(storage: str, sweep_id: str, stage: Stage | None = None) -> str:
    """Where Tune keeps the experiment: ``<storage>/<sweep id>``, or one folder per
    stage under it for a spec with ``tune``."""
    return f"{storage}/{sweep_id}" if stage is None else f"{storage}/{sweep_id}/{stage}"


def import_report_libraries() -> None:
    """Import what the reports need (matplotlib, SciPy's tests: seconds) while the
    trials run and the driver mostly waits, rather than after the last trial."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
    from matplotlib.figure import Figure  # noqa: F401
    from scipy import stats  # noqa: F401


def wait_for_cluster(
    spec: SweepSpec, sweep_id: str, settings: DicesweepSettings, client: Any, parent: str
) -> int:
    """Wait for a node that holds one trial (``await_capacity``), telling so on stderr
    and in the parent run's ``dicesweep.waiting`` tag; 0 once one is there, else the
    exit code, the parent run FAILED with the reason."""
    own_head = not settings.ray_address and not os.environ.get("RAY_ADDRESS")

    notices: list[str] = []

    def notify(message: str) -> None:
        print(f"sweep {sweep_id}: {message}", file=sys.stderr)
        client.set_tag(parent, WAITING_TAG, message)
        notices.append(message)

    refused = await_capacity(spec, settings, own_head, notify)
    if notices:
        client.delete_tag(parent, WAITING_TAG)
    if refused is None:
        return 0
    code, reason = refused
    print(f"sweep {sweep_id}: {reason}", file=sys.stderr)
    client.set_tag(parent, "dicesweep.failure", reason)
    client.set_terminated(parent, "FAILED")
    return code


def run(
    spec: SweepSpec,
    sweep_id: str | None,
    settings: DicesweepSettings,
    num_cpus: int | None,
    started_at: float | None = None,
    experiment: str = EXPERIMENT,
) -> int:
    """Run (or resume) the sweep of a validated ``spec``; returns the process exit code.
    ``started_at`` (seconds since the epoch; now when None) is when this run began, the
    progress display's clock's start unless the sweep is resumed; ``experiment`` is the
    MLflow experiment its runs go to (the service names its owner's)."""
    started_at = time.time() if started_at is None else started_at
    sweep_id = sweep_id or new_sweep_id(spec)
    log_file = settings.home / "logs" / f"{sweep_id}.log"
    print(f"sweep {sweep_id}: {trial_count(spec)} trials; Ray's log: {log_file}", file=sys.stderr)
    # While Ray starts (seconds, mostly waiting on its processes), a thread sets up
    # MLflow (import, store, parent run). The trials' libraries (torch, transformers)
    # are never imported here: only the workers that run trials need them.
    with ThreadPoolExecutor(max_workers=1) as pool:
        tracking = pool.submit(open_tracking, settings, sweep_id, spec, experiment)
        start_ray(settings, num_cpus, log_file)
        client, link = tracking.result()
    experiment, parent = link.experiment_id, link.parent_run_id
    refused = wait_for_cluster(spec, sweep_id, settings, client, parent)
    if refused:
        return refused
    from trainables.driver.tracking import TrialLogger

    logger = TrialLogger(link, client)
    threading.Thread(target=import_report_libraries, name="report-imports", daemon=True).start()
    chosen: dict[str, dict[str, Any]] = {}
    stage_one: list[Any] = []
    stage: Stage | None = None
    expected = trial_count(spec)
    with ray_log_file(log_file):
        if spec.tune is not None:
            try:
                stage_one = run_stage_one(
                    spec, sweep_id, logger, settings, started_at, client, parent
                )
            except StageInterrupted as stop:
                return interrupted(client, experiment, parent, sweep_id, stop.unfinished)
            chosen = choose_settings(
                ((r.config, None if r.error else r.metrics) for r in stage_one),
                stage_one_settings(spec.tune, spec.seeds[0]),
                spec.search.metric,
            )
            mark_stage(client, parent, "final", announce_choices(sweep_id, chosen, stage_one))
            stage = "final"
            expected = len(chosen) * len(spec.seeds)
        tuner = build_tuner(
            spec, sweep_id, logger, settings.storage_path, started_at, stage, chosen
        )
        results = tuner.fit()
    logger.flush()  # the trial runs are complete before they are read or stopped
    # The experiment's URI as configured: Tune's own path drops an s3:// scheme.
    unfinished = count_unfinished(experiment_path(settings.storage_path, sweep_id, stage), expected)
    if unfinished:
        return interrupted(client, experiment, parent, sweep_id, unfinished)
    # What an outage or a dead driver left unwritten, from Tune's own results.
    repaired = logger.backfill([*stage_one, *results])
    if repaired:
        print(
            f"sweep {sweep_id}: {repaired} trial run(s) completed from Tune's results",
            file=sys.stderr,
        )
    return report(spec, sweep_id, client, parent, results, stage_one)


class StageInterrupted(Exception):
    """A stage's ``Tuner`` returned with trials unfinished (Ctrl-C, a stop request)."""

    def __init__(self, unfinished: int) -> None:
        super().__init__(f"{unfinished} trial(s) unfinished")
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
        print(f"sweep {sweep_id}: stage 1 done, read back from {path}", file=sys.stderr)
        return list(tune.Tuner.restore(path, trainable=trainable_of(spec)).get_results())
    mark_stage(client, parent, "tune")
    client.set_tag(parent, TUNE_METHOD_TAG, tune_method(spec.tune))
    tuner = build_tuner(spec, sweep_id, logger, settings.storage_path, started_at, "tune")
    results = tuner.fit()
    logger.flush()
    unfinished = count_unfinished(path, expected)
    if unfinished:
        raise StageInterrupted(unfinished)
    return list(results)


def mark_stage(
    client: Any, parent: str, stage: Stage, tuned: dict[str, dict[str, Any]] | None = None
) -> None:
    """Tag the parent run with the stage that runs and, once known, each loss's
    chosen settings (JSON, keyed by the loss's table label)."""
    client.set_tag(parent, STAGE_TAG, stage)
    if tuned is not None:
        client.set_tag(parent, TUNED_TAG, json.dumps(tuned, sort_keys=True))


def interrupted(client: Any, experiment: str, parent: str, sweep_id: str, unfinished: int) -> int:
    """Close an interrupted sweep's runs as KILLED: resumable, not failed."""
    stop_running_trial_runs(client, experiment, sweep_id)
    client.set_terminated(parent, "KILLED")
    print(
        f"sweep {sweep_id} interrupted with {unfinished} trial(s) unfinished; resume with "
        f"--sweep-id {sweep_id}",
        file=sys.stderr,
    )
    return 130


def report(
    spec: SweepSpec,
    sweep_id: str,
    client: Any,
    parent: str,
    results: Any,
    stage_one: Any,
) -> int:
    """Print and attach the table of ``results`` (stage 2's with ``tune``, whose stage-1
    trials go to ``report/tune_trials.csv``), close the parent; the exit code."""
    rows, failed = collect_rows(results)
    tune_rows, tune_failed = collect_rows(stage_one)
    for entry in [*tune_failed, *failed]:
        print(
            f"trial failed: {entry['loss']} seed={entry['seed']} on {entry['dataset']} "
            f"{entry['variant']}: {entry['reason']}",
            file=sys.stderr,
        )
    if not rows.empty:
        name = spec.name or spec.extends or sweep_id
        # Stage 1's rows too: the budget curves are drawn from them (the table is not).
        reported = pd.concat([tune_rows, rows], ignore_index=True) if len(tune_rows) else rows
        random_sampling = stage_one_is_random(spec.model_dump())
        print(
            write_reports(
                client, parent, reported, spec.search.metric, failed, name, random_sampling
            )
        )
    if not tune_rows.empty:
        client.log_text(parent, tune_rows.to_csv(index=False), "report/tune_trials.csv")
    status = "FAILED" if len(failed) == len(results) else "FINISHED"
    # A stage-1 trial that fails (a learning rate that diverges) is an outcome of the
    # tuning, not a failure of the sweep: counted apart.
    client.set_tag(parent, "dicesweep.failed_trials", str(len(failed)))
    if spec.tune is not None:
        client.set_tag(parent, "dicesweep.failed_tune_trials", str(len(tune_failed)))
    client.set_terminated(parent, status)
    done = len(results) - len(failed)
    print(f"sweep {sweep_id}: {done} done, {len(failed)} failed", file=sys.stderr)
    return 1 if failed else 0


def load_spec(args: argparse.Namespace, settings: DicesweepSettings) -> SweepSpec:
    """The spec the arguments name: a stored resolved spec is validated as it is; a
    spec file or a preset is resolved against the presets first.

    Raises:
        SpecError: an invalid spec.
    """
    if args.resolved_spec:
        # Checked by the service; a model folder is relative to the data-sets folder.
        spec = validate_spec(read_spec_file(args.resolved_spec), max_trials=None)
        roots = allowed_roots(settings)
        # What lies on disk may have changed since: checked again before trials open it.
        issues = [] if roots is None else local_file_issues(spec, settings.datasets_dir, roots)
        if issues:
            raise SpecError(issues)
        return with_absolute_model(spec, settings.datasets_dir)
    raw = {"extends": args.preset} if args.preset else read_spec_file(args.spec)
    spec = with_absolute_folders(resolve_spec(raw, max_trials=settings.max_trials))
    # The service's checks, before anything starts; any local folder may be read here.
    issues = model_issues(spec, Path.cwd()) + dataset_issues(spec, settings.datasets_dir)
    if issues:
        raise SpecError(issues)
    return spec


def with_absolute_model(spec: SweepSpec, base: Path) -> SweepSpec:
    """``spec`` with a model folder relative to ``base`` made absolute (the trials run
    in other folders); a hub id or ``tiny-bert`` stays as it is."""
    folder = model_folder(spec.model, base)
    return spec if folder is None else spec.model_copy(update={"model": str(folder)})


def with_absolute_folders(spec: SweepSpec) -> SweepSpec:
    """``spec`` with its local data sets' and model folder's relative paths taken from
    the current folder (the trials run in other folders)."""
    spec = with_absolute_model(spec, Path.cwd())
    datasets = [
        dataset.model_copy(update={"path": str(Path(dataset.path).expanduser().absolute())})
        if isinstance(dataset, LocalDataset)
        else dataset
        for dataset in spec.task.dataset
    ]
    task = spec.task.model_copy(update={"dataset": datasets})
    return spec.model_copy(update={"task": task})


def main(argv: list[str] | None = None, started_at: float | None = None) -> None:
    """The driver's command line; ``started_at`` as ``run`` takes it."""
    parser = argparse.ArgumentParser(prog="python -m trainables.driver", description=__doc__)
    parser.add_argument("spec", nargs="?", help="YAML/JSON spec file, or - for stdin")
    parser.add_argument("--preset", help="run a preset: the same as {extends: NAME}")
    parser.add_argument(
        "--resolved-spec", help="a spec already resolved (presets applied), as JSON: a Ray Job's"
    )
    parser.add_argument("--sweep-id", help="resume (or name) this sweep")
    parser.add_argument("--num-cpus", type=int, default=None, help="CPUs of a local Ray head")
    parser.add_argument(
        "--experiment", default=EXPERIMENT, help="MLflow experiment (an owner's: dicesweep/NAME)"
    )
    args = parser.parse_args(argv)
    if len([x for x in (args.spec, args.preset, args.resolved_spec) if x]) != 1:
        parser.error("give exactly one of: a spec file, --preset, --resolved-spec")
    settings = DicesweepSettings()
    mismatch = submitter_skew()
    if mismatch:  # a job from a service of another release: refused before anything runs
        print(mismatch, file=sys.stderr)
        sys.exit(3)
    try:
        spec = load_spec(args, settings)
    except (SpecError, SpecFileError) as error:
        print(error, file=sys.stderr)
        sys.exit(2)
    sys.exit(run(spec, args.sweep_id, settings, args.num_cpus, started_at, args.experiment))
