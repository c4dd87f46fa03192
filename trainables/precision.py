"""The numeric precision a trial trains in: which autocast dtype the forward pass runs
under, the gradient scaler fp16 needs, and the loss computed in fp32 whatever it is.

``training.precision`` (``search_spaces.sections.TrainingSpec``) asks; ``resolve``
answers for the device the trial got:

- ``auto``: bf16 on a CUDA GPU that supports it, fp16 with a gradient scaler on one
  that does not; fp32 on a CPU. Whether bf16 pays on a CPU depends on the chip, not on
  its flags (docs/benchmarks.md), and a timing probe at a trial's start would decide
  differently in two processes on a busy machine, giving the same spec other numbers:
  ``auto`` does not guess there.
  Ask for ``bf16`` where the benchmark says it pays; its F1 matches fp32's within what
  3 seeds resolve (docs/sweeps.md).
- ``bf16``: bf16 autocast on any device; a CPU without native bf16 emulates it, and
  one whose bf16 products are measured slower than fp32's (``cpu_bf16_speedup``,
  timed once per process) runs it slower (both logged).
- ``fp16``: fp16 autocast and ``torch.amp.GradScaler``, on a CUDA GPU only (refused at
  submission without one: ``sweep_service.api.operations.resource_issues``).
- ``fp32``: no autocast.

Every loss sees float32 logits and runs with autocast off (``batch_loss``): the dice,
Tversky and DSC sums and denominators are never rounded to 16 bits.
"""

from __future__ import annotations

import logging
import statistics
import time
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


@cache  # once per width and thread count in a process: about 0.1 s
def cpu_bf16_speedup(width: int, threads: int | None = None) -> float:
    """How many times faster this CPU multiplies in bf16 than in fp32, at a transformer
    layer's shape for ``width`` (256 tokens by ``width``, times ``width`` by 4 ``width``:
    the feed-forward product that dominates a step) on ``threads`` threads (default:
    torch's current count): fp32 time / bf16 time, the median of 3 interleaved pairs."""
    threads = threads or torch.get_num_threads()
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        generator = torch.Generator().manual_seed(0)
        a = torch.randn(256, width, generator=generator)
        b = torch.randn(width, 4 * width, generator=generator)
        reps = max(3, int(1e9 // (2 * 256 * width * 4 * width)))  # ~1 GFLOP a timing

        def clock(x: Tensor, y: Tensor) -> float:
            x @ y  # warm-up: oneDNN builds its kernel on the first call
            start = time.perf_counter()
            for _ in range(reps):
                x @ y
            return time.perf_counter() - start

        low = (a.to(torch.bfloat16), b.to(torch.bfloat16))
        return statistics.median(clock(a, b) / clock(*low) for _ in range(3))
    finally:
        torch.set_num_threads(previous)


def gpu_bf16_speedup(width: int, device: torch.device) -> float:
    """``cpu_bf16_speedup``'s figure on a CUDA GPU: fp32 time / bf16 time of the same
    product, the median of 3 interleaved pairs, each timed to the device's completion."""
    generator = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(256, width, generator=generator, device=device)
    b = torch.randn(width, 4 * width, generator=generator, device=device)
    reps = max(10, int(1e11 // (2 * 256 * width * 4 * width)))  # ~100 GFLOP a timing

    def clock(x: Tensor, y: Tensor) -> float:
        x @ y
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        for _ in range(reps):
            x @ y
        torch.cuda.synchronize(device)
        return time.perf_counter() - start

    low = (a.to(torch.bfloat16), b.to(torch.bfloat16))
    return statistics.median(clock(a, b) / clock(*low) for _ in range(3))


def model_width(model: torch.nn.Module) -> int | None:
    """The hidden size of a Hugging Face model (its config's ``hidden_size``), else None."""
    width = getattr(getattr(model, "config", None), "hidden_size", None)
    return width if isinstance(width, int) else None


@cache  # a process's trials share the choice, and its warnings are logged once
def resolve(requested: str, device: torch.device, width: int | None = None) -> Resolved:
    """The precision a trial on ``device`` trains in for ``training.precision``;
    ``width`` (the model's hidden size) lets ``bf16`` on a CPU measure whether it pays
    there and warn where it does not.

    Raises:
        PrecisionUnavailableError: ``fp16`` on a device other than a CUDA GPU.
    """
    cuda = device.type == "cuda"
    if requested == "auto":
        if cuda:
            return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
        return "fp32"  # the same numbers in every process: bf16 on a CPU is asked for
    if requested == "fp16" and not cuda:
        raise PrecisionUnavailableError(
            f"training.precision: fp16 needs a CUDA GPU (with a gradient scaler); this trial "
            f"runs on {device.type}: use bf16 or fp32, or set resources.gpus_per_trial"
        )
    if requested == "bf16" and not cuda:
        if not cpu_has_native_bf16():
            log.warning(
                "training.precision bf16 on a CPU without native bf16 (%s): emulated, slower "
                "than fp32",
                " or ".join(CPU_BF16_FLAGS),
            )
        elif width is not None and (speedup := cpu_bf16_speedup(width)) < 1:
            log.warning(
                "training.precision bf16: a bf16 product of width %d runs %.2fx as fast as "
                "fp32's on this CPU (slower)",
                width,
                speedup,
            )
    assert requested in ("fp32", "bf16", "fp16"), requested  # the spec's Literal
    return requested  # type: ignore[return-value]


def autocast(device: torch.device, precision: Resolved) -> AbstractContextManager[Any]:
    """The forward pass's autocast for a resolved ``precision`` (none for fp32)."""
    if precision == "fp32":
        return nullcontext()
    return torch.autocast(device_type=device.type, dtype=DTYPES[precision])


def grad_scaler(device: torch.device, precision: Resolved) -> torch.amp.GradScaler:
    """The loss scaler, enabled in fp16 only (small gradients would flush to zero there);
    disabled, it passes the loss, the gradients and the optimiser's step through."""
    return torch.amp.GradScaler(device.type, enabled=precision == "fp16")


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
