"""Secrets stay secret through a whole sweep: the API key, the store's database
password, the Ray head's auth token and a Hugging Face token appear in no log, no
response, no MLflow param or tag, no job the Jobs API shows, no file under the home
but their own (the owner's only) and no process's command line, grepped after a real
smoke sweep on ``dicesweep serve`` with a PostgreSQL store; a Ray token others may
read is refused at start."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mlflow.tracking import MlflowClient
from sqlalchemy import URL

from search_spaces.contract import experiment_name
from sweep_service import local_head, serve
from sweep_service.settings import ServiceSettings
from tests.service.test_e2e import CLI, Service, wait

pytestmark = pytest.mark.data


def command_lines() -> str:
    """Every process's command line, as ``ps`` shows them to any user."""
    return subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout


def files_holding(root: Path, secret: str, skip: set[Path]) -> list[str]:
    needle = secret.encode()
    return [
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() and path not in skip and needle in path.read_bytes()
    ]


@pytest.fixture
def password_url(postgres_database: URL) -> Iterator[URL]:
    """The test database's URL with a password in it (the test server trusts loopback,
    so any password is accepted: what matters is where it could leak)."""
    yield postgres_database.set(password=f"pw-{secrets.token_hex(12)}")


@pytest.mark.e2e
def test_no_secret_leaves_its_place_during_a_sweep(
    short_home: Path, datasets_dir: Path, password_url: URL
) -> None:
    password = str(password_url.password)
    service = Service(short_home, datasets_dir)
    service.env["DICESWEEP_DATABASE_URL"] = password_url.render_as_string(hide_password=False)
    created = subprocess.run(
        [*CLI, "keys", "create", "--owner", "alice"],
        env=service.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    api_key = created.stdout.strip()
    hf_token = f"hf_{secrets.token_hex(16)}"
    # Set for the service, as an operator would: the client's key, the hub's token.
    service.env.update(DICESWEEP_API_KEY=api_key, HF_TOKEN=hf_token)
    service.env["DICESWEEP_METRICS_OWNERS"] = '["alice"]'  # its /metrics is read below
    service.start()
    try:
        ray_token = (short_home / "ray" / "auth_token").read_text().strip()
        secret_values = {
            "API key": api_key,
            "database password": password,
            "Ray token": ray_token,
            "HF token": hf_token,
        }
        headers = {"Authorization": f"Bearer {api_key}"}
        answers: list[str] = []
        listings: list[str] = []

        def finished() -> bool:
            listings.append(command_lines())
            answer = service.http.get(f"/v1/sweeps/{sweep_id}", headers=headers)
            answers.append(answer.text)
            return answer.json()["status"] in ("succeeded", "failed")

        submitted = service.http.post("/v1/sweeps", json={"extends": "smoke"}, headers=headers)
        assert submitted.status_code == 201, submitted.text
        sweep_id = submitted.json()["id"]
        answers.append(submitted.text)
        wait(finished, 420, "the smoke sweep")
        for path in (f"/v1/sweeps/{sweep_id}/trials", "/v1/sweeps", "/metrics", "/openapi.json"):
            answer = service.http.get(path, headers=headers)
            assert answer.status_code == 200, path
            answers.append(answer.text)
        refused = service.http.get("/v1/sweeps", headers={"Authorization": f"Bearer {api_key}x"})
        answers.append(refused.text)
        # What the cluster shows of the sweep's job: its runtime environment included.
        jobs = httpx.get(
            f"http://127.0.0.1:{service.env['DICESWEEP_RAY_DASHBOARD_PORT']}/api/jobs/",
            headers={"Authorization": f"Bearer {ray_token}"},
            timeout=30,
        )
        assert jobs.status_code == 200, jobs.text
        assert sweep_id in jobs.text
        answers.append(jobs.text)
        (job,) = [j for j in jobs.json() if j["submission_id"] == sweep_id]
        job_env = job["runtime_env"]["env_vars"]
        # The settings a driver needs, by name; the token as a file the trials read.
        assert not {"DICESWEEP_API_KEY", "HF_TOKEN", "DICESWEEP_DATABASE_URL"} & set(job_env)
        assert Path(job_env["HF_TOKEN_PATH"]).read_text() == hf_token
    finally:
        service.stop()

    client = MlflowClient(f"sqlite:///{short_home / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(experiment_name("alice"))
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 3  # the sweep's parent run and its two trials
    tracked = "\n".join(f"{run.data.params}\n{run.data.tags}" for run in runs)
    # The tokens' own files, readable by their owner only, are where they belong.
    kept = {short_home / "ray" / "auth_token", short_home / "secrets" / "hf_token"}
    for name, value in secret_values.items():
        assert value not in "\n".join(answers), f"the {name} in an API answer"
        assert value not in "\n".join(listings), f"the {name} in the process list"
        assert value not in tracked, f"the {name} in MLflow"
        assert files_holding(short_home, value, kept) == [], f"the {name} in these files"
    for private in (short_home, short_home / "secrets", *kept, short_home / "mlflow.db"):
        assert os.stat(private).st_mode & 0o077 == 0, f"{private} is not its owner's only"


@pytest.mark.parametrize("mode", [0o644, 0o640])
def test_a_ray_token_others_may_read_is_refused_at_start(short_home: Path, mode: int) -> None:
    token = short_home / "ray" / "auth_token"
    token.parent.mkdir()
    token.write_text(secrets.token_hex(32))
    token.chmod(mode)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DICESWEEP_", "RAY_AUTH"))}
    env.update(DICESWEEP_HOME=str(short_home), DICESWEEP_PORT="0")
    refused = subprocess.run(
        [*CLI, "serve"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert refused.returncode == 1, refused.stderr
    assert "may be read by others" in refused.stderr
    assert f"chmod 600 {token}" in refused.stderr
    assert not (short_home / "ray" / "session_latest").exists()  # no head started


def test_a_job_and_the_head_get_settings_by_name_and_no_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The environment a job is submitted with (the Jobs API shows it, Ray's agent logs
    # it) and the local head's, which every driver and trial inherits.
    token, key = f"hf_{secrets.token_hex(16)}", f"ds_{secrets.token_hex(16)}"
    monkeypatch.setenv("HF_TOKEN", token)
    monkeypatch.setenv("DICESWEEP_API_KEY", key)
    monkeypatch.setenv("DICESWEEP_DATABASE_URL", "postgresql://u:pw-secret@db/x")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("DICESWEEP_SOMETHING_ELSE", "not a setting")
    home = tmp_path / "home"
    env = serve.job_environment(ServiceSettings(home=home, data_roots=[tmp_path / "team"]))
    shown = "\n".join(f"{k}={v}" for k, v in {**env, **local_head._head_env()}.items())
    for secret in (token, key, "pw-secret", "not a setting"):
        assert secret not in shown
    assert env["HF_HUB_OFFLINE"] == "1"  # Hugging Face's settings, by name
    assert json.loads(env["DICESWEEP_DATA_ROOTS"]) == [str(tmp_path / "team")]
    token_file = Path(env["HF_TOKEN_PATH"])
    assert token_file.read_text() == token
    assert token_file.stat().st_mode & 0o777 == 0o600
    assert token_file.parent.stat().st_mode & 0o777 == 0o700
