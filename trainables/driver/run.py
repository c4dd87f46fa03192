"""The sweep driver: one spec, one Ray Tune ``Tuner``, one MLflow parent run.

    python -m trainables.driver SPEC.yaml [--sweep-id ID]     # resolves the spec here
    python -m trainables.driver --preset smoke
    python -m trainables.driver --resolved-spec spec.json --sweep-id ID

The service resolves and validates a submitted spec once and stores it; its Ray Job
carries that resolved spec as ``spec.json`` in the job's working folder, and the
driver validates it again without applying presets (``spec_loading.load_spec``). Runs on the
Ray cluster at ``DICESWEEP_RAY_ADDRESS`` (a local head when unset), logs to
``DICESWEEP_MLFLOW_TRACKING_URI``, and keeps Tune's experiment state in
``DICESWEEP_STORAGE_PATH/<sweep id>``. Run again with the same sweep id to resume:
finished trials are not rerun. The table is printed at the end and attached,
with the other report formats and a plot, to the parent run.

The spec comes from ``spec_loading``; the ``Tuner`` (two in turn, one a stage, for a
spec with ``tune``) from ``stages``.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pandas as pd

from search_spaces.contract import (
    EXPERIMENT,
    FAILED_TRIALS_TAG,
    FAILED_TUNE_TRIALS_TAG,
    FAILURE_TAG,
    DriverExit,
    said,
)
from search_spaces.errors import SpecError
from search_spaces.plural import counted
from search_spaces.reports.budget import stage_one_is_random
from search_spaces.resolve import trial_count
from search_spaces.settings import DicesweepSettings
from search_spaces.spec import SweepSpec
from search_spaces.spec_file import SpecFileError
from search_spaces.tuning import Stage
from search_spaces.versions import submitter_skew
from trainables.driver.cluster import await_capacity, count_unfinished, start_ray, with_configs
from trainables.driver.parent import open_tracking, stop_running_trial_runs
from trainables.driver.precision_probe import with_sweep_precision
from trainables.driver.progress import ray_log_file
from trainables.driver.reports import collect_rows, write_reports
from trainables.driver.rounds import run_rounds
from trainables.driver.spec_loading import load_spec
from trainables.driver.stages import (
    StageInterrupted,
    build_tuner,
    experiment_path,
    run_tuning,
)

# Ray Tune's classic console output, silenced by verbose=0: the progress display
# of SweepProgress replaces it.
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")


def new_sweep_id(spec: SweepSpec) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"{spec.name or 'sweep'}-{stamp}-{uuid.uuid4().hex[:6]}"


def import_report_libraries() -> None:
    """Import what the reports need (matplotlib, SciPy's tests: seconds) while the
    trials run and the driver mostly waits, rather than after the last trial."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
    from matplotlib.figure import Figure  # noqa: F401
    from scipy import stats  # noqa: F401


def wait_for_cluster(
    spec: SweepSpec, sweep_id: str, settings: DicesweepSettings, client: Any, parent: str
) -> int:
    """Wait for a node that holds one trial (``await_capacity``), its notice on stderr
    (the sweep's message in the service); ``DONE`` once one is there, else the exit
    code, the parent run FAILED with the reason."""
    own_head = not settings.ray_address and not os.environ.get("RAY_ADDRESS")

    def notify(message: str) -> None:
        print(said(sweep_id, message), file=sys.stderr)

    refused = await_capacity(spec, settings, own_head, notify)
    if refused is None:
        return DriverExit.DONE
    code, reason = refused
    print(said(sweep_id, reason), file=sys.stderr)
    client.set_tag(parent, FAILURE_TAG, reason)
    client.set_terminated(parent, "FAILED")
    return code


def run(
    spec: SweepSpec,
    sweep_id: str | None,
    settings: DicesweepSettings,
    num_cpus: int | None,
    started_at: float | None = None,
    experiment: str = EXPERIMENT,
    experiment_id: str | None = None,
) -> int:
    """Run (or resume) the sweep of a validated ``spec``; returns the process exit code.
    ``started_at`` (seconds since the epoch; now when None) is when this run began, the
    progress display's clock's start unless the sweep is resumed; ``experiment`` is the
    MLflow experiment its runs go to (the service names its owner's, and gives its id,
    ``experiment_id``, where it made it)."""
    started_at = time.time() if started_at is None else started_at
    sweep_id = sweep_id or new_sweep_id(spec)
    log_file = settings.home / "logs" / f"{sweep_id}.log"
    most = "at most " if spec.seeds_until is not None else ""
    print(
        said(sweep_id, f"{most}{trial_count(spec)} trials; Ray's log: {log_file}"),
        file=sys.stderr,
    )
    # While Ray starts (seconds, mostly waiting on its processes), a thread sets up
    # MLflow (import, store, parent run). The trials' libraries (torch, transformers)
    # are never imported here: only the workers that run trials need them.
    with ThreadPoolExecutor(max_workers=1) as pool:
        tracking = pool.submit(open_tracking, settings, sweep_id, spec, experiment, experiment_id)
        start_ray(settings, num_cpus, log_file)
        client, link = tracking.result()
    experiment, parent = link.experiment_id, link.parent_run_id
    refused = wait_for_cluster(spec, sweep_id, settings, client, parent)
    if refused:
        return refused
    from trainables.driver.tracking import TrialLogger

    spec = with_sweep_precision(spec, settings, client, parent, sweep_id)
    logger = TrialLogger(link, client, outage_s=settings.mlflow_outage_s)
    threading.Thread(target=import_report_libraries, name="report-imports", daemon=True).start()
    chosen: dict[str, dict[str, Any]] | None = None
    stage_one: list[Any] = []
    stage: Stage | None = None
    with ray_log_file(log_file):
        try:
            if spec.tune is not None:
                stage_one, chosen = run_tuning(
                    spec, sweep_id, logger, settings, started_at, client, parent
                )
                stage = "final"
            results = run_final(spec, sweep_id, logger, settings, started_at, stage, chosen)
        except StageInterrupted as stop:
            return interrupted(client, experiment, parent, sweep_id, stop.unfinished)
    # What an outage or a dead driver left unwritten, from Tune's own results.
    repaired = logger.backfill([*stage_one, *results])
    if repaired:
        print(
            said(sweep_id, f"{repaired} trial run(s) completed from Tune's results"),
            file=sys.stderr,
        )
    return report(spec, sweep_id, client, parent, results, stage_one)


def run_final(
    spec: SweepSpec,
    sweep_id: str,
    logger: Any,
    settings: DicesweepSettings,
    started_at: float,
    stage: Stage | None,
    chosen: dict[str, dict[str, Any]] | None,
) -> list[Any]:
    """The results of the sweep's table: its one ``Tuner`` (stage 2's with ``tune``, at
    the ``chosen`` settings), or the rounds of seeds until decided (``rounds``).

    Raises:
        StageInterrupted: trials were left unfinished.
    """
    if spec.seeds_until is not None:
        return run_rounds(spec, sweep_id, logger, settings, started_at, chosen)
    tuner = build_tuner(spec, sweep_id, logger, settings.storage_path, started_at, stage, chosen)
    results = tuner.fit()
    logger.flush()  # the trial runs are complete before they are read or stopped
    # The experiment's URI as configured: Tune's own path drops an s3:// scheme.
    path = experiment_path(settings.storage_path, sweep_id, stage)
    expected = trial_count(spec) if chosen is None else len(chosen) * len(spec.seed_list)
    unfinished = count_unfinished(path, expected)
    if unfinished:
        raise StageInterrupted(unfinished)
    return with_configs(results, path)


def interrupted(client: Any, experiment: str, parent: str, sweep_id: str, unfinished: int) -> int:
    """Close an interrupted sweep's runs as KILLED: resumable, not failed."""
    stop_running_trial_runs(client, experiment, sweep_id)
    client.set_terminated(parent, "KILLED")
    print(
        said(
            sweep_id,
            f"interrupted with {counted(unfinished, 'trial')} unfinished; "
            f"resume with --sweep-id {sweep_id}",
        ),
        file=sys.stderr,
    )
    return DriverExit.INTERRUPTED


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
    client.set_tag(parent, FAILED_TRIALS_TAG, str(len(failed)))
    if spec.tune is not None:
        client.set_tag(parent, FAILED_TUNE_TRIALS_TAG, str(len(tune_failed)))
    client.set_terminated(parent, status)
    done = len(results) - len(failed)
    print(said(sweep_id, f"{done} done, {len(failed)} failed"), file=sys.stderr)
    return DriverExit.TRIALS_FAILED if failed else DriverExit.DONE


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
    parser.add_argument(
        "--experiment-id", help="the experiment's id, as the service made it: never looked up"
    )
    args = parser.parse_args(argv)
    if len([x for x in (args.spec, args.preset, args.resolved_spec) if x]) != 1:
        parser.error("give exactly one of: a spec file, --preset, --resolved-spec")
    settings = DicesweepSettings()
    mismatch = submitter_skew()
    if mismatch:  # a job from a service of another release: refused before anything runs
        print(mismatch, file=sys.stderr)
        sys.exit(DriverExit.RELEASE_SKEW)
    try:
        spec = load_spec(args, settings)
    except (SpecError, SpecFileError) as error:
        print(error, file=sys.stderr)
        sys.exit(DriverExit.INVALID)
    code = run(
        spec,
        args.sweep_id,
        settings,
        args.num_cpus,
        started_at,
        args.experiment,
        args.experiment_id,
    )
    sys.exit(code)
