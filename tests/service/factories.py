"""Sweep drafts for store tests, built directly (the spec's validation is tested elsewhere)."""

from __future__ import annotations

from typing import Any

from sweep_service.store import SweepDraft


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
