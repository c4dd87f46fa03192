"""A driver's exit is final only where the contract declares it so: a real driver
process that dies of an error it did not foresee is submitted again, never read as
"trials failed"; a running sweep's message is its driver's notice while it waits; and
the driver and the service read each exit code, tag name and notice format from one
definition, ``search_spaces.contract``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from search_spaces import contract
from search_spaces.contract import FINAL_EXITS, DriverExit, current_notice, exit_is_final
from sweep_service.runner import JobState
from sweep_service.store import Owner, SweepStatus
from tests.service.test_reconciler import setup, status

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
    failed = ray_job_message(died.returncode, died.stderr)
    runner.jobs[sweep_id] = (JobState.FAILED, failed, died.returncode)
    reconciler.run_once()
    sweep = status(session_factory, alice, sweep_id)
    assert sweep.status is SweepStatus.PENDING and sweep.resubmissions == 1, sweep.message
    assert died.returncode == DriverExit.CRASHED == 70
    assert sweep.message.startswith(f"driver job {sweep_id} failed: exit code 70: ")
    assert "Traceback" not in sweep.message
    reconciler.run_once()
    assert runner.submitted[-1] == (f"{sweep_id}-retry1", sweep_id)


def test_only_the_codes_the_driver_declares_final_fail_the_sweep(
    session_factory: sessionmaker[Session], alice: Owner
) -> None:
    assert FINAL_EXITS == {DriverExit.TRIALS_FAILED, DriverExit.INVALID} == {1, 2}
    assert all(exit_is_final(code) for code in (1, 2))
    resubmitted = [c for c in DriverExit if c not in FINAL_EXITS]
    for code in [*resubmitted, -9, None]:
        assert not exit_is_final(code), code
    for code, after in ((DriverExit.NO_TRACKING, SweepStatus.PENDING), (2, SweepStatus.FAILED)):
        reconciler, runner, sweep_id = setup(session_factory, alice, limit=5)
        reconciler.run_once()
        # The code comes from the Jobs API's field, not from Ray's text about it.
        runner.jobs[sweep_id] = (JobState.FAILED, ray_job_message(99, "…"), code)
        reconciler.run_once()
        assert status(session_factory, alice, sweep_id).status is after, code


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


def module_names(package: str) -> list[str]:
    """The modules of ``package`` (a folder of the repository), dotted."""
    return [
        ".".join(path.relative_to(REPO).with_suffix("").parts)
        for path in sorted((REPO / package).rglob("*.py"))
    ]


def test_the_driver_and_the_service_read_one_definition_of_the_contract() -> None:
    """Every exit code, tag name and the notice format is defined in the contract
    module and nowhere else: no other module of the driver's or the service's binds a
    contract name to a value of its own, writes a ``dicesweep.`` tag or a ``sweep <id>:``
    line by hand, parses an exit code out of Ray's text, or exits with a bare number."""
    import ast

    owned = {
        name
        for name, value in vars(contract).items()
        if name.isupper() and isinstance(value, (str, int, frozenset))
    }
    tags = {value for name, value in vars(contract).items() if name.endswith("_TAG")}
    assert {"dicesweep.failure", "dicesweep.sweep_id", "dicesweep.loss"} <= tags
    offenders = []
    for name in [*module_names("trainables"), *module_names("sweep_service")]:
        source = (REPO / name.replace(".", "/")).with_suffix(".py").read_text()
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                bound = {t.id for t in targets if isinstance(t, ast.Name)} & owned
                offenders += [f"{name} binds {b}" for b in bound]
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if node.value in tags:
                    offenders.append(f"{name} writes the tag {node.value!r}")
                if "exit code (-?" in node.value:  # a regex over Ray's message
                    offenders.append(f"{name} parses an exit code out of text")
            if isinstance(node, ast.JoinedStr) and name.startswith("trainables.driver"):
                first = node.values[0]
                if isinstance(first, ast.Constant) and str(first.value) == "sweep ":
                    offenders.append(f"{name} formats a driver line by hand")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "exit"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and name.startswith("trainables.driver")
            ):
                offenders.append(f"{name} exits with a bare {node.args[0].value!r}")
    assert offenders == [], "\n".join(offenders)


def test_the_progress_line_the_driver_prints_is_the_one_the_notice_reader_knows() -> None:
    from trainables.driver.progress import Snapshot

    line = Snapshot(metric="eval_f1", total=4, elapsed_s=72.0).line()
    assert line.startswith("[0:01:12] 0/4 trials (0%): ")
    waiting = contract.said("s-1", f"{contract.WAITING}a node")
    assert current_notice(f"{waiting}\n", "s-1") == "waiting for a node"
    assert current_notice(f"{waiting}\n{line}\n", "s-1") is None
