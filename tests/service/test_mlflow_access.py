"""Owners isolated in MLflow itself: a real ``mlflow server --app-name basic-auth`` on
a free loopback port with its own folder, its admin password generated at the first
start; the service makes alice and bob users with MANAGE on their own experiments.
alice's credential file reads and writes her runs and artifacts; bob's experiment,
runs and artifacts answer her 403; a request with no credential answers 401."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from search_spaces.mlflow_credentials import (
    CREDENTIALS_ENV,
    CredentialsFileError,
    adopt_job_credentials,
    use_credentials_file,
    write_credentials,
)
from search_spaces.settings import DicesweepSettings
from sweep_service.mlflow_access import (
    PERMISSIONS,
    MlflowAccessError,
    OwnerAccess,
    OwnerCredentials,
)
from sweep_service.mlflow_auth_server import ADMIN_USERNAME, AuthServerFiles, prepare_auth_server
from sweep_service.owner_experiments import MARK_TAG
from sweep_service.runner import CREDENTIALS_FILE, sign_in
from tests.tcp_proxy import free_port
from trainables.driver.parent import experiment_id


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, AuthServerFiles]]:
    """``mlflow server --app-name basic-auth`` on SQLite with proxied artifacts; yields
    its address and its auth files."""
    home = tmp_path_factory.mktemp("mlflow-auth")
    files = prepare_auth_server(home / "auth")
    port = free_port()
    log = (home / "server.log").open("ab")
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "mlflow", "server", "--app-name", "basic-auth"),
            *("--backend-store-uri", f"sqlite:///{home / 'mlflow.db'}"),
            *("--artifacts-destination", str(home / "artifacts")),
            *("--host", "127.0.0.1", "--port", str(port), "--workers", "1"),
        ],
        env={**os.environ, **files.server_env()},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while not _answers(f"{url}/health"):
            assert server.poll() is None, (home / "server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the MLflow server did not start"
            time.sleep(0.5)
        yield url, files
    finally:
        os.killpg(server.pid, signal.SIGKILL)  # its uvicorn takes long to stop on TERM
        server.wait(timeout=30)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="module")
def access(auth_server: tuple[str, AuthServerFiles]) -> OwnerAccess:
    url, files = auth_server
    password = files.admin_password_file.read_text().strip()
    return OwnerAccess(url, ADMIN_USERNAME, password)


@pytest.fixture(scope="module")
def owners(access: OwnerAccess) -> dict[str, OwnerCredentials]:
    return {name: access.ensure_owner(name) for name in ("alice", "bob")}


@pytest.fixture(scope="module")
def bob_run(auth_server: tuple[str, AuthServerFiles], owners: dict[str, OwnerCredentials]) -> str:
    """A run in bob's experiment, with an artifact, logged with bob's credential."""
    url, _ = auth_server
    bob = httpx.Client(base_url=url, auth=(owners["bob"].username, owners["bob"].password))
    created = bob.post(
        "/api/2.0/mlflow/runs/create", json={"experiment_id": owners["bob"].experiment_id}
    )
    assert created.status_code == 200, created.text
    run_id = str(created.json()["run"]["info"]["run_id"])
    stored = bob.put(
        f"/api/2.0/mlflow-artifacts/artifacts/{owners['bob'].experiment_id}/{run_id}"
        "/artifacts/spec.yaml",
        content=b"name: bob's spec\n",
    )
    assert stored.status_code == 200, stored.text
    return run_id


def test_the_admin_password_is_generated_private_and_not_a_default(
    auth_server: tuple[str, AuthServerFiles],
) -> None:
    _, files = auth_server
    for path in (files.admin_password_file, files.config_file):
        assert path.stat().st_mode & 0o777 == 0o600, path
    password = files.admin_password_file.read_text().strip()
    assert len(password) >= 40 and password != "password1234"
    again = prepare_auth_server(files.folder)  # a restart keeps the password
    assert again.admin_password_file.read_text().strip() == password


def test_alice_reads_and_writes_her_runs_with_a_credential_file(
    auth_server: tuple[str, AuthServerFiles],
    owners: dict[str, OwnerCredentials],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, _ = auth_server
    alice = owners["alice"]
    credentials = write_credentials(tmp_path / "alice", alice.username, alice.password)
    assert credentials.stat().st_mode & 0o777 == 0o600
    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD", raising=False)
    use_credentials_file(credentials)
    try:
        client = MlflowClient(url)
        run = client.create_run(alice.experiment_id)
        client.log_metric(run.info.run_id, "eval_f1", 0.5)
        client.set_tag(run.info.run_id, "dicesweep.role", "sweep")
        client.log_text(run.info.run_id, "name: alice's spec\n", "spec.yaml")
        # The driver's first step on an experiment the admin made: tag it (MANAGE).
        client.set_experiment_tag(alice.experiment_id, "mlflow.experimentKind", "x")
        read = client.get_run(run.info.run_id)
        assert read.data.metrics == {"eval_f1": 0.5}
        assert [a.path for a in client.list_artifacts(run.info.run_id)] == ["spec.yaml"]
        names = [e.name for e in client.search_experiments()]
        assert "dicesweep/alice" in names and "dicesweep/bob" not in names
    finally:
        os.environ.pop(CREDENTIALS_ENV, None)
        os.environ.pop("MLFLOW_TRACKING_AUTH", None)


def test_alice_gets_403_on_bob_s_experiment_runs_and_artifacts(
    auth_server: tuple[str, AuthServerFiles], owners: dict[str, OwnerCredentials], bob_run: str
) -> None:
    url, _ = auth_server
    alice = httpx.Client(base_url=url, auth=(owners["alice"].username, owners["alice"].password))
    bob_experiment = owners["bob"].experiment_id
    refused = {
        "experiment": alice.get(
            "/api/2.0/mlflow/experiments/get", params={"experiment_id": bob_experiment}
        ),
        "experiment by name": alice.get(
            "/api/2.0/mlflow/experiments/get-by-name",
            params={"experiment_name": "dicesweep/bob"},
        ),
        "run": alice.get("/api/2.0/mlflow/runs/get", params={"run_id": bob_run}),
        "set a tag": alice.post(
            "/api/2.0/mlflow/runs/set-tag", json={"run_id": bob_run, "key": "x", "value": "y"}
        ),
        "a run in it": alice.post(
            "/api/2.0/mlflow/runs/create", json={"experiment_id": bob_experiment}
        ),
        "artifact list": alice.get("/api/2.0/mlflow/artifacts/list", params={"run_id": bob_run}),
        "artifact (UI route)": alice.get(
            "/get-artifact", params={"run_id": bob_run, "path": "spec.yaml"}
        ),
        "artifact (proxied)": alice.get(
            f"/api/2.0/mlflow-artifacts/artifacts/{bob_experiment}/{bob_run}/artifacts/spec.yaml"
        ),
    }
    assert {what: answer.status_code for what, answer in refused.items()} == dict.fromkeys(
        refused, 403
    )
    # A search over bob's experiment is filtered to what she may read: nothing.
    search = alice.post("/api/2.0/mlflow/runs/search", json={"experiment_ids": [bob_experiment]})
    assert search.status_code == 200 and search.json().get("runs", []) == [], search.text
    # What bob logged is untouched and his own credential still reads it.
    bob = httpx.Client(base_url=url, auth=(owners["bob"].username, owners["bob"].password))
    tags = bob.get("/api/2.0/mlflow/runs/get", params={"run_id": bob_run}).json()
    assert "x" not in {t["key"] for t in tags["run"]["data"].get("tags", [])}
    spec = bob.get("/get-artifact", params={"run_id": bob_run, "path": "spec.yaml"})
    assert spec.status_code == 200 and spec.content == b"name: bob's spec\n"


def test_only_the_admin_lists_users_and_roles(
    auth_server: tuple[str, AuthServerFiles], owners: dict[str, OwnerCredentials]
) -> None:
    """MLflow answers every user the list of users and, in a workspace the user has a
    role in, every role and its grants; here an owner gets 403 on each (REST and ajax,
    a role of the owner's own too), the admin 200, and an owner still reads its own
    roles and permissions."""
    url, files = auth_server
    admin = httpx.Client(
        base_url=url, auth=(ADMIN_USERNAME, files.admin_password_file.read_text().strip())
    )
    role = admin.post(
        "/api/3.0/mlflow/roles/create", json={"name": "readers", "workspace": "default"}
    )
    assert role.status_code == 200, role.text
    role_id = role.json()["role"]["id"]
    assigned = admin.post(
        "/api/3.0/mlflow/roles/assign", json={"username": "bob", "role_id": role_id}
    )
    assert assigned.status_code == 200, assigned.text
    roster = {
        "users": ("/api/2.0/mlflow/users/list", {}),
        "users (ajax)": ("/ajax-api/2.0/mlflow/users/list", {}),
        "roles": ("/api/3.0/mlflow/roles/list", {"workspace": "default"}),
        "roles (ajax)": ("/ajax-api/3.0/mlflow/roles/list", {"workspace": "default"}),
        "a role": ("/api/3.0/mlflow/roles/get", {"role_id": role_id}),
        "a role's grants": ("/api/3.0/mlflow/roles/permissions/list", {"role_id": role_id}),
        "a role's users": ("/api/3.0/mlflow/roles/users/list", {"role_id": role_id}),
    }
    bob = httpx.Client(base_url=url, auth=(owners["bob"].username, owners["bob"].password))
    answers = {what: bob.get(path, params=params) for what, (path, params) in roster.items()}
    assert {what: a.status_code for what, a in answers.items()} == dict.fromkeys(roster, 403), {
        what: a.text[:200] for what, a in answers.items()
    }
    for what in ("users", "roles", "a role's grants"):
        path, params = roster[what]
        assert admin.get(path, params=params).status_code == 200, what
    own = bob.get("/api/3.0/mlflow/users/roles/list", params={"username": "bob"})
    assert own.status_code == 200 and role_id in [r["id"] for r in own.json()["roles"]]
    others = bob.get("/api/3.0/mlflow/users/roles/list", params={"username": "alice"})
    assert others.status_code == 403


def test_a_request_without_a_credential_gets_401(
    auth_server: tuple[str, AuthServerFiles], owners: dict[str, OwnerCredentials], bob_run: str
) -> None:
    url, _ = auth_server
    anonymous = httpx.Client(base_url=url)
    answers = [
        anonymous.get("/api/2.0/mlflow/experiments/search", params={"max_results": 10}),
        anonymous.get("/api/2.0/mlflow/runs/get", params={"run_id": bob_run}),
        anonymous.post(
            "/api/2.0/mlflow/runs/set-tag", json={"run_id": bob_run, "key": "x", "value": "y"}
        ),
        anonymous.get("/get-artifact", params={"run_id": bob_run, "path": "spec.yaml"}),
    ]
    assert [answer.status_code for answer in answers] == [401] * len(answers)
    wrong = httpx.Client(base_url=url, auth=("alice", "not-her-password"))
    assert wrong.get("/api/2.0/mlflow/runs/get", params={"run_id": bob_run}).status_code == 401


def test_provisioning_is_idempotent_and_refuses_what_cannot_be_a_user(
    access: OwnerAccess, owners: dict[str, OwnerCredentials]
) -> None:
    assert access.ensure_owner("alice") == owners["alice"]
    for name in (ADMIN_USERNAME, "a:b"):
        with pytest.raises(MlflowAccessError, match="cannot be an MLflow user"):
            access.ensure_owner(name)
    wrong = OwnerAccess(access_url(access), ADMIN_USERNAME, "not-the-admin-password")
    with pytest.raises(MlflowAccessError, match="refused the admin"):
        wrong.ensure_owner("carol")


def test_a_credential_file_others_may_read_is_refused(tmp_path: Path) -> None:
    path = write_credentials(tmp_path / "c", "alice", "secret")
    path.chmod(0o644)
    with pytest.raises(CredentialsFileError, match="chmod 600"):
        use_credentials_file(path)


def access_url(access: OwnerAccess) -> str:
    return str(access._http.base_url)


def test_a_job_gets_its_owner_s_credential_as_a_file_and_its_driver_signs_in_with_it(
    auth_server: tuple[str, AuthServerFiles],
    access: OwnerAccess,
    owners: dict[str, OwnerCredentials],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, _ = auth_server
    upload = tmp_path / "upload"
    upload.mkdir()
    env, carol_id = sign_in(access, upload, "dicesweep/carol")
    assert carol_id == access.ensure_owner("carol").experiment_id
    sent = upload / CREDENTIALS_FILE
    assert sent.stat().st_mode & 0o777 == 0o600
    password = access.password("carol")
    assert sent.read_text().strip() == f"carol:{password}"
    # The job's environment names the file; the password is in no variable.
    assert env == {"MLFLOW_TRACKING_AUTH": "dicesweep-file", CREDENTIALS_ENV: CREDENTIALS_FILE}
    assert not any(password in value for value in env.values())

    # On the node, Ray unpacks the working folder under its own umask (0644 here); the
    # driver makes the file private and signs in as carol from any folder.
    unpacked = tmp_path / "working_dir"
    unpacked.mkdir()
    (unpacked / CREDENTIALS_FILE).write_text(sent.read_text())
    (unpacked / CREDENTIALS_FILE).chmod(0o644)
    monkeypatch.chdir(unpacked)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    adopt_job_credentials()
    assert (unpacked / CREDENTIALS_FILE).stat().st_mode & 0o777 == 0o600
    assert os.environ[CREDENTIALS_ENV] == str(unpacked / CREDENTIALS_FILE)
    monkeypatch.chdir(tmp_path)
    client = MlflowClient(url)
    settings = DicesweepSettings(home=tmp_path / "home", mlflow_tracking_uri=url)
    # The driver uses the id it is given, tagging the admin's experiment.
    carol = experiment_id(client, settings, "dicesweep/carol", carol_id)
    assert carol == carol_id
    run = client.create_run(carol)
    client.log_metric(run.info.run_id, "eval_f1", 0.25)
    assert client.get_run(run.info.run_id).data.metrics == {"eval_f1": 0.25}
    with pytest.raises(MlflowException, match=r"PERMISSION_DENIED|403"):
        experiment_id(client, settings, "dicesweep/alice")  # alice made by `owners`


def test_the_compose_check_s_isolation_assertion_holds_here_and_bites(
    auth_server: tuple[str, AuthServerFiles], owners: dict[str, OwnerCredentials], bob_run: str
) -> None:
    """``infra/compose/mlflow_isolation.py`` (run by ``make compose-check`` on the compose
    stack) against this server: it passes on bob's run, and fails where bob's
    credential is taken for another owner's."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "infra" / "compose"))
    from mlflow_isolation import check_isolation

    url, _ = auth_server
    bob = (owners["bob"].username, owners["bob"].password)
    alice = (owners["alice"].username, owners["alice"].password)
    run = httpx.get(f"{url}/api/2.0/mlflow/runs/get", params={"run_id": bob_run}, auth=bob)
    seen = check_isolation(url, bob, alice, run.json()["run"])
    assert seen["other owner: artifact"] == 403 and seen["anonymous: run"] == 401
    with pytest.raises(AssertionError, match="other owner"):
        check_isolation(url, bob, bob, run.json()["run"])


@pytest.mark.parametrize("victim", ["dave", "erin"])
def test_an_experiment_squatted_before_the_owner_s_key_is_moved_aside_never_adopted(
    auth_server: tuple[str, AuthServerFiles],
    access: OwnerAccess,
    owners: dict[str, OwnerCredentials],
    tmp_path: Path,
    victim: str,
) -> None:
    """bob makes ``dicesweep/<victim>`` before the victim has a key, at a location he
    reads (a ``file:`` folder; a folder of his own experiment's proxied artifacts), with
    a planted run and a forged mark. Granting the victim moves it aside, revokes bob's
    grants on it, and makes a fresh experiment at the server's default location, which
    bob cannot read and the victim can."""
    url, files = auth_server
    bob = httpx.Client(base_url=url, auth=(owners["bob"].username, owners["bob"].password))
    admin = httpx.Client(
        base_url=url, auth=(ADMIN_USERNAME, files.admin_password_file.read_text().strip())
    )
    location = {
        "dave": (tmp_path / "loot").as_uri(),
        "erin": f"mlflow-artifacts:/{owners['bob'].experiment_id}/loot",
    }[victim]
    name = f"dicesweep/{victim}"
    made = bob.post(
        "/api/2.0/mlflow/experiments/create", json={"name": name, "artifact_location": location}
    )
    assert made.status_code == 200, made.text
    squatted = str(made.json()["experiment_id"])
    planted = bob.post("/api/2.0/mlflow/runs/create", json={"experiment_id": squatted})
    assert planted.status_code == 200, planted.text
    forged = {"experiment_id": squatted, "key": MARK_TAG, "value": "0" * 64}
    assert (
        bob.post("/api/2.0/mlflow/experiments/set-experiment-tag", json=forged).status_code == 200
    )

    granted = access.ensure_owner(victim)

    assert granted.experiment_id != squatted
    fresh = admin.get(
        "/api/2.0/mlflow/experiments/get", params={"experiment_id": granted.experiment_id}
    )
    fresh_experiment = fresh.json()["experiment"]
    assert fresh_experiment["name"] == name
    assert fresh_experiment["artifact_location"] == f"mlflow-artifacts:/{granted.experiment_id}"
    moved = admin.get("/api/2.0/mlflow/experiments/get", params={"experiment_id": squatted})
    assert moved.json()["experiment"]["name"].startswith(f"{name} (moved aside ")
    bob_on_moved = {"username": "bob", "resource_type": "experiment", "resource_id": squatted}
    held = admin.get(f"{PERMISSIONS}/get", params=bob_on_moved)
    assert held.status_code == 404 or held.json().get("permission") == "NO_PERMISSIONS", held.text
    # The victim's run and artifact in the fresh experiment: the victim's, not bob's.
    owner = httpx.Client(base_url=url, auth=(granted.username, granted.password))
    run = owner.post("/api/2.0/mlflow/runs/create", json={"experiment_id": granted.experiment_id})
    assert run.status_code == 200, run.text
    run_id = run.json()["run"]["info"]["run_id"]
    artifact = (
        f"/api/2.0/mlflow-artifacts/artifacts/{granted.experiment_id}/{run_id}/artifacts/spec.yaml"
    )
    assert owner.put(artifact, content=b"name: the victim's spec\n").status_code == 200
    assert bob.get(artifact).status_code == 403
    assert bob.get("/api/2.0/mlflow/runs/get", params={"run_id": run_id}).status_code == 403
    search = {"experiment_ids": [granted.experiment_id]}
    searched = bob.post("/api/2.0/mlflow/runs/search", json=search)  # filtered, not refused
    assert searched.status_code == 403 or not searched.json().get("runs"), searched.text
    assert not (tmp_path / "loot").exists()  # nothing of the victim's at bob's location
    # Marked: the next grant keeps it.
    assert access.ensure_owner(victim).experiment_id == granted.experiment_id
