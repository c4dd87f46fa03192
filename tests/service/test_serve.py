"""``dicesweep serve``'s own Ray head: the command it runs and what it leaves behind."""

from __future__ import annotations

from pathlib import Path

from sweep_service import serve


def test_the_head_listens_on_loopback_on_the_ports_given(tmp_path: Path) -> None:
    command = serve.head_command(dashboard_port=8123, gcs_port=9123)
    assert command[1:4] == ["start", "--head", "--block"]
    assert "--dashboard-port=8123" in command and "--port=9123" in command
    assert "--dashboard-host=127.0.0.1" in command
    assert Path(command[0]).name == "ray"
