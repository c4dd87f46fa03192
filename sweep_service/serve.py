"""``dicesweep serve``: the API, its store, the reconciler and, by default, a local Ray head.

With ``DICESWEEP_RAY_ADDRESS`` unset the service starts a Ray head in its own
process (with the Jobs API on ``ray_dashboard_port``) and stops it when it
stops; the sweeps' drivers run as Ray Jobs on it and track to the MLflow store
under ``DICESWEEP_HOME``. With it set (``http://head:8265``), it submits to that
cluster. Either way the store is migrated to the latest schema first.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sweep_service.settings import ServiceSettings

log = logging.getLogger("dicesweep.serve")


def job_environment(settings: ServiceSettings) -> dict[str, str]:
    """What every sweep driver needs to find the data, the tracking store and storage."""
    env = {k: v for k, v in os.environ.items() if k.startswith(("DICESWEEP_", "HF_"))}
    env.update(
        DICESWEEP_HOME=str(settings.home),
        DICESWEEP_DATASETS_DIR=str(settings.datasets_dir),
        DICESWEEP_MLFLOW_TRACKING_URI=str(settings.mlflow_tracking_uri),
        DICESWEEP_STORAGE_PATH=str(settings.storage_path),
    )
    env.pop("DICESWEEP_RAY_ADDRESS", None)  # drivers join the cluster their job runs on
    return env


@contextmanager
def ray_jobs_address(settings: ServiceSettings) -> Iterator[str]:
    """The Jobs API address: the configured cluster, or a local head owned until exit."""
    if settings.ray_address:
        yield settings.ray_address
        return
    import ray

    context: Any = ray.init(
        include_dashboard=True,
        dashboard_host="127.0.0.1",
        dashboard_port=settings.ray_dashboard_port,
        log_to_driver=False,
    )
    try:
        yield f"http://{context.dashboard_url}"
    finally:
        ray.shutdown()


def serve(settings: ServiceSettings) -> None:
    """Run until interrupted; everything started here is stopped on the way out."""
    import uvicorn
    from mlflow.tracking import MlflowClient

    from sweep_service.api import create_app
    from sweep_service.reconciler import Reconciler
    from sweep_service.runner import RayJobRunner
    from sweep_service.store import create_engine_for, create_session_factory, upgrade

    settings.home.mkdir(parents=True, exist_ok=True)
    upgrade(settings.database_url)
    sessions = create_session_factory(create_engine_for(settings.database_url))
    with ray_jobs_address(settings) as address:
        runner = RayJobRunner(address, job_environment(settings), python=sys.executable)
        tracking = MlflowClient(str(settings.mlflow_tracking_uri))
        app = create_app(settings, session_factory=sessions, runner=runner, tracking=tracking)
        reconciler = Reconciler(
            sessions, runner, settings.max_resubmissions, settings.reconcile_interval_s
        )
        reconciler.start()
        log.info("Ray Jobs at %s; store %s", address, settings.database_url)
        try:
            uvicorn.run(app, host=settings.host, port=settings.port, log_level="info")
        finally:
            reconciler.stop()
