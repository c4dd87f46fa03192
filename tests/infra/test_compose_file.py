"""docker-compose.yml read as a deployment, offline: valid against the Compose
specification, and holding what the topology needs (make compose-check runs it)."""

from __future__ import annotations

import configparser
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from sweep_service.mlflow_auth_server import AUTHORIZATION_FUNCTION

ROOT = Path(__file__).resolve().parents[2]
FILES = ["docker-compose.yml", "docker-compose.ci.yml"]
RAY_NODES = ("ray-head", "ray-worker-1", "ray-worker-2", "ray-gpu-worker")
# What the machine's own services hold: never published by default.
TAKEN = {"5432", "3306", "6379", "5672", "1883", "4222"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return loaded


@pytest.mark.parametrize("name", FILES)
def test_the_files_follow_the_compose_specification(name: str) -> None:
    checker = Path(sys.executable).with_name("check-jsonschema")
    done = subprocess.run(
        [str(checker), "--builtin-schema", "vendor.compose-spec", str(ROOT / name)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_specification_check_bites(tmp_path: Path) -> None:
    broken = tmp_path / "compose.yml"
    broken.write_text("services:\n  api:\n    image: x\n    depends_on: {db: {condition: up}}\n")
    checker = Path(sys.executable).with_name("check-jsonschema")
    done = subprocess.run(
        [str(checker), "--builtin-schema", "vendor.compose-spec", str(broken)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0


def test_two_cpu_workers_join_the_head_and_a_gpu_profile_reserves_nvidia_devices(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    for worker in ("ray-worker-1", "ray-worker-2"):
        assert "--address=ray-head:6379" in services[worker]["command"]
        assert services[worker]["profiles"] == ["cpu"]
        assert services[worker]["depends_on"]["ray-head"]["condition"] == "service_healthy"
    gpu = services["ray-gpu-worker"]
    assert gpu["profiles"] == ["gpu"]
    (device,) = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
    assert "--num-cpus=0" in services["ray-head"]["command"]  # trials only on workers


def test_every_ray_node_shares_tune_storage_at_one_path_and_has_shared_memory(
    compose: dict[str, Any],
) -> None:
    for node in RAY_NODES:
        service = compose["services"][node]
        assert "shared:/shared" in service["volumes"], node
        assert service["shm_size"], node
        assert service["environment"]["DICESWEEP_STORAGE_PATH"].endswith(":-/shared/ray-results}")
    assert "shared" in compose["volumes"]


def test_the_api_submits_through_the_heads_jobs_api_after_its_dependencies_are_healthy(
    compose: dict[str, Any],
) -> None:
    api = compose["services"]["api"]
    assert api["environment"]["DICESWEEP_RAY_JOBS_URL"] == "http://ray-head:8265"
    assert api["environment"]["DICESWEEP_MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
    assert {name: rule["condition"] for name, rule in api["depends_on"].items()} == dict.fromkeys(
        ("postgres", "mlflow", "ray-head"), "service_healthy"
    )


def test_secrets_come_from_the_environment_and_must_be_set() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    for secret in ("POSTGRES_PASSWORD", "RAY_AUTH_TOKEN"):
        uses = re.findall(r"\$\{" + secret + r"(:[?-][^}]*)?\}", text)
        assert uses and all(use.startswith(":?") for use in uses), (secret, uses)
    # Where MLflow's admin password lies (a file the server makes) is not a password.
    files = ("postgres_password", "mlflow_admin_password_file", "/admin_password")
    left = re.sub(r"\$\{[^}]*\}", "", text).lower()
    for name in files:
        left = left.replace(name, "")
    assert "password" not in left


def test_mlflow_asks_for_a_user_and_the_api_is_its_admin(compose: dict[str, Any]) -> None:
    """MLflow's basic-auth app (the image's command) keeps its generated admin password
    in a volume the API mounts read-only, where its setting points."""
    services = compose["services"]
    assert "command" not in services["mlflow"]  # the image's: mlflow server --app-name basic-auth
    assert "mlflow-auth:/var/lib/mlflow/auth" in services["mlflow"]["volumes"]
    api = services["api"]
    assert "mlflow-auth:/run/mlflow-auth:ro" in api["volumes"]
    assert api["environment"]["DICESWEEP_MLFLOW_ADMIN_PASSWORD_FILE"] == (
        "/run/mlflow-auth/admin_password"
    )
    dockerfile = (ROOT / "infra" / "docker" / "mlflow.Dockerfile").read_text()
    assert '"mlflow[auth]"' in dockerfile
    assert 'CMD ["mlflow", "server", "--app-name", "basic-auth"' in dockerfile
    assert 'ENTRYPOINT ["tini", "--", "mlflow-auth"]' in dockerfile


def test_the_image_s_mlflow_lists_users_and_roles_to_its_admin_only(tmp_path: Path) -> None:
    """The image's entrypoint names the project's authorization function (in the image
    from the project's wheel, installed without its dependencies), which resolves."""
    entrypoint = ROOT / "infra" / "docker" / "mlflow-auth.sh"
    env = {"PATH": os.environ["PATH"], "MLFLOW_AUTH_DIR": str(tmp_path / "auth")}
    shown = subprocess.run(
        ["sh", str(entrypoint), "sh", "-c", 'cat "$MLFLOW_AUTH_CONFIG_PATH"'],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    config = configparser.ConfigParser()
    config.read_string(shown.stdout)
    assert config["mlflow"]["authorization_function"] == AUTHORIZATION_FUNCTION
    module, function = AUTHORIZATION_FUNCTION.split(":")
    # In a process of its own: importing MLflow's auth app reads its config.
    resolve = f"import {module} as m; assert callable(m.{function})"
    subprocess.run([sys.executable, "-c", resolve], check=True, timeout=300)
    dockerfile = (ROOT / "infra" / "docker" / "mlflow.Dockerfile").read_text()
    assert "--no-deps" in dockerfile and '"dicesweep==${DICESWEEP_VERSION}"' in dockerfile


def test_published_ports_are_settings_on_loopback_by_default(compose: dict[str, Any]) -> None:
    published = [
        (name, port)
        for name, service in compose["services"].items()
        for port in service.get("ports", [])
    ]
    assert published
    for name, port in published:
        setting = re.fullmatch(r"\$\{DICESWEEP_BIND:-127\.0\.0\.1\}:\$\{(\w+):-(\d+)\}:\d+", port)
        assert setting, (name, port)
        assert setting.group(2) not in TAKEN, (name, port)
