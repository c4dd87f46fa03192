"""The training settings of the official recipes: gradient accumulation, a polynomial
decay with a floor, AdamW's epsilon, k evaluations an epoch, the best evaluation's
checkpoint reported and the test split scored with it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch

from search_spaces.reports import paper_table, row_from_trial
from search_spaces.reports.captions import notes
from search_spaces.reports.csv_json import to_json
from search_spaces.sections import TrainingSpec
from search_spaces.settings import DicesweepSettings
from search_spaces.setup import trial_setup
from tests.trainables.test_precision import CPU, TAGS, TinyTagger, tagging_batch
from tests.trainables.test_train import Recorder, toy_config
from trainables.checkpoints import CHECKPOINT_FILE
from trainables.loop import evaluate
from trainables.losses import build_loss
from trainables.precision import resolve
from trainables.step import build_optimizer, step_context, train_step
from trainables.train import data_request, parse_config, run_trial, trial_model
from trainables.trial_data import load_trial_data


def batch_of(seed: int) -> dict[str, torch.Tensor]:
    _, batch, _ = tagging_batch(seed)
    ids = torch.randint(0, 50, batch["labels"].shape, generator=torch.Generator().manual_seed(seed))
    return {**batch, "input_ids": ids, "attention_mask": torch.ones_like(ids)}


def test_two_accumulated_halves_step_as_one_batch_of_both() -> None:
    """Two micro-batches of 8 sequences accumulated into one step give the loss and the
    gradients of one batch of the 16 (a loss that is a mean over equally many tokens in
    each half), to 1e-6."""
    task = tagging_batch()[0]
    whole = batch_of(3)
    halves = [
        {key: value[:8] for key, value in whole.items()},
        {k: v[8:] for k, v in whole.items()},
    ]
    loss_fn = build_loss({"name": "ce"}, labels=TAGS)
    results = []
    for micro_batches, accumulation in (([whole], 1), (halves, 2)):
        model = TinyTagger()
        training = TrainingSpec(grad_accumulation=accumulation, grad_clip=None, batch_size=8)
        context = step_context(model, task, loss_fn, training, CPU, total_steps=10)
        loss = train_step(context, micro_batches)
        grads = {name: p.grad.clone() for name, p in model.named_parameters()}  # type: ignore[union-attr]
        results.append((loss, grads))
    (one_loss, one_grads), (two_loss, two_grads) = results
    assert two_loss == pytest.approx(one_loss, abs=1e-6, rel=0)
    for name, grad in one_grads.items():
        assert torch.allclose(two_grads[name], grad, atol=1e-6, rtol=0), name


def test_steps_per_epoch_count_accumulated_micro_batches() -> None:
    """100 examples in micro-batches of 8 are 13 micro-batches: 4 steps of 4 (the last
    takes the one left)."""
    training = TrainingSpec(batch_size=8, grad_accumulation=4)
    assert training.steps_per_epoch(100) == 4


def rates(training: TrainingSpec, total: int, steps: list[int]) -> list[float]:
    """The learning rate the optimiser uses at each of ``steps`` (0-based)."""
    model = TinyTagger()
    optimizer, scheduler = build_optimizer(model, training, total)
    found = []
    for step in range(max(steps) + 1):
        if step in steps:
            found.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return found


def test_polynomial_decay_falls_to_its_floor_as_computed_by_hand() -> None:
    """lr 1e-3, 100 steps, 10 of warm-up, power 2, floor 0.25 × lr: at step s > 10 the
    rate is (1e-3 - 2.5e-4) · (1 - (s - 10)/90)² + 2.5e-4, held at 2.5e-4 from step 100."""
    training = TrainingSpec(
        learning_rate=1e-3,
        warmup_ratio=0.1,
        decay={"kind": "polynomial", "power": 2.0, "end_factor": 0.25},
    )
    steps = [0, 5, 10, 40, 55, 99, 100, 120]
    expected = [0.0, 5e-4, 1e-3]
    expected += [7.5e-4 * (1 - (s - 10) / 90) ** 2 + 2.5e-4 for s in (40, 55, 99)]
    expected += [2.5e-4, 2.5e-4]
    assert rates(training, 100, steps) == pytest.approx(expected, abs=1e-12, rel=0)


def test_the_official_polydecay_is_power_one_to_a_quarter() -> None:
    """The official ``polydecay`` (power 1, ``lr_end = lr / 4``): halfway through the
    decay the rate is 5/8 of the peak."""
    training = TrainingSpec(
        learning_rate=1e-3, warmup_ratio=0.0, decay={"kind": "polynomial", "end_factor": 0.25}
    )
    assert rates(training, 100, [50])[0] == pytest.approx(6.25e-4, abs=1e-12)


def test_adam_epsilon_reaches_the_optimiser() -> None:
    optimizer, _ = build_optimizer(TinyTagger(), TrainingSpec(adam_epsilon=1e-6), 10)
    assert {group["eps"] for group in optimizer.param_groups} == {1e-6}


def test_k_evaluations_an_epoch_fall_evenly_with_the_last_at_its_end() -> None:
    training = TrainingSpec(evaluations_per_epoch=4)
    at = [step for step in range(1, 41) if training.evaluates_at(step, 20)]
    assert at == [5, 10, 15, 20, 25, 30, 35, 40]


def falling_config() -> dict[str, Any]:
    """A toy tiny-bert trial whose dev F1 peaks early and falls by its end: the rate
    warms up over 85% of its 30 steps to 4e-2, too high for it to hold what it learned."""
    config = toy_config(
        epochs=2,
        learning_rate=4e-2,
        warmup_ratio=0.85,
        evaluations_per_epoch=3,
        checkpoint="best",
        score_test=True,
    )
    return {**config, "seed": 0}


def test_the_best_dev_checkpoint_is_reported_and_scored_on_test(
    toy_home: DicesweepSettings, tmp_path: Path
) -> None:
    """A real tiny-bert trial whose dev F1 falls at its end reports its best evaluation,
    not its last, and scores that evaluation's weights on the test split: the same
    test F1 as the checkpoint's kept weights give, another than the last weights give.
    Its row and its table carry the test score beside dev's."""
    recorder = KeepingRecorder(tmp_path)
    config = falling_config()
    final = run_trial(config, recorder, toy_home)
    history = [report["eval_f1"] for report in recorder.reports[:-1]]
    history.append(final["last_eval_f1"])
    assert [r["step"] for r in recorder.reports] == [5, 10, 15, 20, 25, 30]
    assert max(history) - history[-1] > 20, history  # it falls at the end
    assert final["eval_f1"] == max(history)
    assert final["best_step"] == 5 * (history.index(max(history)) + 1)

    state = torch.load(tmp_path / CHECKPOINT_FILE, weights_only=False)
    trial = parse_config(config)
    data = load_trial_data(
        data_request(trial, toy_home, trial_model(trial.model, None)),
        toy_home.datasets_dir,
        toy_home.cache_dir,
    )
    model = data.task.build_model("tiny-bert", len(data.tokenizer))
    model.load_state_dict(state["best_model"])
    kept = evaluate(model, data, 16, CPU, resolve("fp32", CPU, None), split="test")
    assert final["test_f1"] == pytest.approx(kept["test_f1"], abs=1e-9)
    # The same trial reporting its last checkpoint: the same evaluations, the last
    # weights on test.
    last = run_trial(
        {**config, "training": {**config["training"], "checkpoint": "last"}}, Recorder(), toy_home
    )
    assert last["eval_f1"] == pytest.approx(history[-1], abs=1e-9)
    assert abs(last["test_f1"] - final["test_f1"]) > 5, (last["test_f1"], final["test_f1"])

    row = row_from_trial(config, final)
    assert row["test_f1"] == final["test_f1"] and row["eval_f1"] == final["eval_f1"]
    assert row["setup_checkpoint"] == "the best evaluation by eval_f1"
    assert row["setup_test_data"].startswith("conll2003 test.txt")
    other = {**row, "loss": "focal(gamma=2)", "test_f1": 40.0, "eval_f1": 41.0}
    table = paper_table(pd.DataFrame([row, other]))
    assert table.attrs["test"][0]["mean"] == pytest.approx(final["test_f1"])
    line = next(text for text in notes(table) if text.startswith("Test split"))
    assert f"ce on conll2003 {final['test_f1']:.2f} (1 trial)" in line, line
    exported = json.loads(to_json(table), parse_constant=_no_constant)
    assert exported["test"][0]["mean"] == pytest.approx(final["test_f1"])


def _no_constant(name: str) -> float:
    raise AssertionError(f"{name} is not JSON")


class KeepingRecorder(Recorder):
    """A ``Recorder`` that keeps the last checkpoint file in ``folder``."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.folder = folder

    def report(self, metrics: dict[str, float], checkpoint_dir: Path) -> None:
        super().report(metrics, checkpoint_dir)
        (self.folder / CHECKPOINT_FILE).write_bytes((checkpoint_dir / CHECKPOINT_FILE).read_bytes())


def test_a_tune_trial_never_reads_the_test_split(toy_home: DicesweepSettings) -> None:
    config = {**falling_config(), "stage": "tune", "holdout": 0.2}
    trial = parse_config(config)
    assert not data_request(trial, toy_home, "tiny-bert").test
    assert "test_data" not in trial_setup(config)


def test_settings_at_their_defaults_leave_the_setup_as_it_was() -> None:
    """A trial of the defaults carries none of the added setup fields, so its rows share
    cells with the published trials of the same setup."""
    setup = trial_setup(toy_config())
    assert not {"grad_accumulation", "adam_epsilon", "checkpoint", "head_init", "test_data"} & set(
        setup
    )
    assert setup["decay"] == "linear to 0" and setup["evaluations"] == "once an epoch"
    changed = trial_setup(
        toy_config(
            grad_accumulation=8,
            batch_size=36,
            adam_epsilon=1e-6,
            decay={"kind": "polynomial", "end_factor": 0.25},
            evaluations_per_epoch=4,
            head_init="encoder",
        )
    )
    assert changed["grad_accumulation"] == "8 (288 per step)"
    assert changed["adam_epsilon"] == "1e-06"
    assert changed["decay"] == "polynomial (power 1) to 0.25 × the peak rate"
    assert changed["evaluations"] == "4 an epoch"
    assert changed["head_init"] == "the encoder's _init_weights"


def test_head_init_encoder_draws_the_mrc_heads_as_bert_does() -> None:
    """``head_init: encoder`` gives the MRC-NER heads BERT's N(0, 0.02) weights and zero
    biases, as the official ``init_weights()``."""
    from trainables.modeling import build_encoder, init_heads_as_encoder
    from trainables.tasks.mrc_ner_model import QueryNer

    model = QueryNer(build_encoder("tiny-bert", 500), span_head=True, answerable=True)
    before = copy.deepcopy(model.encoder.state_dict())
    init_heads_as_encoder(model)
    for head in (model.start, model.end, model.span, model.answerable):
        assert head is not None
        for layer in (head[0], head[2]):
            assert float(layer.bias.detach().abs().max()) == 0.0
            assert float(layer.weight.detach().std()) == pytest.approx(0.02, rel=0.1)
    after = model.encoder.state_dict()
    assert all(torch.equal(before[name], after[name]) for name in before)
