"""The t-scale design's spending level, calibrated so that its looks together spend α.

``t_boundaries`` keeps each look's own level exact (the boundary's nominal tail read off
Student's t), but one cell's looks share their variance estimates, and at few degrees of
freedom the looks together spend more than the z boundaries' α: about 5.3% for looks
after 3, 5, 7 and 10 seeds at α 5%. The t statistics' joint law has no closed form, so
the spending level α' of the t-scale design is set by simulation: ``REFERENCE_STUDIES``
null studies (normal paired differences; a t statistic does not depend on σ), drawn from
a fixed seed so that every process computes the same boundaries, and

    α' = sup { a : P̂(|T_k| ≥ c_k^t(a) at some look k) ≤ α },

found by bisection (``calibrated_level``), where c_k^t(a) are ``t_boundaries`` of
``z_boundaries`` at level a. The estimate's own Monte-Carlo error is
√(α(1 − α)/N), 0.0002 at α 5% and N = 10⁶. ``t_design_error`` is P̂ itself: the
repeated p-value of a look on the t scale is ``t_design_error`` at the level where that
look's boundary is crossed, so that it is at most α exactly where the calibrated
boundary is crossed.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from search_spaces.sequential.boundaries import (
    Floats,
    information_fractions,
    repeated_p_value,
    t_boundaries,
    z_boundaries,
    z_equivalent,
)

REFERENCE_STUDIES = 1_000_000
REFERENCE_SEED = 62  # numpy's PCG64: the same draws, so the same boundaries, everywhere
CHUNK = 100_000  # studies drawn at a time (memory)
BISECTIONS = 40


@cache
def reference_t(looks: tuple[int, ...]) -> Floats:
    """|T_k| of ``REFERENCE_STUDIES`` null studies at each look: shape (studies, looks)."""
    rng = np.random.default_rng(REFERENCE_SEED)
    blocks = []
    for start in range(0, REFERENCE_STUDIES, CHUNK):
        draws = rng.standard_normal((min(CHUNK, REFERENCE_STUDIES - start), looks[-1]))
        blocks.append(
            np.stack(
                [
                    np.abs(draws[:, :n].mean(axis=1))
                    / (draws[:, :n].std(axis=1, ddof=1) / math.sqrt(n))
                    for n in looks
                ],
                axis=1,
            )
        )
    return np.concatenate(blocks)


def t_design_error(looks: tuple[int, ...], level: float) -> float:
    """P̂(some look's |T_k| ≥ c_k^t(``level``)) over the reference studies: the type-I
    error of the t-scale design that spends at ``level`` (1 at ``level`` ≥ 1; with one
    look, ``level`` itself: a single t-test is exact)."""
    if level >= 1 or len(looks) == 1:
        return min(level, 1.0)
    bounds = t_boundaries(z_boundaries(information_fractions(looks), level), looks)
    return float(np.any(reference_t(looks) >= bounds, axis=1).mean())


@cache
def calibrated_level(looks: tuple[int, ...], alpha: float) -> float:
    """The largest spending level whose t-scale design errs at most ``alpha`` on the
    reference studies (to ``alpha · 2⁻⁴⁰``); ``alpha`` itself with one look."""
    if len(looks) == 1:
        return alpha
    low, high = alpha / 4, alpha
    if t_design_error(looks, high) <= alpha:
        return high
    while t_design_error(looks, low) > alpha:
        low /= 2
    for _ in range(BISECTIONS):
        middle = (low + high) / 2
        if t_design_error(looks, middle) <= alpha:
            low = middle
        else:
            high = middle
    return low


def repeated_t_p_value(t_statistic: float, look: int, looks: tuple[int, ...]) -> float:
    """The repeated p-value of a paired t statistic at look ``look`` (0-based): the
    smallest α whose calibrated t-scale design crosses there, ``t_design_error`` at the
    spending level where that look's boundary meets |T| (``repeated_p_value`` of the
    z with the same tail), and never below that level. At most α exactly where the
    calibrated level-α boundary is crossed."""
    z = z_equivalent(t_statistic, looks[look])
    level = repeated_p_value(z, look, information_fractions(looks))
    if math.isnan(level):
        return math.nan
    return max(level, t_design_error(looks, level))
