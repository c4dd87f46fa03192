"""``dicesweep serve``'s own Ray head: the command it runs and what it leaves behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep_service import serve


def test_the_head_listens_on_loopback_on_the_ports_given(tmp_path: Path) -> None:
    command = serve.head_command(dashboard_port=8123, gcs_port=9123)
    assert command[1:4] == ["start", "--head", "--block"]
    assert "--dashboard-port=8123" in command and "--port=9123" in command
    assert "--dashboard-host=127.0.0.1" in command
    assert Path(command[0]).name == "ray"


@pytest.mark.parametrize(("recorded", "kept"), [("192.0.2.2:9123", False), ("10.0.0.1:6379", True)])
def test_a_stopped_head_is_forgotten_only_when_the_note_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorded: str, kept: bool
) -> None:
    # A plain ray.init() on this machine would otherwise try to join the stopped head.
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    note = tmp_path / "ray" / "ray_current_cluster"
    note.parent.mkdir()
    note.write_text(recorded)
    serve._forget_head(9123)
    assert note.exists() is kept
    serve._forget_head(9123)  # no note: nothing to do
