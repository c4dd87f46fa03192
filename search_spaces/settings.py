"""Paths and endpoints shared by the service, the sweep driver and every trial.

All come from ``DICESWEEP_*`` environment variables; the defaults are the embedded
ones of docs/design: one directory (``DICESWEEP_HOME``) holding a SQLite store,
an MLflow SQLite backend with its artifacts, the Ray Tune storage and the
tokenisation cache, so a laptop with nothing installed runs a sweep.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


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
    ray_address: str | None = None  # None: start (or join) a local Ray head
    storage_path: Path = Field(default_factory=lambda d: d["home"] / "ray_results")  # Ray Tune
    cache_dir: Path = Field(default_factory=lambda d: d["home"] / "cache")  # tokenised data
    max_trials: int = Field(1000, ge=1)  # a sweep with more trials is refused

    @field_validator("home")
    @classmethod
    def _absolute_home(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @property
    def mlflow_artifact_root(self) -> Path:
        """Artifact folder used when the tracking store is the embedded SQLite one."""
        return self.home / "mlartifacts"
