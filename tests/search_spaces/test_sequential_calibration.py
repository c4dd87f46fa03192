"""The t-scale design's calibrated spending level (search_spaces.sequential.calibration):
what it spends on its reference studies and on fresh ones."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from search_spaces.sequential import (
    SeedsUntilDecided,
    calibrated_level,
    design,
    information_fractions,
    t_boundaries,
    t_design_error,
    z_boundaries,
)
from search_spaces.sequential.calibration import REFERENCE_STUDIES

LOOKS = (3, 5, 7, 10)


def test_the_calibrated_level_spends_alpha_on_the_reference_studies() -> None:
    level = calibrated_level(LOOKS, 0.05)
    assert 0.04 < level < 0.05
    assert t_design_error(LOOKS, level) <= 0.05 < t_design_error(LOOKS, level * (1 + 1e-9))
    # Uncalibrated, the looks together spend more than α.
    assert t_design_error(LOOKS, 0.05) > 0.052


def test_one_look_needs_no_calibration() -> None:
    assert calibrated_level((10,), 0.05) == 0.05
    rule = SeedsUntilDecided(min=10, max=10, looks=(10,))
    assert design(rule).t[0] == pytest.approx(stats.t.isf(0.025, 9))


def test_fresh_null_studies_are_decided_at_alpha() -> None:
    # Draws apart from the reference ones: the boundaries alone decide α of them, within
    # 3 of the combined Monte-Carlo errors (these studies' and the calibration's).
    studies = 200_000
    bounds = design(SeedsUntilDecided()).t
    rng = np.random.default_rng(123)
    draws = rng.standard_normal((studies, LOOKS[-1]))
    t_stats = np.stack(
        [
            np.abs(draws[:, :n].mean(axis=1)) / (draws[:, :n].std(axis=1, ddof=1) / math.sqrt(n))
            for n in LOOKS
        ],
        axis=1,
    )
    found = float(np.any(t_stats >= bounds, axis=1).mean())
    error = math.sqrt(0.05 * 0.95 * (1 / studies + 1 / REFERENCE_STUDIES))
    assert abs(found - 0.05) < 3 * error
    uncalibrated = t_boundaries(z_boundaries(information_fractions(LOOKS), 0.05), LOOKS)
    assert float(np.any(t_stats >= uncalibrated, axis=1).mean()) > 0.05 + 3 * error
