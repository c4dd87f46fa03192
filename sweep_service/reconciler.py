"""Keeps each sweep's status in step with its Ray Job, and submits pending sweeps.

One pass reads every active sweep and moves it on:

- pending: its driver is submitted as a job with the stored resolved spec; the sweep
  becomes submitted;
- submitted or running, job running: running; job succeeded: succeeded;
- job failed with exit code 1 (trials failed) or 2 (invalid spec): failed;
- job failed otherwise, stopped by someone else, or missing (the driver died, the
  head restarted): pending again, resubmitted under a new job id, at most
  ``max_resubmissions`` times, then failed;
- cancelling: the job is stopped; once it has ended, cancelled.

A resubmitted driver resumes from Tune's experiment state: finished trials keep
their results. After a service restart the first pass picks every active sweep
up again. Each sweep's step is committed on its own, so one failing sweep never
holds the others back.

Each pass also reads the trials' progress of every submitted sweep (``progress``,
from MLflow) into the store, after the job's state, so a sweep seen finished
stores its final counts; a finished sweep is read once more after it finished. A
tracking store that does not answer delays the progress, never a status change.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable

from sqlalchemy.orm import Session

from sweep_service.runner import JobState, Runner, job_id
from sweep_service.store import (
    InvalidTransitionError,
    ResubmissionLimitError,
    StoreError,
    Sweep,
    SweepStatus,
    TrialProgress,
    list_active_sweeps,
    list_unsynced_finished_sweeps,
    record_progress,
    record_resubmission,
    transition_sweep,
)

log = logging.getLogger(__name__)
# Reads a sweep's progress from its tracking store (``progress.read_progress``).
ProgressReader = Callable[[Sweep], TrialProgress]
# Closes a finished sweep's MLflow runs left RUNNING: (sweep, KILLED|FAILED, reason).
RunCloser = Callable[[Sweep, str, str], object]
# Exit codes of the driver that end a sweep for good: 1, some trials failed; 2, invalid spec.
FINAL_EXIT_CODES = {1, 2}
_EXIT_CODE = re.compile(r"exit code (-?\d+)")


def driver_failed_for_good(message: str) -> bool:
    """Whether a failed job's message shows the driver exiting with a final code."""
    match = _EXIT_CODE.search(message)
    return match is not None and int(match.group(1)) in FINAL_EXIT_CODES


class Reconciler:
    """Moves active sweeps on, one pass at a time (``run_once``) or in a thread (``start``)."""

    def __init__(
        self,
        session_factory: Callable[[], Session],
        runner: Runner,
        max_resubmissions: int,
        interval_s: float = 2.0,
        progress: ProgressReader | None = None,
        close_runs: RunCloser | None = None,
    ) -> None:
        self._sessions = session_factory
        self._runner = runner
        self._progress = progress
        self._close_runs = close_runs
        self._max_resubmissions = max_resubmissions
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> None:
        """One pass over every active sweep."""
        with self._sessions() as session:
            sweeps = list_active_sweeps(session)
            finished = list_unsynced_finished_sweeps(session) if self._progress else []
        for sweep in sweeps:
            try:
                with self._sessions() as session:
                    self._step(session, sweep)
            except (StoreError, RuntimeError, ConnectionError) as error:
                # Ray or the store may be briefly away; the next pass tries again.
                log.warning("sweep %s: %s", sweep.id, error)
        for sweep in finished:
            try:
                with self._sessions() as session:
                    self._sync_progress(session, sweep)
            except StoreError as error:
                log.warning("sweep %s: %s", sweep.id, error)

    def _sync_progress(self, session: Session, sweep: Sweep) -> None:
        """Store the sweep's progress as its tracking store shows it now."""
        if self._progress is None:
            return
        try:
            progress = self._progress(sweep)
        except Exception as error:  # MLflow raises what its store or transport raises
            log.warning("sweep %s: progress not read from MLflow: %s", sweep.id, error)
            return
        record_progress(session, sweep.id, progress)

    def _step(self, session: Session, sweep: Sweep) -> None:
        job = job_id(sweep.id, sweep.resubmissions)
        if sweep.status is SweepStatus.PENDING:
            self._runner.submit(job, sweep.id, sweep.resolved_spec)
            try:
                transition_sweep(session, sweep.id, SweepStatus.SUBMITTED, job_status="PENDING")
            except InvalidTransitionError:
                # Cancelled while its job was being submitted: stop the job just started.
                self._runner.stop(job)
            return
        state, message = self._runner.state(job)
        self._sync_progress(session, sweep)  # after the state: a finished job's is final
        if sweep.status is SweepStatus.CANCELLING:
            if state in (JobState.PENDING, JobState.RUNNING):
                self._runner.stop(job)
            else:
                transition_sweep(
                    session,
                    sweep.id,
                    SweepStatus.CANCELLED,
                    job_status=state,
                    message="cancelled on request: its running trials were stopped",
                )
                self._closed(session, sweep, "KILLED", "cancelled")
            return
        if state is JobState.RUNNING:
            if sweep.status is not SweepStatus.RUNNING:
                transition_sweep(session, sweep.id, SweepStatus.RUNNING, job_status=state)
        elif state is JobState.PENDING:
            return
        elif state is JobState.SUCCEEDED:
            transition_sweep(session, sweep.id, SweepStatus.SUCCEEDED, job_status=state)
        elif state is JobState.FAILED and driver_failed_for_good(message):
            transition_sweep(
                session, sweep.id, SweepStatus.FAILED, job_status=state, message=message[-2000:]
            )
            self._closed(session, sweep, "FAILED", f"the sweep's driver failed: {message[-400:]}")
        elif state in (JobState.FAILED, JobState.STOPPED, JobState.MISSING):
            self._resubmit(session, sweep, f"driver job {job} {state.lower()}: {message[-500:]}")

    def _resubmit(self, session: Session, sweep: Sweep, reason: str) -> None:
        try:
            record_resubmission(
                session, sweep.id, max_resubmissions=self._max_resubmissions, message=reason
            )
        except ResubmissionLimitError:
            message = f"{reason} (resubmitted {self._max_resubmissions} times already)"
            transition_sweep(session, sweep.id, SweepStatus.FAILED, message=message)
            self._closed(session, sweep, "FAILED", message)

    def _closed(self, session: Session, sweep: Sweep, status: str, reason: str) -> None:
        """Close the runs a stopped or dead driver left RUNNING, then store the progress
        they now show (a tracking store that does not answer is retried by nobody: the
        runs stay RUNNING, as before, and the sweep's status is already right)."""
        if self._close_runs is None:
            return
        try:
            self._close_runs(sweep, status, reason)
        except Exception as error:  # MLflow raises what its store or transport raises
            log.warning("sweep %s: runs not closed in MLflow: %s", sweep.id, error)
            return
        self._sync_progress(session, sweep)

    def start(self) -> None:
        """Run passes every ``interval_s`` in a daemon thread until ``stop``."""
        self._thread = threading.Thread(target=self._loop, name="reconciler", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception:  # the loop must outlive any one bad pass
                log.exception("reconciler pass failed")
            self._stop.wait(self._interval_s)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
