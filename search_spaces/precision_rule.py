"""``training.precision: auto`` decided once per sweep, for the kind of worker its trials
train on: the rule, over what one probe there measured (``Probe``) or what the cluster
states (``DICESWEEP_AUTO_PRECISION``).

- **bf16** where it was measured at least ``BF16_SPEEDUP`` times as fast as fp32 there
  and its F1 was shown to match fp32's for the task's formulation (``BF16_PARITY``:
  tagging, pair classification and MRC-NER, by the project's bf16 parity study; span
  extraction needs a parity cell of its own first);
- **fp16** with a gradient scaler on a CUDA GPU without bf16, for those formulations;
- **fp32** everywhere else.

The driver records the choice and why on the sweep's parent run, rewrites the spec so
that every trial config asks for it, and a resumed driver reads it back instead of
measuring again: one precision per sweep, whatever each trial's process would measure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Resolved = Literal["fp32", "bf16", "fp16"]
BF16_SPEEDUP = 1.25  # bf16 products at least this many times as fast as fp32's
BF16_PARITY = frozenset({"tagger", "pair classifier", "mrc"})  # where bf16's F1 matches fp32's


@dataclass(frozen=True)
class Probe:
    """What one worker of the kind a sweep's trials get measured: its ``device``
    (``cpu``, ``cuda``), whether that GPU computes bf16, and how many times as fast as
    fp32 a bf16 product of the model's width ran there (``bf16_speedup``)."""

    device: Literal["cpu", "cuda"]
    bf16_speedup: float
    cuda_bf16: bool = False


def sweep_precision(probe: Probe, formulation: str) -> tuple[Resolved, str]:
    """The precision every trial of a sweep trains in, and why in words, for a task of
    ``formulation`` (``search_spaces.setup``'s: ``tagger``, ``pair classifier``, ``mrc``,
    ``span extraction``) on the worker ``probe`` measured."""
    where = f"{probe.device}: bf16 measured {probe.bf16_speedup:.2f}x fp32"
    if formulation not in BF16_PARITY:
        return "fp32", f"{where}; no bf16 F1 parity shown for {formulation}"
    if probe.device == "cuda" and not probe.cuda_bf16:
        return "fp16", "cuda without bf16: fp16 with a gradient scaler"
    if probe.bf16_speedup >= BF16_SPEEDUP:
        return "bf16", f"{where} (at least {BF16_SPEEDUP}x); bf16 F1 parity for {formulation}"
    return "fp32", f"{where} (below {BF16_SPEEDUP}x)"


def stated_precision(stated: Resolved, formulation: str) -> tuple[Resolved, str]:
    """The precision the cluster states (``DICESWEEP_AUTO_PRECISION``), fp32 where the
    formulation has no 16-bit parity shown, and why."""
    if stated != "fp32" and formulation not in BF16_PARITY:
        return "fp32", f"stated {stated} by the cluster; no bf16 F1 parity shown for {formulation}"
    return stated, f"stated by the cluster ({stated})"
