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
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from search_spaces.settings import check_private, forwarded_settings, isolate_ray
from search_spaces.versions import SUBMITTER_ENV, skew, stack_versions
from sweep_service.settings import ServiceSettings

log = logging.getLogger("dicesweep.serve")
HEAD_START_TIMEOUT_S = 180.0  # a cold head on 2 CPUs takes 10-30 s
HEAD_STOP_TIMEOUT_S = 60.0


HF_TOKENS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
# Secrets the service may hold that no process it starts needs in its environment.
SERVICE_SECRETS = ("DICESWEEP_API_KEY", "DICESWEEP_DATABASE_URL", *HF_TOKENS)


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


# The home's stores: its user's only. (Ray's token is not made private here but
# refused when others may read it: they may know it already.)
PRIVATE_FILES = ("dicesweep.db", "mlflow.db")


def make_home_private(home: Path) -> None:
    """The home and what the service makes in it, its user's only: a umask of 077 for
    this process and its children (the Ray head, drivers, trials), the home 0700, and
    the stores a former version left readable, 0600."""
    os.umask(0o077)
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    home.chmod(0o700)
    for relative in PRIVATE_FILES:
        for path in home.glob(f"{relative}*"):  # SQLite's -wal and -shm files too
            if path.is_file() and path.stat().st_uid == os.getuid():
                path.chmod(0o600)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def ray_executable() -> str:
    """The ``ray`` command of this interpreter's environment (else the one on PATH)."""
    beside = Path(sys.executable).with_name("ray")
    found = str(beside) if beside.exists() else shutil.which("ray")
    if found is None:
        raise RuntimeError("the 'ray' command is missing: install dicesweep[service]")
    return found


def head_command(dashboard_port: int, gcs_port: int) -> list[str]:
    """``ray start --head --block`` on loopback, its Jobs API on ``dashboard_port``.
    The GCS, client-server and agent ports are free ones, so the head never meets
    another service's default port (6379 is often Redis) or a second head here."""
    return [
        ray_executable(),
        "start",
        "--head",
        "--block",
        "--node-ip-address=127.0.0.1",
        f"--port={gcs_port}",
        "--include-dashboard=true",
        "--dashboard-host=127.0.0.1",
        f"--dashboard-port={dashboard_port}",
        f"--dashboard-agent-listen-port={_free_port()}",
        f"--ray-client-server-port={_free_port()}",
        "--disable-usage-stats",
    ]


HEAD_START_ATTEMPTS = 3  # a head that exits at once (a free port taken meanwhile) is tried again


@contextmanager
def local_ray_head(settings: ServiceSettings) -> Iterator[str]:
    """A Ray head in a child process until exit; yields its Jobs API address. Its
    output goes to ``<home>/logs/ray-head.log``. A head that exits while starting is
    started again on fresh free ports (its ports are picked free, then bound by Ray:
    another process may take one in between), ``HEAD_START_ATTEMPTS`` times at most.

    Raises:
        RuntimeError: the head exited every time, or its Jobs API did not answer in time.
    """
    log_path = settings.home / "logs" / "ray-head.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # The head, its jobs and this process's Jobs client share the environment it sets.
    isolate_ray(settings.home)
    for attempt in range(1, HEAD_START_ATTEMPTS + 1):
        dashboard_port = settings.ray_dashboard_port or _free_port()  # 0: any free port
        _wait_for_free_port(dashboard_port)
        address = f"http://127.0.0.1:{dashboard_port}"
        with log_path.open("ab") as output:
            head = subprocess.Popen(
                head_command(dashboard_port, _free_port()),
                stdout=output,
                stderr=subprocess.STDOUT,
                env=_head_env(),
                start_new_session=True,  # its own process group: stopped as a whole
                preexec_fn=_terminate_with_parent if sys.platform == "linux" else None,
            )
        try:
            _wait_for_jobs_api(head, address, log_path)
        except HeadExited as exited:
            _stop_head(head)
            if attempt == HEAD_START_ATTEMPTS:
                raise
            log.warning("%s; starting it again", exited)
            continue
        except BaseException:
            _stop_head(head)
            raise
        try:
            yield address
        finally:
            _stop_head(head)
        return


class HeadExited(RuntimeError):
    """The local Ray head exited before its Jobs API answered."""


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _terminate_with_parent() -> None:
    """In the child: SIGTERM when the service dies, even by SIGKILL, so no orphaned
    head keeps the ports (Linux's ``PR_SET_PDEATHSIG``)."""
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _head_env() -> dict[str, str]:
    """The service's environment less its secrets and its own settings: every job,
    driver and trial on the head inherits it, and a job gets its settings by name
    (``job_environment``)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in SERVICE_SECRETS and not k.startswith("DICESWEEP_")
    }
    env.pop("RAY_ADDRESS", None)  # a fresh head, never a join
    return env


def _wait_for_jobs_api(head: subprocess.Popen[bytes], address: str, log_path: Path) -> None:
    deadline = time.monotonic() + HEAD_START_TIMEOUT_S
    while True:
        if head.poll() is not None:
            raise HeadExited(
                f"the Ray head exited with code {head.returncode}; the end of {log_path}:\n"
                + _log_tail(log_path)
            )
        try:
            with urllib.request.urlopen(f"{address}/api/version", timeout=5) as answer:
                if answer.status == 200:
                    return
        except urllib.error.HTTPError as refused:
            if refused.code in (401, 403):
                return  # it answers, asking for Ray's token: the Jobs client sends it
        except OSError:
            pass
        if time.monotonic() > deadline:
            _stop_head(head)
            raise RuntimeError(
                f"the Ray head's Jobs API at {address} did not answer within "
                f"{HEAD_START_TIMEOUT_S:.0f} s; see {log_path}"
            )
        time.sleep(0.5)


def _wait_for_free_port(port: int) -> None:
    """Wait (a head stopped just before may still hold it) until ``port`` is free.

    Raises:
        RuntimeError: it stays taken.
    """
    deadline = time.monotonic() + HEAD_STOP_TIMEOUT_S
    while True:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
                return
            except OSError:
                pass
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"port {port} for the local Ray head's Jobs API is taken; "
                "set DICESWEEP_RAY_DASHBOARD_PORT to a free one (0: any)"
            )
        time.sleep(0.5)


def _stop_head(head: subprocess.Popen[bytes]) -> None:
    """SIGTERM to ``ray start --block``, which stops its node's processes; then the
    rest of its process group (workers, drivers, the dashboard's modules), waited for
    so that a head started next finds its ports free."""
    if head.poll() is None:
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(timeout=HEAD_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()
    _stop_group(head.pid)


def _stop_group(group: int) -> None:
    deadline = time.monotonic() + HEAD_STOP_TIMEOUT_S / 2
    sent = signal.SIGTERM
    while True:
        try:
            os.killpg(group, sent)
        except ProcessLookupError:
            return  # nothing of it is left
        except PermissionError:
            return  # only processes of others' share the id now
        if time.monotonic() > deadline:
            sent = signal.SIGKILL
        time.sleep(0.2)


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


def uvicorn_options(settings: ServiceSettings) -> dict[str, Any]:
    """How uvicorn serves the API. Behind a TLS proxy, that proxy's X-Forwarded-Proto
    and X-Forwarded-For give the scheme (the sign-in cookie's ``Secure``) and the client
    (the failed sign-in limit), believed from ``trusted_proxies`` only."""
    return {
        "host": settings.host,
        "port": settings.port,
        "log_level": "info",
        "access_log": settings.access_log,
        "proxy_headers": True,
        "forwarded_allow_ips": settings.trusted_proxies,
    }


def stop_on_sigterm() -> None:
    """SIGTERM (``docker stop``, ``kill``, systemd) unwinds as Ctrl-C does, so that the
    ``finally`` blocks stop what the service started (its Ray head's process group).
    uvicorn handles the signal while it serves, then restores this handler and raises
    the signal again; Python's default would end the process before they run."""

    def exit_on(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

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
        runner = RayJobRunner(address, job_environment(settings), python=python)
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
