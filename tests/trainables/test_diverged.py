"""A trial whose training loss goes NaN fails with "diverged at step N", in MLflow
and in the table, and is never averaged in as a result."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from mlflow.tracking import MlflowClient
from transformers import BertConfig, BertForSequenceClassification

from search_spaces.contract import FAILURE_TAG
from tests.trainables.test_local_datasets import RUN_TRAINING, cut_pairs, dicesweep_run
from tests.trainables.test_sweep import environment, runs
from trainables.modeling import TINY_VOCAB_SIZE, tiny_tokenizer


def overflowing_classifier(folder: Path, texts: list[str]) -> Path:
    """A small BERT pair classifier saved as a local model, its bias for label 0 at
    3e38 (float32's largest is 3.4e38): cross-entropy charges each label-1 pair about
    3e38, so a batch's summed loss overflows to inf at the first step, while the
    dice losses, which see only the probabilities (1 and 0), stay finite."""
    tokenizer = tiny_tokenizer(texts, folder.parent / "tokenizer-cache", "overflow")
    config = BertConfig(
        vocab_size=max(len(tokenizer), TINY_VOCAB_SIZE),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=2,
    )
    model = BertForSequenceClassification(config)
    with torch.no_grad():
        model.classifier.bias.copy_(torch.tensor([3e38, 0.0]))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.e2e
@pytest.mark.data
def test_a_diverged_trial_fails_with_its_step_and_is_not_in_the_table(
    datasets_dir: Path, tmp_path: Path, short_home: Path
) -> None:
    data = cut_pairs(datasets_dir, tmp_path / "pairs")
    texts = (data / "train.tsv").read_text().splitlines()[1:]
    overflowing_classifier(tmp_path / "overflowing-model", texts)
    spec = {
        "name": "diverges",
        "task": {"kind": "pi", "dataset": {"path": "pairs", "format": "pairs-tsv"}},
        "model": "overflowing-model",
        "training": RUN_TRAINING,
        "search_space": {"losses": [{"name": "ce"}, {"name": "dsc", "alpha": 0.1}]},
        "seeds": [0],
        "resources": {"cpus_per_trial": 1, "max_concurrent_trials": 1},
    }
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = dicesweep_run(tmp_path, environment(short_home, tmp_path), "--sweep-id", "nan")

    client = MlflowClient(f"sqlite:///{short_home / 'mlflow.db'}")
    trials = {t.data.tags["dicesweep.loss"]: t for t in runs(client, "nan", "trial")}
    assert set(trials) == {"ce", "dsc"}, result.stderr[-3000:]
    ce, dsc = trials["ce"], trials["dsc"]
    assert ce.info.status == "FAILED"
    assert ce.data.tags[FAILURE_TAG] == "diverged at step 1 (training loss inf)"
    assert dsc.info.status == "FINISHED" and FAILURE_TAG not in dsc.data.tags
    # The table holds the finished trial and lists the diverged one under it.
    assert result.returncode == 1  # a trial failed
    table, _, failures = result.stdout.partition("Failed trials (not in the table):")
    assert "dsc(alpha=0.1)" in table and "| ce " not in table
    assert "ce seed=0 on pairs original: diverged at step 1 (training loss inf)" in failures
    assert "diverged at step 1 (training loss inf)" in result.stderr  # printed as it failed
