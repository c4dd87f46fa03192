"""A trial's checkpoint: the file ``fit`` writes after every evaluation and a resumed
trial starts from (``trainables.loop``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from trainables.step import StepContext

CHECKPOINT_FILE = "state.pt"


def save_checkpoint(
    folder: Path,
    context: StepContext,
    progress: dict[str, Any],
    finished: bool = False,
    best: dict[str, torch.Tensor] | None = None,
) -> None:
    """The trial's state after an evaluation: its model and progress and, unless it
    has ``finished``, its optimiser, scheduler, random states and fp16's loss scale
    (``None`` in other precisions). A finished trial keeps only what its results need:
    its optimiser state (twice the model's size with AdamW), scheduler and random
    states would never be read again, and a sweep keeps one checkpoint per trial
    (docs/deploy.md, storage). ``best``: the best evaluation's weights
    (``checkpoint: best``), kept beside them."""
    state: dict[str, Any] = {"model": context.model.state_dict(), "progress": progress}
    if best is not None:
        state["best_model"] = best
    if not finished:
        scaler = context.scaler
        state.update(
            optimizer=context.optimizer.state_dict(),
            scheduler=context.scheduler.state_dict(),
            rng=torch.get_rng_state(),
            cuda_rng=torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            scaler=scaler.state_dict() if scaler.is_enabled() else None,
        )
    torch.save(state, folder / CHECKPOINT_FILE)


def load_checkpoint(folder: Path, context: StepContext) -> dict[str, Any]:
    """Restore the state ``save_checkpoint`` wrote in ``folder`` into the context's
    model (and, unless the trial had finished, its optimiser, scheduler, random states
    and fp16's loss scale); returns the trial's progress as it was saved."""
    state = torch.load(folder / CHECKPOINT_FILE, map_location="cpu", weights_only=False)
    context.model.load_state_dict(state["model"])
    if "optimizer" in state:  # a finished trial's checkpoint has none: nothing is left to train
        context.optimizer.load_state_dict(state["optimizer"])
        context.scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["rng"])
        if state["cuda_rng"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        if state.get("scaler") is not None:  # a disabled scaler ignores it
            context.scaler.load_state_dict(state["scaler"])
    progress: dict[str, Any] = state["progress"]
    return progress


def load_best_weights(folder: Path) -> dict[str, torch.Tensor] | None:
    """The best evaluation's weights ``save_checkpoint`` kept in ``folder``, or None."""
    state = torch.load(folder / CHECKPOINT_FILE, map_location="cpu", weights_only=False)
    best: dict[str, torch.Tensor] | None = state.get("best_model")
    return best
