"""Study E's pages (Table 10 in MRC-NER) against the CSVs they quote: each figure the
prose of a shard page and its README row gives is recomputed here from the shard's
per-trial and per-evaluation CSVs (and, for the figures quoted for scale, study B's)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
FIRST = "studyE-conll-mrc-tversky-a0.1-a0.9-s0"
STUDY_B = "studyB-conll-mrc-12ep-s0"


def _trials(stem: str) -> pd.DataFrame:
    return pd.read_csv(RESULTS / f"{stem}-trials.csv")


def _alpha(frame: pd.DataFrame, alpha: float) -> pd.DataFrame:
    return frame[frame["loss"].str.startswith(f"tversky(alpha={alpha:g},beta={1 - alpha:.1f},")]


def _quoted(stem: str) -> str:
    page = (RESULTS / f"{stem}.md").read_text()
    row = next(line for line in (RESULTS / "README.md").read_text().splitlines() if stem in line)
    return page + "\n" + row


def test_the_first_shards_alpha_0_1_figures_are_its_csvs() -> None:
    trial = _alpha(_trials(FIRST), 0.1).iloc[0]
    text = _quoted(FIRST)
    for value in (trial.eval_f1, trial.eval_precision, trial.eval_recall):
        assert f"{value:.2f}" in text
    assert f"dev F1 {trial.eval_f1:.2f}" in text
    for value in (trial.test_f1, trial.test_precision, trial.test_recall):
        assert f"{value:.2f}" in text
    assert f"**{trial.test_f1:.2f} on test**" in text and f"test {trial.test_f1:.2f}" in text
    last = [float(point.split(":")[1]) for point in trial.last_evaluations.split()]
    assert f"({', '.join(f'{v:.2f}' for v in last)})" in text
    assert last == sorted(last)  # "still rise ... at each"
    assert f"within {trial.last_evaluations_range:.2f}" in text
    assert trial.eval_f1 == max(last)  # its best evaluation is the last
    history = pd.read_csv(RESULTS / f"{FIRST}-history.csv")
    curve = history[history["loss"] == trial.loss].sort_values("step")
    assert curve["eval_f1"].idxmax() == curve.index[-1]
    assert trial.optimizer_steps == 3000 and "3,000 steps" in text


def test_the_first_shards_alpha_0_9_collapses_at_every_evaluation() -> None:
    trial = _alpha(_trials(FIRST), 0.9).iloc[0]
    assert trial.eval_f1 == 0 and trial.test_f1 == 0
    assert trial.degenerate_reason == "gives one prediction to 100.0% of words"
    history = pd.read_csv(RESULTS / f"{FIRST}-history.csv")
    curve = history[history["loss"] == trial.loss]
    assert len(curve) == 12 and (curve["eval_f1"] == 0).all()
    assert "all 12 evaluations score F1 0" in (RESULTS / f"{FIRST}.md").read_text()
    assert "all 12 evaluations F1 0" in _quoted(FIRST)


@pytest.mark.parametrize(("loss", "quoted"), [("ce", 0), ("dsc", 1)])
def test_the_figures_quoted_for_scale_are_study_bs_seed_0(loss: str, quoted: int) -> None:
    frame = _trials(STUDY_B)
    trial = frame[(frame["loss_name"] == loss) & (frame["seed"] == 0)].iloc[0]
    page = (RESULTS / f"{FIRST}.md").read_text()
    figures = page.split("reach ", 1)[1].split(" on dev", 1)[0].split(" and ")
    assert figures[quoted] == f"{trial.eval_f1:.2f}"
