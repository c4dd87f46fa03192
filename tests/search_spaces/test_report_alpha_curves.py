"""Table 10's α curves across set-ups (search_spaces.reports.alpha_curves,
scripts/alpha_curves.py): each α's mean over its seeds, the curve's shape, and the
published studies' curves recomputed from their CSVs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from search_spaces.reports.alpha_curves import alpha_curve, curves_markdown, curves_png, shape
from tests.scripts import script

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"


def _rows(scores: dict[float, list[float]], stage: str = "final") -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "loss": f"tversky(alpha={alpha:g},beta={1 - alpha:g},scope=set)",
                "loss_name": "tversky",
                "seed": seed,
                "stage": stage,
                "eval_f1": value,
            }
            for alpha, values in scores.items()
            for seed, value in enumerate(values)
        ]
    )


def test_each_alpha_is_the_mean_of_its_final_seeds() -> None:
    rows = pd.concat(
        [
            _rows({0.1: [80.0, 82.0], 0.5: [0.0, 0.0, 1.5], 0.3: [70.0]}),
            _rows({0.1: [10.0]}, stage="tune"),  # a tuning trial is no seed
            pd.DataFrame(
                [{"loss": "ce", "loss_name": "ce", "seed": 0, "stage": "final", "eval_f1": 90.0}]
            ),
        ],
        ignore_index=True,
    )
    curve = alpha_curve(rows)
    assert list(curve.index) == [0.1, 0.3, 0.5]
    assert list(curve["seeds"]) == [2, 1, 3]
    assert list(curve["mean"]) == pytest.approx([81.0, 70.0, 0.5])
    assert curve.loc[0.1, "std"] == pytest.approx(2**0.5)
    assert (curve.loc[0.5, "low"], curve.loc[0.5, "high"]) == (0.0, 1.5)
    with pytest.raises(ValueError, match="no tversky row with eval_f1"):
        alpha_curve(rows[rows["loss_name"] == "ce"])


def test_the_shape_names_the_peak_the_range_and_the_collapsed_alphas() -> None:
    found = shape(pd.Series({0.1: 80.0, 0.3: 70.0, 0.5: 0.5, 0.7: 0.0}))
    assert (found.peak, found.peak_value, found.low, found.collapsed) == (
        0.1,
        80.0,
        0.0,
        (0.5, 0.7),
    )
    assert (
        found.words()
        == "peak at α 0.1 (80.00), range 0.00–80.00; collapses (F1 under 1) at α 0.5, 0.7"
    )
    paper = shape(pd.Series({0.1: 80.13, 0.6: 84.67, 0.9: 80.21}))
    assert paper.words() == "peak at α 0.6 (84.67), range 80.13–84.67; no α collapses"


def test_the_table_sets_every_curve_and_paper_column_side_by_side() -> None:
    curves = {"ours": alpha_curve(_rows({0.1: [80.0, 82.0], 0.3: [70.0]}))}
    text = curves_markdown(curves, {"paper": {0.1: 63.23, 0.2: 63.45}})
    assert "| 0.1 | 81.00 ± 1.41 (2) | 63.23 |" in text
    assert "| 0.2 | – | 63.45 |" in text
    assert "| 0.3 | 70.00 (1) | – |" in text
    assert "- ours: peak at α 0.1 (81.00), range 70.00–81.00; no α collapses." in text
    assert curves_png(curves, {"paper": {0.1: 63.23}}, "eval_f1").startswith(b"\x89PNG")


def test_the_published_tagger_curves_recomputed_from_their_csvs(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "alpha_curves.py"),
            "curves",
            "--out",
            str(tmp_path),
            "--curve",
            "tagger, entity tags",
            "study5-conll-fg",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    page = (tmp_path / "curves.md").read_text()
    assert (tmp_path / "curves-alpha.png").read_bytes().startswith(b"\x89PNG")
    shards = script("setup_sections").page_shards("study5-conll-fg")  # the page's shards
    rows = pd.concat([pd.read_csv(RESULTS / f"{s}-trials.csv") for s in shards], ignore_index=True)
    rows = rows[(rows["loss_name"] == "tversky") & (rows["stage"] != "tune")]
    alpha = rows["loss"].str.extract(r"alpha=([\d.]+)", expand=False).astype(float)
    for value, group in rows.groupby(alpha)["eval_f1"]:
        assert f"| {value:g} | {group.mean():.2f} ± {group.std():.2f} ({len(group)}) |" in page
    assert "the paper: BERT-MRC on Chinese OntoNotes 4.0 (test)" in page
    assert "- formulation: tagger" in page
