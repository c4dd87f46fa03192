"""An owner's experiment in the embedded store (real MLflow on SQLite under a home, as
``dicesweep serve`` and ``dicesweep ui`` share it) is only ever one the service made:
one of the owner's name made by someone else (a user of ``dicesweep ui``), at a
location of theirs, with a planted run and a forged mark, is moved aside and a fresh
one made; ``dicesweep keys create`` makes it before it issues the key, and issues
none when it cannot."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from search_spaces.settings import DicesweepSettings
from sweep_service.mlflow_ui import embedded_auth, embedded_owner_experiment
from sweep_service.owner_experiments import MARK_TAG, is_marked

CLI = [sys.executable, "-m", "sweep_service.cli"]


@pytest.fixture
def settings(tmp_path: Path) -> DicesweepSettings:
    (tmp_path / "home").mkdir()
    return DicesweepSettings(home=tmp_path / "home")


@pytest.fixture
def client(settings: DicesweepSettings) -> MlflowClient:
    """The embedded store, as a user of ``dicesweep ui`` or a driver writes it."""
    return MlflowClient(str(settings.mlflow_tracking_uri))


def squat(client: MlflowClient, name: str, location: Path) -> str:
    """``name`` made by someone else: their location, a run, a forged mark."""
    made = client.create_experiment(name, artifact_location=location.as_uri())
    client.create_run(made)
    client.set_experiment_tag(made, MARK_TAG, "0" * 64)
    return str(made)


def test_a_squatted_owner_experiment_is_moved_aside_and_a_marked_one_kept(
    settings: DicesweepSettings, client: MlflowClient, tmp_path: Path
) -> None:
    squatted = squat(client, "dicesweep/dave", tmp_path / "loot")

    made = embedded_owner_experiment(settings, "dicesweep/dave")

    assert made != squatted
    fresh = client.get_experiment(made)
    assert fresh.name == "dicesweep/dave"
    assert fresh.artifact_location == settings.mlflow_artifact_root.as_uri()
    secret = embedded_auth(settings.home).admin_password_file.read_text().strip()
    assert is_marked(fresh, secret)
    moved = client.get_experiment(squatted)
    assert moved.name.startswith("dicesweep/dave (moved aside ")
    assert len(client.search_runs([squatted])) == 1  # the planted run stays with it
    assert client.search_runs([made]) == []
    # Marked: kept, and restored when deleted.
    assert embedded_owner_experiment(settings, "dicesweep/dave") == made
    client.delete_experiment(made)
    assert embedded_owner_experiment(settings, "dicesweep/dave") == made
    assert client.get_experiment(made).lifecycle_stage == "active"


def test_a_mark_made_under_another_secret_or_for_another_location_is_not_taken(
    settings: DicesweepSettings, client: MlflowClient, tmp_path: Path
) -> None:
    """A mark copied from the owner's real experiment onto one elsewhere does not hold:
    it covers the id, the name and the location."""
    real = client.get_experiment(embedded_owner_experiment(settings, "dicesweep/alice"))
    other = client.create_experiment("dicesweep/mallory", artifact_location=tmp_path.as_uri())
    client.set_experiment_tag(other, MARK_TAG, real.tags[MARK_TAG])
    secret = embedded_auth(settings.home).admin_password_file.read_text().strip()
    assert not is_marked(client.get_experiment(other), secret)
    assert not is_marked(real, "another secret")
    assert embedded_owner_experiment(settings, "dicesweep/mallory") != other


def keys_create(home: Path, owner: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "keys", "create", "--owner", owner],
        env={"PATH": "/usr/bin:/bin", "DICESWEEP_HOME": str(home), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_keys_create_makes_the_owner_s_experiment_first(
    settings: DicesweepSettings, client: MlflowClient, tmp_path: Path
) -> None:
    squatted = squat(client, "dicesweep/dave", tmp_path / "loot")

    created = keys_create(settings.home, "dave")

    assert created.returncode == 0, created.stderr
    assert created.stdout.startswith("ds_")
    found = client.get_experiment_by_name("dicesweep/dave")
    assert found is not None and found.experiment_id != squatted
    secret = embedded_auth(settings.home).admin_password_file.read_text().strip()
    assert is_marked(found, secret)


def test_keys_create_issues_no_key_when_the_experiment_cannot_be_made(tmp_path: Path) -> None:
    """An MLflow server that does not answer: no key, no owner, the reason said."""
    home = tmp_path / "home"
    password = tmp_path / "admin_password"
    password.write_text("secret\n")
    password.chmod(0o600)
    refused = keys_create(
        home,
        "dave",
        DICESWEEP_MLFLOW_TRACKING_URI="http://127.0.0.1:9",
        DICESWEEP_MLFLOW_ADMIN_PASSWORD_FILE=str(password),
    )
    assert refused.returncode == 1
    assert "no key made: owner 'dave''s MLflow experiment could not be made" in refused.stderr
    assert refused.stdout == ""
    with sqlite3.connect(home / "dicesweep.db") as db:
        assert db.execute("select count(*) from owners").fetchone() == (0,)
        assert db.execute("select count(*) from api_keys").fetchone() == (0,)
