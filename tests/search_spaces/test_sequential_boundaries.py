"""The group-sequential boundaries (search_spaces.sequential.boundaries): against
published values, against an independent integration, and their t-scale and p-value
forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from search_spaces.sequential import (
    information_fractions,
    repeated_p_value,
    spent,
    t_boundaries,
    z_boundaries,
    z_equivalent,
)

# Lan–DeMets O'Brien–Fleming, two-sided α 0.05, equally spaced looks (gsDesign's
# sfLDOF at one-sided 0.025, test.type 2; Jennison & Turnbull 2000, ch. 7).
PUBLISHED = {
    3: (3.7103, 2.5114, 1.9930),
    4: (4.3326, 2.9631, 2.3590, 2.0141),
    5: (4.8769, 3.3569, 2.6803, 2.2898, 2.0310),
}
LOOKS = (3, 5, 7, 10)


@pytest.mark.parametrize("count", sorted(PUBLISHED))
def test_equally_spaced_boundaries_match_the_published_values(count: int) -> None:
    fractions = np.arange(1, count + 1) / count
    assert z_boundaries(fractions, 0.05) == pytest.approx(PUBLISHED[count], abs=2e-4)


def _still_going(bounds: np.ndarray, fractions: np.ndarray) -> list[float]:
    """P(|Z_j| < c_j for every j ≤ k), k = 1..K, from the multivariate normal CDF
    (Genz's integration in SciPy) with corr(Z_i, Z_j) = √(t_i/t_j), i ≤ j."""
    ratio = np.minimum.outer(fractions, fractions) / np.maximum.outer(fractions, fractions)
    found = []
    for k in range(1, fractions.size + 1):
        law = stats.multivariate_normal(
            mean=np.zeros(k), cov=np.sqrt(ratio[:k, :k]), abseps=2e-6, releps=0, seed=0
        )
        found.append(float(law.cdf(bounds[:k], lower_limit=-bounds[:k])))
    return found


@pytest.mark.parametrize("looks", [LOOKS, (2, 4, 6, 8, 10), (3, 6)])
@pytest.mark.parametrize("alpha", [0.05, 0.01])
def test_each_look_spends_what_the_spending_function_allows(
    looks: tuple[int, ...], alpha: float
) -> None:
    # Independently of the grid recursion: the chance of never crossing by look k is
    # 1 − 2α*(t_k), α*(t) = 2 − 2Φ(z_{1−α/4}/√t).
    fractions = information_fractions(looks)
    bounds = z_boundaries(fractions, alpha)
    expected = 1 - 2 * (2 - 2 * stats.norm.cdf(stats.norm.isf(alpha / 4) / np.sqrt(fractions)))
    assert _still_going(bounds, fractions) == pytest.approx(list(expected), abs=2e-5)
    assert 2 * spent(fractions, alpha)[-1] == pytest.approx(alpha)


def test_the_rules_boundaries_fall_and_end_near_the_fixed_test() -> None:
    bounds = z_boundaries(information_fractions(LOOKS), 0.05)
    assert bounds == pytest.approx([3.9286, 2.9656, 2.4625, 2.0018], abs=1e-4)
    assert np.all(np.diff(bounds) < 0)
    assert stats.norm.isf(0.025) < bounds[-1] < 2.05  # a little above the fixed 1.96


def test_one_look_is_the_fixed_test_on_either_scale() -> None:
    (z,) = z_boundaries([1.0], 0.05)
    assert z == pytest.approx(stats.norm.isf(0.025), abs=1e-9)
    (t,) = t_boundaries(np.asarray([z]), [10])
    assert t == pytest.approx(stats.t.isf(0.025, 9), abs=1e-9)
    assert repeated_p_value(2.5, 0, [1.0]) == pytest.approx(2 * stats.norm.sf(2.5), rel=1e-6)


def test_the_t_boundary_keeps_the_nominal_tail() -> None:
    bounds = z_boundaries(information_fractions(LOOKS), 0.05)
    t_bounds = t_boundaries(bounds, LOOKS)
    for z, t, n in zip(bounds, t_bounds, LOOKS, strict=True):
        assert stats.t.sf(t, n - 1) == pytest.approx(stats.norm.sf(z), rel=1e-9)
        assert z_equivalent(t, n) == pytest.approx(z, rel=1e-9)
    assert t_bounds == pytest.approx([108.17, 6.423, 3.440, 2.322], abs=1e-2)


@pytest.mark.parametrize("look", range(4))
def test_a_repeated_p_value_is_under_alpha_exactly_where_the_boundary_is_crossed(
    look: int,
) -> None:
    fractions = information_fractions(LOOKS)
    bound = z_boundaries(fractions, 0.05)[look]
    assert repeated_p_value(bound, look, fractions) == pytest.approx(0.05, rel=1e-6)
    assert repeated_p_value(bound * 1.01, look, fractions) < 0.05
    assert repeated_p_value(bound * 0.99, look, fractions) > 0.05
    assert repeated_p_value(-bound * 1.01, look, fractions) < 0.05  # either sign


def test_repeated_p_values_at_the_edges() -> None:
    fractions = information_fractions(LOOKS)
    assert repeated_p_value(0.0, 0, fractions) == 1.0
    assert repeated_p_value(math.inf, 1, fractions) <= 1e-12
    assert math.isnan(repeated_p_value(math.nan, 1, fractions))
    # Larger |z|, smaller p; and the same |z| later is stronger evidence.
    ps = [repeated_p_value(z, 3, fractions) for z in (1.0, 2.0, 3.0)]
    assert ps == sorted(ps, reverse=True)
    assert repeated_p_value(2.5, 3, fractions) < repeated_p_value(2.5, 1, fractions)


@pytest.mark.parametrize(
    ("fractions", "alpha"), [([0.5, 0.5, 1.0], 0.05), ([0.0, 1.0], 0.05), ([1.0], 1.5)]
)
def test_bad_fractions_or_alpha_are_refused(fractions: list[float], alpha: float) -> None:
    with pytest.raises(ValueError, match=r"fractions|alpha"):
        z_boundaries(fractions, alpha)
