"""The trainable: a tiny model learns, a crashed trial resumes exactly, the cache is shared."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from search_spaces.dataset_refs import LocalDataset, dataset_info
from search_spaces.datasets import get_dataset
from search_spaces.reports import degenerate_reason
from search_spaces.settings import DicesweepSettings
from trainables.loop import CHECKPOINT_FILE
from trainables.tasks import EncodeOptions
from trainables.train import run_trial
from trainables.trial_data import DataRequest, TrialData, load_trial_data


def toy_config(**training: Any) -> dict[str, Any]:
    return {
        "sweep_id": "test",
        "dataset": "conll2003",
        "variant": "original",
        "model": "tiny-bert",
        "loss": {"name": "ce"},
        "seed": 0,
        "training": {
            "epochs": 3,
            "learning_rate": 2e-3,
            "batch_size": 16,
            "max_seq_length": 32,
            "warmup_ratio": 0.0,
            **training,
        },
    }


class Recorder:
    """A reporter that keeps every evaluation and can crash after the n-th one."""

    def __init__(self, resume_from: Path | None = None, crash_after: int | None = None) -> None:
        self.reports: list[dict[str, float]] = []
        self.resume_from = resume_from
        self.crash_after = crash_after
        self.saved: Path | None = None

    def latest_checkpoint(self) -> Path | None:
        return self.resume_from

    def report(self, metrics: dict[str, float], checkpoint_dir: Path) -> None:
        assert (checkpoint_dir / CHECKPOINT_FILE).exists()
        self.reports.append(metrics)
        if self.crash_after is not None and len(self.reports) == self.crash_after:
            assert self.saved is not None
            (self.saved / CHECKPOINT_FILE).write_bytes(
                (checkpoint_dir / CHECKPOINT_FILE).read_bytes()
            )
            raise RuntimeError("worker lost")

    def progress(self, step: int, total: int, loss: float) -> None:
        pass


def test_tiny_model_learns_the_toy_ner_task(toy_home: DicesweepSettings) -> None:
    recorder = Recorder()
    final = run_trial(toy_config(epochs=2, eval_every_steps=3), recorder, toy_home)
    # 240 sentences / 16 = 15 steps an epoch: evaluations at steps 3, 6, ..., 30.
    assert [r["step"] for r in recorder.reports] == list(range(3, 31, 3))
    first, last = recorder.reports[0]["eval_f1"], final["eval_f1"]
    assert first < 50.0, recorder.reports
    assert last > 80.0, recorder.reports
    assert final["best_eval_f1"] == max(r["eval_f1"] for r in recorder.reports)
    assert {"eval_precision", "eval_recall", "train_loss", "epoch", "step"} <= set(final)
    assert final["eval_baseline_f1"] == 0.0  # NER: tagging no entity
    assert 0 < final["eval_baseline_accuracy"] < 100.0  # every word O: the O share
    assert final["eval_top_prediction_share"] < 100.0
    assert degenerate_reason(final) is None  # a tagger that learned


@pytest.mark.parametrize(
    "loss", [{"name": "dsc", "alpha": 0.1, "scope": "set"}, {"name": "wce", "k": 1.0}]
)
def test_other_losses_train_too(toy_home: DicesweepSettings, loss: dict[str, Any]) -> None:
    config = {**toy_config(epochs=2), "loss": loss}
    final = run_trial(config, Recorder(), toy_home)
    assert final["eval_f1"] > 50.0


def test_crashed_trial_resumes_mid_epoch_to_the_same_result(
    toy_home: DicesweepSettings, tmp_path: Path
) -> None:
    config = toy_config(epochs=2, eval_every_steps=5)  # 15 steps per epoch: mid-epoch checkpoints
    uninterrupted = Recorder()
    expected = run_trial(config, uninterrupted, toy_home)

    crashed = Recorder(crash_after=2)
    crashed.saved = tmp_path
    with pytest.raises(RuntimeError, match="worker lost"):
        run_trial(config, crashed, toy_home)
    assert crashed.reports[-1]["step"] == 10

    resumed = Recorder(resume_from=tmp_path)
    final = run_trial(config, resumed, toy_home)
    assert resumed.reports[0]["step"] == 15  # continues after the checkpoint, no rerun
    assert [r["step"] for r in resumed.reports] == [r["step"] for r in uninterrupted.reports[2:]]
    for key in ("eval_f1", "eval_precision", "eval_recall"):
        assert final[key] == pytest.approx(expected[key])
    assert final["train_loss"] == pytest.approx(expected["train_loss"], rel=1e-4)


class Keeper(Recorder):
    """A reporter that notes what each checkpoint holds and its size on disk."""

    def __init__(self) -> None:
        super().__init__()
        self.kept: list[tuple[set[str], int]] = []

    def report(self, metrics: dict[str, float], checkpoint_dir: Path) -> None:
        import torch

        file = checkpoint_dir / CHECKPOINT_FILE
        state = torch.load(file, map_location="cpu", weights_only=False)
        self.kept.append((set(state), file.stat().st_size))
        super().report(metrics, checkpoint_dir)


def test_a_finished_trial_keeps_its_weights_but_not_its_optimiser(
    toy_home: DicesweepSettings,
) -> None:
    keeper = Keeper()
    run_trial(toy_config(epochs=2), keeper, toy_home)  # an evaluation at each epoch's end
    (during, during_size), (final, final_size) = keeper.kept
    assert {"model", "optimizer", "scheduler", "rng", "progress"} <= during
    assert final == {"model", "progress"}
    # AdamW keeps two moments per weight: the final checkpoint is about a third as large.
    assert final_size < 0.4 * during_size


def test_tokenised_features_are_cached_and_keyed(toy_home: DicesweepSettings) -> None:
    request = DataRequest(get_dataset("conll2003"), "original", "tiny-bert", 32, 128, None, None)
    first = load_trial_data(request, toy_home.datasets_dir, toy_home.cache_dir)
    cached = sorted((toy_home.cache_dir / "features").glob("conll2003-*/train.pkl"))
    assert cached
    second = load_trial_data(request, toy_home.datasets_dir, toy_home.cache_dir)
    assert first.train_features == second.train_features
    longer = DataRequest(get_dataset("conll2003"), "original", "tiny-bert", 48, 128, None, None)
    load_trial_data(longer, toy_home.datasets_dir, toy_home.cache_dir)
    assert (
        len(list((toy_home.cache_dir / "features").glob("conll2003-*/train.pkl")))
        == len(cached) + 1
    )


def test_tagging_labels_sit_on_first_sub_words(toy_home: DicesweepSettings) -> None:
    request = DataRequest(get_dataset("conll2003"), "original", "tiny-bert", 32, 128, None, 5)
    data = load_trial_data(request, toy_home.datasets_dir, toy_home.cache_dir)
    for feature, example in zip(data.eval_features, data.eval_examples, strict=True):
        labelled = [tag for tag in feature["labels"] if tag != -100]
        assert [data.task.labels[t] for t in labelled] == list(example.tags)
        assert len(feature["first_tokens"]) == len(example.tags)


@pytest.mark.data
def test_wce_counts_come_from_the_variant_in_use(datasets_dir: Path, tmp_path: Path) -> None:
    request = DataRequest(get_dataset("mrpc"), "-negative", "tiny-bert", 32, 128, None, 10)
    data = load_trial_data(request, datasets_dir, tmp_path)
    # The minority, label 0, is scored by default: "-negative" drops label 1 (x 0.5871).
    assert data.task.class_counts(data.train_features) == [1194, 1452]


class Output:
    def __init__(self, logits: torch.Tensor) -> None:
        self.logits = logits


def precision_recall(data: TrialData) -> tuple[float, float]:
    """The task's precision and recall on gold 0 0 1 1 predicted 0 0 0 1."""
    batch = {"labels": torch.tensor([0, 0, 1, 1])}
    logits = torch.tensor([[2.0, 0.0], [2.0, 0.0], [2.0, 0.0], [0.0, 2.0]])
    metrics = data.task.evaluate(lambda _: Output(logits), [batch], [])
    return metrics["precision"], metrics["recall"]


@pytest.mark.data
def test_the_minority_is_the_default_scored_class(datasets_dir: Path, tmp_path: Path) -> None:
    request = DataRequest(get_dataset("mrpc"), "original", "tiny-bert", 32, 128, None, 10)
    data = load_trial_data(request, datasets_dir, tmp_path)
    assert data.scored is not None
    assert (data.scored.label, data.scored.named) == (0, False)
    assert data.scored.describe() == "0 (the minority, 32.6% of the training file)"
    # Label 0 scored: TP 2, predicted 0 three times, gold 0 twice.
    assert precision_recall(data) == (pytest.approx(200 / 3), 100.0)


@pytest.mark.data
def test_the_positive_label_sets_the_variant_and_the_scored_class(
    datasets_dir: Path, tmp_path: Path
) -> None:
    request = DataRequest(
        get_dataset("mrpc"), "-negative", "tiny-bert", 32, 128, None, 10, positive_label=1
    )
    data = load_trial_data(request, datasets_dir, tmp_path)
    assert data.scored is not None and (data.scored.label, data.scored.named) == (1, True)
    assert data.task.class_counts(data.train_features) == [701, 2474]  # label 0 x 0.5871
    # Label 1 scored: TP 1, predicted 1 once, gold 1 twice.
    assert precision_recall(data) == (100.0, 50.0)


@pytest.mark.data
def test_a_binary_trial_reports_its_scored_class(datasets_dir: Path, tmp_path: Path) -> None:
    """Every evaluation and the final metrics carry the resolved label and its shares,
    for MLflow and the report rows."""
    settings = DicesweepSettings(home=tmp_path / "home", datasets_dir=datasets_dir)
    config = {
        **toy_config(epochs=1, max_train_examples=40, max_eval_examples=16),
        "dataset": "mrpc",
        "variant": "+negative",
    }
    recorder = Recorder()
    final = run_trial(config, recorder, settings)
    assert recorder.reports
    for metrics in [*recorder.reports, final]:
        assert metrics["positive_label"] == 0.0
        assert metrics["positive_share"] == pytest.approx(1194 / 3668)
        # 40 pairs of "+negative" (854 of 4,763 label 0, 17.9%), stratified: 7 label 0.
        assert metrics["train_positive_share"] == pytest.approx(7 / 40)


def test_a_set_that_is_not_binary_reports_no_scored_class(toy_home: DicesweepSettings) -> None:
    request = DataRequest(get_dataset("conll2003"), "original", "tiny-bert", 32, 128, None, 5)
    assert load_trial_data(request, toy_home.datasets_dir, toy_home.cache_dir).scored is None


@pytest.mark.data
def test_mrc_windows_point_at_the_answer_text(datasets_dir: Path, tmp_path: Path) -> None:
    request = DataRequest(get_dataset("squad_v1"), "original", "tiny-bert", 96, 32, 40, 20)
    data = load_trial_data(request, datasets_dir, tmp_path)
    features = data.task.encode(
        data.eval_examples, data.tokenizer, EncodeOptions(96, 32), training=False
    )
    assert len(features) > len(data.eval_examples)  # long contexts split into windows
    answered = [f for f in features if f["start_positions"] > 0]
    assert answered
    for feature in answered:
        example = data.eval_examples[feature["example_index"]]
        start = feature["offsets"][feature["start_positions"]][0]
        end = feature["offsets"][feature["end_positions"]][1]
        assert example.context[start:end] == example.answers[0].text


def squad_v2_folder(datasets_dir: Path, folder: Path) -> Path:
    """SQuAD v2-style files cut from v1.1 dev: each paragraph also gets its article's
    neighbour's first question, unanswerable there (``answers: []``)."""
    articles = json.loads((datasets_dir / "squad/dev-v1.1.json").read_text())["data"][:3]
    for article in articles:
        article["paragraphs"] = article["paragraphs"][:4]
        for index, paragraph in enumerate(article["paragraphs"]):
            other = article["paragraphs"][index - 1]["qas"][0]
            unanswerable = {"id": f"{other['id']}-x", "question": other["question"]}
            paragraph["qas"] = [*paragraph["qas"][:2], {**unanswerable, "answers": []}]
    folder.mkdir(parents=True)
    for name, chosen in (("train.json", articles[:2]), ("dev.json", articles[2:])):
        (folder / name).write_text(json.dumps({"version": "v2.0", "data": chosen}))
    return folder


@pytest.mark.data
def test_squad_v2_questions_without_an_answer_are_predicted_empty(
    datasets_dir: Path, tmp_path: Path
) -> None:
    folder = squad_v2_folder(datasets_dir, tmp_path / "squad2")
    info = dataset_info(LocalDataset(path=str(folder), format="squad-json"), "mrc", tmp_path)
    data = load_trial_data(
        DataRequest(info, "original", "tiny-bert", 128, 64, None, None), tmp_path, tmp_path
    )
    assert data.task.no_answer  # read from the unanswerable training questions
    unanswerable = sum(not e.answers for e in data.eval_examples)
    assert 0 < unanswerable < len(data.eval_examples)
    batch = data.task.collate(data.eval_features, data.tokenizer.pad_token_id)

    class Output:
        def __init__(self) -> None:
            logits = torch.zeros(batch["input_ids"].shape)
            logits[:, 0] = 5.0  # [CLS] above every span
            self.start_logits = self.end_logits = logits

    # Every window scores [CLS] highest: each unanswerable question is right, no other.
    metrics = data.task.evaluate(lambda _: Output(), [batch], data.eval_examples)
    share = 100 * unanswerable / len(data.eval_examples)
    assert metrics == pytest.approx(
        # Answering nothing is this set's best no-skill rule, and the same answer everywhere.
        {
            "exact_match": share,
            "f1": share,
            "baseline_f1": share,
            "baseline_exact_match": share,
            "top_prediction_share": 100.0,
        }
    )


def test_bf16_autocast_path_runs_on_cpu(toy_home: DicesweepSettings) -> None:
    final = run_trial(toy_config(epochs=1, bf16=True), Recorder(), toy_home)
    assert torch.isfinite(torch.tensor(final["train_loss"]))


def test_command_line_trial_prints_metrics(toy_home: DicesweepSettings, tmp_path: Path) -> None:
    env = {
        "DICESWEEP_DATASETS_DIR": str(toy_home.datasets_dir),
        "DICESWEEP_HOME": str(toy_home.home),
        "PATH": "/usr/bin:/bin",
    }
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainables.train",
            "--task",
            "ner",
            "--dataset",
            "conll2003",
            "--loss",
            '{"name": "dsc", "alpha": 0.1}',
            "--epochs",
            "1",
            "--max-seq-length",
            "32",
            "--output-dir",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout[result.stdout.index("{\n") :])
    assert summary["config"]["loss"] == {"name": "dsc", "alpha": 0.1}
    assert 0.0 <= summary["metrics"]["eval_f1"] <= 100.0
    assert (tmp_path / "out" / "checkpoint" / CHECKPOINT_FILE).exists()
    assert "step" in result.stderr  # the progress bar
