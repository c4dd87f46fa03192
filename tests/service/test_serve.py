"""``dicesweep serve``'s own Ray head: the command it runs and what it leaves behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from sweep_service import serve


def test_the_head_listens_on_loopback_on_the_ports_given(tmp_path: Path) -> None:
    command = serve.head_command(dashboard_port=8123, gcs_port=9123)
    assert command[1:4] == ["start", "--head", "--block"]
    assert "--dashboard-port=8123" in command and "--port=9123" in command
    assert "--dashboard-host=127.0.0.1" in command
    assert Path(command[0]).name == "ray"


@pytest.mark.parametrize(("recorded", "kept"), [("192.0.2.2:9123", False), ("10.0.0.1:6379", True)])
def test_a_stopped_head_is_forgotten_only_when_the_note_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorded: str, kept: bool
) -> None:
    # A plain ray.init() on this machine would otherwise try to join the stopped head.
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    note = tmp_path / "ray" / "ray_current_cluster"
    note.parent.mkdir()
    note.write_text(recorded)
    serve._forget_head(9123)
    assert note.exists() is kept
    serve._forget_head(9123)  # no note: nothing to do


@pytest.fixture
def ray_auth_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Token auth on, and no token given: what a fresh machine has."""
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    return monkeypatch


def test_the_head_and_its_clients_share_a_token_made_under_the_home(
    tmp_path: Path, ray_auth_env: pytest.MonkeyPatch
) -> None:
    path = serve.provide_ray_token(tmp_path)
    assert path == tmp_path / "ray" / "auth_token"
    assert os.environ["RAY_AUTH_TOKEN_PATH"] == str(path)
    token = path.read_text()
    assert len(token) == 64 and int(token, 16) >= 0  # 256 bits in hex
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # its owner's only
    # The next start keeps it: jobs and clients that read it before still get in.
    ray_auth_env.delenv("RAY_AUTH_TOKEN_PATH")
    assert serve.provide_ray_token(tmp_path) == path
    assert path.read_text() == token


@pytest.mark.parametrize(
    ("variable", "value"), [("RAY_AUTH_TOKEN", "given"), ("RAY_AUTH_TOKEN_PATH", "/run/token")]
)
def test_a_token_the_operator_gives_wins(
    tmp_path: Path, ray_auth_env: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    ray_auth_env.setenv(variable, value)
    assert serve.provide_ray_token(tmp_path) is None
    assert os.environ[variable] == value
    assert not (tmp_path / "ray").exists()


def test_no_token_without_token_auth(tmp_path: Path, ray_auth_env: pytest.MonkeyPatch) -> None:
    ray_auth_env.setenv("RAY_AUTH_MODE", "disabled")
    assert serve.provide_ray_token(tmp_path) is None
    assert "RAY_AUTH_TOKEN_PATH" not in os.environ
