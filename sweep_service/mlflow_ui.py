"""Who may open the MLflow UI: ``dicesweep ui`` over the embedded store, and what
``dicesweep keys create`` tells an owner about signing in.

The embedded store (SQLite under the home) is open, as its UI on a loopback address
is, only while the service has no API key: every sweep is the loopback user's then.
Once a key exists, ``dicesweep ui`` runs MLflow's basic-auth app (its admin password
generated in ``<home>/mlflow-auth``, 0600) and makes each owner with a key a user
with MANAGE on ``dicesweep/<owner>``, as the service does on an MLflow server
(``sweep_service.mlflow_access``).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from pathlib import Path

import httpx
from sqlalchemy import select

from search_spaces.contract import experiment_name
from search_spaces.mlflow_credentials import CredentialsFileError
from search_spaces.settings import DicesweepSettings
from sweep_service.mlflow_access import MlflowAccessError, OwnerAccess, derive_password
from sweep_service.mlflow_auth_server import ADMIN_USERNAME, AuthServerFiles, prepare_auth_server
from sweep_service.owner_experiments import owner_experiment

log = logging.getLogger("dicesweep.ui")

AUTH_FOLDER = "mlflow-auth"  # under the home: the embedded UI's users and admin password
UI_START_TIMEOUT_S = 240.0


def embedded_auth(home: Path) -> AuthServerFiles:
    """The embedded UI's basic-auth files under ``home``, made at the first call."""
    return prepare_auth_server(home / AUTH_FOLDER)


def embedded_owner_experiment(settings: DicesweepSettings, name: str) -> str:
    """The id of the owner experiment ``name`` (``dicesweep/<owner>``) in the embedded
    store, as the service made it (``owner_experiments``: marked under the embedded
    UI's admin password, its artifacts under the home's folder; one of that name that
    a user of ``dicesweep ui`` made is moved aside)."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    files = embedded_auth(settings.home)
    secret = files.admin_password_file.read_text(encoding="utf-8").strip()
    settings.mlflow_artifact_root.mkdir(parents=True, exist_ok=True)
    root = settings.mlflow_artifact_root.as_uri()
    store = SqlAlchemyStore(str(settings.mlflow_tracking_uri), root)
    return owner_experiment(store, name, secret, location=root)


def owners_with_keys(settings: DicesweepSettings) -> list[str]:
    """The names of the owners that were ever given an API key (none: the service and
    the embedded UI are open on a loopback address)."""
    from sweep_service import store
    from sweep_service.store.models import ApiKey, Owner

    store.upgrade(settings.database_url)
    sessions = store.create_session_factory(store.create_engine_for(settings.database_url))
    with sessions() as session:
        query = select(Owner.name).join(ApiKey, ApiKey.owner_id == Owner.id).distinct()
        return sorted(session.scalars(query))


def grant_when_up(url: str, files: AuthServerFiles, owners: list[str]) -> threading.Thread:
    """A thread that, once the UI's server at ``url`` answers, makes each owner a user
    with MANAGE on its experiment, trying again for ``UI_START_TIMEOUT_S`` while the
    server refuses or is slow (its workers start one by one); what still fails then is
    logged."""

    def grant() -> None:
        deadline = time.monotonic() + UI_START_TIMEOUT_S
        password = files.admin_password_file.read_text(encoding="utf-8").strip()
        access = OwnerAccess(url, ADMIN_USERNAME, password)
        left = dict.fromkeys(owners, "the UI's server did not answer")
        while left and time.monotonic() < deadline:
            if _answers(f"{url}/health"):
                for owner in list(left):
                    try:
                        access.ensure_owner(owner)
                        del left[owner]
                    except MlflowAccessError as error:
                        left[owner] = str(error)
            time.sleep(1)
        for owner, reason in left.items():
            log.error("owner %s not granted its experiment in the MLflow UI: %s", owner, reason)
        access.close()

    thread = threading.Thread(target=grant, name="mlflow-ui-grants", daemon=True)
    thread.start()
    return thread


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


class OwnerExperimentError(RuntimeError):
    """An owner's MLflow experiment could not be made: no key is issued."""


def prepare_owner(settings: DicesweepSettings, owner: str) -> list[str]:
    """Make ``owner``'s experiment (``dicesweep/<owner>``, ``owner_experiments``) and,
    on an MLflow server the service administers (``DICESWEEP_MLFLOW_ADMIN_PASSWORD_FILE``),
    the owner's user with MANAGE on it; the lines ``dicesweep keys create`` prints on
    how the owner signs in to the MLflow UI (the embedded store's at the next
    ``dicesweep ui``). Called before the key is issued.

    Raises:
        OwnerExperimentError: the MLflow server refused, the owner cannot be a user,
            the admin's password file is missing or others may read it.
    """
    from mlflow.exceptions import MlflowException

    store = str(settings.mlflow_tracking_uri)
    try:
        if store.startswith(("http://", "https://")):
            access = OwnerAccess.from_settings(store)
            if access is None:
                return [
                    f"MLflow at {settings.mlflow_ui} has no access control set up here "
                    "(DICESWEEP_MLFLOW_ADMIN_PASSWORD_FILE is unset): see docs/mlflow.md"
                ]
            try:
                password = access.ensure_owner(owner).password
            finally:
                access.close()
            when = ""
        else:
            # MLflow logs its store's creation at INFO: noise in the command's output.
            quiet = logging.getLogger("mlflow")
            level = quiet.level
            quiet.setLevel(logging.WARNING)
            try:
                embedded_owner_experiment(settings, experiment_name(owner))
            finally:
                quiet.setLevel(level)
            admin = embedded_auth(settings.home).admin_password_file.read_text(encoding="utf-8")
            password = derive_password(admin.strip(), owner)
            when = " (restart `dicesweep ui` if it is running)"
    except (MlflowAccessError, CredentialsFileError, MlflowException) as error:
        raise OwnerExperimentError(
            f"no key made: owner {owner!r}'s MLflow experiment could not be made: {error}"
        ) from error
    return [
        f"MLflow UI: {settings.mlflow_ui}: sign in as {owner!r} with password {password}{when}; "
        f"it opens the experiment dicesweep/{owner} only. Shown here only: keep it with the key."
    ]


def protect_embedded_ui(settings: DicesweepSettings, host: str, port: int) -> list[str]:
    """The options that put the embedded UI behind MLflow's basic-auth app once the
    service has an API key (its settings put in this process's environment, for the
    server it starts, and each owner with a key granted its experiment once the server
    answers); none while it has none, said on standard error."""
    owners = owners_with_keys(settings)
    if not owners:
        print(
            "open to anyone who reaches it: the service has no API key (docs/mlflow.md)",
            file=sys.stderr,
            flush=True,
        )
        return []
    files = embedded_auth(settings.home)
    os.environ.update(files.server_env())
    reach = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    grant_when_up(f"http://{reach}:{port}", files, owners)
    print(
        f"sign-in required: each owner ({', '.join(owners)}) with the password "
        f"`dicesweep keys create` showed; the admin's is in {files.admin_password_file}",
        file=sys.stderr,
        flush=True,
    )
    return ["--app-name", "basic-auth"]
