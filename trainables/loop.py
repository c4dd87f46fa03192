"""The fine-tuning loop of one trial: named steps, resumable from a checkpoint.

``fit`` builds the model and the loss, trains on dynamically padded batches
(each optimiser step: ``trainables.step``), evaluates every epoch (or every N
steps) and hands each evaluation, with a checkpoint, to a ``Reporter`` (Ray
Tune inside a sweep, the terminal for a single run). A checkpoint holds the
model, optimiser, scheduler, step and RNG states, the best evaluation and the
early-stopping count: a resumed trial continues with the batch after the last
checkpoint, in the same order, and stops where it would have stopped.

A trial trains ``training.max_steps`` optimiser steps, or ``epochs`` epochs
without it, and stops sooner when early stopping is on and the search metric
has not improved for ``early_stopping_patience`` evaluations. Its last report
carries ``stop_reason`` (``StopReason``) and, with early stopping, the best
evaluation's metrics (``final_metrics``).
"""

from __future__ import annotations

import math
import random
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import torch
from torch import nn
from transformers import PreTrainedModel

from search_spaces.sections import TrainingSpec
from trainables.checkpoints import CHECKPOINT_FILE as CHECKPOINT_FILE  # re-exported
from trainables.checkpoints import load_best_weights, load_checkpoint, save_checkpoint
from trainables.losses import build_loss
from trainables.modeling import TINY_BERT, init_heads_as_encoder
from trainables.precision import Resolved, autocast
from trainables.step import step_context, to_device, train_step
from trainables.tasks import Batch, model_inputs
from trainables.trial_data import TrialData

# Why a trial ends itself; the driver tags a run stopped by the scheduler "scheduler".
StopReason = Literal["epochs", "max_steps", "early_stopping"]


class TrialDiverged(RuntimeError):
    """The training loss became NaN or infinite: the trial has no result to report.

    Its message is the reason shown in MLflow, the API and the table,
    "diverged at step N (training loss nan)". The step is deterministic for a
    seed, so a retried trial diverges again at the same step.
    """

    def __init__(self, step: int, loss: float) -> None:
        super().__init__(f"diverged at step {step} (training loss {loss})")
        self.step, self.loss = step, loss

    def __reduce__(self) -> tuple[type[TrialDiverged], tuple[int, float]]:
        return type(self), (self.step, self.loss)  # Ray pickles it to the driver


class Reporter(Protocol):
    """Where evaluations go, and where a resumed trial finds its last checkpoint."""

    def latest_checkpoint(self) -> Path | None:
        """A folder holding ``state.pt``, or None for a fresh start."""

    def report(self, metrics: dict[str, Any], checkpoint_dir: Path) -> None:
        """Record one evaluation with the checkpoint written for it: numbers, and the
        ``stop_reason`` string in a trial's last report."""

    def progress(self, step: int, total: int, loss: float) -> None:
        """Called after every optimiser step (a progress bar, or nothing)."""


@dataclass
class Progress:
    """Where training stands; saved in every checkpoint."""

    step: int = 0
    loss_sum: float = 0.0  # training loss summed since the last evaluation
    loss_steps: int = 0
    best_metric: float = -math.inf  # the watched metric's best value so far
    best: dict[str, float] = field(default_factory=dict)  # that evaluation's eval_* metrics
    best_step: int = 0
    stale_evals: int = 0  # evaluations since the metric last rose by more than min_delta
    stop_reason: StopReason | None = None


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def pick_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def batches(data: TrialData, features: list[Any], size: int, order: list[int]) -> Iterator[Batch]:
    pad = data.tokenizer.pad_token_id or 0
    for start in range(0, len(order), size):
        yield data.task.collate([features[i] for i in order[start : start + size]], pad)


def epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    """The shuffled example order of one epoch, reproducible after a resume."""
    generator = torch.Generator().manual_seed(seed * 100_003 + epoch)
    return torch.randperm(n, generator=generator).tolist()


GROUP_BATCHES = 50  # batches shuffled together, then sorted by length (as Trainer's)


def grouped_order(lengths: list[int], seed: int, epoch: int, batch_size: int) -> list[int]:
    """``epoch_order`` with each run of ``GROUP_BATCHES`` batches sorted by length,
    longest first: consecutive batches hold examples of similar lengths, so dynamic
    padding pads little (Hugging Face ``Trainer``'s ``group_by_length`` does the same).
    Reproducible after a resume, as ``epoch_order`` is."""
    order, size = epoch_order(len(lengths), seed, epoch), GROUP_BATCHES * batch_size
    groups = (
        sorted(order[i : i + size], key=lambda j: -lengths[j]) for i in range(0, len(order), size)
    )
    return [index for group in groups for index in group]


@torch.no_grad()
def evaluate(
    model: PreTrainedModel,
    data: TrialData,
    batch_size: int,
    device: torch.device,
    precision: Resolved,
    split: Literal["eval", "test"] = "eval",
) -> dict[str, float]:
    """The task's metrics on the ``split`` (the evaluation split, or the test split the
    trial read), prefixed ``<split>_``; the forward pass under ``precision``'s autocast.

    Raises:
        ValueError: ``split`` test where the trial read no test split.
    """
    features, examples = data.eval_features, data.eval_examples
    if split == "test":
        if data.test_features is None or data.test_examples is None:
            raise ValueError("this trial read no test split (training.score_test)")
        features, examples = data.test_features, data.test_examples
    model.eval()
    order = list(range(len(features)))
    eval_batches = [to_device(b, device) for b in batches(data, features, batch_size, order)]

    def predict(batch: Batch) -> Any:
        with autocast(device, precision):
            return model(**model_inputs(batch))

    metrics = data.task.evaluate(predict, eval_batches, examples)
    model.train()
    return {f"{split}_{name}": value for name, value in metrics.items()}


def step_batches(
    data: TrialData, order: list[int], training: TrainingSpec
) -> Iterator[list[Batch]]:
    """The micro-batches of each optimiser step over ``order``: ``grad_accumulation``
    batches of ``batch_size``, the last step taking what is left."""
    step: list[Batch] = []
    for batch in batches(data, data.train_features, training.batch_size, order):
        step.append(batch)
        if len(step) == training.grad_accumulation:
            yield step
            step = []
    if step:
        yield step


def weights(model: nn.Module) -> dict[str, torch.Tensor]:
    """A copy of ``model``'s state on the CPU (the best evaluation's model)."""
    return {name: value.detach().to("cpu", copy=True) for name, value in model.state_dict().items()}


def fit(
    data: TrialData,
    model_name: str,
    loss_spec: dict[str, Any],
    seed: int,
    training: TrainingSpec,
    reporter: Reporter,
    metric: str = "eval_f1",
) -> dict[str, float]:
    """Train and evaluate one trial; returns its last report: the last evaluation's
    metrics or, with ``checkpoint: best`` or early stopping, the best one's, with the
    ``precision`` it trained in (``trainables.precision.resolve``) and, where the trial
    read a test split, the reported model's ``test_*`` metrics.

    Raises:
        PrecisionUnavailableError: ``training.precision`` fp16 off a CUDA GPU.
        TrialDiverged: the training loss became NaN or infinite.
    """
    seed_everything(seed)
    device = pick_device()
    vocab = len(data.tokenizer) if model_name == TINY_BERT else None
    model = data.task.build_model(model_name, vocab)
    if training.head_init == "encoder":
        init_heads_as_encoder(model)
    model = model.to(device)
    counts = data.task.class_counts(data.train_features)
    # Span tasks name no classes (their losses see binary start/end inputs): no labels.
    labels = data.task.labels or None
    loss_fn = build_loss(loss_spec, class_counts=counts, labels=labels).to(device)
    steps_per_epoch = training.steps_per_epoch(len(data.train_features))
    total_steps = training.total_steps(steps_per_epoch)
    context = step_context(model, data.task, loss_fn, training, device, total_steps)
    precision = context.precision
    progress = Progress()
    best: dict[str, torch.Tensor] | None = None  # the best evaluation's weights (checkpoint best)
    resumed = reporter.latest_checkpoint()
    if resumed is not None:
        progress = Progress(**load_checkpoint(resumed, context))
        best = load_best_weights(resumed)
    model.train()
    last: dict[str, Any] = {}
    started = time.perf_counter()
    lengths = [len(feature["input_ids"]) for feature in data.train_features]
    per_step = training.batch_size * training.grad_accumulation
    # A checkpoint may end at the last step without a stop reason: nothing is left to do.
    while progress.stop_reason is None and progress.step < total_steps:
        epoch, skip = divmod(progress.step, steps_per_epoch)
        if training.group_by_length:
            order = grouped_order(lengths, seed, epoch, training.batch_size)
        else:
            order = epoch_order(len(lengths), seed, epoch)
        for micro_batches in step_batches(data, order[skip * per_step :], training):
            loss = train_step(context, micro_batches)
            progress.step += 1
            if not math.isfinite(loss):
                raise TrialDiverged(progress.step, loss)
            progress.loss_sum += loss
            progress.loss_steps += 1
            reporter.progress(progress.step, total_steps, loss)
            at_end = progress.step == total_steps  # max_steps may end mid-epoch
            if not (at_end or training.evaluates_at(progress.step, steps_per_epoch)):
                continue
            last = {**evaluate(model, data, training.batch_size, device, precision)}
            last.update(
                precision=precision,
                train_loss=progress.loss_sum / max(progress.loss_steps, 1),
                epoch=progress.step / steps_per_epoch,
                step=progress.step,
                optimizer_steps=progress.step,
                seconds=time.perf_counter() - started,
            )
            watch(progress, last, metric, training.min_delta)
            if training.checkpoint == "best" and progress.best_step == progress.step:
                best = weights(model)
            last[f"best_{metric}"] = progress.best_metric
            last["best_step"] = progress.best_step
            progress.loss_sum, progress.loss_steps = 0.0, 0
            progress.stop_reason = stop_reason(progress, training, total_steps)
            if progress.stop_reason is not None:
                last = final_metrics(last, progress, training, metric)
                if data.test_features is not None:
                    last.update(score_test(model, best, data, training, device, precision))
            with tempfile.TemporaryDirectory(prefix="dicesweep-ckpt-") as folder:
                finished = progress.stop_reason is not None
                save_checkpoint(Path(folder), context, progress.__dict__, finished, best)
                reporter.report(last, Path(folder))
            if progress.stop_reason is not None:
                break
    return last


def score_test(
    model: nn.Module,
    best: dict[str, torch.Tensor] | None,
    data: TrialData,
    training: TrainingSpec,
    device: torch.device,
    precision: Resolved,
) -> dict[str, float]:
    """The reported model's ``test_*`` metrics: the best evaluation's weights where
    ``best`` holds them (``checkpoint: best``), else the model as it ended. ``model``
    ends holding the weights it was scored with."""
    if best is not None:
        model.load_state_dict(best)
    return evaluate(model, data, training.batch_size, device, precision, split="test")


def watch(progress: Progress, metrics: dict[str, Any], metric: str, min_delta: float) -> None:
    """Take one evaluation into ``progress``: the best evaluation (the first of the
    highest ``metric``) and the evaluations since ``metric`` last rose by more than
    ``min_delta`` (a smaller rise makes a new best but counts as stale, as Hugging Face
    ``EarlyStoppingCallback``'s threshold does)."""
    value = float(metrics.get(metric, -math.inf))
    progress.stale_evals = (
        0 if value > progress.best_metric + min_delta else progress.stale_evals + 1
    )
    if value > progress.best_metric or not progress.best:
        progress.best_metric = value
        progress.best = {k: float(v) for k, v in metrics.items() if k.startswith("eval_")}
        progress.best_step = progress.step


def stop_reason(progress: Progress, training: TrainingSpec, total_steps: int) -> StopReason | None:
    """Why the trial stops after this evaluation, or None to go on: the planned steps
    are done (``max_steps``, else ``epochs``), or early stopping's patience ran out."""
    if progress.step >= total_steps:
        return "max_steps" if training.max_steps is not None else "epochs"
    patience = training.early_stopping_patience
    if patience is not None and progress.stale_evals >= patience:
        return "early_stopping"
    return None


def final_metrics(
    last: dict[str, Any], progress: Progress, training: TrainingSpec, metric: str
) -> dict[str, Any]:
    """A trial's last report: its last evaluation with ``stop_reason``. With early
    stopping or ``checkpoint: best``, the trial's result is its best evaluation (the
    checkpoint Hugging Face ``Trainer`` keeps with ``load_best_model_at_end``): the eval
    metrics are the best evaluation's, found at ``best_step``, and ``last_<metric>``
    keeps the last one's; the step counts and the training loss stay the run's."""
    final = {**last, "stop_reason": progress.stop_reason}
    if training.early_stopping_patience is not None or training.checkpoint == "best":
        final.update(progress.best)
        final[f"last_{metric}"] = last.get(metric, math.nan)
    return final
