"""The GPU check's verdicts on its trials and head steps (benchmarks/gpu_check.py): the
16-bit losses against fp32's tolerance, and the heads' shapes and dtypes."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from gpu_check import LOSS_TOLERANCE, head_checks, loss_checks, precisions  # noqa: E402


def trial(precision: str, loss: float, trained_in: str | None = None) -> dict[str, Any]:
    return {"precision": precision, "trained_in": trained_in or precision, "final_loss": loss}


def test_a_16_bit_loss_within_the_tolerance_of_fp32s_passes_and_one_beyond_fails() -> None:
    near = 0.36 * (1 + LOSS_TOLERANCE / 2)
    far = 0.36 * (1 + 2 * LOSS_TOLERANCE)
    checks = {c.name: c for c in loss_checks([trial("fp32", 0.36), trial("bf16", near),
                                              trial("fp16", far)])}  # fmt: skip
    assert checks[f"bf16 loss ≤ {LOSS_TOLERANCE:.0%}"].ok
    assert not checks[f"fp16 loss ≤ {LOSS_TOLERANCE:.0%}"].ok
    assert all(checks[f"{p} trial"].ok for p in ("fp32", "bf16", "fp16"))


def test_a_trial_in_another_precision_than_asked_fails() -> None:
    (check,) = loss_checks([trial("fp32", 0.36, trained_in="bf16")])
    assert not check.ok


def step(dtype: str, span_dtype: str, losses: list[float]) -> dict[str, Any]:
    """A bf16 head step's record over a batch of 2 windows of 5 tokens."""
    return {
        "precision": "bf16",
        "batch": [2, 5],
        "outputs": {
            "start_logits": [[2, 5], dtype],
            "end_logits": [[2, 5], dtype],
            "span_logits": [[2, 5, 5], span_dtype],
        },
        "loss_dtype": "torch.float32",
        "step_losses": losses,
    }


def test_heads_in_the_autocast_dtype_with_finite_steps_pass() -> None:
    checks = head_checks("mrc-ner", step("torch.bfloat16", "torch.bfloat16", [0.5, 0.4]))
    assert all(c.ok for c in checks), checks


def test_a_head_out_of_the_autocast_dtype_or_a_nan_step_fails() -> None:
    shapes, loss, steps = head_checks(
        "mrc-ner", step("torch.bfloat16", "torch.float32", [0.5, math.nan])
    )
    assert not shapes.ok and loss.ok and not steps.ok


def test_the_rehearsal_trains_in_fp32_alone() -> None:
    assert precisions(dry_run=True) == ["fp32"]
