"""The service end to end: ``dicesweep serve`` as a process, a real local Ray head, real
MLflow, sweeps submitted, watched, cancelled and carried across a restart over HTTP."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import mlflow.artifacts
import psutil
import pytest
import yaml
from mlflow.tracking import MlflowClient

from search_spaces.contract import ROLE_TAG, SWEEP_TAG, experiment_name
from search_spaces.resolve import get_preset
from sweep_service.api.auth import LOCAL_OWNER
from tests.conftest import short_home_folder

CLI = [sys.executable, "-m", "sweep_service.cli"]

pytestmark = [pytest.mark.data, pytest.mark.e2e]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Service:
    """One ``dicesweep serve`` process; ``restart`` keeps its home and ports."""

    start_timeout_s = 120.0  # imports, the store's migrations and a Ray head

    def __init__(self, home: Path, datasets: Path) -> None:
        self.home = home
        self.port = free_port()
        # As `make demo` runs it: Ray's auth left to the service (token auth on its head).
        self.env = {
            k: v for k, v in os.environ.items() if not k.startswith(("DICESWEEP_", "RAY_AUTH"))
        }
        self.env.update(
            DICESWEEP_HOME=str(home),
            DICESWEEP_DATASETS_DIR=str(datasets),
            DICESWEEP_PORT=str(self.port),
            DICESWEEP_RAY_DASHBOARD_PORT=str(free_port()),
            DICESWEEP_RECONCILE_INTERVAL_S="1",
            # What precision auto is, stated: a probe of tiny-bert's width sits near
            # bf16's bar on some CPUs (trainables/test_sweep_precision.py measures).
            DICESWEEP_AUTO_PRECISION="fp32",
            OMP_NUM_THREADS="1",
        )
        self.process: subprocess.Popen[bytes] | None = None
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=30)

    def start(self) -> None:
        log = (self.home / "serve.log").open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sweep_service.cli", "serve"],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait(lambda: self._healthy(), self.start_timeout_s, "the service to answer /healthz")

    def _healthy(self) -> bool:
        assert self.process is not None and self.process.poll() is None, self.log_tail()
        try:
            return self.http.get("/healthz").status_code == 200
        except httpx.TransportError:
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log_tail(self) -> str:
        path = self.home / "serve.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def sweep(self, sweep_id: str) -> dict[str, Any]:
        response = self.http.get(f"/v1/sweeps/{sweep_id}")
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body


def wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


@pytest.fixture
def service(short_home: Path, datasets_dir: Path) -> Iterator[Service]:
    running = Service(short_home, datasets_dir)
    running.start()
    try:
        yield running
    finally:
        running.stop()


def trial_runs(home: Path, sweep_id: str) -> list[Any]:
    client = MlflowClient(f"sqlite:///{home / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(experiment_name(LOCAL_OWNER))
    if experiment is None:
        return []
    query = f"tags.`{SWEEP_TAG}` = '{sweep_id}' and tags.`{ROLE_TAG}` = 'trial'"
    return client.search_runs([experiment.experiment_id], filter_string=query)


def test_smoke_sweeps_of_two_services_side_by_side(service: Service, datasets_dir: Path) -> None:
    """Two services with two homes on one machine: each runs its sweep on its own Ray
    head, whose files stay under its home."""
    ray_home_token = Path.home() / ".ray" / "auth_token"
    token_before = ray_home_token.stat().st_mtime if ray_home_token.exists() else None
    with short_home_folder() as other_home:
        other = Service(other_home, datasets_dir)
        other.start()
        try:
            # Beside it, `dicesweep submit --wait` follows a sweep on the other service
            # (found by DICESWEEP_PORT), printing plain lines since stdout is a pipe.
            (other_home / "smoke.yaml").write_text("extends: smoke\n")
            beside = subprocess.Popen(
                [*CLI, "submit", "--wait", str(other_home / "smoke.yaml")],
                env=other.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            check_smoke_sweep(service)
            out, err = beside.communicate(timeout=420)
            assert beside.returncode == 0, (out, err, other.log_tail())
            lines = out.splitlines()
            assert lines[0].startswith("sweep ") and lines[0].endswith("(smoke): 2 trials")
            assert "\x1b" not in out  # no escape codes when stdout is not a terminal
            assert any(line.startswith("running: ") for line in lines), out
            assert "succeeded: 2 done, 0 running, 0 failed, best eval_f1 " in out
            assert lines[-1].startswith(f"sweep {lines[0].split()[1]}: succeeded; best ")
        finally:
            other.stop()
        for home in (service.home, other_home):
            # The head's session files and its token under the home, nothing shared.
            assert any((home / "ray").glob("session_2*")), home
            assert (home / "ray" / "auth_token").exists()
    now = ray_home_token.stat().st_mtime if ray_home_token.exists() else None
    assert now == token_before  # ~/.ray untouched


def check_smoke_sweep(service: Service) -> None:
    """The smoke preset over HTTP, to its table, on ``service``."""
    # Over the 128 KiB a single command-line argument may hold: the resolved spec
    # reaches the driver as a file in its job's working folder, not on its command line.
    description = "a long description " * 8_000
    # The service asks its local head what its node has: a trial of one GPU, on a
    # machine without one, is refused at once, naming what the node has.
    greedy = {"extends": "smoke", "resources": {"gpus_per_trial": 1}}
    refused = service.http.post("/v1/sweeps", json=greedy)
    assert refused.status_code == 422, refused.text
    [issue] = refused.json()["detail"]
    assert issue["loc"] == ["body", "resources", "gpus_per_trial"]
    assert "no node of the cluster has them (its nodes: " in issue["msg"]
    created = service.http.post("/v1/sweeps", json={"extends": "smoke", "description": description})
    assert created.status_code == 201, created.text
    sweep_id = created.json()["id"]
    drivers: dict[int, bool] = {}  # the sweep's driver processes: whether torch was loaded

    def finished() -> bool:
        for process in psutil.process_iter(["cmdline"]):
            if f"--sweep-id {sweep_id}" in " ".join(process.info["cmdline"] or []):
                with contextlib.suppress(OSError):
                    maps = Path(f"/proc/{process.pid}/maps").read_text()
                    drivers[process.pid] = drivers.get(process.pid, False) or "libtorch" in maps
        return service.sweep(sweep_id)["status"] in ("succeeded", "failed")

    wait(finished, 420, "the sweep")
    sweep = service.sweep(sweep_id)
    assert sweep["status"] == "succeeded", sweep["message"][-3000:]
    assert sweep["trials"]["done"] == 2 and sweep["trials"]["failed"] == 0
    assert sweep["best_trial"]["eval_f1"] >= 0
    for fmt, marker in [
        ("json", b"{"),
        ("csv", b"loss"),
        ("markdown", b"| loss"),
        ("latex", b"\\toprule"),
        ("png", b"\x89PNG"),
    ]:
        grid = service.http.get(f"/v1/sweeps/{sweep_id}/grid", params={"format": fmt})
        assert grid.status_code == 200, grid.text
        assert marker in grid.content[:200] or marker in grid.content, fmt
    # A table that shows something: a number in every cell, no trial flagged.
    table = service.http.get(f"/v1/sweeps/{sweep_id}/grid", params={"format": "json"}).json()
    assert len(table["cells"]) == 2, table
    assert all(isinstance(cell["mean"], float) for cell in table["cells"]), table
    assert table["degenerate"] == [] and not any(cell["degenerate"] for cell in table["cells"])
    runs = trial_runs(service.home, sweep_id)
    assert len(runs) == 2 and all(r.info.status == "FINISHED" for r in runs)
    # The driver ran the spec the service resolved and stored, presets already applied.
    client = MlflowClient(f"sqlite:///{service.home / 'mlflow.db'}")
    parent = client.get_run(runs[0].data.tags["mlflow.parentRunId"])
    ran = yaml.safe_load(mlflow.artifacts.load_text(f"{parent.info.artifact_uri}/spec.yaml"))
    assert ran["description"] == description and ran["extends"] == "smoke"
    assert ran["search_space"] == get_preset("smoke").model_dump(mode="json")["search_space"]
    # The trials trained with torch on Ray workers; the service itself never loaded it.
    assert service.process is not None
    assert "libtorch" not in Path(f"/proc/{service.process.pid}/maps").read_text()
    # Nor did the sweep's driver: the trials' workers import torch, not the driver.
    assert drivers and not any(drivers.values()), drivers


def cli(service: Service, *args: str) -> subprocess.CompletedProcess[str]:
    """``dicesweep ARGS`` against ``service`` (its DICESWEEP_PORT)."""
    return subprocess.run(
        [*CLI, *args], env=service.env, capture_output=True, text=True, timeout=60, check=False
    )


def test_cancel_a_running_sweep_from_the_command_line(service: Service) -> None:
    long = {"extends": "smoke", "training": {"epochs": 50, "eval_every_steps": 2}}
    (service.home / "long.yaml").write_text(yaml.safe_dump(long))
    submitted = cli(service, "submit", "--json", str(service.home / "long.yaml"))
    assert submitted.returncode == 0, submitted.stderr
    sweep_id = json.loads(submitted.stdout)["id"]
    wait(lambda: service.sweep(sweep_id)["status"] == "running", 240, "the sweep to run")
    listed = cli(service, "list").stdout.splitlines()
    assert listed[0].split() == ["id", "name", "status", "trials", "submitted"]
    assert listed[1].split()[:4] == [sweep_id, "smoke", "running", "2"]
    wait(lambda: "RUNNING" in cli(service, "trials", sweep_id).stdout, 120, "a trial to run")
    cancelled = cli(service, "cancel", sweep_id)
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout.strip() in (
        f"sweep {sweep_id}: cancelling",
        f"sweep {sweep_id}: cancelled",
    )
    wait(lambda: service.sweep(sweep_id)["status"] == "cancelled", 180, "the cancel")
    again = cli(service, "cancel", sweep_id)
    assert again.returncode == 1 and len(again.stderr.strip().splitlines()) == 1
    assert again.stderr.startswith(f"dicesweep cancel: POST /v1/sweeps/{sweep_id}/cancel: HTTP 409")
    # The stopped driver could not close its runs: the service does, with the reason,
    # in its first progress pass after the cancel (every 2 s).
    trials: list[str] = []

    def closed() -> bool:
        trials[:] = cli(service, "trials", sweep_id).stdout.splitlines()
        return {line.split()[4] for line in trials[1:]} <= {"KILLED", "FINISHED"}

    wait(closed, 60, "the service to close the cancelled sweep's runs")
    assert trials[0].split() == [
        "loss",
        "dataset",
        "variant",
        "seed",
        "status",
        "eval_f1",
        "steps",
        "reason",
    ]
    killed = [line.split() for line in trials[1:] if line.split()[4] == "KILLED"]
    assert killed and all(fields[-1] == "cancelled" for fields in killed), trials
    client = MlflowClient(f"sqlite:///{service.home / 'mlflow.db'}")
    (parent,) = client.search_runs(
        [client.get_experiment_by_name(experiment_name(LOCAL_OWNER)).experiment_id],
        f"tags.`{SWEEP_TAG}` = '{sweep_id}' and tags.`{ROLE_TAG}` = 'sweep'",
    )
    assert parent.info.status == "KILLED"


def test_sigterm_stops_the_service_with_its_ray_head_and_all_it_started(
    service: Service,
) -> None:
    """``docker stop``, ``kill`` and systemd stop with SIGTERM: the service stops its Ray
    head's whole process group, as on Ctrl-C, not leaving its agents behind."""
    assert service.process is not None
    (head,) = (
        child
        for child in psutil.Process(service.process.pid).children()
        if {"start", "--head", "--block"} <= set(child.cmdline())
    )
    group = os.getpgid(head.pid)
    assert len([p for p in psutil.process_iter() if _group(p) == group]) > 1  # gcs, raylet, ...
    service.stop()
    assert [p.info["name"] for p in psutil.process_iter(["name"]) if _group(p) == group] == []
    assert service.process.returncode == 0  # a stop asked for, not a failure


def _group(process: psutil.Process) -> int | None:
    try:
        return os.getpgid(process.pid)
    except (ProcessLookupError, psutil.Error):
        return None


def test_restart_mid_sweep_finishes_every_trial(service: Service) -> None:
    spec = {
        "extends": "smoke",
        "search_space": {
            "losses": [
                {"name": "ce"},
                {"name": "focal", "gamma": 2},
                {"name": "dice", "scope": "set"},
                {"name": "dsc", "alpha": 0.1, "scope": "set"},
            ]
        },
        "training": {"epochs": 3},
        "resources": {"max_concurrent_trials": 1},
    }
    sweep_id = service.http.post("/v1/sweeps", json=spec).json()["id"]

    def one_trial_done() -> bool:
        return any(r.info.status == "FINISHED" for r in trial_runs(service.home, sweep_id))

    wait(one_trial_done, 300, "a first finished trial")
    service.stop()  # the service, its Ray head and the sweep's driver go down
    service.start()
    wait(lambda: service.sweep(sweep_id)["status"] in ("succeeded", "failed"), 600, "the sweep")
    sweep = service.sweep(sweep_id)
    assert sweep["status"] == "succeeded", sweep["message"][-3000:]
    runs = trial_runs(service.home, sweep_id)
    assert len(runs) == 4 and all(r.info.status == "FINISHED" for r in runs)  # no duplicates
