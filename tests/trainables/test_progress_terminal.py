"""``dicesweep run`` as a person sees it: under a pseudo-terminal (a live rich view:
bar, percent, clock, ETA, then the table) and with its output piped (plain lines,
no escape codes). The real smoke sweep on a local Ray head, both times."""

from __future__ import annotations

import errno
import fcntl
import io
import os
import re
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

from tests.trainables.test_sweep import CLI, environment

pytestmark = [pytest.mark.data, pytest.mark.e2e]
ESCAPE = "\x1b["
# What rich's live view writes before each redraw: back to the line start, erase the
# lines of the last frame going up.
REDRAW = re.compile(r"\r\x1b\[2K(?:\x1b\[1A\x1b\[2K)*")
SHOW_CURSOR = "\x1b[?25h"  # written when the live view stops
PLAIN_LINE = re.compile(
    r"^\[\d+:\d\d:\d\d\] \d/2 trials \(\d+%\): \d running, \d done, \d failed \| ETA \S+", re.M
)
TABLE_ROW = "| dsc(alpha=0.1,scope=set) |"
ROUTINE = "Wrote the latest version of all result files"  # Tune's, at INFO: in the log file
RAY_STARTED = "Started a local Ray instance."  # Ray's, at INFO: in the log file too


def clock_seconds(text: str) -> int:
    hours, minutes, seconds = map(int, text.split(":"))
    return 3600 * hours + 60 * minutes + seconds


def routine_logged(home: Path, record: str = ROUTINE) -> bool:
    """Whether a routine record (Tune's) went to the sweep's log file under the home."""
    return any(record in log.read_text() for log in (home / "logs").glob("*.log"))


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


def frames(drawn: str) -> list[str]:
    """The live view's frames, in the order drawn (what a person saw, one at a time)."""
    live = drawn.split(SHOW_CURSOR)[0]
    return [frame for frame in REDRAW.split(live)[1:] if frame.strip()]


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
    assert "seed=0 ud_en_ewt_sample/original" in drawn  # a running trial's line
    assert TABLE_ROW in drawn  # the table at the end
    assert "2 done, 0 failed" in drawn
    assert ROUTINE not in drawn and routine_logged(short_home)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", drawn)  # what it says, without the codes
    running_dsc = (
        r"  dsc\(alpha=0\.1,scope=set\) seed=0 ud_en_ewt_sample/original +(starting|epoch)"
    )
    assert re.search(running_dsc, text)
    clocks = set(re.findall(r"0/2 trials \(0%\) +elapsed (\S+)", text))
    assert len(clocks) >= 2  # redrawn as the clock moves while the counts stand still
    shown = frames(drawn)
    assert len(shown) >= 3  # redrawn on a timer, not once per change
    assert any(
        "running" in frame and "seed=0 ud_en_ewt_sample/original" in frame for frame in shown
    )
    kept = os.environ.get("DICESWEEP_SCREENSHOTS")
    if kept:  # the README's picture: the busiest frame, then what followed it
        busiest = max(shown, key=lambda frame: frame.count("seed="))
        after = drawn.split(SHOW_CURSOR)[1]
        save_terminal(busiest.rstrip() + "\n" + after, Path(kept) / "cli-run.svg")


def save_terminal(text: str, path: Path) -> None:
    """``text`` (with its colours) drawn as a terminal of 120 columns, as SVG."""
    from rich.console import Console
    from rich.text import Text

    console = Console(record=True, width=120, file=io.StringIO())
    console.print(Text.from_ansi(text.replace("\r", "")))
    console.save_svg(str(path), title="dicesweep run --preset smoke")


def test_piped_the_progress_is_plain_lines(
    short_home: Path, datasets_dir: Path, tmp_path: Path
) -> None:
    """Plain lines, each stamped with the time since the command started: checked
    against when each line arrived."""
    started = time.monotonic()
    process = subprocess.Popen(
        [*CLI, "run", "--preset", "smoke"],
        env=environment(short_home, datasets_dir),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None and process.stdout is not None
    said = [(line, time.monotonic() - started) for line in process.stderr]
    table = process.stdout.read()  # a few lines: they wait in the pipe meanwhile
    stderr = "".join(line for line, _ in said)
    assert process.wait(timeout=60) == 0, stderr[-3000:]
    assert ESCAPE not in table + stderr
    assert ROUTINE not in stderr and routine_logged(short_home)
    assert RAY_STARTED not in stderr and routine_logged(short_home, RAY_STARTED)
    progress = [(line, arrived) for line, arrived in said if PLAIN_LINE.match(line)]
    assert len(progress) >= 2, stderr
    assert "2/2 trials (100%): 0 running, 2 done, 0 failed | ETA 0:00:00" in progress[-1][0]
    for line, arrived in progress:  # the clock started with the command, not later
        assert arrived - 8 <= clock_seconds(line[1:].split("]")[0]) <= arrived + 1, (line, arrived)
    assert TABLE_ROW in table
    # What a newcomer's first sweep shows: a number in every cell, none flagged.
    cells = re.findall(r"^\| (ce|dsc\S*) +\| (.*?) +\|$", table, re.M)
    assert len(cells) == 2 and all(re.match(r"\**\d+\.\d\d", cell) for _, cell in cells), table
    assert "degenerate" not in table
