"""scripts/merge_study.py on two real published shards of study 1."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
SHARDS = ("study1-conll-ce", "study1-conll-dsc-tversky")


def final_means(trials: pd.DataFrame) -> pd.Series:
    """Each loss's mean over its seeds at its chosen setting (the final stage)."""
    return trials[trials["stage"] == "final"].groupby("loss")["eval_f1"].mean()


def test_two_shards_merge_into_one_table_with_deltas_against_ce(tmp_path: Path) -> None:
    for shard in SHARDS:
        shutil.copy(RESULTS / f"{shard}-trials.csv", tmp_path)
    kept = "## Against the paper\n\nwritten by hand, kept\n"
    (tmp_path / "merged.md").write_text(f"# merged\n\n{kept}")
    result = subprocess.run(
        [sys.executable, "scripts/merge_study.py", "merged", *SHARDS, "--results", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    expected = pd.concat(
        [final_means(pd.read_csv(tmp_path / f"{shard}-trials.csv")) for shard in SHARDS]
    )
    table = pd.read_csv(tmp_path / "merged.csv").set_index("loss")
    assert set(table.index) == set(expected.index) and len(table) == 3
    for loss, mean in expected.items():
        assert table.loc[loss, "mean"] == pytest.approx(mean, abs=1e-3)
        assert table.loc[loss, "count"] == 3
        if loss != "ce":
            delta = mean - expected["ce"]
            assert table.loc[loss, "delta"] == pytest.approx(delta, abs=1e-3)
    page = (tmp_path / "merged.md").read_text()
    assert kept in page
    assert "[study1-conll-ce](study1-conll-ce.md): ce (6 trials)" in page
    assert "## The table" in page and "![merged](merged.png)" in page
    assert (tmp_path / "merged.png").read_bytes().startswith(b"\x89PNG")
