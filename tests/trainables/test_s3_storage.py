"""A sweep whose Ray Tune storage and MLflow artifacts live on S3-compatible storage, as
on a cluster: a real S3 protocol server (moto's), a real ``mlflow server`` proxying its
artifacts there, the driver as a process. The endpoint is the standard AWS setting."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mlflow.tracking import MlflowClient

from tests.service.test_e2e import free_port
from tests.trainables.test_sweep import DRIVER, environment, runs

BUCKET = "dicesweep"
KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


def wait_until(answers: Callable[[], bool], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not answers():
        assert time.monotonic() < deadline, f"{what} did not start"
        time.sleep(0.5)


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code < 500
    except httpx.TransportError:
        return False


def started(command: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("ab") as output:
        return subprocess.Popen(
            command, stdout=output, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A moto S3 server with the bucket made, and the environment that reaches it."""
    folder = tmp_path_factory.mktemp("s3")
    port = free_port()
    env = {**os.environ, **KEYS, "AWS_DEFAULT_REGION": "us-east-1"}
    server = started([sys.executable, "-m", "moto.server", "-p", str(port)], folder / "log", env)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: answers(endpoint), "the S3 server")
        import boto3

        boto3.client("s3", endpoint_url=endpoint, **client_keys()).create_bucket(Bucket=BUCKET)
        yield {"AWS_ENDPOINT_URL": endpoint, "AWS_DEFAULT_REGION": "us-east-1", **KEYS}
    finally:
        server.terminate()
        server.wait(timeout=30)


def client_keys() -> dict[str, Any]:
    return {
        "aws_access_key_id": KEYS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": KEYS["AWS_SECRET_ACCESS_KEY"],
        "region_name": "us-east-1",
    }


def objects(s3: dict[str, str], prefix: str) -> list[str]:
    import boto3

    client = boto3.client("s3", endpoint_url=s3["AWS_ENDPOINT_URL"], **client_keys())
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return [item["Key"] for page in pages for item in page.get("Contents", [])]


@pytest.fixture(scope="module")
def mlflow_on_s3(s3: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``mlflow server`` with proxied artifacts on the bucket (MLflow reads the endpoint
    from MLFLOW_S3_ENDPOINT_URL)."""
    folder = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    env = {**os.environ, **s3, "MLFLOW_S3_ENDPOINT_URL": s3["AWS_ENDPOINT_URL"]}
    command = [
        *(sys.executable, "-m", "mlflow", "server"),
        *("--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}"),
        *("--artifacts-destination", f"s3://{BUCKET}/mlflow"),
        *("--host", "127.0.0.1", "--port", str(port), "--workers", "1"),
    ]
    server = started(command, folder / "log", env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: answers(f"{url}/health"), "the MLflow server")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.e2e
@pytest.mark.data
def test_a_sweep_keeps_its_experiment_and_artifacts_on_s3_and_resumes_from_there(
    s3: dict[str, str], mlflow_on_s3: str, short_home: Path, datasets_dir: Path
) -> None:
    env = environment(short_home, datasets_dir)
    env.update(
        s3,
        DICESWEEP_STORAGE_PATH=f"s3://{BUCKET}/ray-results",
        DICESWEEP_MLFLOW_TRACKING_URI=mlflow_on_s3,
    )
    command = [*DRIVER, "--preset", "smoke", "--sweep-id", "s3-sweep", "--num-cpus", "2"]
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]

    stored = objects(s3, "ray-results/s3-sweep/")
    assert any(key.split("/")[-1].startswith("experiment_state") for key in stored), stored
    checkpoints = {key.split("/")[2] for key in stored if "/checkpoint_" in key}
    assert len(checkpoints) == 2, stored  # one per trial, kept on the bucket
    assert not (short_home / "ray_results").exists()  # nothing under the local home

    client = MlflowClient(mlflow_on_s3)
    (parent,) = runs(client, "s3-sweep", "sweep")
    assert len(runs(client, "s3-sweep", "trial")) == 2
    artifacts = objects(s3, "mlflow/")
    assert any(key.endswith("spec.yaml") and parent.info.run_id in key for key in artifacts)
    assert any("/report/" in key for key in artifacts), artifacts

    # The same sweep again: Tune restores it from the bucket and reruns nothing.
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming sweep s3-sweep from s3://dicesweep/ray-results/s3-sweep" in again.stderr
    assert len(runs(client, "s3-sweep", "trial")) == 2
    for trial in runs(client, "s3-sweep", "trial"):
        assert trial.data.tags["dicesweep.attempt"] == "1"  # not run a second time
