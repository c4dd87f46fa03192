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
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from search_spaces.checks import dataset_issues, local_file_issues, model_folder, model_issues
from search_spaces.data_roots import allowed_roots
from search_spaces.dataset_refs import LocalDataset, dataset_label
from search_spaces.errors import SpecError
from search_spaces.lineage import DATASET_COUNT_TAG, EXPERIMENT, ROLE_TAG, SWEEP_TAG
from search_spaces.presets import resolve_spec
from search_spaces.reports.budget import stage_one_is_random
from search_spaces.sections import TrackingLink
from search_spaces.settings import DicesweepSettings
from search_spaces.spec import SweepSpec, trial_count, validate_spec
from search_spaces.spec_file import SpecFileError, read_spec_file
from search_spaces.versions import submitter_skew
from trainables.driver.cluster import await_capacity, count_unfinished, start_ray
from trainables.driver.progress import SweepProgress, ray_log_file
from trainables.driver.reports import collect_rows, write_reports

# Ray Tune's classic console output, silenced by verbose=0: the progress display
# of SweepProgress replaces it.
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")


def new_sweep_id(spec: SweepSpec) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"{spec.name or 'sweep'}-{stamp}-{uuid.uuid4().hex[:6]}"


# MLflow 3's experiment kind, its model-training view (runs, params, metrics, charts)
# rather than the GenAI one (traces, evaluations): the UI reads the tag where the kind
# is chosen per experiment and asks for it where it is missing; where the sidebar's
# switch chooses the view instead (MLflow 3.17 does), the service's links add
# ``workflowType`` (sweep_service.api.trials).
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")
# On a sweep's parent run while its driver waits for a node (``wait_for_cluster``).
WAITING_TAG = "dicesweep.waiting"


def experiment_id(client: Any, settings: DicesweepSettings) -> str:
    """The ``dicesweep`` experiment, created with an artifact folder under the home,
    marked as model training for the MLflow UI."""
    found = client.get_experiment_by_name(EXPERIMENT)
    if found is not None:
        if found.tags.get(EXPERIMENT_KIND[0]) != EXPERIMENT_KIND[1]:
            client.set_experiment_tag(found.experiment_id, *EXPERIMENT_KIND)
        return str(found.experiment_id)
    location = None
    if str(settings.mlflow_tracking_uri).startswith("sqlite:"):
        settings.mlflow_artifact_root.mkdir(parents=True, exist_ok=True)
        location = settings.mlflow_artifact_root.as_uri()
    tags = dict([EXPERIMENT_KIND])
    return str(client.create_experiment(EXPERIMENT, artifact_location=location, tags=tags))


def parent_run_name(spec: SweepSpec, sweep_id: str) -> str:
    """``"table8-mrpc · 3536bd89"``: the spec's name (a preset's when it sets none) and a
    short id, so runs of one spec stay apart in the MLflow UI: the first 8 hex digits of
    the service's ``sw-3536bd89...``, the random tail of ``new_sweep_id``'s
    ``table8-mrpc-20261125-101500-a1b2c3``."""
    short = sweep_id.removeprefix("sw-").rsplit("-", 1)[-1][:8]
    return f"{spec.name} · {short}"


def parent_run(client: Any, experiment: str, sweep_id: str, spec: SweepSpec) -> str:
    """The sweep's parent run: found by its tags on a resume, else created with the spec,
    named by ``parent_run_name`` and described by the spec's description."""
    from mlflow.entities import Param, RunStatus
    from mlflow.utils.mlflow_tags import MLFLOW_RUN_NAME, MLFLOW_RUN_NOTE

    from trainables.driver.tracking import find_run

    tags = {SWEEP_TAG: sweep_id, ROLE_TAG: "sweep"}
    existing = find_run(client, experiment, tags)
    if existing is not None:
        client.update_run(existing, status=RunStatus.to_string(RunStatus.RUNNING))
        return existing
    described = {MLFLOW_RUN_NOTE: spec.description} if spec.description else {}
    named = {
        **tags,
        **described,
        MLFLOW_RUN_NAME: parent_run_name(spec, sweep_id),
        DATASET_COUNT_TAG: str(len(spec.task.dataset)),
    }
    run = client.create_run(experiment, tags=named)
    params = {
        "preset": spec.extends or "",
        "trials": trial_count(spec),
        "model": spec.model,
        "datasets": ",".join(dataset_label(dataset) for dataset in spec.task.dataset),
        "variants": ",".join(spec.task.variant),
        "seeds": ",".join(map(str, spec.seeds)),
        "search": spec.search.algorithm,
        "scheduler": spec.scheduler.kind,
        "metric": spec.search.metric,
    }
    client.log_batch(run.info.run_id, params=[Param(k, str(v)) for k, v in params.items()])
    # The spec that ran, every preset applied: enough to run the sweep again.
    client.log_dict(run.info.run_id, spec.model_dump(mode="json"), "spec.yaml")
    return str(run.info.run_id)


def open_tracking(
    settings: DicesweepSettings, sweep_id: str, spec: SweepSpec
) -> tuple[Any, TrackingLink]:
    """An MLflow client, and the link trials log through: experiment and parent run."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=str(settings.mlflow_tracking_uri))
    experiment = experiment_id(client, settings)
    link = TrackingLink(
        tracking_uri=str(settings.mlflow_tracking_uri),
        experiment_id=experiment,
        parent_run_id=parent_run(client, experiment, sweep_id, spec),
    )
    return client, link


def build_tuner(
    spec: SweepSpec, sweep_id: str, logger: Any, storage: str, started_at: float
) -> Any:
    """The one ``Tuner`` of a sweep; restored from ``storage/sweep_id`` (a folder or an
    ``s3://`` URI) when it exists.
    Either way ``logger`` logs its trials to MLflow; the progress display of a new
    sweep counts time from ``started_at`` (seconds since the epoch); a restored one
    keeps the start it was given first."""
    from ray import tune
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

    from search_spaces.tune_search import to_param_space, trial_resources, tune_config_kwargs
    from trainables.train import train

    # Tune's own result files (CSV, JSON), without its TensorBoard logger: tensorboardX
    # imports torch, which the driver otherwise never loads (the trials' workers do).
    os.environ["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] = "1"

    trainable = tune.with_resources(train, trial_resources(spec))
    path = f"{storage}/{sweep_id}"
    if tune.Tuner.can_restore(path):
        # The experiment keeps its callbacks: the progress display (with the sweep's
        # first start) and the trial logger.
        print(f"resuming sweep {sweep_id} from {path}", file=sys.stderr)
        # An errored trial runs again only where the spec allows a retry: with
        # max_failures 0 its one failure is final, a resumed driver's too.
        retry = spec.max_failures > 0
        return tune.Tuner.restore(path, trainable=trainable, resume_errored=retry)
    param_space = to_param_space(spec, sweep_id=sweep_id)
    run_config = tune.RunConfig(
        name=sweep_id,
        storage_path=storage,
        failure_config=tune.FailureConfig(max_failures=spec.max_failures),
        checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
        callbacks=[
            SweepProgress(spec.search.metric, trial_count(spec), started_at),
            logger,
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
        tune_config=tune.TuneConfig(**tune_config_kwargs(spec), reuse_actors=True),
        run_config=run_config,
    )


def import_report_libraries() -> None:
    """Import what the reports need (matplotlib, SciPy's tests: seconds) while the
    trials run and the driver mostly waits, rather than after the last trial."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
    from matplotlib.figure import Figure  # noqa: F401
    from scipy import stats  # noqa: F401


def stop_running_trial_runs(client: Any, experiment: str, sweep_id: str) -> None:
    """An interrupted sweep's trial runs still marked running become KILLED (a resumed
    sweep reopens them)."""
    query = (
        f"tags.`{SWEEP_TAG}` = '{sweep_id}' and tags.`{ROLE_TAG}` = 'trial' "
        "and attributes.status = 'RUNNING'"
    )
    for run in client.search_runs([experiment], filter_string=query, max_results=5000):
        client.set_terminated(run.info.run_id, "KILLED")


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
) -> int:
    """Run (or resume) the sweep of a validated ``spec``; returns the process exit code.
    ``started_at`` (seconds since the epoch; now when None) is when this run began, the
    progress display's clock's start unless the sweep is resumed."""
    started_at = time.time() if started_at is None else started_at
    sweep_id = sweep_id or new_sweep_id(spec)
    log_file = settings.home / "logs" / f"{sweep_id}.log"
    print(f"sweep {sweep_id}: {trial_count(spec)} trials; Ray's log: {log_file}", file=sys.stderr)
    # While Ray starts (seconds, mostly waiting on its processes), a thread sets up
    # MLflow (import, store, parent run). The trials' libraries (torch, transformers)
    # are never imported here: only the workers that run trials need them.
    with ThreadPoolExecutor(max_workers=1) as pool:
        tracking = pool.submit(open_tracking, settings, sweep_id, spec)
        start_ray(settings, num_cpus, log_file)
        client, link = tracking.result()
    experiment, parent = link.experiment_id, link.parent_run_id
    refused = wait_for_cluster(spec, sweep_id, settings, client, parent)
    if refused:
        return refused
    from trainables.driver.tracking import TrialLogger

    logger = TrialLogger(link, client)
    tuner = build_tuner(spec, sweep_id, logger, settings.storage_path, started_at)
    threading.Thread(target=import_report_libraries, name="report-imports", daemon=True).start()
    with ray_log_file(log_file):
        results = tuner.fit()
    logger.flush()  # the trial runs are complete before they are read or stopped
    # The experiment's URI as configured: Tune's own path drops an s3:// scheme.
    unfinished = count_unfinished(f"{settings.storage_path}/{sweep_id}", trial_count(spec))
    if unfinished:  # interrupted (Ctrl-C, a stop request): resumable, not failed
        stop_running_trial_runs(client, experiment, sweep_id)
        client.set_terminated(parent, "KILLED")
        print(
            f"sweep {sweep_id} interrupted with {unfinished} trial(s) unfinished; resume with "
            f"--sweep-id {sweep_id}",
            file=sys.stderr,
        )
        return 130
    repaired = logger.backfill(results)  # what an outage or a dead driver left unwritten
    if repaired:
        print(
            f"sweep {sweep_id}: {repaired} trial run(s) completed from Tune's results",
            file=sys.stderr,
        )
    rows, failed = collect_rows(results)
    for entry in failed:
        print(
            f"trial failed: {entry['loss']} seed={entry['seed']} on {entry['dataset']} "
            f"{entry['variant']}: {entry['reason']}",
            file=sys.stderr,
        )
    if not rows.empty:
        name = spec.name or spec.extends or sweep_id
        random_sampling = stage_one_is_random(spec.model_dump())
        print(
            write_reports(client, parent, rows, spec.search.metric, failed, name, random_sampling)
        )
    status = "FAILED" if len(failed) == len(results) else "FINISHED"
    client.set_tag(parent, "dicesweep.failed_trials", str(len(failed)))
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
    sys.exit(run(spec, args.sweep_id, settings, args.num_cpus, started_at))
