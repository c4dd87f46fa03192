"""The service's settings: the shared ``DICESWEEP_*`` paths plus how the API is served."""

from __future__ import annotations

import ipaddress

from pydantic import Field

from search_spaces.settings import DicesweepSettings


class ServiceSettings(DicesweepSettings):
    """``DICESWEEP_HOST``, ``DICESWEEP_PORT`` and the API's limits, over the shared paths."""

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)  # 0: any free port
    max_request_bytes: int = Field(1_000_000, ge=1024)  # bigger bodies get 413
    auth_cache_s: float = Field(5.0, ge=0)  # how long a key's owner is remembered; 0: never
    api_threads: int = Field(8, ge=1, le=256)  # threads for the API's blocking work
    # A log line per HTTP request. Off by default: GET /metrics counts every request by
    # route and status, and a line per poll costs each request a tenth of its CPU.
    access_log: bool = False
    reconcile_interval_s: float = Field(2.0, gt=0)  # how often job states are polled
    max_resubmissions: int = Field(3, ge=0)  # a sweep whose driver died is resubmitted this often
    ray_dashboard_port: int = Field(8265, ge=0, le=65535)  # of the local head `serve` starts

    @property
    def loopback(self) -> bool:
        """Whether the API listens on a loopback address only (auth may then be off)."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False
