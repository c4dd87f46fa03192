"""The progress display's arithmetic and output over Tune's own trial objects (status,
config, last result), fed as Tune feeds its callbacks, without a cluster; the time
comes from a clock the test sets."""

from __future__ import annotations

import io
import logging
import pickle
import time
from pathlib import Path
from typing import Any

import pytest
from ray.tune.experiment import Trial
from rich.console import Console

from trainables.driver import progress
from trainables.driver.progress import (
    Snapshot,
    SweepProgress,
    TrialState,
    clock,
    eta,
    ray_log_file,
    view,
)

LABEL = "dsc(alpha=0.1) seed=1 mrpc/original"


def trial(trial_id: str, loss: str = "dsc", status: str = Trial.PENDING) -> Trial:
    config = {
        "loss": {"name": loss, "alpha": 0.1} if loss == "dsc" else {"name": loss},
        "seed": 1,
        "dataset": "mrpc",
        "variant": "original",
        "training": {"epochs": 4},
    }
    made = Trial("__fake", config=config, stub=True, trial_id=trial_id)
    made.set_status(status)
    return made


def evaluated(made: Trial, epoch: float, f1: float) -> Trial:
    made.set_status(Trial.RUNNING)
    made.update_last_result({"epoch": epoch, "eval_f1": f1})
    return made


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_clock_and_eta_arithmetic() -> None:
    assert clock(3723.4) == "1:02:03" and clock(None) == "-:--:--" and clock(-1) == "-:--:--"
    assert eta(remaining=6, done_here=2, seconds_here=100) == 300  # 50 s a trial
    assert eta(remaining=6, done_here=0.5, seconds_here=100) == 1200  # half a trial so far
    assert eta(remaining=6, done_here=0, seconds_here=100) is None  # no pace yet
    assert eta(remaining=0, done_here=0, seconds_here=0) == 0.0


def test_a_trials_share_of_its_work_and_its_line() -> None:
    assert TrialState("a", "PENDING").progress == 0.0
    assert TrialState("a", "RUNNING").state("eval_f1") == "starting"
    halfway = TrialState("a", "RUNNING", epoch=1.5, epochs=3, value=71.5)
    assert halfway.progress == 0.5 and halfway.state("eval_f1") == "epoch 1.5/3  eval_f1 71.50"
    assert TrialState("a", "ERROR", epoch=1, epochs=3).progress == 1.0  # no more to do
    # With max_steps the trial's length is its steps, whatever its epochs say.
    stepped = TrialState("a", "RUNNING", epoch=8.0, epochs=3, value=71.5, steps=120, max_steps=480)
    assert stepped.progress == 0.25 and stepped.state("eval_f1") == "step 120/480  eval_f1 71.50"


def test_a_snapshot_counts_and_its_plain_line() -> None:
    snapshot = Snapshot(
        metric="eval_f1",
        total=8,
        trials=(
            TrialState("a", "TERMINATED", 3, 3, 80.0),
            TrialState("b", "TERMINATED", 3, 3, 84.2),
            TrialState("c", "ERROR", 1, 3, 99.0),  # failed: never the best
            TrialState("d", "RUNNING", 1, 3, 70.0),
        ),
        elapsed_s=72,
        eta_s=120,
    )
    assert (snapshot.done, snapshot.failed, len(snapshot.running), snapshot.waiting) == (2, 1, 1, 4)
    assert snapshot.percent == pytest.approx(37.5)
    assert snapshot.line() == (
        "[0:01:12] 3/8 trials (38%): 1 running, 2 done, 1 failed | ETA 0:02:00"
        " | best eval_f1 84.20: b"
    )


def test_the_best_so_far_skips_a_degenerate_trial() -> None:
    """Tune's trials as the display reads them: the one with the highest F1 predicts
    paraphrase for 99.3% of the pairs, so the next one is the best; while every scored
    trial is degenerate, no trial learned."""
    shown = SweepProgress("eval_f1", 3, started_at=time.time(), stream=io.StringIO())
    constant = trial("t0", status=Trial.TERMINATED)
    constant.update_last_result(
        {
            "epoch": 4.0,
            "eval_f1": 81.8,
            "eval_baseline_f1": 81.22,
            "eval_baseline_accuracy": 68.38,
            "eval_top_prediction_share": 99.3,
            "eval_positive_prediction_share": 99.3,
        }
    )
    shown.on_step_end(0, [constant, trial("t1")])
    assert shown.snapshot().best is None
    assert shown.snapshot().best_text() == "none (no trial learned)"
    assert shown.snapshot().line().endswith(" | best none (no trial learned)")
    learned = trial("t2", loss="ce", status=Trial.TERMINATED)
    learned.update_last_result(
        {
            "epoch": 4.0,
            "eval_f1": 81.5,
            "eval_baseline_f1": 81.22,
            "eval_baseline_accuracy": 68.38,
            "eval_top_prediction_share": 90.0,
            "eval_positive_prediction_share": 90.0,
        }
    )
    shown.on_step_end(1, [constant, learned])
    assert shown.snapshot().best_text() == "eval_f1 81.50: ce seed=1 mrpc/original"


def test_the_clock_runs_from_the_sweeps_first_start_and_survives_a_resume() -> None:
    started = time.time() - 1000  # the sweep began 1000 s ago, in an earlier driver
    shown = SweepProgress("eval_f1", 4, started, stream=io.StringIO())
    resumed = pickle.loads(pickle.dumps(shown))  # as Tune keeps it with the experiment
    assert resumed.started_at == started
    assert resumed.snapshot().elapsed_s == pytest.approx(1000, abs=5)


def test_eta_from_this_drivers_pace_and_the_best_so_far() -> None:
    now = Clock(10_000.0)
    out = io.StringIO()
    shown = SweepProgress("eval_f1", 4, started_at=9_000.0, stream=out, clock=now)
    before = trial("t0", loss="ce", status=Trial.TERMINATED)  # done before a resume
    before.update_last_result({"epoch": 4.0, "eval_f1": 60.0})
    running = trial("t1", status=Trial.RUNNING)
    waiting = trial("t2")
    shown.on_step_end(0, [before, running, waiting])
    assert shown.snapshot().eta_s is None  # nothing done here yet
    now.now += 100  # one epoch of four in 100 s: a quarter of a trial
    shown.on_step_end(1, [before, evaluated(running, 1.0, 71.5), waiting])
    snapshot = shown.snapshot()
    assert [(t.label, t.state("eval_f1")) for t in snapshot.running] == [
        (LABEL, "epoch 1/4  eval_f1 71.50")
    ]
    assert snapshot.elapsed_s == 1100
    assert snapshot.eta_s == pytest.approx(1100)  # 2.75 trials left at 400 s a trial
    assert snapshot.best_text() == f"eval_f1 71.50: {LABEL}"
    now.now += 300  # the running trial ends
    evaluated(running, 4.0, 85.0).set_status(Trial.TERMINATED)
    shown.on_step_end(2, [before, running, waiting])
    snapshot = shown.snapshot()
    assert (snapshot.done, snapshot.failed, snapshot.running) == (2, 0, [])
    assert snapshot.eta_s == pytest.approx(800)  # 2 trials left at 400 s each
    assert out.getvalue().splitlines() == [
        "[0:16:40] 1/4 trials (25%): 1 running, 1 done, 0 failed | ETA -:--:--"
        " | best eval_f1 60.00: ce seed=1 mrpc/original",
        f"[0:18:20] 1/4 trials (25%): 1 running, 1 done, 0 failed | ETA 0:18:20"
        f" | best eval_f1 71.50: {LABEL}",
        f"[0:23:20] 2/4 trials (50%): 0 running, 2 done, 0 failed | ETA 0:13:20"
        f" | best eval_f1 85.00: {LABEL}",
    ]


def test_piped_a_line_on_news_or_a_heartbeat() -> None:
    now = Clock(0.0)
    out = io.StringIO()
    shown = SweepProgress("eval_f1", 2, started_at=0.0, stream=out, clock=now)
    trials = [trial("t1", status=Trial.RUNNING), trial("t2")]
    shown.on_step_end(0, trials)
    now.now = 5.0
    shown.on_step_end(1, trials)  # nothing new: no line
    now.now = 5.0 + progress.HEARTBEAT_S
    shown.on_step_end(2, trials)  # a heartbeat
    now.now += 1
    shown.on_experiment_end(trials)  # nothing new: no line
    assert [line[:9] for line in out.getvalue().splitlines()] == ["[0:00:00]", "[0:00:35]"]
    assert "\x1b[" not in out.getvalue()


def test_the_view_draws_bar_counts_clock_best_and_each_running_trial() -> None:
    snapshot = Snapshot(
        metric="eval_f1",
        total=4,
        trials=(
            TrialState("ce seed=0 mrpc/[x]", "TERMINATED", 4, 4, 80.0),
            TrialState(LABEL, "RUNNING", 2, 4, 70.0),
        ),
        elapsed_s=3723,
        eta_s=60,
    )
    console = Console(file=io.StringIO(), width=120, force_terminal=False)
    console.print(view(snapshot))
    drawn = console.file.getvalue()  # type: ignore[attr-defined]
    assert "1/4 trials (25%)" in drawn and "elapsed 1:02:03" in drawn and "ETA 0:01:00" in drawn
    assert "1 running, 1 done, 0 failed, 2 waiting" in drawn
    assert "best eval_f1 80.00: ce seed=0 mrpc/[x]" in drawn  # a label is not markup
    assert f"{LABEL}  epoch 2/4  eval_f1 70.00" in drawn


def test_rays_routine_records_go_to_the_file_its_warnings_to_the_console(
    tmp_path: Path,
) -> None:
    ray_logger = logging.getLogger("ray")
    console = io.StringIO()
    handler = logging.StreamHandler(console)
    ray_logger.addHandler(handler)
    try:
        with ray_log_file(tmp_path / "logs" / "sweep.log"):
            logging.getLogger("ray.tune").info("Wrote the latest version")
            logging.getLogger("ray.tune").warning("a trial is slow")
        logging.getLogger("ray.tune").info("after the sweep")
    finally:
        ray_logger.removeHandler(handler)
    assert console.getvalue().splitlines() == ["a trial is slow", "after the sweep"]
    written = (tmp_path / "logs" / "sweep.log").read_text()
    assert "INFO ray.tune: Wrote the latest version" in written
    assert "WARNING ray.tune: a trial is slow" in written
    assert "after the sweep" not in written


def test_on_a_terminal_log_records_print_above_the_live_view(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A handler that held the terminal before the view started writes through the
    view's console while it is up, and gets its stream back after."""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("TERM", "xterm-256color")
    terminal = Terminal()
    handler = logging.StreamHandler(terminal)
    logger = logging.getLogger("dicesweep-test-progress")
    logger.addHandler(handler)
    records: list[Any] = []
    try:
        shown = SweepProgress("eval_f1", 1, started_at=time.time(), stream=terminal)
        shown.on_step_end(0, [trial("t1", status=Trial.RUNNING)])
        records.append(handler.stream)
        logger.warning("a warning while the view is up")
        shown.on_step_end(1, [trial("t1", status=Trial.TERMINATED)])
        shown.on_experiment_end([])
    finally:
        logger.removeHandler(handler)
    assert records[0] is not terminal  # moved to the live view's proxy
    assert handler.stream is terminal
    drawn = terminal.getvalue()
    assert "a warning while the view is up" in drawn and "1/1 trials (100%)" in drawn
    assert "\x1b[" in drawn


def test_an_interrupted_sweep_ends_showing_its_last_step_not_tunes_cleanup() -> None:
    """On Ctrl-C Tune stops the running trials, marking them TERMINATED, before it
    calls ``on_experiment_end``: they were not done."""
    out = io.StringIO()
    shown = SweepProgress("eval_f1", 2, started_at=0.0, stream=out, clock=Clock(10.0))
    trials = [trial("t1", status=Trial.RUNNING), trial("t2")]
    shown.on_step_end(0, trials)
    for stopped in trials:
        stopped.set_status(Trial.TERMINATED)
    shown.on_experiment_end(trials)
    assert (shown.snapshot().done, len(shown.snapshot().running)) == (0, 1)
    assert out.getvalue().splitlines() == [
        "[0:00:10] 0/2 trials (0%): 1 running, 0 done, 0 failed | ETA -:--:--"
    ]


def test_a_resumed_sweep_that_had_ended_shows_its_trials_once() -> None:
    out = io.StringIO()
    shown = SweepProgress("eval_f1", 1, started_at=0.0, stream=out, clock=Clock(90.0))
    ended = trial("t1", status=Trial.TERMINATED)
    ended.update_last_result({"epoch": 4.0, "eval_f1": 80.0})
    shown.on_experiment_end([ended])  # Tune ran no step: nothing left to run
    assert out.getvalue() == (
        f"[0:01:30] 1/1 trials (100%): 0 running, 1 done, 0 failed | ETA 0:00:00"
        f" | best eval_f1 80.00: {LABEL}\n"
    )
