"""The published pages' setup lines are generated (``scripts/setup_sections.py``) and
current, and the descriptions they replaced are corrected: each claim read back from
the specs, the per-trial CSVs and the data."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from scipy import stats

from tests.scripts import script

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
sections = script("setup_sections")
CASING = json.loads((RESULTS / sections.MODELS).read_text())
PAGES = sorted(page.stem for page in RESULTS.glob("*.md") if sections.page_shards(page.stem))
STUDY_B = [stem for stem in PAGES if stem.startswith("studyB-")]


def text(stem: str) -> str:
    """A page's text with its lines joined, so a phrase may wrap anywhere."""
    return " ".join((RESULTS / f"{stem}.md").read_text().split())


@pytest.mark.parametrize("stem", PAGES)
def test_every_study_page_carries_its_generated_setup_and_it_is_current(stem: str) -> None:
    page = (RESULTS / f"{stem}.md").read_text()
    body = sections.setup_section(stem, CASING)
    assert body is not None
    assert sections.place_section(page, body) == page
    assert "## Setup\n\nFrom the spec" in page


def test_study_b_draws_its_sentences_at_random_and_says_so() -> None:
    spec = yaml.safe_load((RESULTS / "studyB-conll-tagger-s0-4-spec.yaml").read_text())
    assert spec["training"]["max_train_examples"] == spec["training"]["max_eval_examples"] == 1000
    for stem in STUDY_B:
        assert "first 1,000" not in text(stem), stem
        assert "conll2003 train.txt, 1000 drawn at random (seed 0)" in text(stem), stem
    assert "74 of the 1,000 training sentences are among the file's first 1,000" in text("README")


@pytest.mark.data
def test_the_draw_holds_74_of_the_files_first_1000_sentences(datasets_dir: Path) -> None:
    from search_spaces.datasets import get_dataset
    from trainables.data import load_split
    from trainables.trial_data import _cap

    train = load_split(get_dataset("conll2003"), "train", datasets_dir)
    first = {id(sentence) for sentence in train[:1000]}
    assert sum(id(sentence) in first for sentence in _cap(train, 1000)) == 74


def test_the_taggers_dsc_is_per_token_and_minilm_is_uncased() -> None:
    assert CASING == {"minilm-l6": True}
    for stem in (*STUDY_B, "study1-conll-dice-dsc-6ep"):
        assert "per sentence" not in text(stem), stem
    assert "a ratio per token, averaged over the tokens" in text("studyB-conll-tagger")
    minilm = [stem for stem in PAGES if "model: minilm-l6" in text(stem)]
    assert len(minilm) > 40
    assert all("tokenizer: lowercases (uncased)" in text(stem) for stem in minilm)


def test_choices_at_their_grids_edge_are_flagged() -> None:
    tagger = pd.read_csv(RESULTS / "studyB-conll-tagger-s0-4-trials.csv")
    final = tagger[tagger["stage"] == "final"]
    assert set(final["tuned_learning_rate"]) == {1e-4}  # the lower edge of {1e-4, 3e-4}
    line = "ce: learning_rate 0.0001, the lowest of {0.0001, 0.0003}"
    assert line in text("studyB-conll-tagger")
    shards = ("a0.1-a0.3", "a0.4-a0.6", "a0.7-a0.9")
    rows = pd.concat(
        pd.read_csv(RESULTS / f"study5-conll-fg-tversky-{shard}-trials.csv") for shard in shards
    )
    chosen = rows[rows["stage"] == "final"].groupby("loss")["tuned_learning_rate"].first()
    assert (chosen == 3e-5).sum() == 8 and (chosen == 3e-4).sum() == 1
    page = text("study5-conll-fg")
    assert page.count("the lowest of {3e-05, 0.0001, 0.0003}") == 8
    assert page.count("the highest of {3e-05, 0.0001, 0.0003}") == 1


def test_the_taggers_p_value_is_0042_everywhere() -> None:
    rows = pd.read_csv(RESULTS / "studyB-conll-tagger-s0-4-trials.csv")
    wide = rows[rows["stage"] == "final"].pivot_table(
        index="seed", columns="loss_name", values="eval_f1"
    )
    p_value = stats.ttest_rel(wide["dsc"], wide["ce"]).pvalue
    assert f"{p_value:.3f}" == "0.042"
    for stem in ("README", "studyB-conll-tagger", "studyB-conll-tagger-s0-4"):
        assert "paired p 0.042" in text(stem) and "0.043" not in text(stem), stem


def test_study_a_is_a_tagger_study_and_its_alpha_03_row_is_the_whole_file_rerun() -> None:
    assert text("study5-conll-fg").startswith(
        "# study5-conll-fg: Tversky α in a softmax tagger on CoNLL-2003"
    )
    rerun = pd.read_csv(RESULTS / "studyC-conll-tversky-seeds0-3-trials.csv")
    scores = rerun[(rerun["loss_name"] == "tversky") & (rerun["stage"] == "final")]["eval_f1"]
    assert sorted(round(score, 2) for score in scores) == [0.0, 0.0, 37.74, 37.9]
    cell = f"| 0.3 | {scores.mean():.2f} ± {scores.std():.2f} | 2 of 4 | 1e-4 |"
    assert cell in text("study5-conll-fg")
    assert "61.98" not in text("study5-conll-fg")


def test_study_bs_pages_claim_no_cause_their_design_does_not_isolate() -> None:
    frames = [pd.read_csv(RESULTS / f"studyB-conll-mrc-12ep-s{s}-trials.csv") for s in range(5)]
    wide = pd.concat(frames).pivot_table(index="seed", columns="loss_name", values="eval_f1")
    low, high = stats.ttest_rel(wide["dsc"], wide["ce"]).confidence_interval()
    claim = f"+1.00 (95% CI {low:.2f}–{high:.2f}"
    for stem in ("README", "studyB-conll-12ep"):
        assert claim in text(stem), stem
        assert "not the loss" not in text(stem)
    assert "not the loss" not in " ".join((ROOT / "README.md").read_text().split())
    assert "What causes it is not isolated." in text("studyB-conll-12ep")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
