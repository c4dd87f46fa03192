"""Synchronous successive halving: the ``halving`` scheduler of a sweep's spec.

Rungs at ``grace_period × reduction_factor^k`` evaluations (``halving_rung``). A trial
that reaches a rung waits there (paused, from the checkpoint it reported with that
evaluation) until every live trial it is compared with has reached the rung or ended;
then the best ``ceil(n / reduction_factor)`` go on and the others stop. ASHA, being
asynchronous, compares a trial only with those that reached its rung before it: with one
or two trials at a time and the learning rates in ascending order, it has nothing to
stop. Here every trial is compared with all of them, whatever the order they run in.

A trial left alone at its rung goes on without waiting; one that ends on its own (its
epochs, early stopping) or fails leaves the comparison. Imports Ray: only
``trainables.driver.tune_search`` imports this module.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from search_spaces.tuning import halving_rung

if TYPE_CHECKING:
    from ray.tune.experiment import Trial


class SyncHalving(FIFOScheduler):
    """Synchronous successive halving over every trial it is given (``PerLossScheduler``
    gives it one loss's). Metric and mode come from ``TuneConfig``
    (``set_search_properties``); ``time_attr`` counts evaluations; ``group_size``: how
    many trials it compares; ``max_running``: the most trials running at once (None: as
    many as the cluster holds)."""

    def __init__(
        self,
        time_attr: str,
        grace_period: int,
        reduction_factor: float,
        group_size: int = 1,
        max_running: int | None = None,
    ) -> None:
        super().__init__()
        # Tune's max_concurrent_trials would count the paused trials too and never add
        # the rest of the group: the limit on running trials is kept here instead.
        self._max_running = max_running
        # Tune adds a grid's trials as there is room to run them: a rung is decided only
        # once all ``group_size`` trials were added.
        self._size = group_size
        self._added = 0
        self._time_attr = time_attr
        self._grace = grace_period
        self._eta = reduction_factor
        self._sign = 1.0
        self._live: dict[str, Trial] = {}  # trial id -> trial, in the order added
        self._level: dict[str, int] = {}  # the next rung (index) each live trial must reach
        self._waiting: dict[str, float] = {}  # trials paused at their rung -> signed score
        self._resume: set[str] = set()  # paused trials that won their rung
        self.stopped: dict[str, int] = {}  # trial id -> the rung (index) it was stopped at

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        if metric is not None:
            self._metric = metric
        if mode is not None:
            self._sign = 1.0 if mode == "max" else -1.0
        return True

    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        self._live[trial.trial_id] = trial
        self._level[trial.trial_id] = 0
        self._added += 1

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict[str, Any]) -> str:
        key = trial.trial_id
        if key not in self._live:
            return TrialScheduler.CONTINUE
        self._resume.discard(key)
        value = result.get(self._metric or "")
        rung = halving_rung(self._level[key], self._grace, self._eta)
        if value is None or float(result.get(self._time_attr, 0)) < rung:
            return TrialScheduler.CONTINUE
        self._waiting[key] = self._sign * float(value)
        return self._decide(tune_controller, current=key)

    def _decide(self, tune_controller: Any, current: str | None = None) -> str:
        """Halve the trials at the lowest rung once every live trial is there; the
        action for ``current`` (the trial reporting now): PAUSE while others are to come."""
        if not self._ready():
            return TrialScheduler.PAUSE
        ranked = sorted(self._waiting, key=lambda key: -self._waiting[key])
        keep = max(1, math.ceil(len(ranked) / self._eta))
        action = TrialScheduler.CONTINUE
        for key in ranked[keep:]:
            trial = self._live.pop(key)
            self.stopped[key] = self._level.pop(key)
            if key == current:
                action = TrialScheduler.STOP
            else:
                tune_controller.stop_trial(trial)
                # Ray (2.60) saves a trial's state again only when it had an actor: a
                # trial stopped while paused would stay PAUSED in the experiment's
                # files, and a driver reading them back would count it unfinished.
                mark = getattr(tune_controller, "_mark_trial_to_checkpoint", None)
                if mark is not None:
                    mark(trial)
        for key in ranked[:keep]:
            self._level[key] += 1
            if key != current:
                self._resume.add(key)
        self._waiting.clear()
        return action

    def _leave(self, tune_controller: Any, trial: Trial) -> None:
        """A trial that ended (or was stopped) leaves the comparison; those waiting
        for it may now be halved."""
        key = trial.trial_id
        if self._live.pop(key, None) is None:
            return
        self._level.pop(key, None)
        self._waiting.pop(key, None)
        self._resume.discard(key)
        if self._ready():
            self._decide(tune_controller)

    def _ready(self) -> bool:
        """Whether every trial of the group was added and every live one waits at its rung."""
        waiting = bool(self._waiting) and set(self._waiting) == set(self._live)
        return waiting and self._added >= self._size

    def on_trial_complete(self, tune_controller: Any, trial: Trial, result: dict[str, Any]) -> None:
        self._leave(tune_controller, trial)

    def on_trial_error(self, tune_controller: Any, trial: Trial) -> None:
        self._leave(tune_controller, trial)

    def on_trial_remove(self, tune_controller: Any, trial: Trial) -> None:
        self._leave(tune_controller, trial)

    def choose_trial_to_run(self, tune_controller: Any) -> Trial | None:
        """A pending trial of this scheduler's first, else a paused one that won its
        rung; never one still waiting at its rung."""
        everyone = tune_controller.get_trials()
        running = sum(trial.status == trial.RUNNING for trial in everyone)
        if self._max_running is not None and running >= self._max_running:
            return None
        trials = [t for t in everyone if t.trial_id in self._live]
        for trial in trials:
            if trial.status == trial.PENDING:
                return trial
        for trial in trials:
            if trial.status == trial.PAUSED and trial.trial_id in self._resume:
                return trial
        return None

    def debug_string(self) -> str:
        return (
            f"Synchronous successive halving: {len(self._live)} live, "
            f"{len(self._waiting)} waiting at their rung, {len(self.stopped)} stopped."
        )
