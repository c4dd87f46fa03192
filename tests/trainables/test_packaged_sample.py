"""The smoke preset's data set ships in the package: it needs no data-sets folder, and
it holds exactly the sentences the smoke sweep read out of the full treebank. A
catalogue set that is missing says where it was looked for and what moves it."""

from __future__ import annotations

from pathlib import Path

import pytest

from search_spaces.checks import dataset_issues
from search_spaces.datasets import SAMPLES_DIR, get_dataset
from search_spaces.resolve import get_preset, resolve_spec
from trainables.data.classes import stratified_sample
from trainables.data.loading import label_list, load_split
from trainables.trial_data import CAP_SEED


def test_the_smoke_preset_needs_no_data_sets_folder(tmp_path: Path) -> None:
    smoke = get_preset("smoke")
    assert smoke.task.dataset == ["ud_en_ewt_sample"]
    empty = tmp_path / "no-data-here"
    assert dataset_issues(smoke, empty) == []
    assert dataset_issues(smoke, empty, roots=[empty]) == []  # as a service checks it
    train, dev = (
        load_split("ud_en_ewt_sample", "train", empty),
        load_split("ud_en_ewt_sample", "eval", empty),
    )
    assert (len(train), len(dev)) == (2000, 500)
    assert len(label_list("ud_en_ewt_sample", empty)) == 17
    folder = SAMPLES_DIR / "ud_en_ewt_sample"
    assert "Attribution-ShareAlike 4.0" in (folder / "LICENSE.txt").read_text("utf-8")
    assert "The Leland Stanford Junior University" in (folder / "README.md").read_text("utf-8")


def test_a_missing_catalogue_set_names_the_folder_and_the_variable(tmp_path: Path) -> None:
    spec = resolve_spec({"extends": "smoke", "task": {"kind": "ner", "dataset": "conll2003"}})
    folder = tmp_path / "datasets"
    (issue,) = dataset_issues(spec, folder)
    assert issue.message == (
        f"data set 'conll2003': conll2003/train.txt is missing from the data-sets folder "
        f"{folder} (DICESWEEP_DATASETS_DIR moves it)"
    )
    # A service names the variable, never where its own folder is.
    (served,) = dataset_issues(spec, folder, roots=[folder])
    assert str(folder) not in served.message and "DICESWEEP_DATASETS_DIR" in served.message


@pytest.mark.data
def test_the_sample_is_what_the_smoke_sweep_read_of_the_full_treebank(
    datasets_dir: Path,
) -> None:
    sample = get_dataset("ud_en_ewt_sample")
    for split, cap in (("train", 2000), ("eval", 500)):
        full = load_split("ud_en_ewt", split, datasets_dir)
        assert load_split(sample, split, datasets_dir) == stratified_sample(full, cap, CAP_SEED)
    assert label_list(sample, datasets_dir) == label_list("ud_en_ewt", datasets_dir)
