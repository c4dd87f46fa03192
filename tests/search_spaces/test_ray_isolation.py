"""Every Ray process the project starts keeps its files under DICESWEEP_HOME, and each
Ray address setting has one meaning."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from pydantic import ValidationError

from search_spaces.settings import MAX_RAY_HOME_CHARS, DicesweepSettings, isolate_ray

RAY_VARIABLES = ("RAY_TMPDIR", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


@pytest.fixture
def fresh_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No Ray variables set (what a fresh machine has); restored afterwards."""
    for variable in RAY_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    return monkeypatch


def test_temp_folder_and_a_private_token_under_the_home(
    short_home: Path, fresh_env: pytest.MonkeyPatch
) -> None:
    isolate_ray(short_home)
    assert os.environ["RAY_TMPDIR"] == str(short_home)  # Ray uses <home>/ray
    assert os.environ["RAY_AUTH_MODE"] == "token"
    path = short_home / "ray" / "auth_token"
    assert os.environ["RAY_AUTH_TOKEN_PATH"] == str(path)
    token = path.read_text()
    assert len(token) == 64 and int(token, 16) >= 0  # 256 bits in hex
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # its owner's only
    # The next start keeps it: jobs and clients that read it before still get in.
    fresh_env.delenv("RAY_AUTH_TOKEN_PATH")
    isolate_ray(short_home)
    assert path.read_text() == token


@pytest.mark.parametrize(
    ("variable", "value"), [("RAY_AUTH_TOKEN", "given"), ("RAY_AUTH_TOKEN_PATH", "/run/token")]
)
def test_a_token_the_operator_gives_wins(
    short_home: Path, fresh_env: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    fresh_env.setenv(variable, value)
    isolate_ray(short_home)
    assert os.environ[variable] == value
    assert not (short_home / "ray" / "auth_token").exists()


def test_no_token_without_token_auth(short_home: Path, fresh_env: pytest.MonkeyPatch) -> None:
    fresh_env.setenv("RAY_AUTH_MODE", "disabled")
    isolate_ray(short_home)
    assert "RAY_AUTH_TOKEN_PATH" not in os.environ
    assert os.environ["RAY_TMPDIR"] == str(short_home)


def test_a_home_too_long_for_rays_sockets_is_refused_naming_the_limit(
    fresh_env: pytest.MonkeyPatch,
) -> None:
    home = Path("/tmp/" + "h" * MAX_RAY_HOME_CHARS)
    with pytest.raises(ValueError, match=f"need at most {MAX_RAY_HOME_CHARS}"):
        isolate_ray(home)
    assert "RAY_TMPDIR" not in os.environ


def test_each_address_setting_takes_its_own_form(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DICESWEEP_RAY_ADDRESS", "head:6379")
    monkeypatch.setenv("DICESWEEP_RAY_JOBS_URL", "http://head:8265")
    settings = DicesweepSettings()
    assert (settings.ray_address, settings.ray_jobs_url) == ("head:6379", "http://head:8265")
    monkeypatch.setenv("DICESWEEP_RAY_ADDRESS", "http://head:8265")
    with pytest.raises(ValidationError, match="goes in DICESWEEP_RAY_JOBS_URL"):
        DicesweepSettings()
    monkeypatch.setenv("DICESWEEP_RAY_ADDRESS", "head:6379")
    monkeypatch.setenv("DICESWEEP_RAY_JOBS_URL", "head:8265")
    with pytest.raises(ValidationError, match="DICESWEEP_RAY_JOBS_URL is the cluster's Jobs API"):
        DicesweepSettings()
