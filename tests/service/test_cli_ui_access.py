"""``dicesweep ui`` over the embedded store once the service has API keys: MLflow's
basic-auth app, each owner signing in with the password ``dicesweep keys create``
showed and reading its own experiment only; open while no key exists."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from mlflow.tracking import MlflowClient

from tests.service.test_cli_keys import dicesweep
from tests.service.test_cli_ui import free_port

SHOWN = re.compile(r"sign in as '(\w+)' with password ([\w-]+)")


def test_the_embedded_ui_asks_each_owner_to_sign_in_once_keys_exist(tmp_path: Path) -> None:
    passwords = {}
    for owner in ("alice", "bob"):
        created = dicesweep(tmp_path, "keys", "create", "--owner", owner)
        assert created.returncode == 0, created.stderr
        found = SHOWN.search(created.stderr)
        assert found and found[1] == owner, created.stderr
        passwords[owner] = found[2]
    auth = tmp_path / "mlflow-auth"
    assert (auth / "admin_password").stat().st_mode & 0o777 == 0o600
    # `keys create` made each owner's experiment; the drivers write the embedded store
    # directly: one run in each.
    tracking = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    made = {owner: tracking.get_experiment_by_name(f"dicesweep/{owner}") for owner in passwords}
    runs = {owner: tracking.create_run(e.experiment_id).info.run_id for owner, e in made.items()}

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DICESWEEP_")}
    env["DICESWEEP_HOME"] = str(tmp_path)
    command = [sys.executable, "-m", "sweep_service.cli", "ui", "--port", str(port)]
    said_to = tmp_path / "ui.err"
    with (
        said_to.open("w") as stderr,
        subprocess.Popen(command, env=env, stderr=stderr, start_new_session=True) as ui,
    ):
        try:
            # A loaded machine's MLflow workers may take tens of seconds to answer.
            alice = httpx.Client(base_url=url, auth=("alice", passwords["alice"]), timeout=120)
            own = _when_granted(alice, "dicesweep/alice", said_to)
            assert own.status_code == 200, said_to.read_text()
            assert "sign-in required" in said_to.read_text()
            got = alice.get("/api/2.0/mlflow/runs/get", params={"run_id": runs["alice"]})
            assert got.status_code == 200
            bob_run = {"run_id": runs["bob"]}
            assert alice.get("/api/2.0/mlflow/runs/get", params=bob_run).status_code == 403
            by_name = {"experiment_name": "dicesweep/bob"}
            bob_experiment = alice.get("/api/2.0/mlflow/experiments/get-by-name", params=by_name)
            assert bob_experiment.status_code == 403
            anonymous = httpx.get(f"{url}/api/2.0/mlflow/runs/get", params=bob_run, timeout=120)
            assert anonymous.status_code == 401
            # Only the UI's admin lists MLflow's users (each owner's name).
            assert alice.get("/api/2.0/mlflow/users/list").status_code == 403
        finally:
            os.killpg(ui.pid, signal.SIGINT)
            ui.wait(timeout=60)


def _when_granted(client: httpx.Client, experiment: str, log: Path) -> httpx.Response:
    """The experiment as ``client`` reads it, once the UI has started and granted it."""
    deadline = time.monotonic() + 300
    while True:
        try:
            answer = client.get(
                "/api/2.0/mlflow/experiments/get-by-name", params={"experiment_name": experiment}
            )
            if answer.status_code == 200 or time.monotonic() > deadline:
                return answer
        except httpx.HTTPError:
            assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(1)
