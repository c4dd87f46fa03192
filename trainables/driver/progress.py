"""A live display of a sweep: trials pending, running, done, failed, and the best so far."""

from __future__ import annotations

import sys
import time
from typing import Any

from ray.tune import Callback

from search_spaces.dataset_refs import dataset_label
from search_spaces.reports import loss_label


class SweepProgress(Callback):
    """Prints one status line whenever the counts or the best trial change.

    On a terminal the line is rewritten in place; in a log, each change is a line.
    """

    def __init__(self, metric: str, total: int, stream: Any = None) -> None:
        self.metric = metric
        self.total = total
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.best: tuple[float, str] | None = None
        self._last_line = ""

    def on_trial_result(
        self, iteration: int, trials: list, trial: Any, result: dict, **info: Any
    ) -> None:
        value = result.get(self.metric)
        if value is not None and (self.best is None or value > self.best[0]):
            config = trial.config
            self.best = (
                float(value),
                f"{loss_label(config['loss'])} seed={config['seed']} "
                f"{dataset_label(config['dataset'])}/{config['variant']}",
            )

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        self._show(trials)

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        self._show(trials)
        if self.stream.isatty():
            self.stream.write("\n")

    def _show(self, trials: list) -> None:
        counts = {"PENDING": 0, "RUNNING": 0, "TERMINATED": 0, "ERROR": 0, "PAUSED": 0}
        for trial in trials:
            counts[trial.status] = counts.get(trial.status, 0) + 1
        pending = counts["PENDING"] + counts["PAUSED"] + max(0, self.total - len(trials))
        line = (
            f"trials {pending} pending, {counts['RUNNING']} running, "
            f"{counts['TERMINATED']} done, {counts['ERROR']} failed"
        )
        if self.best is not None:
            line += f" | best {self.metric} {self.best[0]:.2f}: {self.best[1]}"
        if line == self._last_line:
            return
        self._last_line = line
        elapsed = time.monotonic() - self.started
        text = f"[{elapsed:6.0f}s] {line}"
        if self.stream.isatty():
            self.stream.write("\r\033[K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
