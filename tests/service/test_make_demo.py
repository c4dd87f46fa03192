"""``make demo`` as the README runs it, stopped with SIGTERM (a terminal closed, a
supervisor, ``kill`` of its process group): the service stops everything it started
and make reports no error (seen: ``make: *** [Makefile:24: demo] Error 143``)."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from tests.tcp_proxy import free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.e2e
def test_sigterm_stops_make_demo_without_an_error() -> None:
    port = free_port()
    # A home as short as a user's: Ray's socket paths under it allow 36 characters.
    home = tempfile.TemporaryDirectory(prefix="dsd-", dir="/tmp")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DICESWEEP_", "MAKE"))}
    env |= {"DICESWEEP_HOME": home.name, "DICESWEEP_PORT": str(port)}
    with (
        home,
        subprocess.Popen(
            ["make", "--no-print-directory", "demo"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        ) as demo,
    ):
        try:
            deadline = time.monotonic() + 300
            while not _healthy(port):
                assert demo.poll() is None, demo.stdout.read() if demo.stdout else ""
                assert time.monotonic() < deadline, "make demo did not answer /healthz"
                time.sleep(1)
            os.killpg(demo.pid, signal.SIGTERM)
            said, _ = demo.communicate(timeout=120)
        finally:
            if demo.poll() is None:
                os.killpg(demo.pid, signal.SIGKILL)
    assert "Application shutdown complete" in said, said[-2000:]
    assert "Error" not in said and "Traceback" not in said, said[-2000:]


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
    except httpx.TransportError:
        return False
