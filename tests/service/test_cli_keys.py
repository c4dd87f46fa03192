"""``dicesweep keys``: a key is printed once, stored hashed, listed and revoked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweep_service import store


def dicesweep(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DICESWEEP_")}
    env["DICESWEEP_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "sweep_service.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
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
