"""Two-sided group-sequential boundaries: Lan–DeMets O'Brien–Fleming spending, the
boundaries by numerical integration, their t-scale form and repeated p-values.

Looks after ``n_1 < … < n_K`` paired differences have information fractions
``t_k = n_k / n_K`` (the mean's variance falls as 1/n). Under H0 the standardised
statistics ``Z_1 … Z_K`` are jointly normal with ``corr(Z_j, Z_k) = √(t_j / t_k)``
(j ≤ k): the score ``S_k = Z_k·√t_k`` is a Brownian motion seen at the ``t_k``, with
independent increments ``S_k − S_{k−1} ~ N(0, t_k − t_{k−1})``.

Spending (Lan & DeMets, Biometrika 1983, the O'Brien–Fleming-like function): each side
of a two-sided level-α design has spent, by information fraction t,

    α*(t) = 2 − 2Φ(z_{1−α/4} / √t),        α*(1) = α/2,

and the boundary ``c_k`` at look k solves

    P(|Z_1| < c_1, …, |Z_{k−1}| < c_{k−1}, |Z_k| ≥ c_k) = 2(α*(t_k) − α*(t_{k−1})),

so that the chance of ever crossing under H0 is exactly α. The left side is computed by
the recursion of Armitage, McPherson & Rowe (JRSS A 1969) as Jennison & Turnbull (Group
Sequential Methods with Applications to Clinical Trials, 2000, ch. 19) give it: the
sub-density of ``S_k`` on the continuation region, carried from look to look by
convolution with the increment's normal density, on a grid integrated by Simpson's rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, stats

GRID_POINTS = 401  # Simpson nodes per look (odd); boundaries agree with 1,601 to 1e-6
LARGEST_BOUNDARY = 60.0  # a z boundary is sought in [0, this]
SMALLEST_P = 1e-12  # a repeated p-value below this is reported as this

Floats = NDArray[np.float64]


def spent(fractions: Sequence[float] | Floats, alpha: float) -> Floats:
    """α*(t) = 2 − 2Φ(z_{1−α/4}/√t): what one side of a two-sided level-``alpha``
    design has spent by each information fraction (α/2 at t = 1)."""
    t = np.asarray(fractions, dtype=float)
    return 2.0 * stats.norm.sf(stats.norm.isf(alpha / 4.0) / np.sqrt(t))


def information_fractions(looks: Sequence[int]) -> Floats:
    """``t_k = n_k / n_K`` for looks after ``n_1 < … < n_K`` paired differences."""
    seeds = np.asarray(looks, dtype=float)
    return seeds / seeds[-1]


def _simpson(half_width: float) -> tuple[Floats, Floats]:
    """Nodes and Simpson weights on ``[−half_width, half_width]``."""
    nodes = np.linspace(-half_width, half_width, GRID_POINTS)
    weights = np.ones(GRID_POINTS)
    weights[1:-1:2], weights[2:-1:2] = 4.0, 2.0
    return nodes, weights * (nodes[1] - nodes[0]) / 3.0


def _crossing(boundary: float, t: float, step_sd: float, nodes: Floats, mass: Floats) -> float:
    """P(still going before this look, |Z| ≥ ``boundary`` at it): the previous look's
    continuation sub-density (``mass`` = weight × density at ``nodes``, score scale)
    times the chance its increment carries ``S`` beyond ``±boundary·√t``."""
    edge = boundary * math.sqrt(t)
    beyond = stats.norm.cdf((-edge - nodes) / step_sd) + stats.norm.sf((edge - nodes) / step_sd)
    return float(mass @ beyond)


def _boundary(t: float, step_sd: float, nodes: Floats, mass: Floats, spend: float) -> float:
    """The boundary whose crossing probability (``_crossing``) is ``spend``."""
    return float(
        optimize.brentq(
            lambda c: _crossing(c, t, step_sd, nodes, mass) - spend,
            0.0,
            LARGEST_BOUNDARY,
            xtol=1e-12,
        )
    )


def z_boundaries(fractions: Sequence[float] | Floats, alpha: float) -> Floats:
    """The boundaries ``c_1 … c_K`` (|Z_k| ≥ c_k rejects) of the two-sided level-``alpha``
    Lan–DeMets O'Brien–Fleming design at these information fractions (rising, the last
    1). With 4 equal looks at α = 0.05: 4.333, 2.963, 2.359, 2.014.

    Raises:
        ValueError: fractions that do not rise strictly within (0, 1], or ``alpha``
            outside (0, 1).
    """
    t = np.asarray(fractions, dtype=float)
    if t.size == 0 or t[0] <= 0 or t[-1] > 1 or np.any(np.diff(t) <= 0):
        raise ValueError(f"information fractions must rise strictly within (0, 1], got {t}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    increments = 2.0 * np.diff(spent(t, alpha), prepend=0.0)
    bounds = [float(stats.norm.isf(increments[0] / 2.0))]
    nodes, weights = _simpson(bounds[0] * math.sqrt(t[0]))
    density = stats.norm.pdf(nodes, scale=math.sqrt(t[0]))
    for k in range(1, t.size):
        step_sd = math.sqrt(t[k] - t[k - 1])
        mass = weights * density
        bound = _boundary(float(t[k]), step_sd, nodes, mass, float(increments[k]))
        bounds.append(bound)
        new_nodes, weights = _simpson(bound * math.sqrt(t[k]))
        kernel = stats.norm.pdf((new_nodes[:, None] - nodes[None, :]) / step_sd) / step_sd
        density, nodes = kernel @ mass, new_nodes
    return np.asarray(bounds)


def t_boundaries(z_bounds: Floats, seeds: Sequence[int]) -> Floats:
    """The z boundaries carried to paired t statistics: each boundary's nominal
    one-sided tail ``1 − Φ(c_k)`` kept, read off Student's t with ``n_k − 1`` degrees
    of freedom, ``c_k^t = F⁻¹_{t, n_k−1}(Φ(c_k))`` (the significance-level approach to
    an unknown variance; Jennison & Turnbull 2000, ch. 3). Each look's own level is
    exact; the looks together spend a little more than the z boundaries' α at few
    degrees of freedom, which ``calibration`` corrects."""
    degrees = np.asarray(seeds, dtype=float) - 1.0
    return np.asarray(stats.t.isf(stats.norm.sf(z_bounds), degrees), dtype=float)


def z_equivalent(t_statistic: float, seeds: int) -> float:
    """|z| with the same one-sided tail as |``t_statistic``| on ``seeds − 1`` degrees of
    freedom: |T| crosses ``c^t`` exactly when this crosses ``c``."""
    if math.isnan(t_statistic):
        return math.nan
    return float(stats.norm.isf(stats.t.sf(abs(t_statistic), seeds - 1)))


def repeated_p_value(z: float, look: int, fractions: Sequence[float] | Floats) -> float:
    """The repeated p-value at look ``look`` (0-based) of a statistic ``|z|``: the
    smallest α whose design (the same fractions, the same spending function) has
    ``|z| ≥ c_k(α)`` (Jennison & Turnbull 2000, ch. 9). It is at most α exactly where the
    level-α boundary is crossed at that look, and under H0 the chance that any look's
    is at most α is at most α. 1 where even α → 1 would not cross; ``SMALLEST_P``
    where it is smaller than that."""
    if math.isnan(z):
        return math.nan
    t = np.asarray(fractions, dtype=float)[: look + 1]

    def margin(level: float) -> float:
        return float(z_boundaries(t, level)[-1]) - abs(z)

    highest = 1.0 - 1e-9
    if margin(highest) > 0:
        return 1.0
    if math.isinf(z) or margin(SMALLEST_P) <= 0:
        return SMALLEST_P
    return float(optimize.brentq(margin, SMALLEST_P, highest, xtol=1e-12, rtol=1e-10))
