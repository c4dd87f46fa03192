"""A live display of a sweep for ``dicesweep run``: trials done of the total, percent,
time since the sweep first started (a resumed sweep keeps its clock), an ETA from the
rate trials end at, the best trial so far and a line per running trial with its epoch.

On a terminal it is a ``rich`` live view redrawn twice a second, with Ray's log
records printed above it rather than through it; anywhere else it writes plain lines,
one when the counts or the best change and a heartbeat every ``HEARTBEAT_S``.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from ray.tune import Callback

from search_spaces.dataset_refs import dataset_label
from search_spaces.reports import loss_label

HEARTBEAT_S = 30.0
RAY_LOGGERS = ("ray", "ray.tune", "ray.train", "ray.data")


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


@dataclass
class Snapshot:
    """What the display shows at one moment: plain data, drawn by ``lines`` or ``view``."""

    total: int
    done: int = 0
    failed: int = 0
    running: list[tuple[str, str]] = field(default_factory=list)  # (label, epoch and metric)
    elapsed_s: float = 0.0
    eta_s: float | None = None
    best: str | None = None

    @property
    def ended(self) -> int:
        return self.done + self.failed

    @property
    def percent(self) -> float:
        return 100.0 * self.ended / self.total if self.total else 100.0

    def line(self) -> str:
        """One plain line: ``[0:01:12] 3/8 trials (38%): 2 running, 3 done, 0 failed ...``."""
        text = (
            f"[{clock(self.elapsed_s)}] {self.ended}/{self.total} trials ({self.percent:.0f}%): "
            f"{len(self.running)} running, {self.done} done, {self.failed} failed"
            f" | ETA {clock(self.eta_s)}"
        )
        return text + (f" | best {self.best}" if self.best else "")


def eta(remaining: int, ended_here: int, seconds_here: float) -> float | None:
    """Seconds left at the rate trials ended since this driver started (``ended_here``
    in ``seconds_here``); None before any ended. A resumed sweep's earlier trials do
    not count: they ran at another time."""
    if remaining <= 0:
        return 0.0
    if ended_here <= 0 or seconds_here <= 0:
        return None
    return remaining * seconds_here / ended_here


class SweepProgress(Callback):  # type: ignore[misc]
    """Ray Tune callback that shows the sweep's progress (see the module).

    ``started_at`` is the sweep's first start (seconds since the epoch, e.g. its MLflow
    parent run's start time), so the clock of a resumed sweep goes on from there.
    """

    def __init__(self, metric: str, total: int, started_at: float, stream: Any = None) -> None:
        self.metric = metric
        self.total = total
        self.started_at = started_at
        self.stream = stream
        self._reset()

    def _reset(self) -> None:
        self.best: tuple[float, str] | None = None
        self.running: dict[str, tuple[str, str]] = {}  # trial id -> (label, epoch and metric)
        self.counts = (0, 0)  # done, failed
        self._here = time.time()  # this driver's start: the ETA's rate
        self._ended_before: int | None = None
        self._live: Any = None
        self._last: tuple[Any, float] = (None, 0.0)  # what the last plain line said, and when
        self._handlers: dict[str, list[logging.Handler]] = {}

    def __getstate__(self) -> dict[str, Any]:
        # Tune keeps its callbacks with the experiment; a resumed driver gets this one
        # back with the sweep's start, and draws afresh.
        return {"metric": self.metric, "total": self.total, "started_at": self.started_at}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, stream=None)
        self._reset()

    @property
    def out(self) -> Any:
        return self.stream or sys.stderr

    # What Tune tells.

    def on_trial_result(
        self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any], **info: Any
    ) -> None:
        label = trial_label(trial.config)
        epochs = trial.config.get("training", {}).get("epochs")
        value = result.get(self.metric)
        epoch = result.get("epoch")
        state = f"epoch {epoch:g}/{epochs}" if epoch is not None and epochs else "starting"
        if value is not None:
            state += f"  {self.metric} {value:.2f}"
            if self.best is None or value > self.best[0]:
                self.best = (float(value), label)
        self.running[trial.trial_id] = (label, state)

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.running[trial.trial_id] = (trial_label(trial.config), "starting")

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.running.pop(trial.trial_id, None)

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.running.pop(trial.trial_id, None)

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        self.counts = _counts(trials)
        if self._ended_before is None:
            self._ended_before = sum(self.counts)  # a resumed sweep's finished trials
        self._show()

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        self.counts = _counts(trials)
        self.running.clear()
        self._show(final=True)
        if self._live is not None:
            self._live.stop()
            self._live = None
            self._restore_ray_logs()

    # Drawing.

    def snapshot(self, now: float | None = None) -> Snapshot:
        now = time.time() if now is None else now
        done, failed = self.counts
        ended_here = done + failed - (self._ended_before or 0)
        best = f"{self.metric} {self.best[0]:.2f}: {self.best[1]}" if self.best else None
        return Snapshot(
            total=self.total,
            done=done,
            failed=failed,
            running=sorted(self.running.values()),
            elapsed_s=now - self.started_at,
            eta_s=eta(self.total - done - failed, ended_here, now - self._here),
            best=best,
        )

    def _show(self, final: bool = False) -> None:
        if self.out.isatty():
            self._draw_live()
            return
        said, written = self._last
        now = time.time()
        snapshot = self.snapshot(now)
        news = (snapshot.done, snapshot.failed, len(snapshot.running), snapshot.best)
        if news != said or final or now - written >= HEARTBEAT_S:
            self.out.write(snapshot.line() + "\n")
            self.out.flush()
            self._last = (news, now)

    def _draw_live(self) -> None:
        if self._live is None:
            from rich.console import Console
            from rich.live import Live

            console = Console(file=self.out)
            self._live = Live(
                console=console,
                get_renderable=lambda: view(self.snapshot()),
                refresh_per_second=2,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._live.start()
            self._route_ray_logs(console)

    def _route_ray_logs(self, console: Any) -> None:
        """Ray's log records go through the live console (printed above the view):
        its handlers hold the real stderr, which would write through the view."""
        from rich.logging import RichHandler

        handler = RichHandler(console=console, show_path=False, show_time=False)
        for name in RAY_LOGGERS:
            logger = logging.getLogger(name)
            self._handlers[name] = list(logger.handlers)
            logger.handlers = [handler] if logger.handlers or not logger.propagate else []

    def _restore_ray_logs(self) -> None:
        for name, handlers in self._handlers.items():
            logging.getLogger(name).handlers = handlers
        self._handlers = {}


def view(snapshot: Snapshot) -> Any:
    """The rich renderable of a snapshot: the bar with counts, clock, ETA and best, then
    one row per running trial."""
    from rich.console import Group
    from rich.progress_bar import ProgressBar
    from rich.table import Table

    head = Table.grid(padding=(0, 1))
    head.add_row(
        ProgressBar(total=max(snapshot.total, 1), completed=snapshot.ended, width=30),
        f"{snapshot.ended}/{snapshot.total} trials ({snapshot.percent:.0f}%)",
        f"{snapshot.done} done, {len(snapshot.running)} running, {snapshot.failed} failed",
        f"elapsed {clock(snapshot.elapsed_s)}",
        f"ETA {clock(snapshot.eta_s)}",
    )
    parts: list[Any] = [head]
    if snapshot.best:
        parts.append(f"best {snapshot.best}")
    if snapshot.running:
        trials = Table(box=None, show_header=False, padding=(0, 2, 0, 2))
        for label, state in snapshot.running:
            trials.add_row(label, state)
        parts.append(trials)
    return Group(*parts)


def _counts(trials: list[Any]) -> tuple[int, int]:
    """Trials done (TERMINATED) and failed (ERROR)."""
    done = sum(1 for trial in trials if trial.status == "TERMINATED")
    failed = sum(1 for trial in trials if trial.status == "ERROR")
    return done, failed
