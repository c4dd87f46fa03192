"""``dicesweep run`` as a person sees it: under a pseudo-terminal (a live rich view:
bar, percent, clock, ETA, then the table) and with its output piped (plain lines,
no escape codes). The real smoke sweep on a local Ray head, both times."""

from __future__ import annotations

import errno
import fcntl
import os
import re
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

from tests.trainables.test_sweep import CLI, environment

pytestmark = pytest.mark.data
ESCAPE = "\x1b["
PLAIN_LINE = re.compile(
    r"^\[\d+:\d\d:\d\d\] \d/2 trials \(\d+%\): \d running, \d done, \d failed \| ETA \S+", re.M
)
TABLE_ROW = "| dsc(alpha=0.1) |"


def run_in_terminal(env: dict[str, str], cwd: Path, timeout: float = 600) -> tuple[int, str]:
    """``dicesweep run --preset smoke`` with a pseudo-terminal of 120 x 30 as its
    standard output and error; returns its exit code and everything it drew."""
    primary, secondary = os.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    process = subprocess.Popen(
        [*CLI, "run", "--preset", "smoke"],
        stdin=subprocess.DEVNULL,
        stdout=secondary,
        stderr=secondary,
        env={**env, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "30"},
        cwd=cwd,
    )
    os.close(secondary)
    drawn, deadline = bytearray(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = os.read(primary, 65536)
        except OSError as error:  # the terminal closes when the process is gone
            if error.errno != errno.EIO:
                raise
            break
        if not chunk:
            break
        drawn += chunk
    os.close(primary)
    return process.wait(timeout=60), drawn.decode(errors="replace")


def test_on_a_terminal_the_progress_is_drawn_live_then_the_table(
    short_home: Path, datasets_dir: Path, tmp_path: Path
) -> None:
    code, drawn = run_in_terminal(environment(short_home, datasets_dir), tmp_path)
    assert code == 0, drawn[-3000:]
    assert ESCAPE in drawn  # drawn in place, not printed line after line
    assert "━" in drawn  # the bar
    assert re.search(r"0/2 trials \(0%\)", drawn) and "2/2 trials (100%)" in drawn
    assert re.search(r"elapsed \d+:\d\d:\d\d", drawn) and re.search(r"ETA \d+:\d\d:\d\d", drawn)
    assert "best eval_f1" in drawn
    assert "seed=0 mrpc/original" in drawn  # a running trial's line
    assert TABLE_ROW in drawn  # the table at the end
    assert "2 done, 0 failed" in drawn
    (Path(os.environ.get("DICESWEEP_CAPTURE", tmp_path)) / "run-terminal.txt").write_text(drawn)


def test_piped_the_progress_is_plain_lines(
    short_home: Path, datasets_dir: Path, tmp_path: Path
) -> None:
    result = subprocess.run(
        [*CLI, "run", "--preset", "smoke"],
        env=environment(short_home, datasets_dir),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert ESCAPE not in result.stdout + result.stderr
    lines = PLAIN_LINE.findall(result.stderr)
    assert len(lines) >= 2, result.stderr
    assert (
        lines[-1].startswith(lines[-1][:11]) and "2/2 trials (100%): 0 running, 2 done" in lines[-1]
    )
    assert TABLE_ROW in result.stdout
