"""The service's settings: the shared ``DICESWEEP_*`` paths plus how the API is served."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from pydantic import Field

from search_spaces.settings import DicesweepSettings


class ServiceSettings(DicesweepSettings):
    """``DICESWEEP_HOST``, ``DICESWEEP_PORT`` and the API's limits, over the shared paths."""

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)  # 0: any free port
    # Shared folders every owner's local data sets and model folders may lie in, besides
    # the owner's own (``<datasets_dir>/<owner>``, ``<home>/datasets/<owner>``) (JSON
    # list: DICESWEEP_DATA_ROOTS='["/data/team"]'); the service always confines, so
    # unset means each owner's own folders only.
    data_roots: list[Path] = Field(default_factory=list)
    max_request_bytes: int = Field(1_000_000, ge=1024)  # bigger bodies get 413
    # A resolved spec is stored and sent to the cluster whole: larger ones get 413.
    max_spec_bytes: int = Field(256 * 1024, ge=1024)
    auth_cache_s: float = Field(5.0, ge=0)  # how long a key's owner is remembered; 0: never
    # Threads that run request handlers (the store's connection pool holds as many,
    # plus the reconciler's): more only queue on the GIL and the store (docs/benchmarks.md).
    api_threads: int = Field(8, ge=1, le=256)
    access_log: bool = False  # a log line per HTTP request (GET /metrics counts them anyway)
    # The owners whose keys read GET /metrics, every owner's counts together (JSON list:
    # DICESWEEP_METRICS_OWNERS='["ops"]'); the owner local of a loopback service too.
    metrics_owners: list[str] = Field(default_factory=list)
    reconcile_interval_s: float = Field(2.0, gt=0)  # how often job states are polled
    max_resubmissions: int = Field(3, ge=0)  # a sweep whose driver died is resubmitted this often
    ray_dashboard_port: int = Field(8265, ge=0, le=65535)  # of the local head `serve` starts
    # How long the service waits for one MLflow request, never retried: then a route
    # answers 503 tracking_unavailable and the progress pass is skipped. (MLflow's own
    # default, 120 s and 7 retries with backoff, would hold every sweep's status for
    # minutes.)
    mlflow_timeout_s: int = Field(5, ge=1, le=600)

    def mlflow_request_env(self) -> dict[str, str]:
        """The MLflow client's settings for the service's requests (environment
        variables, the only way MLflow takes them); an operator's own values win."""
        return {
            "MLFLOW_HTTP_REQUEST_TIMEOUT": str(self.mlflow_timeout_s),
            "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
        }

    # Wrong API keys (sign-in form or API) a client may send per window before it is
    # refused with 429 until the window has passed.
    sign_in_failures: int = Field(10, ge=1)
    sign_in_window_s: float = Field(60.0, gt=0)
    # Proxies whose X-Forwarded-For/-Proto are believed (uvicorn's forwarded_allow_ips:
    # comma-separated addresses or networks, "*" for any): the TLS ingress in front.
    # None by default: believed from anyone, the header names whatever client the
    # sender likes, and each wrong key would count against another client.
    trusted_proxies: str = ""
    # Where people reach the service (https://sweeps.example.org); an https one makes
    # the sign-in cookie Secure whatever scheme the last hop used.
    public_url: str | None = None

    @property
    def loopback(self) -> bool:
        """Whether the API listens on a loopback address only (auth may then be off)."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False
