"""The local Ray head ``dicesweep serve`` starts when no cluster is named
(``DICESWEEP_RAY_JOBS_URL`` unset): ``ray start --head --block`` in a child process
with its own process group, temp folder and free ports, its Jobs API on
``ray_dashboard_port``; stopped, with every process it started, when the service stops.
"""

from __future__ import annotations

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

from search_spaces.settings import isolate_ray
from sweep_service.settings import ServiceSettings

log = logging.getLogger("dicesweep.serve")
HEAD_START_TIMEOUT_S = 180.0  # a cold head on 2 CPUs takes 10-30 s
HEAD_STOP_TIMEOUT_S = 60.0

HF_TOKENS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
# Secrets the service may hold that no process it starts needs in its environment.
SERVICE_SECRETS = ("DICESWEEP_API_KEY", "DICESWEEP_DATABASE_URL", *HF_TOKENS)
# A one-machine Ray: `ray start` turns --node-ip-address=127.0.0.1 into the machine's
# own address unless clusters are off (Ray's setting for Windows and macOS, where no
# node may join), and its GCS, raylet, agents and metrics servers then bind every
# interface; with them off the node's address stays loopback and each binds it.
LOOPBACK_ONLY = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


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
    """``ray start --head --block`` on loopback (with ``LOOPBACK_ONLY`` in its
    environment), its Jobs API on ``dashboard_port``.
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
    """The service's environment less its secrets and its own settings, plus
    ``LOOPBACK_ONLY``: every job, driver and trial on the head inherits it, and a job
    gets its settings by name (``job_environment``)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in SERVICE_SECRETS and not k.startswith("DICESWEEP_")
    }
    env.pop("RAY_ADDRESS", None)  # a fresh head, never a join
    env.update(LOOPBACK_ONLY)
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
