"""MLflow credentials read from a file, never from the environment.

An MLflow server running its basic-auth app (``mlflow server --app-name basic-auth``)
wants a user and a password on every request. MLflow's own client reads them from
``MLFLOW_TRACKING_USERNAME``/``MLFLOW_TRACKING_PASSWORD``, which the Ray Jobs API
shows and Ray's runtime-environment agent logs. Instead, a process sets
``MLFLOW_TRACKING_AUTH=dicesweep-file`` and ``DICESWEEP_MLFLOW_CREDENTIALS`` to the
path of a file (0600) holding ``user:password`` on one line; this provider, registered
as the entry point ``mlflow.request_auth_provider: dicesweep-file``, reads it for each
request. Neither variable is a secret.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

PROVIDER = "dicesweep-file"
CREDENTIALS_ENV = "DICESWEEP_MLFLOW_CREDENTIALS"


class CredentialsFileError(ValueError):
    """The credentials file is missing, readable by others, or not ``user:password``."""


def write_private_text(path: Path, text: str) -> Path:
    """Write ``text`` and a newline to ``path``, created 0600 (a new folder 0700)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)  # an existing file keeps its mode through O_CREAT
    with os.fdopen(descriptor, "w", encoding="utf-8") as written:
        written.write(text.rstrip("\n") + "\n")
    return path


def write_credentials(path: Path, username: str, password: str) -> Path:
    """Write ``user:password`` to ``path``, 0600.

    Raises:
        CredentialsFileError: an empty user name or password, or a user name holding ``:``
            (HTTP basic auth's separator).
    """
    if ":" in username or not username or not password:
        raise CredentialsFileError(
            f"MLflow user {username!r}: a user name is non-empty without ':', a password non-empty"
        )
    return write_private_text(path, f"{username}:{password}")


def read_private_text(path: Path, setting: str) -> str:
    """The stripped text of ``path``, a file no other user may read: its owner's, or
    its group's too (a Kubernetes Secret mounted under the pod's ``fsGroup``);
    ``setting`` names where the path came from, for the message.

    Raises:
        CredentialsFileError: no such file, others may read it, or it is empty.
    """
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8").strip()
    except OSError as error:
        raise CredentialsFileError(f"{setting} {path}: {error.strerror}") from error
    if mode & stat.S_IRWXO:
        raise CredentialsFileError(f"{setting} {path}: others may read it (chmod 600)")
    if not text:
        raise CredentialsFileError(f"{setting} {path}: empty")
    return text


def read_credentials(path: Path) -> tuple[str, str]:
    """``(user, password)`` from ``path``.

    Raises:
        CredentialsFileError: see ``read_private_text``; or not ``user:password``.
    """
    username, separator, password = read_private_text(path, CREDENTIALS_ENV).partition(":")
    if not (separator and username and password):
        raise CredentialsFileError(f"{CREDENTIALS_ENV} {path}: not one line 'user:password'")
    return username, password


def use_credentials_file(path: Path) -> None:
    """Make this process's MLflow requests (and its children's) sign in with the
    credentials in ``path``: the file is checked now, its path and the provider's name
    set in the environment (the password stays in the file).

    Raises:
        CredentialsFileError: see ``read_credentials``.
    """
    absolute = path.resolve()
    read_credentials(absolute)
    os.environ[CREDENTIALS_ENV] = str(absolute)
    os.environ["MLFLOW_TRACKING_AUTH"] = PROVIDER


def adopt_job_credentials() -> None:
    """A Ray job's credentials file (``DICESWEEP_MLFLOW_CREDENTIALS``, relative to the
    job's working folder, where Ray unpacked it under the node's umask) made 0600 and
    named by its absolute path, so that MLflow's requests find it from any folder; a
    no-op when the job has none.

    Raises:
        CredentialsFileError: see ``read_credentials``.
    """
    named = os.environ.get(CREDENTIALS_ENV)
    if not named:
        return
    path = Path(named).resolve()
    if path.is_file() and path.stat().st_uid == os.getuid():
        path.chmod(0o600)
    use_credentials_file(path)


class FileCredentialsProvider:
    """MLflow's request-auth provider ``dicesweep-file``: HTTP basic auth with the
    credentials in the file ``DICESWEEP_MLFLOW_CREDENTIALS`` names (read per request,
    so a rotated password is picked up)."""

    def get_name(self) -> str:
        return PROVIDER

    def get_auth(self) -> Any:
        """A ``requests`` auth object.

        Raises:
            CredentialsFileError: the variable is unset or the file unusable.
        """
        from requests.auth import HTTPBasicAuth

        path = os.environ.get(CREDENTIALS_ENV)
        if not path:
            raise CredentialsFileError(f"MLFLOW_TRACKING_AUTH={PROVIDER} needs {CREDENTIALS_ENV}")
        return HTTPBasicAuth(*read_credentials(Path(path)))
