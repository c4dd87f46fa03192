"""A live display of a sweep for ``dicesweep run``: trials ended of the total, percent,
time since the sweep first started, an ETA, the best trial so far and a line per
running trial with its epoch and latest metric.

On a terminal it is a ``rich`` live view redrawn on a timer (the clock moves between
Tune's events), with whatever Python writes to the terminal meanwhile (log records,
warnings) printed above it rather than through it. Anywhere else (piped, redirected,
a Ray Job's log) it writes plain lines: one when the counts or the best change and a
heartbeat every ``HEARTBEAT_S`` otherwise.

The clock runs from ``started_at``, the first driver's start. The callback travels
with the experiment (Tune pickles its callbacks into the experiment folder), so the
driver of a resume gets it back with that start, and the clock goes on.
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ray.tune import Callback

from search_spaces.contract import progress_head
from search_spaces.dataset_refs import dataset_label
from search_spaces.reports import degenerate_reason, loss_label
from search_spaces.sections import trial_training

HEARTBEAT_S = 30.0  # piped: a line at least this often
REFRESH_PER_SECOND = 2  # on a terminal: redraws, whatever happens
ENDED = ("TERMINATED", "ERROR")  # Tune's statuses of a trial that will not run again
NO_TRIAL_LEARNED = "none (no trial learned)"  # while every scored trial is degenerate


def trial_label(config: dict[str, Any]) -> str:
    """``"dsc(alpha=0.1) seed=0 mrpc/original"``."""
    dataset = dataset_label(config["dataset"])
    return f"{loss_label(config['loss'])} seed={config['seed']} {dataset}/{config['variant']}"


def clock(seconds: float | None) -> str:
    """``"1:02:03"``; ``"-:--:--"`` when unknown."""
    if seconds is None or math.isnan(seconds) or seconds < 0:
        return "-:--:--"
    whole = round(seconds)
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


@dataclass(frozen=True)
class TrialState:
    """What the display reads of one trial."""

    label: str
    status: str  # Tune's: PENDING, RUNNING, PAUSED, TERMINATED, ERROR
    epoch: float | None = None  # of the latest evaluation; fractional between epochs
    epochs: int | None = None
    value: float | None = None  # the metric at the latest evaluation
    degenerate: bool = False  # its latest evaluation's predictions show it learned nothing
    steps: int | None = None  # optimiser steps at the latest evaluation
    max_steps: int | None = None  # training.max_steps: the trial's length instead of epochs

    @property
    def progress(self) -> float:
        """The share of the trial's work done, 0 to 1: 1 once it ended, else the
        steps run of its ``max_steps``, or the epochs evaluated of its epochs."""
        if self.status in ENDED:
            return 1.0
        if self.max_steps:
            return min((self.steps or 0) / self.max_steps, 1.0)
        if not self.epoch or not self.epochs:
            return 0.0
        return min(self.epoch / self.epochs, 1.0)

    def state(self, metric: str) -> str:
        """``"epoch 1.5/3  eval_f1 71.50"`` (``"step 120/500 ..."`` with ``max_steps``);
        ``"starting"`` before its first evaluation."""
        if self.epoch is None:
            return "starting"
        if self.max_steps:
            text = f"step {self.steps or 0}/{self.max_steps}"
        else:
            text = f"epoch {round(self.epoch, 2):g}/{self.epochs or '?'}"
        return text + (f"  {metric} {self.value:.2f}" if self.value is not None else "")


def trial_state(trial: Any, metric: str, label: str) -> TrialState:
    """The state of a Tune ``Trial`` (its status, config and last result)."""
    result = trial.last_result or {}
    epoch, value, steps = result.get("epoch"), result.get(metric), result.get("optimizer_steps")
    training = trial_training(trial.config) if "training" in trial.config else {}
    return TrialState(
        label=label,
        status=trial.status,
        epoch=float(epoch) if epoch is not None else None,
        epochs=training.get("epochs"),
        value=float(value) if value is not None else None,
        degenerate=degenerate_reason(result, metric) is not None,
        steps=int(steps) if steps is not None else None,
        max_steps=training.get("max_steps"),
    )


def eta(remaining: float, done_here: float, seconds_here: float) -> float | None:
    """Seconds until ``remaining`` trials' work is done at this driver's pace:
    ``done_here`` trials' work in ``seconds_here`` (a running trial counts by its
    share of epochs evaluated, so the pace is known before the first trial ends).
    None before any work was done here. Work done before a resume does not count:
    it ran at another time."""
    if remaining <= 0:
        return 0.0
    if done_here <= 0 or seconds_here <= 0:
        return None
    return remaining * seconds_here / done_here


@dataclass(frozen=True)
class Snapshot:
    """What the display shows at one moment: plain data, drawn by ``line`` or ``view``."""

    metric: str
    total: int
    trials: tuple[TrialState, ...] = ()
    elapsed_s: float = 0.0
    eta_s: float | None = None

    def count(self, *statuses: str) -> int:
        return sum(trial.status in statuses for trial in self.trials)

    @property
    def done(self) -> int:
        return self.count("TERMINATED")

    @property
    def failed(self) -> int:
        return self.count("ERROR")

    @property
    def ended(self) -> int:
        return self.done + self.failed

    @property
    def running(self) -> list[TrialState]:
        return sorted((t for t in self.trials if t.status == "RUNNING"), key=lambda t: t.label)

    @property
    def waiting(self) -> int:
        """Trials not started yet (or paused by a scheduler), created or not."""
        return max(self.total - self.ended - len(self.running), 0)

    @property
    def percent(self) -> float:
        return 100.0 * self.ended / self.total if self.total else 100.0

    @property
    def scored(self) -> list[TrialState]:
        """The trials with a latest metric; failed trials do not count (the table
        leaves them out)."""
        return [t for t in self.trials if t.value is not None and t.status != "ERROR"]

    @property
    def best(self) -> TrialState | None:
        """The scored trial with the highest latest metric among those whose latest
        predictions are not degenerate (``degenerate_reason``)."""
        learned = [t for t in self.scored if not t.degenerate]
        return max(learned, key=lambda t: t.value or 0.0, default=None)  # never None here

    def counts(self) -> str:
        """``"1 running, 2 done, 0 failed"``."""
        return f"{len(self.running)} running, {self.done} done, {self.failed} failed"

    def best_text(self) -> str | None:
        """``"eval_f1 84.20: dsc(alpha=0.1) seed=1 mrpc/original"``; ``"none (no trial
        learned"`` while every scored trial is degenerate."""
        best = self.best
        if best is None:
            return NO_TRIAL_LEARNED if self.scored else None
        return f"{self.metric} {best.value:.2f}: {best.label}"

    def line(self) -> str:
        """One plain line: ``[0:01:12] 3/8 trials (38%): 2 running, 3 done, 0 failed ...``."""
        head = progress_head(clock(self.elapsed_s), self.ended, self.total)
        text = f"{head}: {self.counts()} | ETA {clock(self.eta_s)}"
        best = self.best_text()
        return text + (f" | best {best}" if best else "")


def view(snapshot: Snapshot) -> Any:
    """The rich renderable of a snapshot: the bar with counts, clock and ETA; the best
    so far; a row per running trial. Labels are plain text, never read as markup."""
    from rich.console import Group
    from rich.progress_bar import ProgressBar
    from rich.table import Table
    from rich.text import Text

    head = Table.grid(padding=(0, 2))
    head.add_row(
        ProgressBar(total=max(snapshot.total, 1), completed=snapshot.ended, width=30),
        Text(f"{snapshot.ended}/{snapshot.total} trials ({snapshot.percent:.0f}%)", "bold"),
        Text(f"elapsed {clock(snapshot.elapsed_s)}"),
        Text(f"ETA {clock(snapshot.eta_s)}", "cyan"),
    )
    waiting = f", {snapshot.waiting} waiting" if snapshot.waiting else ""
    parts: list[Any] = [head, Text(snapshot.counts() + waiting, "dim")]
    best = snapshot.best_text()
    if best:
        parts.append(Text(f"best {best}", "green"))
    if snapshot.running:
        rows = Table.grid(padding=(0, 2))
        for trial in snapshot.running:
            rows.add_row(Text(f"  {trial.label}"), Text(trial.state(snapshot.metric), "dim"))
        parts.append(rows)
    return Group(*parts)


class SweepProgress(Callback):  # type: ignore[misc]
    """Ray Tune callback that shows the sweep's progress (see the module).

    ``started_at`` is the sweep's first start (seconds since the epoch); ``stream`` the
    display's (standard error when None); ``clock`` gives the time (``time.time``).
    """

    def __init__(
        self,
        metric: str,
        total: int,
        started_at: float,
        stream: Any = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.metric = metric
        self.total = total
        self.started_at = started_at
        self._start_showing(stream, clock)

    def _start_showing(self, stream: Any, clock: Callable[[], float]) -> None:
        self._stream = stream
        self._clock = clock
        self._labels: dict[str, str] = {}  # trial id -> label
        self._trials: tuple[TrialState, ...] = ()
        self._pace_from: tuple[float, float] | None = None  # (time, work done) here first
        self._live: Any = None
        self._moved: dict[logging.StreamHandler, Any] = {}  # handler -> its own stream
        self._said: tuple[Any, float] | None = None  # what the last plain line said, when
        self._drawn: tuple[TrialState, ...] = ()  # the trials as the live view last drew them

    def __getstate__(self) -> dict[str, Any]:
        # Tune keeps its callbacks with the experiment: a resumed driver gets this one
        # back with the sweep's first start, and draws afresh.
        return {"metric": self.metric, "total": self.total, "started_at": self.started_at}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._start_showing(None, time.time)

    # What Tune tells.

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        self._read(trials)
        self._show()

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        # Tune has just marked the trials it stopped TERMINATED: an interrupted sweep's
        # would count as done. The last step's reading stands, unless there was none (a
        # resumed sweep that had already ended).
        if not self._trials:
            self._read(trials)
        self._show()
        self._stop_live()

    def _read(self, trials: Iterable[Any]) -> None:
        states = []
        for trial in trials:
            label = self._labels.get(trial.trial_id)
            if label is None:
                label = self._labels[trial.trial_id] = trial_label(trial.config)
            states.append(trial_state(trial, self.metric, label))
        self._trials = tuple(states)
        if self._pace_from is None:  # what a resumed sweep had done before counts no pace
            self._pace_from = (self._clock(), sum(t.progress for t in self._trials))

    def snapshot(self, now: float | None = None) -> Snapshot:
        now = self._clock() if now is None else now
        trials = self._trials
        work = sum(t.progress for t in trials)
        since, work_then = self._pace_from or (now, work)
        total = max(self.total, len(trials))
        return Snapshot(
            metric=self.metric,
            total=total,
            trials=trials,
            elapsed_s=now - self.started_at,
            eta_s=eta(total - work, work - work_then, now - since),
        )

    # Drawing.

    @property
    def stream(self) -> Any:
        if self._stream is None:  # the real one: a live view replaces sys.stderr
            self._stream = sys.stderr
        return self._stream

    def _show(self) -> None:
        if self._live is None and self.stream.isatty() and os.environ.get("TERM") != "dumb":
            self._start_live()
        if self._live is not None:
            # Redrawn on its timer, and at once when a trial changed (a trial that runs
            # for less than the timer's period is still seen running).
            if self._trials != self._drawn:
                self._drawn = self._trials
                self._live.refresh()
            return
        now = self._clock()
        snapshot = self.snapshot(now)
        news = (snapshot.done, snapshot.failed, len(snapshot.running), snapshot.best_text())
        said, when = self._said or (None, -math.inf)
        if news != said or now - when >= HEARTBEAT_S:
            self.stream.write(snapshot.line() + "\n")
            self.stream.flush()
            self._said = (news, now)

    def _start_live(self) -> None:
        from rich.console import Console
        from rich.live import Live

        real_stdout = sys.stdout
        self._live = Live(
            get_renderable=lambda: view(self.snapshot()),
            console=Console(file=self.stream),
            refresh_per_second=REFRESH_PER_SECOND,
            # What Python writes meanwhile (warnings, MLflow's log) goes above the view.
            redirect_stderr=True,
            redirect_stdout=sys.stdout.isatty(),
        )
        self._live.start()
        # Log handlers made before hold the real streams (Ray's write to standard
        # error): pointed at the live view's proxies while it is up.
        self._moved = _move_handlers({self.stream: sys.stderr, real_stdout: sys.stdout})
        atexit.register(self._stop_live)  # the cursor comes back even on a hard exit

    def _stop_live(self) -> None:
        if self._live is None:
            return
        for handler, stream in self._moved.items():
            handler.setStream(stream)
        self._moved = {}
        self._live.stop()  # drawn a last time: the final frame stays on the terminal
        self._live = None
        atexit.unregister(self._stop_live)


def _move_handlers(streams: dict[Any, Any]) -> dict[logging.StreamHandler, Any]:
    """Point every logging handler that writes to a key of ``streams`` at its value;
    returns each handler moved with the stream it had."""
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    moved: dict[logging.StreamHandler, Any] = {}
    for logger in loggers:
        for handler in getattr(logger, "handlers", []):  # placeholders have none
            if isinstance(handler, logging.StreamHandler) and handler not in moved:
                target = streams.get(handler.stream)
                if target is not None and target is not handler.stream:
                    moved[handler] = handler.setStream(target)
    return moved


@contextmanager
def ray_log_file(path: Path) -> Iterator[None]:
    """While a sweep runs, Ray's log records (Tune's among them) all go to ``path``,
    and its own handlers keep only warnings and errors: its routine notices ("Wrote
    the latest version of all result files ...") would break into the progress, its
    problems must still be seen."""
    ray_logger = logging.getLogger("ray")
    path.parent.mkdir(parents=True, exist_ok=True)
    to_file = logging.FileHandler(path, encoding="utf-8")
    to_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    levels = {handler: handler.level for handler in ray_logger.handlers}
    for handler in levels:
        handler.setLevel(max(handler.level, logging.WARNING))
    ray_logger.addHandler(to_file)
    try:
        yield
    finally:
        ray_logger.removeHandler(to_file)
        to_file.close()
        for handler, level in levels.items():
            handler.setLevel(level)
