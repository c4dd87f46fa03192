"""The files an MLflow server needs to run its basic-auth app, made once in a folder.

``mlflow server --app-name basic-auth`` reads its settings from the file
``MLFLOW_AUTH_CONFIG_PATH`` names (users and permissions in ``database_uri``; MLflow
ships no admin password and refuses to start without one) and signs its forms'
CSRF tokens with ``MLFLOW_FLASK_SERVER_SECRET_KEY``. At the first start the folder
gets a random admin password and secret key, each 0600, never a documented default;
later starts reuse them (MLflow creates the admin user only in an empty user store).
Every user but the admin starts with no permission (``NO_PERMISSIONS``), and only the
admin lists users and roles (``mlflow_roster``).

``dicesweep ui`` uses this for the embedded store; the MLflow image does the same in
``infra/docker/mlflow-auth.sh``.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from search_spaces.mlflow_credentials import write_private_text

ADMIN_USERNAME = "admin"
ADMIN_PASSWORD_FILE = "admin_password"
SECRET_KEY_FILE = "flask_secret_key"
CONFIG_FILE = "basic_auth.ini"
# Named, not imported: importing MLflow's auth app reads its config and opens its store.
AUTHORIZATION_FUNCTION = "sweep_service.mlflow_roster:authenticate"


@dataclass(frozen=True)
class AuthServerFiles:
    """Where the basic-auth app's settings lie, and the environment that names them."""

    folder: Path

    @property
    def admin_password_file(self) -> Path:
        return self.folder / ADMIN_PASSWORD_FILE

    @property
    def config_file(self) -> Path:
        return self.folder / CONFIG_FILE

    def server_env(self) -> dict[str, str]:
        """What ``mlflow server --app-name basic-auth`` needs in its environment (the
        admin's password stays in the 0600 config file)."""
        secret_key = (self.folder / SECRET_KEY_FILE).read_text(encoding="utf-8").strip()
        return {
            "MLFLOW_AUTH_CONFIG_PATH": str(self.config_file),
            "MLFLOW_FLASK_SERVER_SECRET_KEY": secret_key,
        }


def prepare_auth_server(folder: Path, database_uri: str | None = None) -> AuthServerFiles:
    """The folder (0700) holding the admin's password and the secret key (made at the
    first call, 0600) and the basic-auth app's config file (0600, written each time).

    ``database_uri``: where users and permissions live; by default SQLite in the folder.
    """
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    files = AuthServerFiles(folder)
    for name in (ADMIN_PASSWORD_FILE, SECRET_KEY_FILE):
        if not (folder / name).exists():
            write_private_text(folder / name, secrets.token_urlsafe(32))
    password = files.admin_password_file.read_text(encoding="utf-8").strip()
    uri = database_uri or f"sqlite:///{folder / 'basic_auth.db'}"
    config = (
        "[mlflow]\n"
        "default_permission = NO_PERMISSIONS\n"
        f"database_uri = {uri}\n"
        f"admin_username = {ADMIN_USERNAME}\n"
        f"admin_password = {password}\n"
        f"authorization_function = {AUTHORIZATION_FUNCTION}\n"
    )
    write_private_text(files.config_file, config)
    return files
