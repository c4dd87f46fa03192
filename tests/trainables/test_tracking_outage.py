"""The driver's trial runs through an MLflow outage: a real ``mlflow server`` behind a
TCP proxy the test cuts. A metric written while MLflow is away reaches it afterwards,
and a trial whose writes were given up is made whole from Tune's results at the end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from ray.tune import Checkpoint, Result

from search_spaces.contract import EXPERIMENT, FAILURE_TAG, ROLE_TAG, STOP_TAG, SWEEP_TAG
from search_spaces.resolve import resolve_spec
from search_spaces.sections import TrackingLink
from tests.tcp_proxy import TcpProxy, free_port
from trainables.driver.tracking import TrialLogger
from trainables.train import REPORTS_FILE

SWEEP = "sw-0utage0000000001"


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """``mlflow server`` on SQLite; yields its port."""
    home = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    log = (home / "server.log").open("ab")
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "mlflow", "server"),
            *("--backend-store-uri", f"sqlite:///{home / 'mlflow.db'}"),
            *("--default-artifact-root", (home / "artifacts").as_uri()),
            *("--host", "127.0.0.1", "--port", str(port), "--workers", "1"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while not _answers(f"http://127.0.0.1:{port}/health"):
            assert server.poll() is None, (home / "server.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the MLflow server did not start"
            time.sleep(0.5)
        yield port
    finally:
        os.killpg(server.pid, signal.SIGKILL)  # its uvicorn takes long to stop on TERM
        server.wait(timeout=30)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture
def proxy(mlflow_server: int, monkeypatch: pytest.MonkeyPatch) -> Iterator[TcpProxy]:
    """The way to MLflow, to cut; MLflow's client gives up fast (the logger retries)."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "60")  # a cut proxy refuses at once
    proxy = TcpProxy(("127.0.0.1", mlflow_server))
    proxy.start()
    yield proxy
    proxy.stop()


def open_sweep(client: MlflowClient) -> TrackingLink:
    experiment = client.get_experiment_by_name(EXPERIMENT)
    experiment_id = experiment.experiment_id if experiment else client.create_experiment(EXPERIMENT)
    parent = client.create_run(experiment_id, tags={SWEEP_TAG: SWEEP, ROLE_TAG: "sweep"})
    return TrackingLink(
        tracking_uri=client.tracking_uri,
        experiment_id=str(experiment_id),
        parent_run_id=parent.info.run_id,
    )


def trial_config(loss: str, seed: int = 0) -> dict[str, Any]:
    spec = resolve_spec({"extends": "smoke", "task": {"kind": "pi", "dataset": "mrpc"}})
    return {
        "sweep_id": SWEEP,
        "dataset": "mrpc",
        "kind": "pi",
        "variant": "original",
        "model": spec.model,
        "loss": {"name": loss},
        "seed": seed,
        "training": spec.training.model_dump(),
    }


def history(client: MlflowClient, run_id: str, key: str) -> dict[int, float]:
    return {int(m.step): m.value for m in client.get_metric_history(run_id, key)}


def tune_result(
    reported: list[dict[str, Any]],
    config: dict[str, Any],
    path: Path,
    checkpoint: Checkpoint | None = None,
) -> Result:
    """What Tune's ``ResultGrid`` holds for a trial that reported ``reported``."""
    return Result(
        metrics={**reported[-1], "config": config},
        checkpoint=checkpoint,
        error=None,
        path=str(path),
        metrics_dataframe=pd.DataFrame(reported),
    )


def test_a_metric_written_during_an_outage_reaches_mlflow_after_it(proxy: TcpProxy) -> None:
    client = MlflowClient(f"http://127.0.0.1:{proxy.port}")
    logger = TrialLogger(open_sweep(client), client)
    config = trial_config("ce")
    logger.later(lambda: logger.log_result("t-ce", config, {"step": 10, "eval_f1": 40.0}))
    logger.flush()
    run_id = logger.run_id("t-ce", config)

    proxy.stop()  # MLflow away: the next writes fail, and are kept
    logger.later(lambda: logger.log_result("t-ce", config, {"step": 20, "eval_f1": 55.0}))
    logger.later(lambda: logger.finish("t-ce", config, "FINISHED"))
    time.sleep(4)  # a few failed tries
    flushed = threading.Event()
    threading.Thread(target=lambda: (logger.flush(), flushed.set()), daemon=True).start()
    assert not flushed.wait(1), "the writes were dropped instead of waiting for MLflow"

    proxy.start()  # MLflow back
    assert flushed.wait(60), "the queued writes were not made once MLflow answered"
    assert history(client, run_id, "eval_f1") == {10: 40.0, 20: 55.0}
    assert client.get_run(run_id).info.status == "FINISHED"  # after its metrics, in order


def test_writes_given_up_are_completed_from_tunes_results(proxy: TcpProxy, tmp_path: Path) -> None:
    client = MlflowClient(f"http://127.0.0.1:{proxy.port}")
    logger = TrialLogger(open_sweep(client), client, outage_s=0)  # gives up at once
    config = trial_config("dice")
    logger.later(lambda: logger.log_result("t-dice", config, {"step": 5, "eval_f1": 30.0}))
    logger.flush()
    run_id = logger.run_id("t-dice", config)
    proxy.stop()
    logger.later(lambda: logger.log_result("t-dice", config, {"step": 9, "eval_f1": 61.0}))
    logger.later(lambda: logger.finish("t-dice", config, "FINISHED"))
    logger.flush()  # both given up
    proxy.start()
    assert client.get_run(run_id).info.status == "RUNNING"  # not reported finished

    reported = [
        {"step": 5, "eval_f1": 30.0, "trial_id": "t-dice"},
        {"step": 9, "eval_f1": 61.0, "trial_id": "t-dice"},
    ]
    result = tune_result(reported, config, tmp_path)
    assert logger.backfill([result]) == 1
    assert history(client, run_id, "eval_f1") == {5: 30.0, 9: 61.0}
    assert client.get_run(run_id).info.status == "FINISHED"
    assert logger.backfill([result]) == 0  # whole now: nothing written twice


def test_a_trial_that_finishes_on_a_retry_keeps_why_it_needed_one(tmp_path: Path) -> None:
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    logger = TrialLogger(open_sweep(client), client)
    config = trial_config("ce", seed=1)
    logger.finish("t-retried", config, "FAILED", "ActorDiedError: the worker died")
    run_id = logger.run_id("t-retried", config)
    assert client.get_run(run_id).data.tags[FAILURE_TAG] == "ActorDiedError: the worker died"
    logger.finish("t-retried", config, "FINISHED")  # its next attempt (a resumed sweep's)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and FAILURE_TAG not in run.data.tags
    assert run.data.tags["dicesweep.retried_after"] == "ActorDiedError: the worker died"


def test_a_retried_trial_shows_why_while_its_retry_runs(tmp_path: Path) -> None:
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    logger = TrialLogger(open_sweep(client), client)
    config = trial_config("ce", seed=2)
    logger.log_result("t-oom", config, {"step": 4, "eval_f1": 20.0})
    run_id = logger.run_id("t-oom", config)
    reason = "out of memory on node 172.18.0.4 (0.59GB used of a 0.60GB limit)"
    logger.recovered("t-oom", reason)  # Tune retries it: the API and MLflow say why
    run = client.get_run(run_id)
    assert (run.info.status, run.data.tags[FAILURE_TAG]) == ("RUNNING", reason)
    assert run.data.tags["dicesweep.attempt"] == "2"
    logger.finish("t-oom", config, "FINISHED", stopped="epochs")
    tags = client.get_run(run_id).data.tags
    assert FAILURE_TAG not in tags and tags["dicesweep.retried_after"] == reason


def test_a_write_lost_with_a_killed_driver_is_completed_after_the_next_one_closes_the_run(
    tmp_path: Path,
) -> None:
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    link = open_sweep(client)
    config = trial_config("focal", seed=2)
    first = TrialLogger(link, client)  # the driver that is killed with step 30 queued
    first.log_result("t-killed", config, {"step": 10, "eval_f1": 20.0})
    first.log_result("t-killed", config, {"step": 20, "eval_f1": 35.0})
    run_id = first.run_id("t-killed", config)

    second = TrialLogger(link, client)  # the resumed driver: the trial goes on and ends
    second.log_result("t-killed", config, {"step": 40, "eval_f1": 52.0})
    second.log_result("t-killed", config, {"step": 50, "eval_f1": 58.0})
    second.finish("t-killed", config, "FINISHED", stopped="epochs")
    assert 30 not in history(client, run_id, "eval_f1")

    reported = [
        {"step": step, "eval_f1": f1, "trial_id": "t-killed"}
        for step, f1 in [(10, 20.0), (20, 35.0), (30, 44.0), (40, 52.0), (50, 58.0)]
    ]
    result = tune_result(reported, config, tmp_path)
    assert second.backfill([result]) == 1
    assert history(client, run_id, "eval_f1") == {10: 20.0, 20: 35.0, 30: 44.0, 40: 52.0, 50: 58.0}
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.metrics["eval_f1"] == 58.0  # the last step's
    assert run.data.tags[STOP_TAG] == "epochs"  # closed as it was: not closed again
    assert second.backfill([result]) == 0


def test_an_evaluation_only_the_checkpoint_carries_is_backfilled_from_it(tmp_path: Path) -> None:
    """A driver killed before it saved Tune's results table loses the last reports from
    it; the trial resumed from the checkpoint they came with never reports them again.
    The checkpoint's own reports fill the run."""
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    link = open_sweep(client)
    config = trial_config("dice", seed=3)
    killed = TrialLogger(link, client)  # killed with step 30 queued, after its checkpoint
    killed.log_result("t-resumed", config, {"step": 10, "eval_f1": 21.0})
    killed.log_result("t-resumed", config, {"step": 20, "eval_f1": 33.0})
    run_id = killed.run_id("t-resumed", config)
    resumed = TrialLogger(link, client)  # the trial goes on from step 30's checkpoint
    resumed.log_result("t-resumed", config, {"step": 40, "eval_f1": 47.0})
    resumed.finish("t-resumed", config, "FINISHED", stopped="epochs")

    every = [
        {"step": step, "eval_f1": f1, "trial_id": "t-resumed"}
        for step, f1 in [(10, 21.0), (20, 33.0), (30, 41.0), (40, 47.0)]
    ]
    folder = tmp_path / "checkpoint_000003"
    folder.mkdir()
    (folder / REPORTS_FILE).write_text(json.dumps(every))
    # Tune's table as the kill left it: step 30 never saved, step 40 from the resumed run.
    table = [every[0], every[1], every[3]]
    result = tune_result(table, config, tmp_path, Checkpoint.from_directory(str(folder)))
    assert resumed.backfill([result]) == 1
    assert history(client, run_id, "eval_f1") == {10: 21.0, 20: 33.0, 30: 41.0, 40: 47.0}
    assert client.get_run(run_id).data.tags[STOP_TAG] == "epochs"  # not closed again
    assert resumed.backfill([result]) == 0

    (folder / REPORTS_FILE).unlink()  # a checkpoint from before reports were kept
    assert resumed.backfill([result]) == 0
