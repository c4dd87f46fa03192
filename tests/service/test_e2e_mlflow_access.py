"""A sweep through ``dicesweep serve`` on an MLflow server that runs its basic-auth app:
the service makes the owner an MLflow user, the driver logs as that owner with the
credential it got as a file (its job's environment names the file only), the service
reads the progress as the admin, and another owner's credential gets 403 on it; an
experiment of the owner's name that the other owner made first, at a location he
reads and with a planted run, is moved aside, never adopted."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import httpx
import pytest

from sweep_service.mlflow_auth_server import AuthServerFiles
from tests.service.test_e2e import CLI, Service, wait
from tests.service.test_mlflow_access import auth_server  # noqa: F401 (the server fixture)
from tests.service.test_secrets import command_lines

pytestmark = [pytest.mark.data, pytest.mark.e2e]

SHOWN = re.compile(r"sign in as '(\w+)' with password ([\w-]+)")


def create_key(service: Service, owner: str) -> tuple[str, str]:
    """A key for ``owner`` and the MLflow password ``keys create`` showed for it."""
    created = subprocess.run(
        [*CLI, "keys", "create", "--owner", owner],
        env=service.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    shown = SHOWN.search(created.stderr)
    assert shown and shown[1] == owner, created.stderr
    return created.stdout.strip(), shown[2]


def test_a_sweep_logs_as_its_owner_and_only_its_owner_reads_it(
    auth_server: tuple[str, AuthServerFiles],  # noqa: F811
    short_home: Path,
    datasets_dir: Path,
) -> None:
    url, files = auth_server
    service = Service(short_home, datasets_dir)
    service.env.update(
        DICESWEEP_MLFLOW_TRACKING_URI=url,
        DICESWEEP_MLFLOW_ADMIN_PASSWORD_FILE=str(files.admin_password_file),
    )
    _, other_password = create_key(service, "frank")
    frank = httpx.Client(base_url=url, auth=("frank", other_password), timeout=30)
    own = frank.get(
        "/api/2.0/mlflow/experiments/get-by-name", params={"experiment_name": "dicesweep/frank"}
    ).json()["experiment"]["experiment_id"]
    squat = {"name": "dicesweep/erin", "artifact_location": f"mlflow-artifacts:/{own}/loot"}
    squatted = frank.post("/api/2.0/mlflow/experiments/create", json=squat)
    assert squatted.status_code == 200, squatted.text
    squatted_id = squatted.json()["experiment_id"]
    planted = frank.post("/api/2.0/mlflow/runs/create", json={"experiment_id": squatted_id})
    assert planted.status_code == 200, planted.text
    key, password = create_key(service, "erin")
    headers = {"Authorization": f"Bearer {key}"}
    service.start()
    listings: list[str] = []
    try:
        submitted = service.http.post("/v1/sweeps", json={"extends": "smoke"}, headers=headers)
        assert submitted.status_code == 201, submitted.text
        sweep_id = submitted.json()["id"]

        def finished() -> bool:
            listings.append(command_lines())
            state = service.http.get(f"/v1/sweeps/{sweep_id}", headers=headers).json()
            assert state["status"] not in ("failed", "cancelled"), (state, service.log_tail())
            return bool(state["status"] == "succeeded")

        wait(finished, 900, "the smoke sweep on the basic-auth MLflow server")
        ray_token = (short_home / "ray" / "auth_token").read_text().strip()
        jobs = httpx.get(
            f"http://127.0.0.1:{service.env['DICESWEEP_RAY_DASHBOARD_PORT']}/api/jobs/",
            headers={"Authorization": f"Bearer {ray_token}"},
            timeout=30,
        ).json()
        (job,) = [j for j in jobs if j["submission_id"] == sweep_id]
        job_env = job["runtime_env"]["env_vars"]
    finally:
        service.stop()

    # The job's environment names the credential's file; no variable holds the password.
    assert job_env["MLFLOW_TRACKING_AUTH"] == "dicesweep-file"
    assert job_env["DICESWEEP_MLFLOW_CREDENTIALS"] == "mlflow_credentials"
    assert not any(password in value for value in job_env.values())
    assert not any(password in listing for listing in listings), "the password in ps"
    assert password not in service.log_tail()

    erin = httpx.Client(base_url=url, auth=("erin", password), timeout=30)
    experiment = erin.get(
        "/api/2.0/mlflow/experiments/get-by-name", params={"experiment_name": "dicesweep/erin"}
    )
    assert experiment.status_code == 200, experiment.text
    experiment_id = experiment.json()["experiment"]["experiment_id"]
    assert experiment_id != squatted_id  # frank's was moved aside
    location = experiment.json()["experiment"]["artifact_location"]
    assert location == f"mlflow-artifacts:/{experiment_id}"  # the server's default
    runs = erin.post("/api/2.0/mlflow/runs/search", json={"experiment_ids": [experiment_id]})
    found = runs.json()["runs"]
    assert len(found) == 3  # the parent run and the smoke sweep's two trials, logged as erin
    assert all(r["info"]["artifact_uri"].startswith(f"{location}/") for r in found)
    run_id = found[0]["info"]["run_id"]
    assert frank.get("/api/2.0/mlflow/runs/get", params={"run_id": run_id}).status_code == 403
    (parent,) = [r for r in found if "spec.yaml" in _artifacts(erin, r["info"]["run_id"])]
    spec = f"/api/2.0/mlflow-artifacts/artifacts/{experiment_id}/{parent['info']['run_id']}"
    assert erin.get(f"{spec}/artifacts/spec.yaml").status_code == 200
    assert frank.get(f"{spec}/artifacts/spec.yaml").status_code == 403
    loot = frank.get("/api/2.0/mlflow-artifacts/artifacts", params={"path": f"{own}/loot"})
    assert not loot.json().get("files"), loot.text  # nothing of erin's where frank reads
    by_id = {"experiment_id": experiment_id}
    assert frank.get("/api/2.0/mlflow/experiments/get", params=by_id).status_code == 403


def _artifacts(client: httpx.Client, run_id: str) -> list[str]:
    """The paths at the top of a run's artifacts."""
    listed = client.get("/api/2.0/mlflow/artifacts/list", params={"run_id": run_id}).json()
    return [entry["path"] for entry in listed.get("files", [])]
