"""The heatmap's colour scale: it never makes a difference the seeds cannot resolve
look large.

Matplotlib stretches a colour map over the cells' own range, so two means 0.06 apart
are drawn purple against yellow. The scale here spans at least the smallest
difference the table's paired tests resolve (``attrs["resolvable"]``,
``resolution.resolvable_difference``), centred on the cells; where no test resolves
any (one seed, or no baseline to pair with) the cells are not coloured by value and
the plot says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

NONE_RESOLVED = (
    "no difference between cells is resolved (no paired test over 2+ seeds): not coloured"
)


@dataclass(frozen=True)
class HeatScale:
    """The colour limits (the metric's units) and, where colour says nothing, why."""

    low: float
    high: float
    note: str | None = None  # set: draw every cell in one colour and print this

    @property
    def coloured(self) -> bool:
        return self.note is None


def smallest_resolvable(table: pd.DataFrame) -> float | None:
    """The smallest Δ any of the table's paired tests resolves (metric points), or
    None when none does (``attrs["resolvable"]`` empty or NaN throughout)."""
    found = [
        value for value in (table.attrs.get("resolvable") or {}).values() if not math.isnan(value)
    ]
    return min(found) if found else None


def heat_scale(means: np.ndarray, table: pd.DataFrame) -> HeatScale:
    """The colour limits for ``means`` (rows x columns, NaN for an empty cell): the
    cells' range widened symmetrically to the smallest resolvable difference when it
    is narrower; one flat colour and ``NONE_RESOLVED`` where no difference is resolved."""
    finite = means[np.isfinite(means)]
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    resolvable = smallest_resolvable(table)
    if resolvable is None:
        return HeatScale(low, high, NONE_RESOLVED)
    span = max(high - low, resolvable)
    centre = (low + high) / 2
    return HeatScale(centre - span / 2, centre + span / 2)
