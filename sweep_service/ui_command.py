"""``dicesweep ui``: the MLflow UI over the sweeps' tracking store.

It says at once that the UI is starting, and prints its address only once the address
answers, however long the UI's server takes to accept a connection: an address it
prints is one that answers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping

from search_spaces.settings import MLFLOW_UI_FILE, DicesweepSettings
from sweep_service.home import make_home_private
from sweep_service.mlflow_ui import protect_embedded_ui

UI_STOP_GRACE_S = 3.0  # the UI's server waits on open browser connections past this
POLL_S = 0.5  # between two tries of the address while the server starts


def serve_ui(host: str, port: int) -> int:
    """Serve the MLflow UI on ``host:port`` until it ends or Ctrl-C (exit 130); a
    tracking URI that is an MLflow server has its own UI, which is named instead."""
    settings = DicesweepSettings()
    store = str(settings.mlflow_tracking_uri)
    if store.startswith(("http://", "https://")):
        say(f"the sweeps' store is the MLflow server {store}; its UI: {settings.mlflow_ui}")
        return 0
    make_home_private(settings.home)  # the UI's server makes the store if it is new
    url = f"http://{host}:{port}"
    command = [
        sys.executable,
        "-m",
        "mlflow",
        "ui",
        "--backend-store-uri",
        store,
        "--host",
        host,
        "--port",
        str(port),
    ]
    if store.startswith("sqlite:"):
        command += ["--default-artifact-root", settings.mlflow_artifact_root.as_uri()]
    say(f"starting the MLflow UI on port {port}; its address follows once it answers")
    command += protect_embedded_ui(settings, host, port)

    def announce() -> None:
        say(f"MLflow UI at {url} (the sweeps' store {store})")
        say_where_links_go(settings, url)

    return serve_until_stopped(command, _probe_url(host, port), announce)


def say(line: str) -> None:
    """One line on standard error, at once (a terminal, or a file the server shares)."""
    print(line, file=sys.stderr, flush=True)


def say_where_links_go(settings: DicesweepSettings, url: str) -> None:
    """Whether the service's links into the UI come to ``url``: they do unless
    DICESWEEP_MLFLOW_UI_URL says elsewhere; its address is written under the home."""
    if settings.mlflow_ui_url and settings.mlflow_ui_url != url:
        say(
            f"the service's links go to {settings.mlflow_ui_url} (DICESWEEP_MLFLOW_UI_URL): "
            f"set it to {url}, or unset it, for them to come here"
        )
    elif not settings.mlflow_ui_url:
        # The service reads this file whenever it makes a link: no restart needed.
        settings.home.mkdir(parents=True, exist_ok=True)
        (settings.home / MLFLOW_UI_FILE).write_text(url + "\n", encoding="utf-8")
        say(f"the service's links come here (written to {settings.home / MLFLOW_UI_FILE})")


def _probe_url(host: str, port: int) -> str:
    """Where to ask whether the UI answers: a wildcard address is reached on loopback."""
    reachable = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    return f"http://{reachable}:{port}/"


def answers(url: str) -> bool:
    """Whether an HTTP server answers ``url`` (any status: a sign-in page answers too)."""
    try:
        with urllib.request.urlopen(url, timeout=5):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


# As the compose topology runs MLflow (docker-compose.yml): no job runner (its worker
# processes take most of the server's memory and nothing here submits jobs), and a
# worker whose health ping is slow on a loaded machine given 120 s before uvicorn
# kills it. What the environment sets itself wins.
SERVER_DEFAULTS = {
    "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
    "MLFLOW_UVICORN_OPTS": "--timeout-worker-healthcheck 120",
}


def server_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The UI server's environment: ``environ`` with ``SERVER_DEFAULTS`` where unset."""
    return {**SERVER_DEFAULTS, **environ}


def serve_until_stopped(command: list[str], probe: str, announce: Callable[[], None]) -> int:
    """Run the UI's server; call ``announce`` once ``probe`` answers; return when it
    ends, or on Ctrl-C or SIGTERM here, which stop it and every process it started
    (some in sessions of their own, which a signal to its group misses) within
    ``UI_STOP_GRACE_S``, without a traceback; 130 then, as a shell reports Ctrl-C."""
    import psutil

    # Both a KeyboardInterrupt, SIGINT even where this process was started ignoring it
    # (a background job of a script), as Python then leaves it.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.default_int_handler)
    with subprocess.Popen(command, start_new_session=True, env=server_env(os.environ)) as server:
        try:
            while server.poll() is None and not answers(probe):
                time.sleep(POLL_S)
            if server.poll() is None:
                announce()
            return server.wait()
        except KeyboardInterrupt:
            tree = [psutil.Process(server.pid)]
            with contextlib.suppress(psutil.NoSuchProcess):
                tree += tree[0].children(recursive=True)
            for process in tree:
                with contextlib.suppress(psutil.NoSuchProcess):
                    process.terminate()
            _, alive = psutil.wait_procs(tree, timeout=UI_STOP_GRACE_S)
            for process in alive:
                with contextlib.suppress(psutil.NoSuchProcess):
                    process.kill()
            say("MLflow UI stopped")
            return 130
