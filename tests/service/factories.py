"""Sweep drafts for store tests, built directly (the spec's validation is tested elsewhere)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from sweep_service.store import (
    Sweep,
    SweepDraft,
    SweepStatus,
    TrialProgress,
    create_sweep,
    record_progress,
    transition_sweep,
)


def make_draft(
    name: str = "sweep",
    *,
    trials: int = 2,
    gpus_per_trial: float = 0.0,
    spec: dict[str, Any] | None = None,
) -> SweepDraft:
    """A draft whose submitted spec is ``spec`` (default: extends ``smoke``, named ``name``)."""
    submitted = spec if spec is not None else {"extends": "smoke", "name": name}
    return SweepDraft(
        name=name,
        preset="smoke",
        spec=submitted,
        resolved_spec={**submitted, "seeds": [0]},
        trial_count=trials,
        gpus_per_trial=gpus_per_trial,
    )


BEST_TRIAL = {"run_id": "r1", "loss": "dsc(alpha=0.1)", "seed": 3, "eval_f1": 84.25}


def sweep_in_progress(session: Session, owner_id: int, name: str = "running") -> Sweep:
    """A stored sweep, submitted, whose trials have reported: 1 running, 2 done, the
    best ``BEST_TRIAL``, in MLflow experiment 7 (every column of the poll filled)."""
    sweep = create_sweep(session, owner_id, make_draft(name, trials=4, gpus_per_trial=0.25)).sweep
    transition_sweep(session, sweep.id, SweepStatus.SUBMITTED)
    progress = TrialProgress(running=1, done=2, best_trial=BEST_TRIAL, mlflow_experiment_id="7")
    return record_progress(session, sweep.id, progress)
