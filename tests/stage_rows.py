"""Trial rows shaped as a two-stage sweep's (``stage``, ``loss``, ``eval_f1``,
``tuned_learning_rate``), for the tests of its budget curves and table."""

from __future__ import annotations

import pandas as pd

RATES = [1e-5, 2e-5, 3e-5, 5e-5, 7e-5, 1e-4]
# Stage 1: six draws of the learning rate per loss, scored on the tuning split. ce is
# good at once and flat; dsc is poor at most rates but best at its best one, so it
# overtakes ce once five trials are affordable (by less than the spread of the bests).
STAGE_ONE = {
    "ce": [84.0, 85.0, 85.5, 84.5, 83.0, 85.2],
    "dsc": [60.0, 70.0, 88.0, 75.0, 86.0, 65.0],
}
# Stage 2: three seeds at each loss's best rate, reported on dev.
STAGE_TWO = {"ce": [85.1, 85.6, 84.9], "dsc": [87.2, 86.8, 87.9]}


def two_stage_rows() -> pd.DataFrame:
    """Stage 1's twelve rows (``stage == "tune"``), then stage 2's six (``"final"``),
    every one FINISHED on MRPC."""
    common = {"dataset": "mrpc", "variant": "original", "status": "FINISHED"}
    tune = [
        {
            **common,
            "loss": loss,
            "loss_name": loss,
            "seed": 0,
            "stage": "tune",
            "tuned_learning_rate": rate,
            "eval_f1": score,
        }
        for loss, scores in STAGE_ONE.items()
        for rate, score in zip(RATES, scores, strict=True)
    ]
    final = [
        {
            **common,
            "loss": loss,
            "loss_name": loss,
            "seed": seed,
            "stage": "final",
            "tuned_learning_rate": RATES[STAGE_ONE[loss].index(max(STAGE_ONE[loss]))],
            "eval_f1": score,
        }
        for loss, scores in STAGE_TWO.items()
        for seed, score in enumerate(scores)
    ]
    return pd.DataFrame(tune + final)
