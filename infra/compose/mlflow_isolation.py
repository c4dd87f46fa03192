"""The compose stack's MLflow, behind its basic-auth app: an owner's credential reads
and writes the owner's runs; another owner's gets 403 on that experiment, its runs
and artifacts; a request without a credential gets 401; an owner lists neither the
users nor the roles. Used by ``check.py``.
"""

from __future__ import annotations

from typing import Any

import httpx

from sweep_service.mlflow_access import derive_password

ADMIN_PASSWORD = "/var/lib/mlflow/auth/admin_password"  # in the mlflow container


def owner_auth(admin_password: str, owner: str) -> tuple[str, str]:
    """``owner``'s MLflow user and password, as the service derives it (and as
    ``dicesweep keys create`` shows it)."""
    return owner, derive_password(admin_password, owner)


def check_isolation(
    url: str, owner: tuple[str, str], other: tuple[str, str], run: dict[str, Any]
) -> dict[str, int]:
    """Assert the isolation on ``run`` (a parent run of ``owner``'s, as MLflow's REST API
    returns it); the status of each request, for the log.

    Raises:
        AssertionError: one answered otherwise than owner 200, other 403, anonymous 401.
    """
    run_id = run["info"]["run_id"]
    experiment = run["info"]["experiment_id"]
    listed = _client(url, owner).get("/api/2.0/mlflow/artifacts/list", params={"run_id": run_id})
    assert listed.status_code == 200, listed.text
    files = [f["path"] for f in listed.json().get("files", []) if not f.get("is_dir")]
    assert files, f"the parent run {run_id} has no artifact to check"

    def requests(client: httpx.Client) -> dict[str, httpx.Response]:
        return {
            "experiment": client.get(
                "/api/2.0/mlflow/experiments/get", params={"experiment_id": experiment}
            ),
            "run": client.get("/api/2.0/mlflow/runs/get", params={"run_id": run_id}),
            "set a tag": client.post(
                "/api/2.0/mlflow/runs/set-tag",
                json={"run_id": run_id, "key": "compose.check", "value": "isolation"},
            ),
            "artifact list": client.get(
                "/api/2.0/mlflow/artifacts/list", params={"run_id": run_id}
            ),
            "artifact": client.get("/get-artifact", params={"run_id": run_id, "path": files[0]}),
        }

    seen = check_roster_closed(url, owner)
    for who, client, expected in (
        ("owner", _client(url, owner), 200),
        ("other owner", _client(url, other), 403),
        ("anonymous", _client(url, None), 401),
    ):
        answers = requests(client)
        for what, answer in answers.items():
            seen[f"{who}: {what}"] = answer.status_code
        assert {w: a.status_code for w, a in answers.items()} == dict.fromkeys(answers, expected), (
            who,
            {w: (a.status_code, a.text[:200]) for w, a in answers.items()},
        )
    return seen


def check_roster_closed(url: str, owner: tuple[str, str]) -> dict[str, int]:
    """Assert that ``owner`` gets 403 where MLflow alone would list every user and the
    roles in a workspace (only the admin lists them: ``sweep_service/mlflow_roster.py``);
    the status of each request, for the log."""
    client = _client(url, owner)
    answers = {
        "owner: users list": client.get("/api/2.0/mlflow/users/list"),
        "owner: roles list": client.get(
            "/api/3.0/mlflow/roles/list", params={"workspace": "default"}
        ),
    }
    assert {w: a.status_code for w, a in answers.items()} == dict.fromkeys(answers, 403), {
        w: (a.status_code, a.text[:200]) for w, a in answers.items()
    }
    return {what: answer.status_code for what, answer in answers.items()}


def _client(url: str, auth: tuple[str, str] | None) -> httpx.Client:
    return httpx.Client(base_url=url, auth=auth, timeout=30)
