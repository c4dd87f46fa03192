"""Each owner an MLflow user with MANAGE on the owner's own experiment, and nothing else.

An MLflow server running its basic-auth app (``mlflow server --app-name basic-auth``,
``default_permission = NO_PERMISSIONS``) answers 401 without a user and 403 on any
experiment the user holds no permission on. The service signs in as the server's
admin (``DICESWEEP_MLFLOW_ADMIN_PASSWORD_FILE``, the password the server generated at
its first start) and, for an owner, makes sure of three things over the server's
REST API: the user named as the owner, the experiment ``dicesweep/<owner>`` (made and
marked by the admin; one of that name someone else made is moved aside,
``sweep_service.owner_experiments``), and that user's MANAGE on it.

An owner's password is derived from the admin's (HMAC-SHA256 of the owner's name),
so the service stores none and recomputes it for each sweep: the driver signs in
with it (``runner.py`` sends it in a 0600 file), and ``dicesweep keys create`` shows
it for the MLflow UI. Rotating the admin's password rotates every owner's.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from mlflow.exceptions import MlflowException
from mlflow.store.tracking.rest_store import RestStore
from mlflow.utils.rest_utils import MlflowHostCreds
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from search_spaces.contract import experiment_name
from search_spaces.mlflow_credentials import (
    read_private_text,
    use_credentials_file,
    write_credentials,
)
from sweep_service.owner_experiments import owner_experiment

MANAGE = "MANAGE"
PERMISSIONS = "/api/3.0/mlflow/users/permissions"  # MLflow 3's per-user grants


def derive_password(admin_password: str, owner: str) -> str:
    """``owner``'s MLflow password: 43 URL-safe characters, HMAC-SHA256 of the owner's
    name under the admin's password."""
    digest = hmac.new(admin_password.encode(), f"dicesweep owner {owner}".encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(digest.digest()).decode().rstrip("=")


class MlflowAccessError(RuntimeError):
    """The MLflow server refused the admin, or an owner cannot be an MLflow user."""


class MlflowAccessSettings(BaseSettings):
    """``DICESWEEP_MLFLOW_ADMIN_USERNAME`` and ``DICESWEEP_MLFLOW_ADMIN_PASSWORD_FILE``:
    the tracking server's admin; without the file, the service manages no MLflow users."""

    model_config = SettingsConfigDict(env_prefix="DICESWEEP_MLFLOW_", extra="ignore")

    admin_username: str = Field("admin", min_length=1)
    admin_password_file: Path | None = None


@dataclass(frozen=True)
class OwnerCredentials:
    """An owner's MLflow user and password, and the experiment it manages."""

    username: str
    password: str
    experiment_id: str


class OwnerAccess:
    """The admin's client of one basic-auth MLflow server (``tracking_uri``)."""

    def __init__(self, tracking_uri: str, admin_username: str, admin_password: str) -> None:
        self._admin = admin_username
        self._secret = admin_password.encode()
        self._http = httpx.Client(
            base_url=tracking_uri.rstrip("/"), auth=(admin_username, admin_password), timeout=30
        )
        # Experiments through MLflow's own REST store, signed in as the admin.
        creds = MlflowHostCreds(tracking_uri, username=admin_username, password=admin_password)
        self._experiments = RestStore(lambda: creds)

    @classmethod
    def from_settings(cls, tracking_uri: str) -> OwnerAccess | None:
        """The access the environment configures, or None (no admin password file, or a
        tracking store that is not an MLflow server).

        Raises:
            CredentialsFileError: the admin password file is missing or others may read it.
        """
        settings = MlflowAccessSettings()
        if settings.admin_password_file is None:
            return None
        if not tracking_uri.startswith(("http://", "https://")):
            return None
        password = read_private_text(
            settings.admin_password_file, "DICESWEEP_MLFLOW_ADMIN_PASSWORD_FILE"
        )
        return cls(tracking_uri, settings.admin_username, password)

    def password(self, owner: str) -> str:
        """The owner's MLflow password (``derive_password``)."""
        return derive_password(self._secret.decode(), owner)

    def ensure_owner(self, owner: str) -> OwnerCredentials:
        """Make ``owner`` an MLflow user (its password the derived one) with MANAGE on
        ``dicesweep/<owner>``, created when missing. Idempotent.

        Raises:
            MlflowAccessError: an owner named as the admin or holding ``:``; the server
                refused a request (the message names it and its answer).
        """
        if owner == self._admin or ":" in owner:
            raise MlflowAccessError(
                f"owner {owner!r} cannot be an MLflow user: a user name is not the admin's "
                "and holds no ':'"
            )
        password = self.password(owner)
        user = {"username": owner, "password": password}
        if self._call("GET", "/api/2.0/mlflow/users/get", params={"username": owner}) is None:
            self._call("POST", "/api/2.0/mlflow/users/create", json=user)
        else:  # kept in step with the admin's password
            self._call("PATCH", "/api/2.0/mlflow/users/update-password", json=user)
        try:
            experiment = owner_experiment(
                self._experiments, experiment_name(owner), self._secret.decode(), self._revoke_all
            )
        except MlflowException as error:
            raise MlflowAccessError(f"MLflow: the experiment of {owner!r}: {error}") from error
        self._grant_manage(owner, experiment)
        return OwnerCredentials(owner, password, experiment)

    def _grant_manage(self, username: str, experiment: str) -> None:
        """``username``'s permission on ``experiment`` made MANAGE (a grant is refused
        where one exists, so another level is revoked first); at that first grant,
        every other user's permission on it is revoked (``_revoke_all``)."""
        resource = {"username": username, "resource_type": "experiment", "resource_id": experiment}
        held = self._call("GET", f"{PERMISSIONS}/get", params=resource)
        if held is not None and held.get("permission") == MANAGE:
            return
        self._revoke_all(experiment, keep=username)
        try:
            self._call("POST", f"{PERMISSIONS}/grant", json={**resource, "permission": MANAGE})
        except MlflowAccessError as error:
            if "RESOURCE_ALREADY_EXISTS" not in str(error):
                raise
            self._call("POST", f"{PERMISSIONS}/revoke", json=resource)
            self._call("POST", f"{PERMISSIONS}/grant", json={**resource, "permission": MANAGE})

    def _revoke_all(self, experiment: str, keep: str | None = None) -> None:
        """Revoke every user's permission on ``experiment`` but ``keep``'s and the
        admins': any user may create experiments, and MLflow makes the creator its
        manager, so one who made ``dicesweep/<owner>`` keeps nothing of it once it is
        moved aside, nor of the owner's before its first grant."""
        listed = self._call("GET", "/api/2.0/mlflow/users/list") or {}
        for user in listed.get("users", []):
            if user["username"] == keep or user.get("is_admin"):
                continue
            resource = {
                "username": user["username"],
                "resource_type": "experiment",
                "resource_id": experiment,
            }
            held = self._call("GET", f"{PERMISSIONS}/get", params=resource)
            if held is not None and held.get("permission") not in (None, "NO_PERMISSIONS"):
                self._call("POST", f"{PERMISSIONS}/revoke", json=resource)

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any] | None:
        """The JSON answer; None for a 404 (no such user or experiment).

        Raises:
            MlflowAccessError: any other answer than 2xx, or no answer.
        """
        try:
            answer = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as error:
            raise MlflowAccessError(f"MLflow {method} {path}: {error}") from error
        if answer.status_code == 404:
            return None
        if answer.status_code == 401:
            raise MlflowAccessError(
                f"MLflow refused the admin {self._admin!r} (401): check "
                "DICESWEEP_MLFLOW_ADMIN_PASSWORD_FILE against the server's admin password"
            )
        if not answer.is_success:
            raise MlflowAccessError(
                f"MLflow {method} {path}: {answer.status_code} {answer.text[:300]}"
            )
        return dict(answer.json()) if answer.content else {}

    def sign_in_as_admin(self, folder: Path) -> None:
        """Make this process's own MLflow client (the service's reads of every owner's
        runs) sign in as the admin, through a credentials file in ``folder`` (0600)."""
        path = write_credentials(folder / "mlflow_admin", self._admin, self._secret.decode())
        use_credentials_file(path)

    def close(self) -> None:
        self._http.close()
