"""One optimiser step of a trial, and what every step uses, built once per trial.

``step_context`` gathers the model, the loss, AdamW with its schedule, the precision
``training.precision`` resolves to on the trial's device, and a ``GradScaler`` that is
enabled for fp16 only and a pass-through otherwise, so that ``train_step`` runs the
same code in every precision.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import get_linear_schedule_with_warmup, get_polynomial_decay_schedule_with_warmup

from search_spaces.sections import TrainingSpec
from trainables.precision import Resolved, autocast, batch_loss, grad_scaler, model_width, resolve
from trainables.tasks import Batch, Task, model_inputs


@dataclass(frozen=True)
class StepContext:
    """What every optimiser step of one trial uses."""

    model: nn.Module
    task: Task  # its ``loss`` turns the model's outputs and the batch into the loss
    loss_fn: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: Any  # a learning-rate schedule, stepped once a step
    device: torch.device
    precision: Resolved  # the forward pass's autocast
    scaler: torch.amp.GradScaler  # enabled for fp16 only
    grad_clip: float | None  # the largest gradient norm; None: no clipping


def step_context(
    model: nn.Module,
    task: Task,
    loss_fn: nn.Module,
    training: TrainingSpec,
    device: torch.device,
    total_steps: int,
) -> StepContext:
    """The context of a trial's ``total_steps`` steps: ``training.precision`` resolved
    once for ``device`` (``trainables.precision.resolve``), its ``grad_scaler``, and
    AdamW with its schedule (``build_optimizer``).

    Raises:
        PrecisionUnavailableError: ``training.precision`` fp16 off a CUDA GPU.
    """
    precision = resolve(training.precision, device, model_width(model))
    optimizer, scheduler = build_optimizer(model, training, total_steps)
    return StepContext(
        model=model,
        task=task,
        loss_fn=loss_fn,
        optimizer=optimizer,
        scheduler=scheduler,
        device=device,
        precision=precision,
        scaler=grad_scaler(device, precision),
        grad_clip=training.grad_clip,
    )


def build_optimizer(
    model: nn.Module, training: TrainingSpec, total_steps: int
) -> tuple[torch.optim.Optimizer, Any]:
    """AdamW (``training.adam_epsilon``) without weight decay on biases and LayerNorm
    weights; linear warm-up over ``warmup_ratio`` of ``total_steps``, then
    ``training.decay`` (linear to 0, or polynomial to ``end_factor`` × the rate)."""
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        (no_decay if parameter.ndim < 2 or "LayerNorm" in name else decay).append(parameter)
    # The fused kernel updates every parameter in one pass (CPU and CUDA): the optimiser
    # step is a fixed cost per step, a large share of short-sequence steps (NER).
    fused = next(model.parameters()).device.type in ("cpu", "cuda")
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": training.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=training.learning_rate,
        eps=training.adam_epsilon,
        fused=fused,
    )
    warmup = int(training.warmup_ratio * total_steps)
    shape = training.decay
    if shape.kind == "linear":
        return optimizer, get_linear_schedule_with_warmup(optimizer, warmup, total_steps)
    end = shape.end_factor * training.learning_rate
    scheduler = get_polynomial_decay_schedule_with_warmup(
        optimizer, warmup, total_steps, lr_end=end, power=shape.power
    )
    return optimizer, scheduler


def to_device(batch: Batch, device: torch.device) -> Batch:
    """The batch with its tensors on ``device``; other fields as they are."""
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def train_step(context: StepContext, micro_batches: Sequence[Batch]) -> float:
    """One optimiser step over ``micro_batches`` (``loop.step_batches``), the forward
    pass under ``context.precision``'s autocast and the loss in fp32; returns the step's
    loss, the mean of its micro-batches' losses. Each micro-batch's loss is divided by
    their count before its backward pass, so the summed gradients are those of the
    mean: for a loss that is a mean over equal-sized micro-batches, the step is that of
    one batch holding them all. In fp16 the scaler scales the loss before the backward
    pass, unscales the gradients before clipping and skips a step whose gradients
    overflowed (``GradScaler``'s rule); in any other precision it passes them through."""
    model, device, scaler = context.model, context.device, context.scaler
    context.optimizer.zero_grad(set_to_none=True)
    total = 0.0
    for batch in micro_batches:
        batch = to_device(batch, device)
        with autocast(device, context.precision):
            outputs = model(**model_inputs(batch))
        loss = batch_loss(context.task.loss, outputs, batch, context.loss_fn, device)
        loss = loss / len(micro_batches)
        scaler.scale(loss).backward()
        total += float(loss.detach())
    scaler.unscale_(context.optimizer)
    if context.grad_clip is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), context.grad_clip)
    scaler.step(context.optimizer)
    scaler.update()
    context.scheduler.step()
    return total
