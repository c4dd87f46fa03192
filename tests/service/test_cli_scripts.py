"""The ``dicesweep`` commands in scripts: ``--json`` prints the API's shapes, a closed
pipe is no error, a failed sweep's ``status`` says why first and exits 1, Ctrl-C in
``submit --wait`` leaves the sweep running and says so, and the commands that talk to a
service import none of the heavy libraries. Each command a real process, against the
app behind a real uvicorn server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn
import yaml
from fastapi import FastAPI
from mlflow.tracking import MlflowClient
from sqlalchemy.orm import Session, sessionmaker

from sweep_service.reconciler import Reconciler
from tests.service.api_fixtures import FakeTrial, MakeApi, write_trials
from tests.service.test_cli_output import CLI, SPEC, dicesweep
from tests.service.test_failure_message import DRIVER_LOG, FailedJobRunner
from tests.service.test_regressions import served  # noqa: F401 (the fixture)
from tests.tcp_proxy import free_port

# The app's store on SQLite only: what is tested here is the command, not the store.
SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
# What the commands that talk to a service must not load (seconds each on a busy machine).
HEAVY = {"torch", "ray", "pandas", "matplotlib", "mlflow", "sqlalchemy", "alembic", "transformers"}


def command_env(home: Path, url: str, **more: str) -> dict[str, str]:
    """The environment of a command: no DICESWEEP_* of the caller's, the service at ``url``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DICESWEEP_")}
    return {**env, "DICESWEEP_HOME": str(home), "DICESWEEP_API_URL": url, **more}


@contextmanager
def uvicorn_serving(app: FastAPI) -> Iterator[str]:
    """``app`` behind a real uvicorn server on loopback; yields its base URL."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="error")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{server.config.port}"
    server.should_exit = True
    thread.join(timeout=30)


def submitted(url: str, home: Path) -> str:
    """A new sweep of ``SPEC``'s, submitted by the command; its id."""
    (home / "spec.yaml").write_text(yaml.safe_dump(SPEC))
    answer = dicesweep(url, home, "submit", "--json", "spec.yaml", cwd=home)
    assert answer.returncode == 0, answer.stderr
    return str(json.loads(answer.stdout)["id"])


@SQLITE
def test_list_trials_presets_and_grid_print_the_apis_json(
    served: str,  # noqa: F811
    tmp_path: Path,
    tracking: MlflowClient,
) -> None:
    sweep_id = submitted(served, tmp_path)
    write_trials(
        tracking,
        sweep_id,
        [FakeTrial({"name": "ce"}, eval_f1=81.5), FakeTrial({"name": "dice"}, eval_f1=84.0)],
    )
    api = httpx.Client(base_url=served, timeout=30)
    listed = json.loads(dicesweep(served, tmp_path, "list", "--json").stdout)
    assert listed == api.get("/v1/sweeps", params={"limit": 20}).json()
    assert [sweep["id"] for sweep in listed["data"]] == [sweep_id]
    trials = json.loads(dicesweep(served, tmp_path, "trials", "--json", sweep_id).stdout)
    from_api = api.get(f"/v1/sweeps/{sweep_id}/trials", params={"limit": 100}).json()
    assert trials == {"data": from_api["data"], "count": 2}
    presets = json.loads(dicesweep(served, tmp_path, "presets", "--json").stdout)
    assert presets == api.get("/v1/search-spaces").json()
    assert "smoke" in {preset["name"] for preset in presets["data"]}
    # The grid from MLflow here, as the API renders it from the same runs.
    grid = subprocess.run(
        [*CLI, "grid", sweep_id, "--json"],
        env=command_env(tmp_path, served, DICESWEEP_MLFLOW_TRACKING_URI=tracking.tracking_uri),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert grid.returncode == 0, grid.stderr
    from_api_grid = api.get(f"/v1/sweeps/{sweep_id}/grid").json()
    assert json.loads(grid.stdout)["cells"] == from_api_grid["cells"]
    assert len(from_api_grid["cells"]) == 2


def test_keys_list_prints_prefixes_as_json(tmp_path: Path) -> None:
    env = command_env(tmp_path, "http://127.0.0.1:9")
    run = {"env": env, "capture_output": True, "text": True, "timeout": 300, "check": False}
    created = subprocess.run([*CLI, "keys", "create", "--owner", "ada"], **run)  # type: ignore[call-overload]
    assert created.returncode == 0, created.stderr
    prefix = created.stderr.split()[1]  # "key PREFIX for owner ada; shown once"
    listed = subprocess.run([*CLI, "keys", "list", "--owner", "ada", "--json"], **run)  # type: ignore[call-overload]
    assert listed.returncode == 0, listed.stderr
    (key,) = json.loads(listed.stdout)
    assert key["prefix"] == prefix and key["revoked_at"] is None
    assert created.stdout.strip() not in listed.stdout  # the key itself is never listed
    unknown = subprocess.run([*CLI, "keys", "list", "--owner", "bob", "--json"], **run)  # type: ignore[call-overload]
    assert unknown.returncode == 1 and unknown.stderr.startswith("dicesweep keys: ")


def test_a_reader_that_closes_early_is_no_error(tmp_path: Path) -> None:
    # `dicesweep presets | true` under pipefail: the reader may go before a byte is written.
    env = command_env(tmp_path, "http://127.0.0.1:9")
    line = " ".join(CLI) + " presets | true"
    piped = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {line}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert (piped.returncode, piped.stderr) == (0, "")
    # And where it certainly has gone: a pipe closed before the command starts.
    read, write = os.pipe()
    os.close(read)
    with subprocess.Popen(
        [*CLI, "presets"], env=env, stdout=write, stderr=subprocess.PIPE, text=True
    ) as command:
        os.close(write)
        _, errors = command.communicate(timeout=300)
    assert (command.returncode, errors) == (0, "")


@SQLITE
def test_status_of_a_failed_sweep_says_why_first_and_the_log_on_request(
    make_api: MakeApi,
    session_factory: sessionmaker[Session],
    tmp_path: Path,
) -> None:
    runner = FailedJobRunner()
    app: FastAPI = make_api(runner=runner).client.app  # type: ignore[assignment]
    with uvicorn_serving(app) as url:
        sweep_id = submitted(url, tmp_path)
        reconciler = Reconciler(session_factory, runner, max_resubmissions=0)
        reconciler.run_once()  # submitted
        reconciler.run_once()  # failed for good: the driver exited with code 2
        status = dicesweep(url, tmp_path, "status", sweep_id)
        logged = dicesweep(url, tmp_path, "status", "--log", sweep_id)
        as_json = dicesweep(url, tmp_path, "status", "--json", sweep_id)
    assert status.returncode == 1, status.stderr
    first, *rest = status.stdout.splitlines()
    assert first.startswith("failed: ") and "exit code 2" in first, status.stdout
    assert "is not under the data-sets folder" in first
    assert rest[0] == f"sweep:   {sweep_id} (probe)"
    assert rest[-1] == f"its log: dicesweep status --log {sweep_id}"
    assert "Traceback" not in status.stdout and len(status.stdout.splitlines()) < 10
    assert logged.returncode == 1
    assert logged.stdout.splitlines()[0] == first
    assert logged.stdout.endswith(DRIVER_LOG)
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["status"] == "failed"


@SQLITE
def test_ctrl_c_in_submit_wait_leaves_the_sweep_running_and_says_so(
    served: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(SPEC))
    # The sweep stays pending (no cluster here): the command follows it until Ctrl-C.
    with subprocess.Popen(
        [*CLI, "submit", "--wait", "spec.yaml"],
        cwd=tmp_path,
        env=command_env(tmp_path, served),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as command:
        assert command.stdout is not None
        first = command.stdout.readline()  # said once the service has the sweep
        assert first.startswith("sweep sw-"), first
        sweep_id = first.split()[1]
        command.send_signal(signal.SIGINT)
        out, errors = command.communicate(timeout=120)
    assert command.returncode == 130, (out, errors)
    assert "Traceback" not in errors
    assert errors.strip() == (
        f"stopped following; sweep {sweep_id} goes on running "
        f"(dicesweep status {sweep_id}; dicesweep cancel {sweep_id} stops it)"
    )
    still = httpx.get(f"{served}/v1/sweeps/{sweep_id}", timeout=30).json()
    assert still["status"] == "pending"


def test_the_commands_that_talk_to_a_service_load_no_heavy_library(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(SPEC))
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens: a refusal at once
    for args in (["submit", "spec.yaml"], ["status", "sw-x"], ["list"], ["trials", "sw-x"]):
        refused = subprocess.run(
            [CLI[0], "-X", "importtime", *CLI[1:], *args],
            cwd=tmp_path,
            env=command_env(tmp_path, closed),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert refused.returncode == 1, refused.stderr
        said = refused.stderr.splitlines()
        assert said[-1].startswith(f"dicesweep {args[0]}: cannot reach the dicesweep service")
        loaded = {_module(line) for line in said if line.startswith("import time:")}
        assert "sweep_service.client" in loaded
        assert not {name.split(".")[0] for name in loaded} & HEAVY, args


def _module(line: str) -> str:
    """The module of a ``-X importtime`` line: ``import time: 12 | 34 |   httpx``."""
    return line.rsplit("|", 1)[1].strip()
