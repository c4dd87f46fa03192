"""The numeric precision a trial trains in: which autocast dtype the forward pass runs
under, the gradient scaler fp16 needs, and the loss computed in fp32 whatever it is.

``training.precision`` (``search_spaces.sections.TrainingSpec``) asks; ``resolve``
answers for the device the trial got:

- ``auto``: bf16 on a CUDA GPU that supports it, fp16 with a gradient scaler on one
  that does not, fp32 on a CPU. A CPU with native bf16 (AVX-512 BF16 or AMX) steps
  faster under bf16 autocast; ``auto`` stays fp32 there all the same, so a CPU trial
  trains in bf16 only when its spec asks for it (docs/sweeps.md: how its F1 compares
  with fp32's).
- ``bf16``: bf16 autocast on any device; a CPU without native bf16 emulates it (slow:
  logged).
- ``fp16``: fp16 autocast and ``torch.amp.GradScaler``, on a CUDA GPU only (refused at
  submission without one: ``sweep_service.api.operations.resource_issues``).
- ``fp32``: no autocast.

Every loss sees float32 logits and runs with autocast off (``batch_loss``): the dice,
Tversky and DSC sums and denominators are never rounded to 16 bits.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from functools import cache
from pathlib import Path
from typing import Any, Literal

import torch
from torch import Tensor

Resolved = Literal["fp32", "bf16", "fp16"]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # /proc/cpuinfo flags of native bf16

log = logging.getLogger(__name__)


class PrecisionUnavailableError(ValueError):
    """``training.precision`` asks for what the trial's device cannot do (fp16 off a GPU)."""


@cache
def cpu_has_native_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this CPU computes bf16 in hardware (AVX-512 BF16 or AMX), read from the
    kernel's CPU flags; False where they cannot be read (not Linux)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return False
    flags = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return any(flag in flags.split() for flag in CPU_BF16_FLAGS)


@cache  # train_step asks every step; the bf16 warning is logged once
def resolve(requested: str, device: torch.device) -> Resolved:
    """The precision a trial on ``device`` trains in for ``training.precision``.

    Raises:
        PrecisionUnavailableError: ``fp16`` on a device other than a CUDA GPU.
    """
    cuda = device.type == "cuda"
    if requested == "auto":
        if not cuda:
            return "fp32"  # bf16 on a CPU is asked for, never chosen (docs/sweeps.md)
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    if requested == "fp16" and not cuda:
        raise PrecisionUnavailableError(
            f"training.precision: fp16 needs a CUDA GPU (with a gradient scaler); this trial "
            f"runs on {device.type}: use bf16 or fp32, or set resources.gpus_per_trial"
        )
    if requested == "bf16" and not cuda and not cpu_has_native_bf16():
        log.warning(
            "training.precision bf16 on a CPU without native bf16 (%s): emulated, slower than fp32",
            " or ".join(CPU_BF16_FLAGS),
        )
    assert requested in ("fp32", "bf16", "fp16"), requested  # the spec's Literal
    return requested  # type: ignore[return-value]


def autocast(device: torch.device, precision: Resolved) -> AbstractContextManager[Any]:
    """The forward pass's autocast for a resolved ``precision`` (none for fp32)."""
    if precision == "fp32":
        return nullcontext()
    return torch.autocast(device_type=device.type, dtype=DTYPES[precision])


def grad_scaler(device: torch.device, precision: Resolved) -> torch.amp.GradScaler | None:
    """fp16's loss scaler (small gradients would flush to zero in fp16), else None."""
    return torch.amp.GradScaler(device.type) if precision == "fp16" else None


def batch_loss(
    loss: Callable[[Any, Any, Callable[..., Tensor]], Tensor],
    outputs: Any,
    batch: Any,
    loss_fn: Callable[..., Tensor],
    device: torch.device,
) -> Tensor:
    """The batch's loss from the model's ``outputs`` (``task.loss``), float32 even when
    called under autocast: autocast is off here, so the losses' matrix products and
    sums run in the float32 their inputs are cast to (``trainables.losses.inputs``)
    rather than in bf16/fp16.

    Returns:
        A 0-d float32 tensor (float64 for float64 logits).
    """
    with torch.autocast(device_type=device.type, enabled=False):
        return loss(outputs, batch, loss_fn)
