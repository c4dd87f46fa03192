"""What a trial's dev predictions say of it: two marks, two meanings.

- **Constant** (degenerate, ``degenerate_reason``): one prediction (class, tag or
  answer) for at least ``CONSTANT_SHARE`` percent of the dev items. The model learned
  nothing: the trial stays visible, marked with its evidence, and is left out of a
  table's statistics, never chosen by stage 1 and never bold.
- **Below no-skill** (``below_no_skill_reason``): it predicts more than one thing but
  scores at or under its task's no-skill rule on dev (always-positive F1, majority
  accuracy, every word ``O``, the first k words of the passage). It learned something
  badly: it is marked and stays in the statistics.

Both read a trial's metrics (a mapping or a table row): the prediction shares and the
no-skill scores its task reports (``eval_top_prediction_share``,
``eval_baseline_<name>``). Plain functions, no pandas: stage 1's choice
(``search_spaces.tuning``) and the service read them too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

SHARE_METRIC = "eval_top_prediction_share"  # % of inputs given the commonest prediction
POSITIVE_SHARE_METRIC = "eval_positive_prediction_share"  # PI: % of pairs called positive
LEGACY_DISTINCT_METRIC = "eval_distinct_predictions"  # trials from before the shares
# A constant predictor gives its commonest prediction to at least this percent of the
# dev items (MRPC dev: 404 of 408 pairs, 99.0%, is; 403, 98.8%, is not) ...
CONSTANT_SHARE = 99.0
# ... and any other prediction at less than this fraction of the rate the dev set has
# other answers than its own commonest (so a tagger predicting O for 99.5% of the
# words of a set that is 99% O is judged by its F1, not called constant).
CONSTANT_RATE = 0.1
# Scores a no-skill rule gives (``eval_baseline_<name>``, reported by the trainable).
BASELINE_SCORES = ("f1", "accuracy", "exact_match")


def number(value: Any) -> float | None:
    """``value`` as a float, or None where it is missing, not a number or NaN."""
    try:
        result = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(result) else result


def degenerate_reason(metrics: Mapping[str, Any], metric: str = "eval_f1") -> str | None:
    """Why a trial is constant (its model learned nothing), or None.

    Constant: it gives its commonest prediction to at least ``CONSTANT_SHARE`` percent
    of the dev items, and other predictions at less than ``CONSTANT_RATE`` of the rate
    the dev set has them (its majority share is the no-skill accuracy,
    ``eval_baseline_accuracy``, where the task reports it). Trials from before the
    prediction shares are judged by the ``eval_distinct_predictions`` they reported
    (1: constant); a trial that reported neither is never constant. ``metric`` is
    unused: the mark does not depend on the score (kept so that both marks read alike).
    """
    del metric
    share = number(metrics.get(SHARE_METRIC))
    if share is None:
        distinct = number(metrics.get(LEGACY_DISTINCT_METRIC))
        constant = distinct is not None and distinct <= 1
        return "constant predictions (the same for every input)" if constant else None
    majority = number(metrics.get("eval_baseline_accuracy"))
    other_rate = 100.0 - (majority if majority is not None else 0.0)
    if share < CONSTANT_SHARE or 100.0 - share >= CONSTANT_RATE * other_rate:
        return None
    positive = number(metrics.get(POSITIVE_SHARE_METRIC))
    if positive is not None:  # paraphrase identification: which class, of the pairs
        label = "positive" if positive >= 50.0 else "negative"
        return f"predicts {label} for {max(positive, 100.0 - positive):.1f}% of pairs"
    inputs = "questions" if "eval_baseline_exact_match" in metrics else "words"
    return f"gives one prediction to {share:.1f}% of {inputs}"


def below_no_skill_reason(metrics: Mapping[str, Any], metric: str = "eval_f1") -> str | None:
    """Why a trial that is not constant scores at or under its data set's no-skill
    rule on ``metric`` (``eval_baseline_<name>``), e.g. ``"eval_f1 46.07 ≤ no-skill
    48.04"``, or None: where it is constant (``degenerate_reason`` says so), where no
    rule scores ``metric``, or where the trial reported no score."""
    if degenerate_reason(metrics) is not None:
        return None
    name = metric.removeprefix("eval_")
    baseline = number(metrics.get(f"eval_baseline_{name}")) if name in BASELINE_SCORES else None
    value = number(metrics.get(metric))
    if baseline is not None and value is not None and value <= baseline + 1e-9:
        return f"{metric} {value:.2f} ≤ no-skill {baseline:.2f}"
    return None


def constant_choices(rows: Iterable[Mapping[str, Any]], metric: str = "eval_f1") -> list[str]:
    """The losses (``loss`` labels) whose every scored stage-1 trial among ``rows``
    (trial rows: ``stage`` ``tune``, a ``metric`` and, where given, ``status``
    ``FINISHED``) is constant: stage 1 chose their settings among constant trials
    (``search_spaces.tuning.choose_settings``)."""
    constant: dict[str, bool] = {}
    for row in rows:
        scored = number(row.get(metric)) is not None and row.get("status", "FINISHED") == "FINISHED"
        if row.get("stage") != "tune" or not scored:
            continue
        label = str(row["loss"])
        constant[label] = constant.get(label, True) and degenerate_reason(row) is not None
    return sorted(label for label, every in constant.items() if every)
