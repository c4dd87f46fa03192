"""A sweep's trial rows and the tables over them, pure functions (see
``search_spaces.reports``); each row's paired test against the baseline is
``paired``'s."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, get_args

import pandas as pd

from search_spaces.dataset_refs import dataset_label
from search_spaces.flags import BASELINE_SCORES
from search_spaces.reports.cells import keyed_by_cell, require_columns, split_by
from search_spaces.reports.flagged import marks, with_every_cell, with_marks, with_sensitivity
from search_spaces.reports.formats import STATS, format_value, ordered
from search_spaces.reports.notes import grid_edges, precision_counts, tuned_settings
from search_spaces.reports.paired import paired_test, with_significance
from search_spaces.reports.sequential import cell_looks, rule_of, with_rule
from search_spaces.reports.setup_block import setup_block
from search_spaces.reports.tested import tested_metric, tested_scores
from search_spaces.sections import Metric, trial_training
from search_spaces.setup import reported_columns, setup_columns, trial_setup

SEARCH_METRICS: tuple[str, ...] = get_args(Metric)
METRICS = (
    *SEARCH_METRICS,
    # NER as reading comprehension's other official per-query span scores.
    "eval_span_precision",
    "eval_span_recall",
    # The reported checkpoint on the test split (training.score_test; reports.tested).
    *map(tested_metric, SEARCH_METRICS),
    "train_loss",
    "epoch",
    "optimizer_steps",  # the optimiser steps the trial ran (to its last evaluation)
    # What a trial predicts and its data set's no-skill rules score (``degenerate_reason``).
    "eval_top_prediction_share",
    "eval_positive_prediction_share",
    "eval_baseline_f1",
    "eval_baseline_accuracy",
    "eval_baseline_exact_match",
    # Reported by trials before the prediction shares; read for them only.
    "eval_distinct_predictions",
    # A binary set's scored class, its share of the training file and of the set trained
    # on (after the variant and the cap): trainables.data.classes.
    "positive_label",
    "positive_share",
    "train_positive_share",
    # Whether the trial's tokenizer lowercases (search_spaces.setup: setup_tokenizer).
    "tokenizer_lowercase",
)


def loss_label(loss_spec: Mapping[str, Any]) -> str:
    """A short, stable label: ``"ce"``, ``"focal(gamma=2)"``, ``"tversky(alpha=0.3,beta=0.7)"``.

    Parameters are sorted by name; only scalar ones count (never ``class_counts``).
    """
    params = {
        key: value
        for key, value in loss_spec.items()
        if key != "name" and isinstance(value, bool | int | float | str)
    }
    inner = ",".join(f"{key}={format_value(params[key])}" for key in sorted(params))
    return f"{loss_spec['name']}({inner})" if inner else str(loss_spec["name"])


def row_from_trial(config: Mapping[str, Any], metrics: Mapping[str, Any]) -> dict[str, Any]:
    """One row from a trial's config (the trial config contract) and its final metrics:
    its ``stage`` (``tune`` or ``final``), each tuned training setting as
    ``tuned_<setting>`` and its setup (``search_spaces.setup``: ``setup_<field>``)
    among them.

    Raises:
        pydantic.ValidationError: ``config`` is not a trial config.
    """
    loss = config["loss"]
    training = trial_training(config)
    tuned = {f"tuned_{name}": training[name] for name in config.get("tuned", [])}
    setup = setup_columns(trial_setup(config)) | reported_columns(metrics)
    return {
        "loss": loss_label(loss),
        "loss_name": loss["name"],
        **{f"param_{key}": value for key, value in loss.items() if key != "name"},
        "dataset": dataset_label(config["dataset"]),
        "variant": config["variant"],
        "seed": config["seed"],
        "stage": config.get("stage", "final"),
        **tuned,
        **{name: metrics[name] for name in METRICS if name in metrics},
        # What it trained in (trainables.precision), where the trial reported it.
        **({"precision": metrics["precision"]} if "precision" in metrics else {}),
        **setup,
    }


def final_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows the paper's tables are made of: every trial but stage 1's of a
    two-stage sweep (those are scored on the tuning split, not on dev)."""
    if "stage" not in rows:
        return rows
    return rows[rows["stage"].fillna("final") != "tune"]


def infer_layout(rows: pd.DataFrame) -> tuple[str, str, str | None]:
    """The paper's layout for these trials: (rows key, columns key, baseline).

    Several variants: Table 8 (loss x variant). One loss whose parameter varies, e.g.
    Tversky's alpha: Table 10 (``param_<name>`` x data set), no baseline. Otherwise
    loss x data set. The baseline is ``ce`` where the rows hold it.
    """
    baseline = "ce" if "ce" in set(rows.get("loss", [])) else None
    if rows["variant"].nunique() > 1:
        return "loss", "variant", baseline
    if rows["loss_name"].nunique() == 1 and rows["loss"].nunique() > 1:
        varying = sorted(
            column
            for column in rows.columns
            if column.startswith("param_") and rows[column].astype(str).nunique() > 1
        )
        if varying:
            return varying[0], "dataset", None
    return "loss", "dataset", baseline


def pivot_table(
    rows: pd.DataFrame,
    rows_key: str,
    cols_key: str,
    metric: str = "eval_f1",
    baseline: str | None = "ce",
) -> pd.DataFrame:
    """Mean, std (n-1), count and distinct seeds of ``metric`` over each cell's rows, the delta
    of the mean against the ``baseline`` row in the same column.

    Returns a frame indexed by the ``rows_key`` values, with columns ``(col, stat)`` for
    each ``cols_key`` value and stat in ``STATS``; ``delta`` is NaN on the baseline row
    (and everywhere when ``baseline`` is None). Rows with a NaN metric (failed trials)
    are left out. ``attrs`` keeps ``metric``, ``rows_key``, ``cols_key``, ``baseline``,
    and ``precision`` (``notes.precision_counts``) where the rows have that column.

    Raises:
        ValueError: a missing column, or a ``baseline`` that is not among the rows.
    """
    require_columns(rows, (rows_key, cols_key, metric))
    data = rows.dropna(subset=[metric])
    cells = data.groupby([rows_key, cols_key])
    stats = cells[metric].agg(["mean", "std", "count"])  # count: runs; seeds: distinct seeds
    stats["seeds"] = cells["seed"].nunique() if "seed" in data else stats["count"]
    means = stats["mean"].unstack(cols_key)
    if baseline is not None and baseline not in means.index:
        raise ValueError(f"baseline {baseline!r} is not a {rows_key}; have {list(means.index)}")
    frames = {stat: stats[stat].unstack(cols_key) for stat in ("mean", "std", "count", "seeds")}
    frames["delta"] = means * math.nan
    if baseline is not None:
        frames["delta"] = means - means.loc[baseline]
        frames["delta"].loc[baseline] = math.nan
    index = ordered(means.index, baseline)
    columns = ordered(means.columns)
    table = pd.concat(frames, axis=1).swaplevel(axis=1)
    table = table.reindex(index=index, columns=pd.MultiIndex.from_product([columns, STATS]))
    table.index.name, table.columns.names = rows_key, [cols_key, "stat"]
    table.attrs = {
        "metric": metric,
        "rows_key": rows_key,
        "cols_key": cols_key,
        "baseline": baseline,
        "datasets": sorted(map(str, data["dataset"].unique())) if "dataset" in data else [],
        "seeds": sorted(int(seed) for seed in data["seed"].unique()) if "seed" in data else [],
    }
    if "precision" in data:  # its trials reported what they trained in
        table.attrs["precision"] = precision_counts(data)
    return table


def paper_table(
    rows: pd.DataFrame,
    metric: str = "eval_f1",
    rows_key: str | None = None,
    cols_key: str | None = None,
    title: str | None = None,
) -> pd.DataFrame:
    """The table the paper would print of ``rows`` (finished trials): the paper's
    layout unless keys are given (``infer_layout``), the delta against ``ce`` where
    the rows are losses holding it, and the paired tests' marks; ``title`` (the sweep's
    name) captions it.

    Constant trials (``search_spaces.flags.degenerate_reason``) are left out of the
    means, Δs and paired tests alike; trials below no-skill stay in them. Both are
    counted per cell and listed with their reasons (``flagged.with_marks``), a cell of
    constant trials only kept, without a mean; where leaving the below-no-skill trials
    out too changes a Δ's sign or resolution, ``attrs["sensitivity"]`` gives both
    (``flagged.with_sensitivity``). Each data set's no-skill baselines are in
    ``attrs["baselines"]``. Trials that ran seeds until decided are judged by their
    rule (``sequential.with_rule``): each cell's stopping look and reason, its repeated
    CI and p in place of the fixed-k ones.

    Raises:
        ValueError: what ``pivot_table`` raises.
    """
    inferred_rows, inferred_cols, _ = infer_layout(rows)
    rows_key, cols_key = rows_key or inferred_rows, cols_key or inferred_cols
    split = split_by(rows, rows_key, cols_key)
    rows, rows_key = keyed_by_cell(rows, rows_key, cols_key)
    constant, below = marks(rows, metric)
    learned = rows.drop(index=constant.index)
    baseline = "ce" if rows_key == "loss" and "ce" in set(learned["loss"]) else None
    table = pivot_table(learned, rows_key, cols_key, metric=metric, baseline=baseline)
    table = with_every_cell(table, rows)
    if baseline is not None:
        tests = paired_test(learned, rows_key, cols_key, metric, baseline)
        table = with_significance(table, tests)
        kept = learned.drop(index=below.index)
        if len(below) and baseline in set(kept[rows_key]):
            without = pivot_table(kept, rows_key, cols_key, metric, baseline)
            tests_without = paired_test(kept, rows_key, cols_key, metric, baseline)
            table = with_sensitivity(table, tests, without, tests_without)
        rule = rule_of(learned)
        if rule is not None:
            looks = cell_looks(learned, rows_key, cols_key, metric, baseline, rule)
            table = with_rule(table, looks, rule)
    table.attrs["title"] = title
    table = with_marks(table, rows, constant, below)
    table.attrs["baselines"] = no_skill_baselines(rows)
    table.attrs["steps"] = steps_per_row(rows, rows_key, list(table.index))
    table.attrs["tuned"] = tuned_settings(rows)
    table.attrs["grid_edges"] = grid_edges(rows)
    table.attrs["setup"] = setup_block(rows, rows_key, cols_key)
    table.attrs["split_by"] = split
    table.attrs["test"] = tested_scores(learned, rows_key, cols_key, metric)
    return table


def no_skill_baselines(rows: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Each data set's no-skill scores (``eval_baseline_<name>``, by ``name``), as its
    trials report them; data sets whose trials report none are left out."""
    scores: dict[str, dict[str, float]] = {}
    for name in BASELINE_SCORES:
        column = f"eval_baseline_{name}"
        if column not in rows or "dataset" not in rows:
            continue
        means = rows.dropna(subset=[column]).groupby("dataset")[column].mean()
        for dataset, value in means.items():
            scores.setdefault(str(dataset), {})[name] = float(value)
    return scores


STEPS_METRIC = "optimizer_steps"


def steps_per_row(rows: pd.DataFrame, rows_key: str, order: Iterable[Any]) -> list[dict[str, Any]]:
    """The optimiser steps the trials of each table row ran, in the table's ``order``:
    ``{"row", "min", "median", "max"}`` each, so a reader sees whether every loss trained
    as long (early stopping ends some sooner); empty for trials from before the steps
    were recorded."""
    if STEPS_METRIC not in rows or rows[STEPS_METRIC].isna().all():
        return []
    steps = rows.dropna(subset=[STEPS_METRIC]).groupby(rows_key)[STEPS_METRIC]
    spans = steps.agg(["min", "median", "max"])
    return [
        {"row": label, **{stat: int(spans.at[label, stat]) for stat in ("min", "median", "max")}}
        for label in order
        if label in spans.index
    ]


FAILED_KEYS = ("loss", "dataset", "variant", "seed", "reason")


def failed_trials(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """The FAILED trials among MLflow's trial rows, each ``FAILED_KEYS`` with the
    reason their run records (``failure_reason``), for ``with_failures``."""
    if rows.empty or "status" not in rows:
        return []
    failed = rows[rows["status"] == "FAILED"]
    reasons = failed.get("failure_reason", pd.Series(index=failed.index, dtype=object))
    return [
        {
            "loss": row["loss"],
            "dataset": row["dataset"],
            "variant": row["variant"],
            "seed": int(row["seed"]),
            "reason": reason if isinstance(reason, str) and reason else "failed",
            **_sweep_of(failed, index),
        }
        for (index, row), reason in zip(failed.iterrows(), reasons, strict=True)
    ]


def _sweep_of(rows: pd.DataFrame, index: Any) -> dict[str, str]:
    """``{"sweep": id}`` for a row of merged sweeps (``merged_rows``), else nothing."""
    return {"sweep": str(rows.at[index, "sweep"])} if "sweep" in rows else {}


def with_failures(table: pd.DataFrame, failed: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """``table`` carrying the trials that failed (``attrs["failed"]``, sorted), which
    are not in its cells: the renderers list them under the table."""
    listed = [
        {key: entry[key] for key in (*FAILED_KEYS, "sweep") if key in entry} for entry in failed
    ]
    table.attrs["failed"] = sorted(
        listed, key=lambda e: (str(e["loss"]), str(e["dataset"]), str(e["variant"]), e["seed"])
    )
    return table
