"""``dicesweep ui``: the MLflow UI over the sweeps' store, its address printed before it
starts, and what to set when the service's links should go elsewhere."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

from search_spaces.settings import DicesweepSettings
from tests.service.test_cli_keys import dicesweep


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for_line(
    path: Path, start: str, process: subprocess.Popen[str], timeout_s: float
) -> list[str]:
    """The lines of ``path`` once one starts with ``start``; the process must not end first."""
    deadline = time.monotonic() + timeout_s
    while True:
        said = path.read_text().splitlines(keepends=True)
        if any(line.startswith(start) for line in said):
            return said
        assert process.poll() is None, f"ended ({process.returncode}) before {start!r}: {said}"
        assert time.monotonic() < deadline, f"no {start!r} in {timeout_s} s: {said}"
        time.sleep(0.2)


def test_ui_serves_the_sweeps_store_and_says_where(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DICESWEEP_")}
    env["DICESWEEP_HOME"] = str(tmp_path)
    command = [sys.executable, "-m", "sweep_service.cli", "ui", "--port", str(port)]
    # In a group of its own, as a terminal's foreground job; what it says to a file, which
    # the server's processes share (a pipe would wait on the last of them, not on it).
    said_to = tmp_path / "ui.err"
    with (
        said_to.open("w") as stderr,
        subprocess.Popen(command, env=env, stderr=stderr, text=True, start_new_session=True) as ui,
    ):
        try:
            # A wait line at once; the address only once it answers: the page is read
            # once, right after the address is said, with no retry (however long the
            # server took to start on a loaded machine).
            said = wait_for_line(said_to, "MLflow UI at ", ui, timeout_s=420)
            with urllib.request.urlopen(f"{url}/", timeout=30) as response:
                assert "<title>MLflow</title>" in response.read().decode()
            store = f"sqlite:///{tmp_path}/mlflow.db"
            assert said[0] == (
                f"starting the MLflow UI on port {port}; its address follows once it answers\n"
            )
            at = said.index(f"MLflow UI at {url} (the sweeps' store {store})\n")
            # Not where the links go by default (port 5000): the address the service's links
            # follow from now on, written under the home.
            said = wait_for_line(said_to, "the service's links", ui, timeout_s=30)
            assert (
                said[at + 1]
                == f"the service's links come here (written to {tmp_path}/mlflow-ui.url)\n"
            )
            assert (tmp_path / "mlflow-ui.url").read_text() == f"{url}\n"
            assert DicesweepSettings(home=tmp_path).mlflow_ui == url
            # Ctrl-C, as a terminal sends it to its foreground group: the UI's server, in a
            # group of its own, is stopped with its workers at once, without a traceback.
            servers = descendants(ui.pid)
            assert servers
            # Its server runs as compose runs MLflow: no job runner, a slow worker's ping
            # tolerated for 120 s (a loaded machine had uvicorn kill its workers).
            server_env = servers[0].environ()
            assert server_env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
            assert server_env["MLFLOW_UVICORN_OPTS"] == "--timeout-worker-healthcheck 120"
            stopped_at = time.monotonic()
            os.killpg(ui.pid, signal.SIGINT)
            assert ui.wait(timeout=60) == 130
            assert time.monotonic() - stopped_at < 15
            errors = said_to.read_text()
            assert "Traceback" not in errors and "MLflow UI stopped\n" in errors
            assert not any(alive(server) for server in servers)  # every one
        finally:
            if ui.poll() is None:
                os.killpg(ui.pid, signal.SIGTERM)


def alive(process: psutil.Process) -> bool:
    """Running, not a killed process its new parent has yet to reap."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def descendants(pid: int) -> list[psutil.Process]:
    """The processes ``pid`` started, and theirs."""
    return psutil.Process(pid).children(recursive=True)


def test_ui_of_an_mlflow_server_names_its_ui_and_starts_nothing(tmp_path: Path) -> None:
    served = dicesweep(
        tmp_path,
        "ui",
        DICESWEEP_MLFLOW_TRACKING_URI="http://mlflow:5000",
        DICESWEEP_MLFLOW_UI_URL="https://mlflow.example.org",
    )
    assert served.returncode == 0, served.stderr
    assert served.stderr == (
        "the sweeps' store is the MLflow server http://mlflow:5000; "
        "its UI: https://mlflow.example.org\n"
    )


def test_ui_help_says_when_to_set_the_ui_url(tmp_path: Path) -> None:
    shown = dicesweep(tmp_path, "ui", "--help")
    assert shown.returncode == 0
    text = " ".join(shown.stdout.split())
    assert "set it when the UI runs elsewhere" in text
