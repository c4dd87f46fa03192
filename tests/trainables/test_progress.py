"""The progress display's arithmetic and plain output, over Tune's trial objects as
the callback sees them (status, config, trial id), without a cluster."""

from __future__ import annotations

import io
import pickle
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from trainables.driver import progress
from trainables.driver.progress import Snapshot, SweepProgress, clock, eta

CONFIG = {
    "loss": {"name": "dsc", "alpha": 0.1},
    "seed": 1,
    "dataset": "mrpc",
    "variant": "original",
    "training": {"epochs": 3},
}


@dataclass
class Trial:
    trial_id: str
    status: str = "RUNNING"
    config: dict[str, Any] = field(default_factory=lambda: dict(CONFIG))


def test_clock_and_eta() -> None:
    assert clock(3723.4) == "1:02:03" and clock(None) == "-:--:--" and clock(-1) == "-:--:--"
    assert eta(remaining=6, ended_here=2, seconds_here=100) == 300  # 50 s a trial
    assert eta(remaining=6, ended_here=0, seconds_here=100) is None  # no rate yet
    assert eta(remaining=0, ended_here=0, seconds_here=0) == 0.0


def test_a_snapshot_line() -> None:
    snapshot = Snapshot(
        total=8,
        done=2,
        failed=1,
        running=[("a", "epoch 1/3")],
        elapsed_s=72,
        eta_s=120,
        best="eval_f1 84.20: dsc(alpha=0.1) seed=1 mrpc/original",
    )
    assert snapshot.percent == pytest.approx(37.5)
    assert snapshot.line() == (
        "[0:01:12] 3/8 trials (38%): 1 running, 2 done, 1 failed | ETA 0:02:00"
        " | best eval_f1 84.20: dsc(alpha=0.1) seed=1 mrpc/original"
    )


def test_the_clock_runs_from_the_sweeps_first_start_and_survives_a_resume() -> None:
    started = time.time() - 1000  # the sweep began 1000 s ago, in an earlier driver
    shown = SweepProgress("eval_f1", 4, started, stream=io.StringIO())
    resumed = pickle.loads(pickle.dumps(shown))
    assert resumed.started_at == started
    assert resumed.snapshot().elapsed_s == pytest.approx(1000, abs=5)


def test_running_trials_best_and_eta_from_this_drivers_rate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [10_000.0]
    monkeypatch.setattr(progress.time, "time", lambda: now[0])
    out = io.StringIO()
    shown = SweepProgress("eval_f1", 4, started_at=9_000.0, stream=out)
    finished_before = Trial("t0", status="TERMINATED")  # done before a resume
    running = Trial("t1")
    shown.on_trial_start(0, [finished_before, running], running)
    shown.on_step_end(0, [finished_before, running])
    shown.on_trial_result(1, [], running, {"eval_f1": 71.5, "epoch": 1.0})
    assert shown.snapshot().running == [
        ("dsc(alpha=0.1) seed=1 mrpc/original", "epoch 1/3  eval_f1 71.50")
    ]
    now[0] += 100  # 100 s later the running trial ends: 1 trial in 100 s here
    running.status = "TERMINATED"
    shown.on_trial_complete(2, [], running)
    shown.on_step_end(2, [finished_before, running, Trial("t2", status="PENDING")])
    snapshot = shown.snapshot()
    assert (snapshot.done, snapshot.failed, snapshot.running) == (2, 0, [])
    assert snapshot.elapsed_s == 1100 and snapshot.eta_s == 200  # 2 left at 100 s each
    assert snapshot.best == "eval_f1 71.50: dsc(alpha=0.1) seed=1 mrpc/original"
    lines = out.getvalue().splitlines()
    assert lines == [
        "[0:16:40] 1/4 trials (25%): 1 running, 1 done, 0 failed | ETA -:--:--",
        "[0:18:20] 2/4 trials (50%): 0 running, 2 done, 0 failed | ETA 0:03:20"
        " | best eval_f1 71.50: dsc(alpha=0.1) seed=1 mrpc/original",
    ]


def test_plain_lines_on_news_or_a_heartbeat(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    monkeypatch.setattr(progress.time, "time", lambda: now[0])
    out = io.StringIO()
    shown = SweepProgress("eval_f1", 2, started_at=0.0, stream=out)
    trials = [Trial("t1"), Trial("t2", status="PENDING")]
    shown.on_step_end(0, trials)
    now[0] = 5.0
    shown.on_step_end(1, trials)  # nothing new: no line
    now[0] = 5.0 + progress.HEARTBEAT_S
    shown.on_step_end(2, trials)  # a heartbeat
    assert [line[:9] for line in out.getvalue().splitlines()] == ["[0:00:00]", "[0:00:35]"]
    assert "\x1b[" not in out.getvalue()
