"""Paths and endpoints shared by the service, the sweep driver and every trial.

All come from ``DICESWEEP_*`` environment variables; the defaults are embedded: one
directory (``DICESWEEP_HOME``) holding a SQLite store, an MLflow SQLite backend with
its artifacts, the Ray Tune storage and the tokenisation cache, so a laptop with
nothing installed runs a sweep.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# Ray's socket paths (``<home>/ray/session_<time>_<pid>/sockets/plasma_store``, 70
# characters after the home) must fit in 107 bytes (AF_UNIX): the home gets the rest.
MAX_RAY_HOME_CHARS = 36
DEFAULT_MLFLOW_UI = "http://127.0.0.1:5000"
# Under the home: the address ``dicesweep ui`` serves at, which the links follow (read
# at each use, so that a UI started on another port needs no restart of the service).
MLFLOW_UI_FILE = "mlflow-ui.url"


class DicesweepSettings(BaseSettings):
    """Where dicesweep keeps its state; every unset path derives from ``home``."""

    model_config = SettingsConfigDict(env_prefix="DICESWEEP_", extra="ignore")

    # Resolved first: every unset path below derives from it.
    home: Path = Field(default_factory=lambda: Path.home() / ".dicesweep")
    datasets_dir: Path = Field(default_factory=lambda d: d["home"] / "datasets")
    database_url: str = Field(default_factory=lambda d: f"sqlite:///{d['home'] / 'dicesweep.db'}")
    # SQLite under $home by default, artifacts beside it (see mlflow_artifact_root)
    mlflow_tracking_uri: str = Field(
        default_factory=lambda d: f"sqlite:///{d['home'] / 'mlflow.db'}"
    )
    # Where people open the MLflow UI over that store (``https://mlflow.example.org``),
    # for the links of the API and the pages; None: the tracking URI when it is an
    # MLflow server, else ``DEFAULT_MLFLOW_UI`` (where ``dicesweep ui`` serves by
    # default). Set it when the UI runs elsewhere: another host or port, a proxy.
    mlflow_ui_url: str | None = None
    # The cluster's GCS address (``host:6379``, as ``ray start --address`` takes it), for
    # ``dicesweep run`` and a sweep's driver; None: a local head of their own.
    ray_address: str | None = None
    # The cluster's Jobs API (``http://head:8265``), for ``dicesweep serve``; None: a
    # local head of the service's own.
    ray_jobs_url: str | None = None
    # Ray Tune's experiments and checkpoints: a folder every node sees (one machine, or a
    # shared volume mounted at the same path on every node), or an ``s3://bucket/prefix``
    # URI (the S3-compatible endpoint and keys from the standard AWS_ENDPOINT_URL,
    # AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, which Ray's pyarrow and MLflow's boto3
    # both read).
    storage_path: str = Field(default_factory=lambda d: str(d["home"] / "ray_results"))
    cache_dir: Path = Field(default_factory=lambda d: d["home"] / "cache")  # tokenised data
    max_trials: int = Field(1000, ge=1)  # a sweep with more trials is refused
    # Shared folders every owner's local data sets and model folders may lie in (JSON
    # list: DICESWEEP_DATA_ROOTS='["/data/team"]'). Unset: any folder (``dicesweep
    # run``); set, ``[]`` included (the service sends it to its jobs): every file a
    # driver or trial opens must resolve inside the sweep owner's own folders
    # (``search_spaces.data_roots.owner_folders``) or one of them.
    data_roots: list[Path] | None = None
    # The owner whose sweep a service's job runs (DICESWEEP_DATA_OWNER, set per job by
    # the service, ``data_roots.DATA_OWNER_ENV``): its own folders are the ones read.
    data_owner: str | None = None
    # How long a sweep's driver waits for a node that can hold one of its trials
    # (workers rejoining a restarted head, a cluster just started, an autoscaler adding
    # a node) before it exits with code 4, for the service to submit it again.
    cluster_wait_s: float = Field(300.0, ge=0)
    # The resources of the largest node the cluster can ever have, as JSON
    # (``{"CPU": 8, "GPU": 1}``): a trial asking more fails its sweep at once. None: an
    # autoscaler's node groups when Ray shows them (KubeRay, ``ray up``), else unknown,
    # and a sweep waits ``cluster_wait_s`` for such a node.
    cluster_max_resources: dict[str, float] | None = None
    # How long a sweep's driver waits for an MLflow server that does not answer at its
    # start (then it exits with code 5, for the service to submit it again).
    mlflow_outage_s: float = Field(3600.0, gt=0)
    # What ``training.precision: auto`` means on this cluster, stated for every sweep
    # (``search_spaces.precision_rule``); None: each sweep's driver measures it once on a
    # worker of the kind its trials get.
    auto_precision: Literal["fp32", "bf16", "fp16"] | None = None

    @field_validator("home")
    @classmethod
    def _absolute_home(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @field_validator("datasets_dir", "cache_dir")
    @classmethod
    def _absolute_path(cls, value: Path) -> Path:
        # Jobs and trials run in other folders: a relative path would point elsewhere there.
        return value.expanduser().absolute()

    @field_validator("storage_path")
    @classmethod
    def _storage(cls, value: str) -> str:
        if "://" in value:
            if not value.startswith(("s3://", "gs://", "abfs://")):
                raise ValueError(
                    f"{value!r}: DICESWEEP_STORAGE_PATH is a folder or an s3://, gs:// or "
                    "abfs:// URI"
                )
            return value.rstrip("/")
        return str(Path(value).expanduser().absolute())

    @field_validator("ray_address")
    @classmethod
    def _gcs_address(cls, value: str | None) -> str | None:
        if value is not None and value.startswith(("http://", "https://")):
            raise ValueError(
                f"{value!r} is a Jobs API URL: DICESWEEP_RAY_ADDRESS is the cluster's GCS "
                "address (host:port); a Jobs API URL goes in DICESWEEP_RAY_JOBS_URL"
            )
        return value

    @field_validator("mlflow_ui_url")
    @classmethod
    def _ui_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(
                f"{value!r} is not a URL: DICESWEEP_MLFLOW_UI_URL is where a browser opens "
                "the MLflow UI, e.g. http://127.0.0.1:5000"
            )
        return value.rstrip("/") if value else value

    @field_validator("ray_jobs_url")
    @classmethod
    def _jobs_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(
                f"{value!r} is not a URL: DICESWEEP_RAY_JOBS_URL is the cluster's Jobs API, "
                "e.g. http://head:8265"
            )
        return value

    @property
    def mlflow_ui(self) -> str:
        """The MLflow UI's address for links: ``mlflow_ui_url``, else the tracking URI
        when it is an MLflow server, else where ``dicesweep ui`` last said it serves
        (``MLFLOW_UI_FILE`` under the home), else ``DEFAULT_MLFLOW_UI``. Never a store
        path (``sqlite:...``), which no browser opens."""
        if self.mlflow_ui_url:
            return self.mlflow_ui_url
        if self.mlflow_tracking_uri.startswith(("http://", "https://")):
            return self.mlflow_tracking_uri.rstrip("/")
        return self.served_mlflow_ui() or DEFAULT_MLFLOW_UI

    def served_mlflow_ui(self) -> str | None:
        """The address ``dicesweep ui`` wrote under the home, if it did (an unreadable or
        malformed file is ignored: links then go to the default)."""
        try:
            text = (self.home / MLFLOW_UI_FILE).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return None
        return text.rstrip("/") if text.startswith(("http://", "https://")) else None

    @property
    def mlflow_artifact_root(self) -> Path:
        """Artifact folder used when the tracking store is the embedded SQLite one."""
        return self.home / "mlartifacts"


# The shared settings a sweep's driver and its trials read, forwarded to them by name;
# never a store's URL (its password) nor the cluster addresses (drivers join the
# cluster they run on), nor the data owner (each job's own), nor anything else in the
# environment (API keys, tokens).
NOT_FORWARDED = frozenset({"database_url", "ray_address", "ray_jobs_url", "data_owner"})
FORWARDED_SETTINGS = tuple(
    f"DICESWEEP_{name.upper()}"
    for name in DicesweepSettings.model_fields
    if name not in NOT_FORWARDED
)
# Hugging Face's settings a trial's downloads follow (its token is no setting: it
# travels in a file, ``HF_TOKEN_PATH``, or in the environment the workers inherit).
HF_SETTINGS = (
    "HF_HOME",
    "HF_HUB_CACHE",
    "HF_DATASETS_CACHE",
    "HF_ENDPOINT",
    "HF_HUB_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "HF_HUB_DISABLE_TELEMETRY",
    "HF_HUB_ETAG_TIMEOUT",
    "HF_HUB_DOWNLOAD_TIMEOUT",
    "HF_TOKEN_PATH",
)


def forwarded_settings() -> dict[str, str]:
    """This environment's settings that a Ray runtime environment may carry (Ray logs
    it, and the Jobs API shows a job's): ``FORWARDED_SETTINGS`` and ``HF_SETTINGS``."""
    names = {*FORWARDED_SETTINGS, *HF_SETTINGS}
    return {k: v for k, v in os.environ.items() if k in names}


def isolate_ray(home: Path) -> None:
    """Make every Ray process this one starts (a head, a local ``ray.init``, their
    workers) keep its temp folder, session files and auth token under ``home``, never
    in the shared ``/tmp/ray`` or ``~/.ray``: a second head on the machine is never
    joined by mistake, nor ours by its users.

    Sets ``RAY_TMPDIR`` to ``home`` (Ray uses ``<home>/ray``), token auth on unless the
    operator chose (``RAY_AUTH_MODE``), and ``RAY_AUTH_TOKEN_PATH`` to
    ``<home>/ray/auth_token`` (made on first use, readable by its owner only, kept for
    the next start) unless a token is given (``RAY_AUTH_TOKEN`` or its path).

    Raises:
        ValueError: ``home`` is too long a path for Ray's sockets under it.
        UnsafeSecretError: the token's file is another user's, or others may read it.
    """
    if len(str(home)) > MAX_RAY_HOME_CHARS:
        raise ValueError(
            f"DICESWEEP_HOME {str(home)!r} has {len(str(home))} characters; Ray's socket "
            f"paths under it need at most {MAX_RAY_HOME_CHARS}: choose a shorter one"
        )
    os.environ["RAY_TMPDIR"] = str(home)
    os.environ.setdefault("RAY_AUTH_MODE", "token")
    if os.environ["RAY_AUTH_MODE"].lower() != "token":
        return
    if "RAY_AUTH_TOKEN" in os.environ:
        return
    if "RAY_AUTH_TOKEN_PATH" in os.environ:
        given = Path(os.environ["RAY_AUTH_TOKEN_PATH"])
        if given.exists():  # else Ray says it is missing
            check_private(given, "RAY_AUTH_TOKEN_PATH")
        return
    path = home / "ray" / "auth_token"
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):  # a token made before: kept
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as token:
            token.write(secrets.token_hex(32))  # 256 bits, as Ray makes its own
    check_private(path, "Ray's auth token")
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(path)


class UnsafeSecretError(RuntimeError):
    """A file holding a secret that someone else owns or others may read."""


def check_private(path: Path, what: str) -> None:
    """Refuse a secret's file that another user owns (they chose the token) or that
    group or others may read or write (they know it, or may change it).

    Raises:
        UnsafeSecretError: the message says what to do.
    """
    found = path.stat()
    if found.st_uid != os.getuid():
        raise UnsafeSecretError(
            f"{what} at {path} belongs to another user (uid {found.st_uid}): "
            "remove it, and a new one is made"
        )
    if found.st_mode & 0o077:
        raise UnsafeSecretError(
            f"{what} at {path} may be read by others (mode {found.st_mode & 0o777:o}): "
            f"chmod 600 {path}, or remove it and a new one is made"
        )


def isolate_local_ray(settings: DicesweepSettings) -> None:
    """``isolate_ray`` under ``settings.home`` when this process is to start a local head
    of its own (no ``DICESWEEP_RAY_ADDRESS``, not inside a Ray Job). Call it before
    anything imports Ray: Ray reads its auth settings once, on import."""
    if not settings.ray_address and not os.environ.get("RAY_ADDRESS"):
        isolate_ray(settings.home)
