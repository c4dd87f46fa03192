"""``dicesweep grid`` makes the API's table (``sweep_service.tables.grid_of``): of a
two-stage sweep, stage 2's cells with stage 1's budget curves under them, where the
command once averaged stage 2 alone and lost the curves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from search_spaces.reports import to_json
from sweep_service import cli, results
from sweep_service.tables import grid_of
from tests.stage_rows import two_stage_rows


def test_the_grid_of_a_two_stage_sweep_carries_stage_ones_curves(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rows = two_stage_rows().assign(sweep="sw-1")

    def merged_rows(client: Any, sweep_ids: list[str]) -> pd.DataFrame:
        assert sweep_ids == ["sw-1"]
        return rows

    monkeypatch.setenv("DICESWEEP_MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setattr(results, "merged_rows", merged_rows)  # the runs MLflow would give
    with pytest.raises(SystemExit) as done:
        cli.main(["grid", "sw-1", "--json"])
    assert done.value.code == 0
    printed = json.loads(capsys.readouterr().out)
    assert {curve["curve"] for curve in printed["budget"]["curves"]} == {"ce", "dsc"}
    served = json.loads(to_json(grid_of(rows, "sw-1", "sw-1", random_sampling=None)))
    assert printed == served
