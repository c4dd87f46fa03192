"""A driver started while MLflow does not answer waits for it, saying so, rather than
dying on its first request: a real ``mlflow server`` behind a TCP proxy that refuses
connections until the test opens it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from search_spaces.contract import EXPERIMENT, ROLE_TAG, SWEEP_TAG, DriverExit, current_notice
from search_spaces.resolve import resolve_spec
from search_spaces.settings import DicesweepSettings
from sweep_service.failures import driver_failure
from tests.tcp_proxy import TcpProxy, free_port
from tests.trainables.test_tracking_outage import mlflow_server  # noqa: F401 (a fixture)
from trainables.driver.exits import run_declared
from trainables.driver.mlflow_wait import TrackingAwayError
from trainables.driver.parent import open_tracking

SWEEP = "sw-wait0000000000001"
DRIVER = [sys.executable, "-m", "trainables.driver"]


def clock_s(clock: str) -> int:
    """Seconds since midnight of ``13:52:07``."""
    hours, minutes, seconds = map(int, clock.split(":"))
    return hours * 3600 + minutes * 60 + seconds


def utc_clock(seconds: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(seconds))


def settings(home: Path, port: int, outage_s: float) -> DicesweepSettings:
    return DicesweepSettings(
        home=home, mlflow_tracking_uri=f"http://127.0.0.1:{port}", mlflow_outage_s=outage_s
    )


@pytest.fixture
def closed_way(mlflow_server: int, monkeypatch: pytest.MonkeyPatch) -> TcpProxy:  # noqa: F811
    """The way to a real MLflow server, closed: connecting is refused until started.
    MLflow's client gives up at once, as it does after its retries in an outage."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    return TcpProxy(("127.0.0.1", mlflow_server))


def test_a_driver_waits_for_mlflow_at_its_start_then_opens_its_runs(
    closed_way: TcpProxy, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = resolve_spec({"extends": "smoke"})
    opened: dict[str, Any] = {}

    def start() -> None:
        try:
            opened["link"] = open_tracking(
                settings(tmp_path, closed_way.port, 300), SWEEP, spec, EXPERIMENT
            )[1]
        except Exception as error:
            opened["error"] = error

    driver = threading.Thread(target=start, daemon=True)
    started = time.time()
    driver.start()
    time.sleep(6)
    said = capsys.readouterr().err
    assert "error" not in opened, opened
    assert driver.is_alive(), f"the driver did not wait for MLflow: {opened}"
    notice = current_notice(said, SWEEP)  # what the service shows as the sweep's message
    assert notice is not None, said
    since = re.fullmatch(
        rf"waiting for MLflow since (\d\d:\d\d:\d\d) UTC: http://127.0.0.1:{closed_way.port} "
        r"does not answer \(\d+ s of 300, DICESWEEP_MLFLOW_OUTAGE_S\)",
        notice,
    )
    assert since is not None, notice
    # Since the driver first asked: seconds after it started, as a UTC clock.
    assert (clock_s(since.group(1)) - clock_s(utc_clock(started))) % 86400 <= 5, notice

    closed_way.start()  # MLflow answers
    try:
        driver.join(timeout=90)
        assert not driver.is_alive(), "the driver did not go on once MLflow answered"
    finally:
        closed_way.stop()
    assert "error" not in opened, opened
    said = capsys.readouterr().err
    assert f"sweep {SWEEP}: MLflow answered at " in said, said
    assert current_notice(said, SWEEP) is None  # the service clears the notice
    link = opened["link"]
    client = MlflowClient(f"http://127.0.0.1:{closed_way.target[1]}")
    parent = client.get_run(link.parent_run_id)
    assert parent.data.tags[SWEEP_TAG] == SWEEP and parent.data.tags[ROLE_TAG] == "sweep"
    assert client.get_experiment(link.experiment_id).name == EXPERIMENT


def test_mlflow_away_past_the_bound_exits_with_a_code_the_service_resubmits(
    closed_way: TcpProxy, tmp_path: Path
) -> None:
    spec = resolve_spec({"extends": "smoke"})
    begun = time.monotonic()
    with pytest.raises(TrackingAwayError, match=r"did not answer from .* for 3 s") as away:
        open_tracking(settings(tmp_path, closed_way.port, 3), SWEEP, spec, EXPERIMENT)
    assert time.monotonic() - begun < 30

    def main() -> None:
        raise away.value

    with pytest.raises(SystemExit) as exiting:
        run_declared(main)
    assert exiting.value.code == DriverExit.NO_TRACKING


def test_an_unforeseen_error_exits_with_its_own_code_not_trials_failed() -> None:
    def main() -> None:
        raise KeyError("a bug")

    with pytest.raises(SystemExit) as exiting:
        run_declared(main)
    assert exiting.value.code == DriverExit.CRASHED != 1


def test_a_driver_process_that_never_reaches_mlflow_exits_5_saying_why(
    datasets_dir: Path, short_home: Path
) -> None:
    port = free_port()  # nothing listens there
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DICESWEEP_", "RAY_"))}
    env.update(
        DICESWEEP_HOME=str(short_home),
        DICESWEEP_DATASETS_DIR=str(datasets_dir),
        DICESWEEP_MLFLOW_TRACKING_URI=f"http://127.0.0.1:{port}",
        DICESWEEP_MLFLOW_OUTAGE_S="4",
    )
    driver = subprocess.run(
        [*DRIVER, "--preset", "smoke", "--sweep-id", SWEEP, "--num-cpus", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert driver.returncode == DriverExit.NO_TRACKING, driver.stderr[-3000:]
    assert f"sweep {SWEEP}: waiting for MLflow since " in driver.stderr
    ray_message = (  # Ray's, for the driver's job
        "Job entrypoint command failed with exit code 5, last available logs (truncated "
        f"to 20,000 chars):\n{driver.stderr}"
    )
    assert re.fullmatch(
        rf"exit code 5: TrackingAwayError: MLflow at http://127.0.0.1:{port} did not answer "
        r"from \d\d:\d\d:\d\d UTC for 4 s \(DICESWEEP_MLFLOW_OUTAGE_S\)",
        driver_failure(ray_message, driver.returncode),
    ), driver.stderr[-3000:]
