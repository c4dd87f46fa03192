"""Paths and endpoints shared by the service, the sweep driver and every trial.

All come from ``DICESWEEP_*`` environment variables; the defaults are the embedded
ones of docs/design: one directory (``DICESWEEP_HOME``) holding a SQLite store,
an MLflow SQLite backend with its artifacts, the Ray Tune storage and the
tokenisation cache, so a laptop with nothing installed runs a sweep.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class DicesweepSettings(BaseSettings):
    """Where dicesweep keeps its state; every unset path derives from ``home``."""

    model_config = SettingsConfigDict(env_prefix="DICESWEEP_", extra="ignore")

    home: Path = Field(default_factory=lambda: Path.home() / ".dicesweep")
    datasets_dir: Path | None = None  # default: $home/datasets
    database_url: str | None = None  # default: SQLite under $home
    mlflow_tracking_uri: str | None = None  # default: SQLite under $home, artifacts beside it
    ray_address: str | None = None  # None: start (or join) a local Ray head
    storage_path: Path | None = None  # Ray Tune storage; default: $home/ray_results
    cache_dir: Path | None = None  # tokenised data sets; default: $home/cache
    max_trials: int = Field(1000, ge=1)  # a sweep with more trials is refused

    @model_validator(mode="after")
    def _derive_defaults(self) -> DicesweepSettings:
        home = self.home.expanduser().resolve()
        self.home = home
        if self.datasets_dir is None:
            self.datasets_dir = home / "datasets"
        if self.database_url is None:
            self.database_url = f"sqlite:///{home / 'dicesweep.db'}"
        if self.mlflow_tracking_uri is None:
            self.mlflow_tracking_uri = f"sqlite:///{home / 'mlflow.db'}"
        if self.storage_path is None:
            self.storage_path = home / "ray_results"
        if self.cache_dir is None:
            self.cache_dir = home / "cache"
        return self

    @property
    def mlflow_artifact_root(self) -> Path:
        """Artifact folder used when the tracking store is the embedded SQLite one."""
        return self.home / "mlartifacts"
