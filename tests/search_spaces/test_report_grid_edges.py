"""A stage-1 choice at the edge of its grid (search_spaces.reports.notes.grid_edges),
also over a merge whose one-stage shards tuned nothing."""

from __future__ import annotations

import pandas as pd

from search_spaces.reports.notes import grid_edges


def test_a_loss_no_stage_tuned_is_left_out_of_a_merge() -> None:
    rows = pd.DataFrame(
        [
            {
                "loss": "ce",
                "setup_tune_grid": "learning_rate {0.0001, 0.0003}",
                "tuned_learning_rate": 0.0001,
            },
            {"loss": "ce", "setup_tune_grid": None, "tuned_learning_rate": None},
            {"loss": "dsc", "setup_tune_grid": None, "tuned_learning_rate": None},
            {
                "loss": "dice",
                "setup_tune_grid": "learning_rate {3e-05, 0.0001, 0.0003}",
                "tuned_learning_rate": 0.0001,
            },
        ]
    )
    assert grid_edges(rows) == {"ce": {"learning_rate": "lowest of {0.0001, 0.0003}"}}
