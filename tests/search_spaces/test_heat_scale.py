"""The heatmap's colour scale spans at least the smallest difference its seeds
resolve, and says so where none is resolved (one seed)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from search_spaces.reports import paired_test, pivot_table
from search_spaces.reports.heat_scale import NONE_RESOLVED, smallest_resolvable
from search_spaces.reports.paired import with_significance
from search_spaces.reports.plots import _draw_heatmap


def _table(f1: dict[str, list[float]]) -> pd.DataFrame:
    rows = pd.DataFrame(
        [
            {"loss": loss, "variant": "original", "seed": seed, "eval_f1": value}
            for loss, values in f1.items()
            for seed, value in enumerate(values)
        ]
    )
    return with_significance(
        pivot_table(rows, "loss", "variant"), paired_test(rows, "loss", "variant")
    )


def _drawn(table: pd.DataFrame) -> Any:
    from matplotlib.figure import Figure

    figure = Figure()
    axes = figure.add_subplot()
    _draw_heatmap(axes, table)
    return axes


def test_a_difference_below_the_resolvable_one_is_drawn_in_near_colours() -> None:
    # ce and dsc 0.06 apart on average, per-seed differences spread over ±1: the
    # seeds resolve a few points, so the two cells get near colours, not the ends.
    table = _table({"ce": [78.94, 80.0, 77.88], "dsc": [79.00, 79.5, 78.5]})
    resolvable = smallest_resolvable(table)
    assert resolvable is not None and resolvable > 1.0
    image = _drawn(table).images[0]
    assert image.norm.vmax - image.norm.vmin == pytest.approx(resolvable)
    assert (image.norm.vmax + image.norm.vmin) / 2 == pytest.approx((78.94 + 79.0) / 2)


def test_a_resolved_spread_keeps_the_cells_own_range() -> None:
    table = _table({"ce": [70.0, 70.5, 69.5], "dsc": [80.0, 80.6, 79.6]})
    resolvable = smallest_resolvable(table)
    assert resolvable is not None and resolvable < 10
    image = _drawn(table).images[0]
    assert image.norm.vmin == pytest.approx(70.0) and image.norm.vmax == pytest.approx(
        80.0667, abs=1e-3
    )


def test_one_seed_resolves_nothing_and_the_plot_says_so() -> None:
    table = _table({"ce": [78.94], "dsc": [79.00]})
    assert smallest_resolvable(table) is None
    axes = _drawn(table)
    assert axes.images[0].cmap.N == 1  # one colour for every cell
    assert len(axes.figure.axes) == 1  # no colour bar
    assert NONE_RESOLVED in axes.get_xlabel()
