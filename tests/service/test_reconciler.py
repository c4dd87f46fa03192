"""The reconciler against the real store (SQLite and PostgreSQL) and a scripted runner."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mlflow.tracking import MlflowClient
from sqlalchemy.orm import Session, sessionmaker

from search_spaces.contract import FAILURE_TAG, exit_is_final
from sweep_service.progress import close_open_runs, read_progress
from sweep_service.reconciler import Reconciler
from sweep_service.runner import Job, JobState
from sweep_service.store import (
    Owner,
    Sweep,
    SweepStatus,
    TrialProgress,
    create_sweep,
    get_sweep,
)
from tests.service.api_fixtures import FakeTrial, write_parent, write_trials
from tests.service.factories import make_draft


class ScriptedRunner:
    """Jobs whose states the test sets; records submissions and stops."""

    def __init__(self) -> None:
        # job id -> (state, Ray's message[, the driver's exit code])
        self.jobs: dict[str, tuple[Any, ...]] = {}
        self.submitted: list[tuple[str, str]] = []
        self.experiments: dict[str, str] = {}  # sweep id -> the MLflow experiment it was given
        self.stopped: list[str] = []
        self.job_logs: dict[str, str] = {}  # job id -> its driver's log

    def submit(self, job: str, sweep_id: str, spec: Mapping[str, Any], experiment: str) -> None:
        if job not in self.jobs:
            self.jobs[job] = (JobState.PENDING, "")
            self.submitted.append((job, sweep_id))
            self.experiments[sweep_id] = experiment

    def state(self, job: str) -> Job:
        return Job(*self.jobs.get(job, (JobState.MISSING,)))

    def stop(self, job: str) -> None:
        self.stopped.append(job)
        self.jobs[job] = (JobState.STOPPED, "stopped by request")

    def logs(self, job: str) -> str:
        return self.job_logs.get(job, "")

    def nodes(self) -> list[dict[str, float]] | None:
        return None


def setup(
    session_factory: sessionmaker[Session], owner: Owner, limit: int = 2
) -> tuple[Reconciler, ScriptedRunner, str]:
    runner = ScriptedRunner()
    with session_factory() as session:
        sweep_id = create_sweep(session, owner.id, make_draft("r")).sweep.id
    return Reconciler(session_factory, runner, max_resubmissions=limit), runner, sweep_id


def status(session_factory: sessionmaker[Session], owner: Owner, sweep_id: str) -> Any:
    with session_factory() as session:
        return get_sweep(session, owner.id, sweep_id)


def test_pending_sweep_is_submitted_once_then_followed_to_success(
    session_factory: sessionmaker[Session], alice: Owner
) -> None:
    reconciler, runner, sweep_id = setup(session_factory, alice)
    reconciler.run_once()
    assert runner.submitted == [(sweep_id, sweep_id)]  # job id = sweep id
    assert status(session_factory, alice, sweep_id).status is SweepStatus.SUBMITTED
    reconciler.run_once()  # job still pending: nothing changes, no second submission
    assert len(runner.submitted) == 1
    runner.jobs[sweep_id] = (JobState.RUNNING, "")
    reconciler.run_once()
    sweep = status(session_factory, alice, sweep_id)
    assert sweep.status is SweepStatus.RUNNING and sweep.started_at is not None
    runner.jobs[sweep_id] = (JobState.SUCCEEDED, "")
    reconciler.run_once()
    sweep = status(session_factory, alice, sweep_id)
    assert sweep.status is SweepStatus.SUCCEEDED and sweep.finished_at is not None


def test_a_sweep_that_succeeds_after_a_resubmission_drops_the_old_failure(
    session_factory: sessionmaker[Session], alice: Owner
) -> None:
    reconciler, runner, sweep_id = setup(session_factory, alice, limit=2)
    reconciler.run_once()
    tail = "\x1b[36m(raylet)\x1b[0m worker died\nJob entrypoint command failed with exit code -9"
    runner.jobs[sweep_id] = (JobState.FAILED, tail, -9)
    reconciler.run_once()  # back to pending, the reason kept without colour codes
    message = status(session_factory, alice, sweep_id).message or ""
    assert "(raylet) worker died" in message and "\x1b" not in message
    reconciler.run_once()  # resubmitted
    runner.jobs[f"{sweep_id}-retry1"] = (JobState.SUCCEEDED, "")
    reconciler.run_once()
    sweep = status(session_factory, alice, sweep_id)
    assert sweep.status is SweepStatus.SUCCEEDED and not sweep.message


def test_dead_driver_is_resubmitted_under_a_new_job_id_up_to_the_limit(
    session_factory: sessionmaker[Session], alice: Owner
) -> None:
    reconciler, runner, sweep_id = setup(session_factory, alice, limit=2)
    reconciler.run_once()
    runner.jobs[sweep_id] = (JobState.FAILED, "Job entrypoint command failed with exit code -9", -9)
    reconciler.run_once()  # back to pending, counted
    reconciler.run_once()  # resubmitted
    assert runner.submitted[-1] == (f"{sweep_id}-retry1", sweep_id)
    del runner.jobs[f"{sweep_id}-retry1"]  # the head restarted: the job is gone
    reconciler.run_once()
    reconciler.run_once()
    assert runner.submitted[-1] == (f"{sweep_id}-retry2", sweep_id)
    runner.jobs[f"{sweep_id}-retry2"] = (JobState.STOPPED, "")
    reconciler.run_once()  # a third death: over the limit
    sweep = status(session_factory, alice, sweep_id)
    assert sweep.status is SweepStatus.FAILED and "resubmitted 2 times" in sweep.message


def test_driver_exit_codes_one_and_two_fail_the_sweep_for_good(
    session_factory: sessionmaker[Session], alice: Owner
) -> None:
    reconciler, runner, sweep_id = setup(session_factory, alice)
    reconciler.run_once()
    runner.jobs[sweep_id] = (JobState.FAILED, "Job entrypoint command failed with exit code 1", 1)
    reconciler.run_once()
    assert status(session_factory, alice, sweep_id).status is SweepStatus.FAILED
    assert len(runner.submitted) == 1
    assert exit_is_final(2) and not exit_is_final(137)
    # No node joined within the driver's wait: nodes may still join, tried again.
    assert not exit_is_final(4)
    assert not exit_is_final(None)  # the worker died before its driver exited


def test_cancelling_sweep_is_stopped_then_cancelled(
    session_factory: sessionmaker[Session], alice: Owner
) -> None:
    from sweep_service.store import transition_sweep

    reconciler, runner, sweep_id = setup(session_factory, alice)
    reconciler.run_once()
    runner.jobs[sweep_id] = (JobState.RUNNING, "")
    reconciler.run_once()
    with session_factory() as session:
        transition_sweep(session, sweep_id, SweepStatus.CANCELLING)
    reconciler.run_once()
    assert runner.stopped == [sweep_id]
    reconciler.run_once()
    cancelled = status(session_factory, alice, sweep_id)
    assert cancelled.status is SweepStatus.CANCELLED
    # No longer "cancel requested": the page shows this beside the status.
    assert cancelled.message == "cancelled on request before any trial ran"


def test_a_new_reconciler_picks_up_active_sweeps(
    session_factory: sessionmaker[Session], alice: Owner
) -> None:
    # A restarted service: the first pass of a fresh reconciler follows the running job.
    first, runner, sweep_id = setup(session_factory, alice)
    first.run_once()
    runner.jobs[sweep_id] = (JobState.SUCCEEDED, "")
    Reconciler(session_factory, runner, max_resubmissions=2).run_once()
    assert status(session_factory, alice, sweep_id).status is SweepStatus.SUCCEEDED


def test_a_sweep_cancelled_while_being_submitted_has_its_job_stopped(
    session_factory: sessionmaker[Session], alice: Owner
) -> None:
    from sweep_service.store import transition_sweep

    reconciler, runner, sweep_id = setup(session_factory, alice)
    submit = runner.submit

    def cancel_then_submit(job: str, sweep: str, spec: Mapping[str, Any], experiment: str) -> None:
        with session_factory() as session:  # the cancel route wins the race
            transition_sweep(session, sweep, SweepStatus.CANCELLED)
        submit(job, sweep, spec, experiment)

    runner.submit = cancel_then_submit  # type: ignore[method-assign]
    reconciler.run_once()
    assert runner.stopped == [sweep_id]
    assert status(session_factory, alice, sweep_id).status is SweepStatus.CANCELLED


class ScriptedProgress:
    """Progress the test sets per sweep, or a tracking store that does not answer."""

    def __init__(self) -> None:
        self.now: dict[str, TrialProgress] = {}
        self.reads: list[str] = []
        self.down = False

    def __call__(self, sweep: Sweep) -> TrialProgress:
        self.reads.append(sweep.id)
        if self.down:
            raise ConnectionError("tracking store unreachable")
        return self.now.get(sweep.id, TrialProgress())


def test_each_pass_stores_the_progress_and_a_finished_sweep_gets_its_final_counts(
    session_factory: sessionmaker[Session], alice: Owner
) -> None:
    runner, progress = ScriptedRunner(), ScriptedProgress()
    reconciler = Reconciler(session_factory, runner, max_resubmissions=2, progress=progress)
    with session_factory() as session:
        sweep_id = create_sweep(session, alice.id, make_draft("p", trials=3)).sweep.id
    reconciler.run_once()  # submitted: no runs can exist yet, nothing read
    assert progress.reads == []
    runner.jobs[sweep_id] = (JobState.RUNNING, "")
    progress.now[sweep_id] = TrialProgress(running=2, done=1, mlflow_experiment_id="1")
    reconciler.run_once()
    stored = status(session_factory, alice, sweep_id)
    assert (stored.trials_running, stored.trials_done, stored.trials_failed) == (2, 1, 0)
    assert stored.mlflow_experiment_id == "1" and stored.trials_synced_at is not None
    # The job ends; the same pass reads the progress after the job's state: final counts.
    runner.jobs[sweep_id] = (JobState.SUCCEEDED, "")
    best = {"run_id": "r", "loss": "ce", "seed": 0, "dataset": "d", "variant": "v", "eval_f1": 1.0}
    progress.now[sweep_id] = TrialProgress(done=3, best_trial=best)
    reconciler.run_once()
    stored = status(session_factory, alice, sweep_id)
    assert stored.status is SweepStatus.SUCCEEDED
    assert (stored.trials_running, stored.trials_done, stored.best_trial) == (0, 3, best)
    assert stored.mlflow_experiment_id == "1"  # kept when a read has none
    # Read once after it finished, then never again.
    reads = len(progress.reads)
    reconciler.run_once()
    reconciler.run_once()
    assert len(progress.reads) == reads
    assert status(session_factory, alice, sweep_id).trials_synced_at >= stored.finished_at


def test_a_cancelled_sweeps_message_says_whether_trials_were_running(
    session_factory: sessionmaker[Session], alice: Owner
) -> None:
    from sweep_service.store import transition_sweep

    runner, progress = ScriptedRunner(), ScriptedProgress()
    reconciler = Reconciler(session_factory, runner, max_resubmissions=2, progress=progress)
    for counts, message in (
        (TrialProgress(), "cancelled on request before any trial ran"),
        (TrialProgress(running=2, done=1), "cancelled on request: its running trials were stopped"),
        (TrialProgress(done=1, failed=1), "cancelled on request: no trial was running"),
    ):
        with session_factory() as session:
            sweep_id = create_sweep(session, alice.id, make_draft("c", trials=3)).sweep.id
        reconciler.run_once()  # submitted
        runner.jobs[sweep_id] = (JobState.RUNNING, "")
        progress.now[sweep_id] = counts
        reconciler.run_once()  # running, its progress read
        with session_factory() as session:
            transition_sweep(session, sweep_id, SweepStatus.CANCELLING)
        reconciler.run_once()  # its job stopped
        reconciler.run_once()
        cancelled = status(session_factory, alice, sweep_id)
        assert (cancelled.status, cancelled.message) == (SweepStatus.CANCELLED, message)


def test_an_unreachable_tracking_store_delays_progress_not_status(
    session_factory: sessionmaker[Session], alice: Owner
) -> None:
    runner, progress = ScriptedRunner(), ScriptedProgress()
    reconciler = Reconciler(session_factory, runner, max_resubmissions=2, progress=progress)
    with session_factory() as session:
        sweep_id = create_sweep(session, alice.id, make_draft("q")).sweep.id
    reconciler.run_once()
    progress.down = True
    runner.jobs[sweep_id] = (JobState.SUCCEEDED, "")
    reconciler.run_once()
    stored = status(session_factory, alice, sweep_id)
    assert stored.status is SweepStatus.SUCCEEDED and stored.trials_synced_at is None
    progress.down = False
    progress.now[sweep_id] = TrialProgress(done=2)
    reconciler.run_once()  # the finished sweep is read as soon as MLflow answers
    assert status(session_factory, alice, sweep_id).trials_done == 2


def tracked(
    session_factory: sessionmaker[Session],
    runner: ScriptedRunner,
    tracking: MlflowClient,
    progress: Any = None,
) -> Reconciler:
    """A reconciler that reads progress from (``progress``, or ``read_progress`` of)
    the MLflow store ``tracking`` and closes open runs there."""
    return Reconciler(
        session_factory,
        runner,
        max_resubmissions=2,
        progress=progress or (lambda sweep: read_progress(tracking, sweep.id)),
        close_runs=lambda sweep, state, reason: close_open_runs(tracking, sweep.id, state, reason),
    )


def test_a_driver_failed_for_good_has_its_open_runs_closed_with_the_reason(
    session_factory: sessionmaker[Session], alice: Owner, tracking: MlflowClient
) -> None:
    runner = ScriptedRunner()
    with session_factory() as session:
        sweep_id = create_sweep(session, alice.id, make_draft("r")).sweep.id
    parent = write_parent(tracking, sweep_id)
    running, finished = write_trials(
        tracking,
        sweep_id,
        [FakeTrial({"name": "ce"}, status="RUNNING"), FakeTrial({"name": "dice"}, eval_f1=70.0)],
    )
    reconciler = tracked(session_factory, runner, tracking)
    reconciler.run_once()
    runner.jobs[sweep_id] = (JobState.FAILED, "Job entrypoint command failed with exit code 1", 1)
    reconciler.run_once()
    assert status(session_factory, alice, sweep_id).status is SweepStatus.FAILED
    for run_id in (parent, running):
        run = tracking.get_run(run_id)
        assert run.info.status == "FAILED"
        assert run.data.tags[FAILURE_TAG].startswith("the sweep's driver failed: ")
        assert "exit code 1" in run.data.tags[FAILURE_TAG]
    assert tracking.get_run(finished).info.status == "FINISHED"  # left as it ended
    assert FAILURE_TAG not in tracking.get_run(finished).data.tags
    sweep = status(session_factory, alice, sweep_id)
    assert (sweep.trials_running, sweep.trials_done, sweep.trials_failed) == (0, 1, 1)


def test_a_progress_read_that_a_cancel_overtakes_is_not_taken_as_final(
    session_factory: sessionmaker[Session], alice: Owner, tracking: MlflowClient
) -> None:
    # The job thread cancels the sweep while the progress thread's read is under way:
    # that read saw a trial RUNNING, so the next pass must still close it and read again.
    from sweep_service.store import transition_sweep

    runner = ScriptedRunner()
    with session_factory() as session:
        sweep_id = create_sweep(session, alice.id, make_draft("c")).sweep.id
    write_parent(tracking, sweep_id)
    (running,) = write_trials(tracking, sweep_id, [FakeTrial({"name": "ce"}, status="RUNNING")])

    def read_overtaken_by_the_cancel(sweep: Sweep) -> TrialProgress:
        progress = read_progress(tracking, sweep.id)
        with session_factory() as session:
            if get_sweep(session, alice.id, sweep.id).status is SweepStatus.RUNNING:
                transition_sweep(session, sweep.id, SweepStatus.CANCELLING)
                transition_sweep(session, sweep.id, SweepStatus.CANCELLED)
        return progress

    reconciler = tracked(session_factory, runner, tracking, read_overtaken_by_the_cancel)
    reconciler.run_once()
    runner.jobs[sweep_id] = (JobState.RUNNING, "")
    reconciler.follow_jobs()
    reconciler.read_tracking()  # the read the cancel overtook
    overtaken = status(session_factory, alice, sweep_id)
    assert overtaken.status is SweepStatus.CANCELLED
    assert not overtaken.shows_final_trials
    reconciler.read_tracking()
    assert tracking.get_run(running).info.status == "KILLED"
    final = status(session_factory, alice, sweep_id)
    assert final.shows_final_trials
    assert [row["status"] for row in final.trial_rows] == ["KILLED"]
    assert (final.trials_running, final.trials_stopped) == (0, 1)
