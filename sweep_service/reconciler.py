"""Keeps each sweep's status in step with its Ray Job, and submits pending sweeps.

One pass reads every active sweep and moves it on:

- pending: its driver is submitted as a job with the stored resolved spec; the sweep
  becomes submitted;
- submitted or running, job running: running, its message the driver's notice while
  it waits (for MLflow, for a node: ``notices``, read from the job's log at most every
  ``NOTICE_READ_S`` until its trials show progress); job succeeded: succeeded;
- job failed with an exit code the driver declares final (``contract.FINAL_EXITS``:
  trials failed, an invalid spec), read from the Jobs API: failed; its others, an
  unforeseen error's included, are tried again;
- job failed otherwise, stopped by someone else, or missing (the driver died, the
  head restarted): pending again, resubmitted under a new job id, at most
  ``max_resubmissions`` times, then failed;
- cancelling: the job is stopped; once it has ended, cancelled.

A resubmitted driver resumes from Tune's experiment state: finished trials keep
their results. After a service restart the first pass picks every active sweep
up again. Each sweep's step is committed on its own, so one failing sweep never
holds the others back.

A second pass, on a thread of its own in the service, reads the trials' progress of
every running sweep (``progress``, from MLflow) into the store; a finished sweep is
read once more after it finished, after the runs its driver left RUNNING are closed,
and keeps its trial rows, so that what it shows is final and readable without MLflow.
MLflow not answering ends that pass, to be tried again on the next: it delays the
progress, never a submission, a cancellation or a status change.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable

from sqlalchemy.orm import Session

from search_spaces.contract import current_notice, exit_is_final, experiment_name, is_notice
from sweep_service.failures import driver_failure
from sweep_service.runner import JobState, Runner, job_id
from sweep_service.store import (
    InvalidTransitionError,
    Owner,
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
    utc_now,
)

log = logging.getLogger(__name__)
# Reads a sweep's progress from its tracking store (``progress.read_progress``).
ProgressReader = Callable[[Sweep], TrialProgress]
# Closes a finished sweep's MLflow runs left RUNNING: (sweep, KILLED|FAILED, reason).
RunCloser = Callable[[Sweep, str, str], object]
# How often a running job's log is read for its driver's notice.
NOTICE_READ_S = 15.0
# Terminal colour and cursor codes, as Ray's and Tune's log lines carry them.
ANSI_CODES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# Sweeps whose driver has started and may have trials running: their progress is read
# every pass (a submitted one's job has not been seen running yet).
FOLLOWED = frozenset({SweepStatus.RUNNING, SweepStatus.CANCELLING})


class TrackingUnavailableError(RuntimeError):
    """MLflow did not answer a read or a write of the reconciler."""


def _cancelled_message(sweep: Sweep) -> str:
    """A cancelled sweep's message, from its trials as the last read of its progress
    counted them: stopped while some ran, or before any had."""
    if sweep.trials_running:
        return "cancelled on request: its running trials were stopped"
    if sweep.trials_done or sweep.trials_failed or sweep.trials_stopped:
        return "cancelled on request: no trial was running"
    return "cancelled on request before any trial ran"


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
        self._threads: list[threading.Thread] = []
        self._notices_read: dict[str, float] = {}  # job id -> time.monotonic() of its read

    def run_once(self) -> None:
        """One pass over every active sweep: its job, then its trials' progress."""
        self.follow_jobs()
        self.read_tracking()

    def follow_jobs(self) -> None:
        """Submit pending sweeps and follow every active sweep's job into its status.
        Never reads MLflow: a tracking store that is away delays no submission,
        cancellation or status change."""
        with self._sessions() as session:
            sweeps = list_active_sweeps(session)
        followed = {job_id(sweep.id, sweep.resubmissions) for sweep in sweeps}
        self._notices_read = {j: t for j, t in self._notices_read.items() if j in followed}
        for sweep in sweeps:
            try:
                with self._sessions() as session:
                    self._step(session, sweep)
            except (StoreError, RuntimeError, ConnectionError) as error:
                # Ray or the store may be briefly away; the next pass tries again.
                log.warning("sweep %s: %s", sweep.id, error)

    def read_tracking(self) -> None:
        """Read the trials' progress of every running sweep from MLflow into the store,
        and each finished sweep's once more (closing the runs a stopped or dead driver
        left RUNNING first), so that what it shows is final. The first read that fails
        ends the pass: MLflow is away, and the next pass tries again."""
        if self._progress is None:
            return
        with self._sessions() as session:
            sweeps = [sweep for sweep in list_active_sweeps(session) if sweep.status in FOLLOWED]
            finished = list_unsynced_finished_sweeps(session)
        try:
            for sweep in sweeps:
                self._sync_progress(sweep)
            for sweep in finished:
                self._close_runs_of(sweep)
                self._sync_progress(sweep)
        except TrackingUnavailableError as error:
            log.warning("progress not read from MLflow this pass: %s", error)
        except StoreError as error:
            log.warning("progress not stored this pass: %s", error)

    def _sync_progress(self, sweep: Sweep) -> None:
        """Store the sweep's progress as its tracking store shows it now, stamped with
        the time the read began: a read that began before the sweep finished (the
        job thread may finish it meanwhile) does not count as its final one, so the
        next pass closes its open runs and reads it again.

        Raises:
            TrackingUnavailableError: MLflow did not answer.
        """
        assert self._progress is not None  # read_tracking checks
        began = utc_now()
        try:
            progress = self._progress(sweep)
        except Exception as error:  # MLflow raises what its store or transport raises
            raise TrackingUnavailableError(f"sweep {sweep.id}: {error}") from error
        with self._sessions() as session:
            record_progress(session, sweep.id, progress, now=began)

    def _close_runs_of(self, sweep: Sweep) -> None:
        """Close the runs a cancelled or failed sweep's driver left RUNNING (KILLED or
        FAILED, with the reason); a succeeded sweep's driver closed its own.

        Raises:
            TrackingUnavailableError: MLflow did not answer.
        """
        if self._close_runs is None or sweep.status is SweepStatus.SUCCEEDED:
            return
        if sweep.status is SweepStatus.CANCELLED:
            status, reason = "KILLED", "cancelled"
        else:
            status, reason = "FAILED", f"the sweep's driver failed: {(sweep.message or '')[-400:]}"
        try:
            self._close_runs(sweep, status, reason)
        except Exception as error:  # MLflow raises what its store or transport raises
            raise TrackingUnavailableError(f"sweep {sweep.id}: {error}") from error

    def _step(self, session: Session, sweep: Sweep) -> None:
        job = job_id(sweep.id, sweep.resubmissions)
        if sweep.status is SweepStatus.PENDING:
            owner = session.get(Owner, sweep.owner_id)
            experiment = experiment_name(owner.name if owner is not None else None)
            self._runner.submit(job, sweep.id, sweep.resolved_spec, experiment)
            try:
                transition_sweep(session, sweep.id, SweepStatus.SUBMITTED, job_status="PENDING")
            except InvalidTransitionError:
                # Cancelled while its job was being submitted: stop the job just started.
                self._runner.stop(job)
            return
        state, message, exit_code = self._runner.state(job)
        message = ANSI_CODES.sub("", message)  # a log tail's colours: noise once stored
        if sweep.status is SweepStatus.CANCELLING:
            if state in (JobState.PENDING, JobState.RUNNING):
                self._runner.stop(job)
            else:
                transition_sweep(
                    session,
                    sweep.id,
                    SweepStatus.CANCELLED,
                    job_status=state,
                    message=_cancelled_message(sweep),
                )
            return
        if state is JobState.RUNNING:
            notice = self._notice(sweep, job)
            if sweep.status is not SweepStatus.RUNNING or notice is not None:
                transition_sweep(
                    session, sweep.id, SweepStatus.RUNNING, job_status=state, message=notice
                )
        elif state is JobState.PENDING:
            return
        elif state is JobState.SUCCEEDED:
            # A failed earlier driver's message no longer says anything about the sweep.
            transition_sweep(session, sweep.id, SweepStatus.SUCCEEDED, job_status=state, message="")
        elif state is JobState.FAILED and exit_is_final(exit_code):
            # The reason only: the log stays with the job, a link for the sweep's owner.
            reason = f"driver job {job} failed, {driver_failure(message, exit_code)}"
            transition_sweep(
                session, sweep.id, SweepStatus.FAILED, job_status=state, message=reason
            )
        elif state in (JobState.FAILED, JobState.STOPPED, JobState.MISSING):
            reason = driver_failure(message, exit_code) if message else "no message"
            self._resubmit(session, sweep, f"driver job {job} {state.lower()}: {reason}")

    def _notice(self, sweep: Sweep, job: str) -> str | None:
        """The message a running sweep's driver's notice asks for: its text while the
        driver waits, "" once a stored notice no longer holds, None for no change. The
        log is read at most every ``NOTICE_READ_S``, and no more once trials show
        progress (the driver waits before its first trial) unless a notice is shown."""
        shown = is_notice(sweep.message)
        progressed = sweep.trials_running + sweep.trials_done + sweep.trials_failed > 0
        now = time.monotonic()
        last_read = self._notices_read.get(job)
        if (progressed and not shown) or (
            last_read is not None and now - last_read < NOTICE_READ_S
        ):
            return None
        self._notices_read[job] = now
        try:
            text = self._runner.logs(job)
        except (RuntimeError, ConnectionError) as error:  # the next read tries again
            log.warning("sweep %s: its job's log was not read: %s", sweep.id, error)
            return None
        notice = current_notice(ANSI_CODES.sub("", text), sweep.id)
        if notice is not None:
            return None if notice == sweep.message else notice
        return "" if shown else None

    def _resubmit(self, session: Session, sweep: Sweep, reason: str) -> None:
        try:
            record_resubmission(
                session, sweep.id, max_resubmissions=self._max_resubmissions, message=reason
            )
        except ResubmissionLimitError:
            message = f"{reason} (resubmitted {self._max_resubmissions} times already)"
            transition_sweep(session, sweep.id, SweepStatus.FAILED, message=message)

    def start(self) -> None:
        """Follow jobs and read progress every ``interval_s``, each in a daemon thread of
        its own, until ``stop``: a slow or absent MLflow never holds a status back."""
        self._threads = [
            threading.Thread(target=self._loop, args=(self.follow_jobs,), name="reconciler"),
            threading.Thread(target=self._loop, args=(self.read_tracking,), name="progress"),
        ]
        for thread in self._threads:
            thread.daemon = True
            thread.start()

    def _loop(self, one_pass: Callable[[], None]) -> None:
        while not self._stop.is_set():
            try:
                one_pass()
            except Exception:  # the loop must outlive any one bad pass
                log.exception("reconciler pass failed")
            self._stop.wait(self._interval_s)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)
