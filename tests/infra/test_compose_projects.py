"""Two compose projects on one Docker engine, as infra/compose's scripts run them: the
project comes from ``--project``, else COMPOSE_PROJECT_NAME, else ``dicesweep-check``,
and tearing one project's stack down leaves another's containers and volumes alone.
The engine test brings PostgreSQL up under two projects (the stand-in image of
``make images``); it is slow and skipped where no engine or image is found."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "infra" / "compose"))

from check import PROJECT, Stack, project_name  # noqa: E402

STANDIN = "dicesweep/postgres-standin:15"


def test_the_project_is_the_flag_then_the_environment_then_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("COMPOSE_PROJECT_NAME", raising=False)
    assert project_name(None) == PROJECT == "dicesweep-check"
    monkeypatch.setenv("COMPOSE_PROJECT_NAME", "from-env")
    assert project_name(None) == "from-env"
    assert project_name("from-flag") == "from-flag"


def test_every_compose_command_names_the_project(tmp_path: Path) -> None:
    stack = Stack(tmp_path, "named-one")
    assert stack.base[:3] == ["docker-compose", "-p", "named-one"]


def _docker(*args: str) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _engine_has_the_standin() -> bool:
    if not shutil.which("docker") or not shutil.which("docker-compose"):
        return False
    done = subprocess.run(
        ["docker", "image", "inspect", STANDIN], capture_output=True, text=True, timeout=60
    )
    return done.returncode == 0


def _owned(project: str) -> tuple[set[str], set[str]]:
    """The containers (running or not) and volumes labelled as ``project``'s."""
    label = f"label=com.docker.compose.project={project}"
    containers = set(_docker("ps", "-aq", "--filter", label).split())
    volumes = set(_docker("volume", "ls", "-q", "--filter", label).split())
    return containers, volumes


@pytest.fixture
def two_stacks(tmp_path: Path) -> Iterator[tuple[Stack, Stack]]:
    tag = secrets.token_hex(3)
    stacks = (
        Stack(tmp_path, f"dicesweep-test-a-{tag}"),
        Stack(tmp_path, f"dicesweep-test-b-{tag}"),
    )
    try:
        yield stacks
    finally:
        for stack in stacks:
            stack.down()


@pytest.mark.slow
@pytest.mark.skipif(not _engine_has_the_standin(), reason=f"needs the Docker engine and {STANDIN}")
def test_tearing_one_project_down_leaves_the_other_projects_containers_and_volumes(
    two_stacks: tuple[Stack, Stack],
) -> None:
    a, b = two_stacks
    b.compose("up", "-d", "postgres")
    a.compose("up", "-d", "postgres")
    before_b, before_a = _owned(b.project), _owned(a.project)
    assert all(before_a) and all(before_b), (before_a, before_b)
    assert not (before_a[0] & before_b[0]) and not (before_a[1] & before_b[1])

    a.down()

    assert _owned(a.project) == (set(), set())
    assert _owned(b.project) == before_b
    (state,) = json.loads(_docker("inspect", b.container("postgres")))
    assert state["State"]["Running"], state["State"]
