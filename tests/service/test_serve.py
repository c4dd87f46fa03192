"""``dicesweep serve``'s own Ray head: the command it runs and what it leaves behind."""

from __future__ import annotations

import ipaddress
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from sweep_service import local_head
from sweep_service.settings import ServiceSettings


def test_the_head_listens_on_loopback_on_the_ports_given(tmp_path: Path) -> None:
    command = local_head.head_command(dashboard_port=8123, gcs_port=9123)
    assert command[1:4] == ["start", "--head", "--block"]
    assert "--dashboard-port=8123" in command and "--port=9123" in command
    assert "--dashboard-host=127.0.0.1" in command
    assert Path(command[0]).name == "ray"


# The head's servers, by a word of their command lines: each listens once it is up.
HEAD_SERVERS = (
    "gcs_server",
    "raylet",
    "dashboard.py",
    "ray::DashboardAgent",
    "ray::RuntimeEnvAgent",
    "ray.util.client.server",
    "monitor.py",
)


def listening_sockets(root: psutil.Process) -> dict[str, set[str]]:
    """The addresses each listening process under ``root`` is bound to, by its server's
    name in ``HEAD_SERVERS`` (another's by its command line)."""
    processes = {child.pid: child for child in root.children(recursive=True)}
    bound: dict[str, set[str]] = {}
    for connection in psutil.net_connections(kind="inet"):
        if connection.status != psutil.CONN_LISTEN or connection.pid not in processes:
            continue
        try:
            command = " ".join(processes[connection.pid].cmdline())
        except psutil.NoSuchProcess:
            continue
        name = next((server for server in HEAD_SERVERS if server in command), command)
        bound.setdefault(name, set()).add(connection.laddr.ip)
    return bound


def is_loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip)
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return (mapped or address).is_loopback


def test_the_real_head_listens_on_loopback_only(
    short_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("RAY_TMPDIR", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.setenv(variable, "")  # what isolate_ray sets is undone afterwards
        monkeypatch.delenv(variable)
    settings = ServiceSettings(
        home=short_home, datasets_dir=short_home / "datasets", ray_dashboard_port=0
    )
    with local_head.local_ray_head(settings):
        # The node's agents start listening after the Jobs API answers; the autoscaler's
        # monitor last of all, and on a loaded machine minutes later: it is checked
        # when it listens within the wait, the others always.
        deadline = time.monotonic() + 120
        while set(HEAD_SERVERS) - set(bound := listening_sockets(psutil.Process())):
            late = set(HEAD_SERVERS) - set(bound)
            if time.monotonic() > deadline and late == {"monitor.py"}:
                break
            assert time.monotonic() < deadline + 60, f"not listening yet: {bound}"
            time.sleep(1)
        time.sleep(2)  # a server binding a second port just after its first
        bound = listening_sockets(psutil.Process())
    wide = {name: ips for name, ips in bound.items() if not all(map(is_loopback, ips))}
    assert not wide, f"listening beyond loopback: {wide}"


def fake_head(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exits_first: int) -> None:
    """``ray start`` replaced by a stand-in: it exits 1 (printing why) on its first
    ``exits_first`` starts, then serves ``/api/version`` on the dashboard port."""
    script = tmp_path / "fake_head.py"
    script.write_text(
        "import http.server, pathlib, sys\n"
        f"count = pathlib.Path({str(tmp_path / 'starts')!r})\n"
        "starts = int(count.read_text()) + 1 if count.exists() else 1\n"
        "count.write_text(str(starts))\n"
        f"if starts <= {exits_first}:\n"
        "    print('Failed to bind: address already in use'); sys.exit(1)\n"
        "port = int(next(a for a in sys.argv if a.startswith('--dashboard-port=')).split('=')[1])\n"
        "class Version(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        self.send_response(200); self.end_headers(); self.wfile.write(b'{}')\n"
        "http.server.HTTPServer(('127.0.0.1', port), Version).serve_forever()\n"
    )
    command = [sys.executable, str(script)]
    monkeypatch.setattr(
        local_head, "head_command", lambda port, gcs: [*command, f"--dashboard-port={port}"]
    )


@pytest.fixture
def head_settings(short_home: Path, monkeypatch: pytest.MonkeyPatch) -> ServiceSettings:
    monkeypatch.setattr(local_head, "isolate_ray", lambda home: None)  # no real head here
    return ServiceSettings(
        home=short_home, datasets_dir=short_home / "datasets", ray_dashboard_port=0
    )


def test_a_head_that_exits_while_starting_is_started_again_on_fresh_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, head_settings: ServiceSettings
) -> None:
    fake_head(tmp_path, monkeypatch, exits_first=1)
    with local_head.local_ray_head(head_settings) as address:
        assert urllib.request.urlopen(f"{address}/api/version", timeout=5).status == 200
    assert (tmp_path / "starts").read_text() == "2"


def test_a_head_that_never_starts_is_one_error_with_the_end_of_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, head_settings: ServiceSettings
) -> None:
    fake_head(tmp_path, monkeypatch, exits_first=99)
    starting = local_head.local_ray_head(head_settings)
    with pytest.raises(local_head.HeadExited, match="exited with code 1") as raised:
        starting.__enter__()
    assert "address already in use" in str(raised.value)
    assert (tmp_path / "starts").read_text() == str(local_head.HEAD_START_ATTEMPTS)
