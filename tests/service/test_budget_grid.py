"""The grid API's renderings and the sweep page's table fragment of a two-stage sweep's
trials carry its budget curves; a sweep without stage-1 trials gets none. Rows are
shaped as MLflow's trial rows of a two-stage sweep (``stage``, ``tuned_<setting>``)."""

from __future__ import annotations

import struct

import pandas as pd
import pytest

from search_spaces.reports import to_markdown
from search_spaces.reports.budget import stage_one_is_random
from sweep_service.api.grid import PngRenderer
from sweep_service.tables import NoResultsError, grid_of
from sweep_service.web.views import grid_html
from tests.stage_rows import two_stage_rows


def _height(png: bytes) -> int:
    return int(struct.unpack(">II", png[16:24])[1])


def test_the_grid_of_a_two_stage_sweep_leaves_stage_one_out_and_carries_its_curves() -> None:
    trials = two_stage_rows()
    table = grid_of(trials, "sweep 'sw-1'", "two-stage", random_sampling=True)
    assert table.at["ce", ("mrpc", "count")] == 3  # stage 2's seeds only
    assert table.attrs["budget"]["reading"] == (
        "dsc and ce differ by less than 2 stds of their bests at every budget (1–6 trials):"
        " not resolved."
    )
    assert (
        "Reading: dsc and ce differ by less than 2 stds of their bests at every budget"
        " (1–6 trials): not resolved." in to_markdown(table)
    )
    renderer = PngRenderer()  # the API's, which draws every PNG it serves
    png = renderer.png(table).result()
    plain = grid_of(trials[trials["stage"] == "final"], "sweep 'sw-1'", "two-stage")
    assert _height(png) > _height(renderer.png(plain).result()) + 300


def test_a_sweep_still_in_stage_one_has_no_table_yet() -> None:
    trials = two_stage_rows()
    with pytest.raises(NoResultsError, match="no finished final-stage trials yet"):
        grid_of(trials[trials["stage"] == "tune"], "sweep 'sw-1'", "two-stage")


def test_the_sweep_page_shows_the_curves_and_says_when_stage_one_was_a_grid() -> None:
    trials = two_stage_rows()
    # Three learning rates, a budget of three: stage 1 ran their grid.
    gridded = {"tune": {"learning_rate": [1e-5, 3e-5, 1e-4], "trials_per_loss": 3}}
    html = grid_html(trials, "eval_f1", "two-stage", stage_one_is_random(gridded))
    assert html is not None and '<section class="budget">' in html
    assert "dsc and ce differ by less than 2 stds of their bests" in html
    assert "the estimator assumes random sampling" in html
    drawn = {"tune": {"learning_rate": {"loguniform": [1e-5, 1e-4]}, "trials_per_loss": 6}}
    html = grid_html(trials, "eval_f1", "two-stage", stage_one_is_random(drawn))
    assert html is not None and "the estimator assumes random sampling" not in html


def test_a_sweep_without_stage_one_shows_no_curves() -> None:
    trials = two_stage_rows()
    one_stage = trials[trials["stage"] == "final"].drop(columns=["stage"])
    html = grid_html(pd.DataFrame(one_stage), "eval_f1", "one-stage")
    assert html is not None and "budget" not in html
    assert "budget" not in grid_of(one_stage, "sweep 'sw-2'", "one-stage").attrs
