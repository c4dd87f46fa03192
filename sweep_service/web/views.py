"""What the pages show, built from the store's sweep and MLflow's trial rows: plain
data for the templates, no HTML here except the table's own renderer."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd
import yaml

from search_spaces.dataset_refs import dataset_label
from search_spaces.errors import SpecError
from search_spaces.reports import degenerate_reason, loss_label, to_html
from search_spaces.resolve import validate_spec
from search_spaces.spec import expand_losses
from sweep_service.api.schemas import TrialCounts
from sweep_service.api.trials import count_states, run_url, trial_counts
from sweep_service.store import Sweep
from sweep_service.tables import GridQueryError, NoResultsError, grid_of

RUNNING = "RUNNING"


@dataclass(frozen=True)
class Progress:
    """A sweep's trials by state, counted as the API counts them
    (``trials.count_states``); ``percent`` is the share that has ended. ``stopped``
    trials were killed by a cancel (MLflow's KILLED), not failed."""

    done: int
    failed: int
    running: int
    pending: int
    total: int
    stopped: int = 0

    @property
    def ended(self) -> int:
        return self.done + self.failed + self.stopped

    @property
    def percent(self) -> float:
        return 100.0 * self.ended / self.total if self.total else 0.0

    @classmethod
    def of(cls, sweep: Sweep) -> Progress:
        """As the API answers it (the list page: no MLflow read)."""
        return cls.from_counts(trial_counts(sweep), sweep.trial_count)

    @classmethod
    def from_rows(cls, rows: pd.DataFrame, total: int) -> Progress:
        """From MLflow's trial runs as just read (the sweep page)."""
        statuses = [str(status) for status in rows["status"]] if "status" in rows else []
        return cls.from_counts(count_states(statuses, total), total)

    @classmethod
    def from_counts(cls, counts: TrialCounts, total: int) -> Progress:
        return cls(
            counts.done, counts.failed, counts.running, counts.pending, total, counts.stopped
        )


@dataclass(frozen=True)
class TrialLine:
    """One trial as a page lists it."""

    label: str  # e.g. "dsc(alpha=0.3) seed=1 mrpc/original"
    status: str  # MLflow's: RUNNING, FINISHED, FAILED, KILLED
    epoch: float | None
    steps: int | None  # optimiser steps run, at the last evaluation
    metric: float | None
    failure_reason: str | None
    stop_reason: str | None  # e.g. "early_stopping", once FINISHED
    mlflow_url: str | None
    degenerate_reason: str | None = None  # why its predictions show it learned nothing
    stop_rung: int | None = None  # a scheduler's stop: the rung, in evaluations, it reached


def trial_lines(rows: pd.DataFrame, metric: str, experiment: str | None) -> list[TrialLine]:
    """The trials of ``rows`` (``sweep_service.results.trial_rows``), running ones
    first, then by label; ``experiment`` (``experiment_base``) gives each trial's link
    into the MLflow UI."""
    lines = [
        TrialLine(
            label=trial_label(row),
            status=str(row["status"]),
            epoch=_number(row.get("epoch")),
            steps=_whole(row.get("optimizer_steps")),
            metric=_number(row.get(metric)),
            failure_reason=_text(row.get("failure_reason")),
            stop_reason=_text(row.get("stop_reason")),
            mlflow_url=run_url(experiment, str(row["run_id"])) if experiment else None,
            degenerate_reason=degenerate_reason(row, metric),
            stop_rung=_whole(row.get("stop_rung")),
        )
        for row in rows.to_dict(orient="records")
    ]
    return sorted(lines, key=lambda line: (line.status != RUNNING, line.label))


def trial_label(row: dict[str, Any]) -> str:
    """``"dsc(alpha=0.3) seed=1 mrpc/original"``; a stage-1 trial of a two-stage sweep
    ends with the settings it tried: ``" · tune learning_rate=3e-05"``."""
    label = f"{row['loss']} seed={row['seed']} {row['dataset']}/{row['variant']}"
    if row.get("stage") != "tune":
        return label
    tried = ", ".join(
        f"{key.removeprefix('tuned_')}={number:g}"
        for key, value in row.items()
        if key.startswith("tuned_") and (number := _number(value)) is not None
    )
    return f"{label} · tune {tried}"


def pending_lines(sweep: Sweep, started: list[TrialLine]) -> list[TrialLine]:
    """The grid's trials that have no MLflow run (not started, or never will be in a
    finished sweep), labelled as the started ones are; none where the spec samples its
    trials (random/TPE: they are not known before they are drawn) or runs seeds until
    decided (the rule says at each look which seeds it still needs)."""
    try:
        spec = validate_spec(sweep.resolved_spec, max_trials=None)
        losses = expand_losses(spec)
    except (SpecError, ValueError):
        return []
    if spec.seeds_until is not None:
        return []
    seen = {line.label for line in started}
    status = "NOT STARTED" if sweep.status.is_finished() else "PENDING"
    labels = [
        f"{loss_label(loss)} seed={seed} {dataset_label(dataset)}/{variant}"
        for loss in losses
        for dataset in spec.task.dataset
        for variant in spec.task.variant
        for seed in spec.seed_list
    ]
    return [
        TrialLine(label, status, None, None, None, None, None, None)
        for label in labels
        if label not in seen
    ]


def grid_html(
    rows: pd.DataFrame, metric: str, title: str, random_sampling: bool = False
) -> str | None:
    """The paper-shaped table of the finished trials in ``rows`` as an HTML fragment:
    mean ± std over seeds, Δ against CE with the paired tests' marks, the best per
    column in bold, failed trials listed under it, and the budget curves of stage 1
    where the sweep tuned (``random_sampling``: whether stage 1 drew at random); None
    before any trial finished."""
    try:
        table = grid_of(rows, "the sweep", title, metric=metric, random_sampling=random_sampling)
        return to_html(table)
    except (NoResultsError, GridQueryError):  # none finished, or none reports the metric
        return None


def spec_yaml(sweep: Sweep) -> str:
    """The sweep's resolved spec (every preset applied), as YAML."""
    return yaml.safe_dump(sweep.resolved_spec, sort_keys=False, allow_unicode=True)


def _number(value: Any) -> float | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)


def _whole(value: Any) -> int | None:
    number = _number(value)
    return None if number is None else int(number)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
