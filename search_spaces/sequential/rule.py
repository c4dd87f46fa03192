"""Seeds until a difference is decided: the rule's settings and its verdict at each look.

A cell's paired differences ``d_i`` (loss − baseline at seed i, in seed order) are
looked at after ``n_1 < … < n_K`` seeds (``SeedsUntilDecided.looks``). At look k, with
mean ``d̄_k``, standard deviation ``s_k`` and ``T_k = d̄_k / (s_k/√n_k)``:

- **decided** where ``|T_k| ≥ c_k^t``, the Lan–DeMets O'Brien–Fleming boundary carried to
  the t scale (``boundaries``) at the spending level calibrated so that the looks
  together spend α (``calibration``); either sign;
- **max** where it is not decided at the last look;
- **futile** (non-binding: stopping can only lower the type-I error, and a cell that
  goes on regardless keeps the boundaries' own) where the repeated
  confidence interval ``d̄_k ± c_k^t·s_k/√n_k`` lies inside ``(−δ_min, δ_min)``, or where
  the conditional power to cross the last boundary is below ``FUTILITY_POWER``;
- **continue** otherwise.

The conditional power follows the current trend (Jennison & Turnbull 2000, ch. 10): on
the score scale ``B(t) = Z·√t``, with the drift estimated as ``B(t_k)/t_k`` and σ taken as
``s_k`` (so ``Z_k ≈ T_k``), ``B(1)`` is normal with mean ``T_k/√t_k`` and variance
``1 − t_k``, and

    CP_k = Φ((T_k/√t_k − c_K^t)/√(1 − t_k)) + Φ((−T_k/√t_k − c_K^t)/√(1 − t_k)).

The repeated confidence intervals cover the true mean difference at every look at once
with probability 1 − α (ch. 9; up to the calibration's Monte-Carlo error), and the
repeated p-value (``repeated_t_p_value``) is at most α exactly where the cell is decided:
no verdict claims more than the rule.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cache

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from search_spaces.errors import SpecError, SpecIssue
from search_spaces.sequential.boundaries import (
    Floats,
    information_fractions,
    t_boundaries,
    z_boundaries,
)
from search_spaces.sequential.calibration import calibrated_level, repeated_t_p_value

FUTILITY_POWER = 0.10  # below this conditional power a cell stops as futile


class Verdict(StrEnum):
    """What a look says about a cell."""

    CONTINUE = "continue"
    DECIDED = "decided"
    FUTILE = "futile"
    MAX = "max"

    def is_final(self) -> bool:
        """Whether the cell runs no more seeds."""
        return self is not Verdict.CONTINUE


@dataclass(frozen=True)
class SeedsUntilDecided:
    """The settings of ``seeds: {min, max, until: decided, looks, alpha, delta_min}``:
    the first look at ``min`` seeds, the last at ``max``, two-sided ``alpha`` over all
    looks, and ``delta_min``, the metric's difference below which none is of interest.

    Raises:
        SpecError: every broken rule, each with its field (``seeds.looks``).
    """

    min: int = 3
    max: int = 10
    looks: tuple[int, ...] = (3, 5, 7, 10)
    alpha: float = 0.05
    delta_min: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "looks", tuple(self.looks))  # hashable: ``design`` caches
        issues = _issues(self)
        if issues:
            raise SpecError(issues)


def _issues(rule: SeedsUntilDecided) -> list[SpecIssue]:
    """Each rule ``rule`` breaks, with the field it is about."""
    if not all(_is_int(value) for value in (rule.min, rule.max, *rule.looks)):
        return [SpecIssue("seeds", "min, max and the looks must be whole numbers")]
    issues = []
    if rule.min < 2:
        issues.append(SpecIssue("seeds.min", f"a paired t statistic needs 2 seeds, got {rule.min}"))
    if rule.max < rule.min:
        issues.append(SpecIssue("seeds.max", f"must be at least min ({rule.min}), got {rule.max}"))
    rising = all(b > a for a, b in itertools.pairwise(rule.looks))
    if not rule.looks or rule.looks[0] != rule.min or rule.looks[-1] != rule.max or not rising:
        issues.append(
            SpecIssue(
                "seeds.looks",
                f"must rise strictly from min ({rule.min}) to max ({rule.max}),"
                f" got {list(rule.looks)}",
            )
        )
    if not (_is_number(rule.alpha) and 0 < rule.alpha < 1):
        issues.append(SpecIssue("seeds.alpha", f"must lie in (0, 1), got {rule.alpha!r}"))
    if not (_is_number(rule.delta_min) and 0 <= rule.delta_min < math.inf):
        issues.append(
            SpecIssue("seeds.delta_min", f"must be finite and at least 0, got {rule.delta_min!r}")
        )
    return issues


def _is_number(value: object) -> bool:
    return isinstance(value, float | int) and not isinstance(value, bool)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Design:
    """A rule's boundaries: information fractions, the calibrated spending ``level``, and
    at that level the z boundaries and the t boundaries (one per look)."""

    rule: SeedsUntilDecided
    fractions: Floats
    level: float
    z: Floats
    t: Floats


@cache
def design(rule: SeedsUntilDecided) -> Design:
    """The boundaries of ``rule`` (computed once per rule)."""
    fractions = information_fractions(rule.looks)
    level = calibrated_level(rule.looks, rule.alpha)
    z = z_boundaries(fractions, level)
    return Design(rule, fractions, level, z, t_boundaries(z, rule.looks))


@dataclass(frozen=True)
class LookStatistics:
    """One look's figures over many cells at once (arrays of one shape): the t statistic,
    the repeated confidence interval, the conditional power, and the two stopping tests
    (``futile`` never at the last look)."""

    t_statistic: Floats
    ci_low: Floats
    ci_high: Floats
    conditional_power: Floats
    decided: NDArray[np.bool_]
    futile: NDArray[np.bool_]


def look_statistics(plan: Design, look: int, mean: Floats, sd: Floats) -> LookStatistics:
    """The figures at look ``look`` (0-based) of cells whose first ``plan.rule.looks[look]``
    differences have these means and standard deviations (n − 1 denominator). A zero
    spread gives ``T = ±∞`` (0 where the mean is 0 too)."""
    rule = plan.rule
    n = rule.looks[look]
    mean, sd = np.asarray(mean, dtype=float), np.asarray(sd, dtype=float)
    error = sd / math.sqrt(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_stat = np.where(error > 0, mean / error, np.where(mean == 0, 0.0, np.sign(mean) * np.inf))
    half = plan.t[look] * error
    low, high = mean - half, mean + half
    fraction, last = plan.fractions[look], plan.t[-1]
    if look == len(rule.looks) - 1:
        power = (np.abs(t_stat) >= last).astype(float)
    else:
        trend, spread = t_stat / math.sqrt(fraction), math.sqrt(1.0 - fraction)
        power = stats.norm.cdf((trend - last) / spread) + stats.norm.cdf((-trend - last) / spread)
    decided = np.abs(t_stat) >= plan.t[look]
    inside = (low > -rule.delta_min) & (high < rule.delta_min)
    futile = ~decided & (inside | (power < FUTILITY_POWER))
    if look == len(rule.looks) - 1:  # the last look ends every cell: decided or max
        futile = np.zeros_like(decided)
    return LookStatistics(t_stat, low, high, power, decided, futile)


@dataclass(frozen=True)
class Look:
    """What one look at a cell found: ``look`` (1-based) after ``seeds`` differences, their
    ``mean`` and ``sd``, the t statistic against its ``boundary`` (t scale), the repeated
    confidence interval, the repeated p-value, the conditional power, the verdict and,
    for futility, why."""

    look: int
    seeds: int
    mean: float
    sd: float
    t_statistic: float
    boundary: float
    ci_low: float
    ci_high: float
    p_value: float
    conditional_power: float
    verdict: Verdict
    reason: str


def verdict_at(plan: Design, look: int, figures: LookStatistics) -> tuple[Verdict, str]:
    """One cell's verdict at look ``look`` (0-based) from its (scalar) figures, and why."""
    if bool(figures.decided):
        return Verdict.DECIDED, f"|t| {abs(float(figures.t_statistic)):.2f} ≥ {plan.t[look]:.2f}"
    if look == len(plan.rule.looks) - 1:
        return Verdict.MAX, "not decided at the last look"
    if not bool(figures.futile):
        return Verdict.CONTINUE, ""
    delta_min = plan.rule.delta_min
    if float(figures.ci_low) > -delta_min and float(figures.ci_high) < delta_min:
        return Verdict.FUTILE, f"repeated CI inside ±{delta_min:g}"
    return Verdict.FUTILE, f"conditional power {float(figures.conditional_power):.3f}"


def run_rule(differences: Sequence[float], rule: SeedsUntilDecided) -> list[Look]:
    """The looks ``rule`` takes at a cell's paired differences (in seed order), up to the
    first final verdict or the last look the differences reach; empty with fewer than
    ``rule.min``. A last look that says ``continue`` means the rule wanted more seeds."""
    plan = design(rule)
    values = np.asarray(differences, dtype=float)
    taken: list[Look] = []
    for look, n in enumerate(rule.looks):
        if n > values.size:
            break
        mean, sd = float(values[:n].mean()), float(values[:n].std(ddof=1))
        figures = look_statistics(plan, look, np.asarray(mean), np.asarray(sd))
        verdict, reason = verdict_at(plan, look, figures)
        t_stat = float(figures.t_statistic)
        taken.append(
            Look(
                look=look + 1,
                seeds=n,
                mean=mean,
                sd=sd,
                t_statistic=t_stat,
                boundary=float(plan.t[look]),
                ci_low=float(figures.ci_low),
                ci_high=float(figures.ci_high),
                p_value=repeated_t_p_value(t_stat, look, rule.looks),
                conditional_power=float(figures.conditional_power),
                verdict=verdict,
                reason=reason,
            )
        )
        if verdict.is_final():
            break
    return taken
