"""``dicesweep keys``: a key is printed once, stored hashed, listed and revoked; the
commands that talk to a service say in one line when it is not there."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from sweep_service import store


def dicesweep(home: Path, *args: str, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DICESWEEP_")}
    env.update(DICESWEEP_HOME=str(home), **settings)
    return subprocess.run(
        [sys.executable, "-m", "sweep_service.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_first_key_makes_the_home_and_its_stores_private(tmp_path: Path) -> None:
    home = tmp_path / "home"  # made by this command, before any dicesweep serve
    env = {k: v for k, v in os.environ.items() if not k.startswith("DICESWEEP_")}
    created = subprocess.run(
        [sys.executable, "-m", "sweep_service.cli", "keys", "create", "--owner", "alice"],
        env={**env, "DICESWEEP_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        umask=0o022,  # a usual login's: what the command leaves is its own doing
    )
    assert created.returncode == 0, created.stderr
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    stores = [home / "dicesweep.db", home / "mlflow.db"]
    assert {path: stat.S_IMODE(path.stat().st_mode) for path in stores} == dict.fromkeys(
        stores, 0o600
    )


def test_create_list_and_revoke_a_key(tmp_path: Path) -> None:
    created = dicesweep(tmp_path, "keys", "create", "--owner", "alice")
    assert created.returncode == 0, created.stderr
    plain = created.stdout.strip()
    assert plain.startswith("ds_") and "shown once" in created.stderr
    url = f"sqlite:///{tmp_path / 'dicesweep.db'}"
    sessions = store.create_session_factory(store.create_engine_for(url))
    with sessions() as session:
        key = store.authenticate(session, plain)
        assert key.owner.name == "alice" and plain not in (key.secret_hash, key.prefix)
    listed = dicesweep(tmp_path, "keys", "list", "--owner", "alice")
    assert key.prefix in listed.stdout and "revoked" not in listed.stdout
    assert dicesweep(tmp_path, "keys", "revoke", key.prefix).returncode == 0
    with sessions() as session, pytest.raises(store.AuthenticationError):
        store.authenticate(session, plain)
    assert "revoked" in dicesweep(tmp_path, "keys", "list", "--owner", "alice").stdout


def test_keys_list_names_every_owners_keys_and_an_owner_without_keys_lists_none(
    tmp_path: Path,
) -> None:
    none_json = dicesweep(tmp_path, "keys", "list", "--json")  # a store with no key
    assert (none_json.returncode, none_json.stdout.strip()) == (0, "[]"), none_json.stderr
    none_text = dicesweep(tmp_path, "keys", "list")
    assert (none_text.returncode, none_text.stdout) == (0, "")
    for owner in ("alice", "bob"):
        assert dicesweep(tmp_path, "keys", "create", "--owner", owner).returncode == 0
    url = f"sqlite:///{tmp_path / 'dicesweep.db'}"
    with store.create_session_factory(store.create_engine_for(url))() as session:
        store.create_owner(session, "carol")  # an owner with no key, as the service's "local"
    listed = dicesweep(tmp_path, "keys", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [key["owner"] for key in json.loads(listed.stdout)] == ["alice", "bob"]
    text = dicesweep(tmp_path, "keys", "list").stdout.splitlines()
    assert [line.split()[1] for line in text] == ["alice", "bob"]
    carol = dicesweep(tmp_path, "keys", "list", "--owner", "carol", "--json")
    assert (carol.returncode, carol.stdout.strip()) == (0, "[]")
    carol_text = dicesweep(tmp_path, "keys", "list", "--owner", "carol")
    assert (carol_text.returncode, carol_text.stdout) == (0, "")
    unknown = dicesweep(tmp_path, "keys", "list", "--owner", "dave")
    assert unknown.returncode == 1 and unknown.stdout == ""
    assert unknown.stderr == "dicesweep keys: no owner named 'dave'\n"


def test_a_service_that_is_not_there_is_one_line_naming_the_address(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = dicesweep(tmp_path, "list", DICESWEEP_PORT=str(port))
    assert result.returncode == 1
    assert result.stderr.startswith(
        f"dicesweep list: cannot reach the dicesweep service at http://127.0.0.1:{port} "
    )
    assert len(result.stderr.strip().splitlines()) == 1


def test_version_and_help_read_plainly(tmp_path: Path) -> None:
    version = dicesweep(tmp_path, "--version")
    assert version.stdout.strip() == f"dicesweep {metadata.version('dicesweep')}"
    usage = dicesweep(tmp_path, "--help")
    assert usage.returncode == 0
    assert "``" not in usage.stdout
    for command in ("submit", "list", "status", "trials", "cancel"):
        assert command in usage.stdout


def test_an_operator_sets_an_owners_quotas_with_a_key(tmp_path: Path) -> None:
    create = ("keys", "create", "--owner", "lab")
    created = dicesweep(tmp_path, *create, "--max-concurrent-sweeps", "200")
    assert created.returncode == 0, created.stderr
    again = dicesweep(tmp_path, *create, "--max-gpus-per-trial", "0.5")
    assert again.returncode == 0, again.stderr
    url = f"sqlite:///{tmp_path / 'dicesweep.db'}"
    with store.create_session_factory(store.create_engine_for(url))() as session:
        owner = store.get_owner_by_name(session, "lab")
        assert (owner.max_concurrent_sweeps, owner.max_gpus_per_trial) == (200, 0.5)
    refused = dicesweep(tmp_path, *create, "--max-trials-per-sweep", "-1")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "quotas cannot be negative: max_trials_per_sweep=-1" in refused.stderr
