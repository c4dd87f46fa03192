"""A driver's exit is final only where the driver declares it so: a real driver process
that dies of an error it did not foresee is submitted again, never read as "trials
failed"; and a running sweep's message is its driver's notice while it waits."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from sweep_service import reconciler as reconciling
from sweep_service.notices import current_notice
from sweep_service.reconciler import driver_failed_for_good
from sweep_service.runner import JobState
from sweep_service.store import Owner, SweepStatus
from tests.service.test_reconciler import setup, status
from trainables.driver import exits

REPO = Path(__file__).resolve().parents[2]


def ray_job_message(code: int, log: str) -> str:
    """Ray's message for a job whose entrypoint exited ``code``."""
    return (
        f"Job entrypoint command failed with exit code {code}, last available logs "
        f"(truncated to 20,000 chars):\n{log}"
    )


def crashed_driver(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``python -m trainables.driver`` dying of an error nobody declared: a setting that
    does not parse, read before anything starts."""
    env = {
        **os.environ,
        "DICESWEEP_HOME": str(tmp_path),
        "DICESWEEP_CLUSTER_WAIT_S": "five minutes",
    }
    return subprocess.run(
        [sys.executable, "-m", "trainables.driver", "--preset", "smoke"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_driver_dead_of_an_unforeseen_error_is_submitted_again(
    session_factory: sessionmaker[Session], alice: Owner, tmp_path: Path
) -> None:
    died = crashed_driver(tmp_path)
    assert died.returncode not in (0, 1), died.stderr[-2000:]  # 1 means "trials failed"
    assert "cluster_wait_s" in died.stderr.strip().splitlines()[-1]
    reconciler, runner, sweep_id = setup(session_factory, alice)
    reconciler.run_once()
    runner.jobs[sweep_id] = (JobState.FAILED, ray_job_message(died.returncode, died.stderr))
    reconciler.run_once()
    sweep = status(session_factory, alice, sweep_id)
    assert sweep.status is SweepStatus.PENDING and sweep.resubmissions == 1, sweep.message
    assert sweep.message.startswith(f"driver job {sweep_id} failed: exit code 70: ")
    assert "Traceback" not in sweep.message
    reconciler.run_once()
    assert runner.submitted[-1] == (f"{sweep_id}-retry1", sweep_id)


def test_only_the_codes_the_driver_declares_final_fail_the_sweep(
    session_factory: sessionmaker[Session], alice: Owner
) -> None:
    assert reconciling.FINAL_EXIT_CODES == exits.FINAL_EXIT_CODES == {1, 2}
    for code in (1, 2):
        assert driver_failed_for_good(ray_job_message(code, "sweep x: 3 done, 1 failed"))
    for code in (3, 4, exits.EXIT_NO_TRACKING, exits.EXIT_CRASHED, 130, -9):
        assert not driver_failed_for_good(ray_job_message(code, "")), code
    reconciler, runner, sweep_id = setup(session_factory, alice, limit=5)
    reconciler.run_once()
    runner.jobs[sweep_id] = (JobState.FAILED, ray_job_message(5, "TrackingAwayError: ..."))
    reconciler.run_once()
    assert status(session_factory, alice, sweep_id).status is SweepStatus.PENDING


def test_a_running_sweep_shows_its_drivers_notice_until_the_wait_ends(
    session_factory: sessionmaker[Session], alice: Owner
) -> None:
    reconciler, runner, sweep_id = setup(session_factory, alice)
    reconciler.run_once()
    waiting = (
        "waiting for MLflow since 13:52:07 UTC: http://mlflow:5000 does not answer "
        "(35 s of 3600, DICESWEEP_MLFLOW_OUTAGE_S)"
    )
    runner.jobs[sweep_id] = (JobState.RUNNING, "")
    runner.job_logs[sweep_id] = (
        f"sweep {sweep_id}: 2 trials; Ray's log: x\nsweep {sweep_id}: {waiting}\n"
    )
    reconciler.run_once()
    sweep = status(session_factory, alice, sweep_id)
    assert sweep.status is SweepStatus.RUNNING and sweep.message == waiting
    runner.job_logs[sweep_id] += f"sweep {sweep_id}: MLflow answered at 13:56:40 UTC, after 273 s\n"
    reconciler.run_once()  # read again only after NOTICE_READ_S
    assert status(session_factory, alice, sweep_id).message == waiting
    reconciler._notices_read.clear()  # as NOTICE_READ_S later
    reconciler.run_once()
    assert status(session_factory, alice, sweep_id).message == ""


def test_a_waiting_notice_ends_with_the_drivers_next_line_of_its_own() -> None:
    node = "waiting for a node with 1 CPU and 0 GPUs (cluster has 0 CPUs/0 GPUs; 35 s of 300)"
    log = f"sweep s-1: 2 trials\nsweep s-1: {node}\n(raylet) a line of Ray's\n"
    assert current_notice(log, "s-1") == node
    assert current_notice(log, "s-2") is None  # another sweep's driver
    progressed = log + "[0:00:41] 0/2 trials (0%): 1 running, 0 done, 0 failed | ETA -:--:--\n"
    assert current_notice(progressed, "s-1") is None
