"""``dicesweep serve``: the API, its store, the reconciler and, by default, a local Ray head.

With ``DICESWEEP_RAY_JOBS_URL`` unset the service starts a local Ray head as a child
process (``ray start --head --block``, the Jobs API on ``ray_dashboard_port``) and
stops it, with every process it started, when it stops; the head keeps its temp
folder, session files and auth token under ``DICESWEEP_HOME`` (``isolate_ray``),
the sweeps' drivers run as Ray Jobs on it and track to the MLflow store under
``DICESWEEP_HOME``. With it set (``http://head:8265``), it submits to that cluster.
Either way the API process itself never joins a cluster: it only talks to the Jobs
API over HTTP, as it does in deployment. The store is migrated to the latest schema first.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

from search_spaces.settings import check_private, forwarded_settings
from search_spaces.versions import SUBMITTER_ENV, skew, stack_versions
from sweep_service.home import make_home_private
from sweep_service.local_head import HEAD_START_TIMEOUT_S, HF_TOKENS, local_ray_head
from sweep_service.mlflow_access import OwnerAccess
from sweep_service.settings import ServiceSettings

log = logging.getLogger("dicesweep.serve")


def job_environment(settings: ServiceSettings) -> dict[str, str]:
    """The environment of every sweep's job: the service's versions (the driver refuses
    another release); for the local head only, the service's own paths, where reads
    are confined (``DICESWEEP_DATA_ROOTS``) and Hugging Face's settings, by name.

    The Jobs API shows a job's environment to anyone who can read it, and Ray's runtime
    environment agent logs it: no secret goes in. A Hugging Face token reaches the
    trials as a file under the home, readable by the service's user only
    (``HF_TOKEN_PATH``, read by ``huggingface_hub``). A cluster's nodes carry their own
    settings (their images' environment: the data root and the roots reads are confined
    to, the tracking URI, the storage path, a token), so nothing local to the API's
    machine is sent to one.
    """
    submitter = {SUBMITTER_ENV: json.dumps(stack_versions())}
    if settings.ray_jobs_url:
        return submitter
    env = forwarded_settings()
    env.update(submitter)
    env.update(
        DICESWEEP_HOME=str(settings.home),
        DICESWEEP_DATASETS_DIR=str(settings.datasets_dir),
        DICESWEEP_MLFLOW_TRACKING_URI=str(settings.mlflow_tracking_uri),
        DICESWEEP_STORAGE_PATH=str(settings.storage_path),
        # Set, even empty: the driver and trials read only under the roots checked here.
        DICESWEEP_DATA_ROOTS=json.dumps([str(root) for root in settings.data_roots]),
    )
    token_file = hf_token_file(settings.home)
    if token_file is not None:
        env["HF_TOKEN_PATH"] = str(token_file)
    return env


def hf_token_file(home: Path) -> Path | None:
    """The service's Hugging Face token (``HF_TOKEN``) written to ``<home>/secrets/
    hf_token``, mode 0600, for the trials to read; None when it has none."""
    token = next((os.environ[name] for name in HF_TOKENS if os.environ.get(name)), None)
    if token is None:
        return None
    folder = home / "secrets"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    path = folder / "hf_token"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as written:
        written.write(token)
    check_private(path, "the Hugging Face token")
    return path


def cluster_ray_version(address: str) -> str:
    """The Ray version the Jobs API at ``address`` reports.

    Raises:
        RuntimeError: it does not answer.
    """
    headers = {}
    token = os.environ.get("RAY_AUTH_TOKEN")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(f"{address.rstrip('/')}/api/version", headers=headers)
    deadline = time.monotonic() + HEAD_START_TIMEOUT_S
    while True:
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return str(json.load(answer)["ray_version"])
        except (OSError, ValueError, KeyError) as error:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the Ray Jobs API at {address} (DICESWEEP_RAY_JOBS_URL) did not answer "
                    f"within {HEAD_START_TIMEOUT_S:.0f} s: {error}"
                ) from error
            time.sleep(2)


def check_cluster_version(address: str) -> None:
    """Refuse to serve a cluster of another Ray release than the service's.

    Raises:
        RuntimeError: the versions differ (the message names both).
    """
    ours = stack_versions()
    mismatch = skew(
        {"ray": ours["ray"]},
        {"ray": cluster_ray_version(address)},
        "the service",
        f"the Ray cluster at {address}",
    )
    if mismatch:
        raise RuntimeError(mismatch)


@contextmanager
def ray_jobs_address(settings: ServiceSettings) -> Iterator[str]:
    """The Jobs API address: the configured cluster (its Ray version checked first), or a
    local head owned until exit."""
    if settings.ray_jobs_url:
        check_cluster_version(settings.ray_jobs_url)
        yield settings.ray_jobs_url
        return
    with local_ray_head(settings) as address:
        yield address


def mlflow_access(settings: ServiceSettings) -> OwnerAccess | None:
    """The admin's access to an MLflow server running its basic-auth app, the service's
    own MLflow client signed in with it; None (said in the log when the tracking store
    is a server) without ``DICESWEEP_MLFLOW_ADMIN_PASSWORD_FILE``.

    Raises:
        CredentialsFileError: the admin's password file is missing or others may read it.
    """
    store = str(settings.mlflow_tracking_uri)
    access = OwnerAccess.from_settings(store)
    if access is not None:
        access.sign_in_as_admin(settings.home / "secrets")
    elif store.startswith(("http://", "https://")):
        log.warning(
            "the MLflow server %s is used without DICESWEEP_MLFLOW_ADMIN_PASSWORD_FILE: owners "
            "are not MLflow users and their experiments are not isolated (docs/mlflow.md)",
            store,
        )
    return access


def uvicorn_options(settings: ServiceSettings) -> dict[str, Any]:
    """How uvicorn serves the API. Behind a TLS proxy, that proxy's X-Forwarded-Proto
    and X-Forwarded-For give the scheme (the sign-in cookie's ``Secure``) and the client
    (the failed sign-in limit, counted per client as the proxy reports it), believed
    from ``trusted_proxies`` only."""
    return {
        "host": settings.host,
        "port": settings.port,
        "log_level": "info",
        "access_log": settings.access_log,
        # No trusted proxy (the default): the headers are believed from no one.
        "proxy_headers": bool(settings.trusted_proxies),
        "forwarded_allow_ips": settings.trusted_proxies,
    }


def stop_on_sigterm() -> None:
    """SIGTERM (``docker stop``, ``kill``, systemd, ``make demo`` stopped) unwinds as
    Ctrl-C does, so that the ``finally`` blocks stop what the service started (its Ray
    head's process group), and ends with status 0: it is the way to stop the service,
    not a failure (``make demo`` would report 143 as its error). uvicorn handles the
    signal while it serves, then restores this handler and raises the signal again;
    Python's default would end the process before they run."""

    def exit_on(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, exit_on)


def serve(settings: ServiceSettings) -> None:
    """Run until interrupted; everything started here is stopped on the way out."""
    import uvicorn
    from mlflow.tracking import MlflowClient

    from sweep_service.api import create_app
    from sweep_service.progress import close_open_runs, read_progress
    from sweep_service.reconciler import Reconciler
    from sweep_service.runner import RayJobRunner
    from sweep_service.store import (
        create_engine_for,
        create_session_factory,
        normalise_url,
        upgrade,
    )

    stop_on_sigterm()
    make_home_private(settings.home)
    upgrade(settings.database_url)
    # The pool holds a connection for every request thread and the reconciler's, so
    # none is opened and closed per request.
    engine = create_engine_for(settings.database_url, pool_size=settings.api_threads + 2)
    sessions = create_session_factory(engine)
    with ray_jobs_address(settings) as address:
        # A cluster runs the driver with its image's interpreter; a local head with ours.
        python = "python" if settings.ray_jobs_url else sys.executable
        access = mlflow_access(settings)
        local = None
        if not str(settings.mlflow_tracking_uri).startswith(("http://", "https://")):
            from sweep_service.mlflow_ui import embedded_owner_experiment

            local = partial(embedded_owner_experiment, settings)
        env = job_environment(settings)
        runner = RayJobRunner(address, env, python=python, access=access, local_experiments=local)
        for name, value in settings.mlflow_request_env().items():
            os.environ.setdefault(name, value)
        tracking = MlflowClient(str(settings.mlflow_tracking_uri))
        app = create_app(settings, session_factory=sessions, runner=runner, tracking=tracking)
        reconciler = Reconciler(
            sessions,
            runner,
            settings.max_resubmissions,
            settings.reconcile_interval_s,
            progress=lambda sweep: read_progress(
                tracking, sweep.id, sweep.mlflow_parent_run_id, sweep.mlflow_experiment_id
            ),
            close_runs=lambda sweep, status, reason: close_open_runs(
                tracking, sweep.id, status, reason
            ),
        )
        reconciler.start()
        shown = normalise_url(settings.database_url).render_as_string(hide_password=True)
        log.info("Ray Jobs at %s; store %s", address, shown)
        # What start-up loaded (Ray, MLflow, SQLAlchemy: a few hundred thousand objects)
        # lives as long as the process; frozen, the garbage collector's full passes skip
        # it, instead of pausing every request in flight for tens of milliseconds.
        gc.collect()
        gc.freeze()
        try:
            uvicorn.run(app, **uvicorn_options(settings))
        finally:
            reconciler.stop()
