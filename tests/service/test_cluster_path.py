"""The service against a remote Ray cluster: what a job carries there, and the version
checks that refuse a service, driver or cluster of another release."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from search_spaces.versions import SUBMITTER_ENV, stack_versions
from sweep_service import serve
from sweep_service.settings import ServiceSettings


def test_a_job_for_a_cluster_carries_no_path_of_the_services_machine(tmp_path: Path) -> None:
    remote = ServiceSettings(home=tmp_path, ray_jobs_url="http://head:8265")
    env = serve.job_environment(remote)
    assert env == {SUBMITTER_ENV: json.dumps(stack_versions())}
    local = serve.job_environment(ServiceSettings(home=tmp_path))
    assert local["DICESWEEP_HOME"] == str(tmp_path)
    assert local["DICESWEEP_STORAGE_PATH"] == str(tmp_path / "ray_results")
    assert SUBMITTER_ENV in local


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("s3://bucket/ray-results/", "s3://bucket/ray-results"),
        ("relative/results", str(Path.cwd() / "relative/results")),
    ],
)
def test_storage_is_a_folder_or_a_bucket_uri(value: str, expected: str, tmp_path: Path) -> None:
    assert ServiceSettings(home=tmp_path, storage_path=value).storage_path == expected


def test_storage_on_an_unknown_scheme_is_refused_naming_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="DICESWEEP_STORAGE_PATH"):
        ServiceSettings(home=tmp_path, storage_path="ftp://host/results")


def test_a_driver_of_another_release_refuses_the_job_before_anything_runs(
    short_home: Path,
) -> None:
    service = {**stack_versions(), "dicesweep": "0.0.1"}
    env = {**os.environ, "DICESWEEP_HOME": str(short_home), SUBMITTER_ENV: json.dumps(service)}
    done = subprocess.run(
        [sys.executable, "-m", "trainables.driver", "--preset", "smoke"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr
    ours = stack_versions()["dicesweep"]
    assert f"dicesweep 0.0.1 on the service but {ours} on the Ray cluster" in done.stderr
    assert not (short_home / "ray_results").exists()  # refused before Ray or MLflow started


@pytest.fixture
def jobs_api() -> Iterator[tuple[str, dict[str, str]]]:
    """A Jobs API's ``/api/version`` answering the Ray version in the returned dict."""
    answer = {"ray_version": "2.1.0"}

    class Version(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"version": "4", **answer}).encode()
            self.send_response(200 if self.path == "/api/version" else 404)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Version)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", answer
    server.shutdown()


def test_the_service_refuses_a_cluster_of_another_ray_release(
    jobs_api: tuple[str, dict[str, str]],
) -> None:
    address, answer = jobs_api
    ours = stack_versions()["ray"]
    with pytest.raises(RuntimeError, match=f"ray 2.1.0 on the Ray cluster at {address} but {ours}"):
        serve.check_cluster_version(address)
    answer["ray_version"] = ours
    serve.check_cluster_version(address)  # the same release: accepted
