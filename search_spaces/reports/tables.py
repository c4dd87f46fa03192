"""Tables over a sweep's trial rows: pure functions (see ``search_spaces.reports``)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from search_spaces.dataset_refs import dataset_label
from search_spaces.flags import BASELINE_SCORES
from search_spaces.reports.cells import keyed_by_cell, split_by
from search_spaces.reports.flagged import marks, with_every_cell, with_marks, with_sensitivity
from search_spaces.reports.formats import STATS, format_value, ordered, sort_key
from search_spaces.reports.notes import precision_counts
from search_spaces.reports.resolution import resolvable_difference, resolvable_range
from search_spaces.reports.sequential import cell_looks, rule_of, with_rule
from search_spaces.reports.setup_block import setup_block
from search_spaces.reports.tested import tested_scores
from search_spaces.sections import trial_training
from search_spaces.setup import (
    PREFIX,
    parse_tune_grid,
    reported_columns,
    setup_columns,
    trial_setup,
)

METRICS = (
    "eval_f1",
    "eval_precision",
    "eval_recall",
    "eval_accuracy",
    "eval_exact_match",
    # NER as reading comprehension's official per-query span scores.
    "eval_span_f1",
    "eval_span_precision",
    "eval_span_recall",
    # The reported checkpoint on the test split (training.score_test; reports.tested).
    "test_f1",
    "test_precision",
    "test_recall",
    "test_accuracy",
    "test_exact_match",
    "test_span_f1",
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


def _require(rows: pd.DataFrame, columns: Iterable[str]) -> None:
    missing = [column for column in columns if column not in rows.columns]
    if missing:
        raise ValueError(f"rows lack column(s) {missing}; they have {list(rows.columns)}")


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
    _require(rows, (rows_key, cols_key, metric))
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


def paired_test(
    rows: pd.DataFrame,
    rows_key: str,
    cols_key: str,
    metric: str = "eval_f1",
    baseline: str = "ce",
) -> pd.DataFrame:
    """Paired t-test (``scipy.stats.ttest_rel``) of each row against ``baseline`` within
    each column, pairs matched by ``seed`` (several rows of one seed are averaged).

    Returns one line per (row, column) other than the baseline: ``rows_key``,
    ``cols_key``, ``n_pairs``, ``mean_diff`` (row - baseline) with its 95% confidence
    interval (``ci_low``, ``ci_high``: the paired t interval), ``t_statistic``,
    ``p_value`` (two-sided, raw), ``resolvable`` (``resolvable_difference`` of the
    differences' spread) and its 95% range, ``resolvable_low`` and ``resolvable_high``
    (``resolvable_range``), and ``p_holm``, the p-value Holm-adjusted over every line
    (``holm``); all but the first two are NaN with fewer than 2 pairs.

    Raises:
        ValueError: a missing column, or a ``baseline`` that is not among the rows.
    """
    _require(rows, (rows_key, cols_key, "seed", metric))
    per_seed = rows.dropna(subset=[metric]).groupby([cols_key, "seed", rows_key])[metric].mean()
    wide = per_seed.unstack(rows_key)
    if baseline not in wide.columns:
        raise ValueError(f"baseline {baseline!r} is not a {rows_key}; have {list(wide.columns)}")
    lines = [
        {rows_key: label, cols_key: column, **_paired(wide.loc[column], label, baseline)}
        for column in ordered(wide.index.get_level_values(0))
        for label in ordered(wide.columns, baseline)[1:]
    ]
    columns = [rows_key, cols_key, "n_pairs", "mean_diff", "ci_low", "ci_high", "t_statistic"]
    tests = pd.DataFrame(lines, columns=[*columns, "p_value", *RESOLVABLE_COLUMNS])
    return tests.assign(p_holm=holm(tests["p_value"]))


RESOLVABLE_COLUMNS = ("resolvable", "resolvable_low", "resolvable_high")


def holm(p_values: pd.Series) -> pd.Series:
    """Holm's step-down adjustment of a table's p-values (``statsmodels``' ``holm``),
    which keeps the chance of any false mark at 5% over all of them; NaN stays NaN."""
    from statsmodels.stats.multitest import multipletests

    adjusted = p_values.astype(float).copy()
    tested = adjusted.notna()
    if tested.any():
        adjusted[tested] = multipletests(adjusted[tested], method="holm")[1]
    return adjusted


def _paired(block: pd.DataFrame, label: Any, baseline: Any) -> dict[str, float]:
    """The paired test of column ``label`` against ``baseline`` over the seeds (rows) of
    ``block``; seeds missing either are left out."""
    from scipy import stats

    pairs = block[[label, baseline]].dropna()
    differences = pairs[label] - pairs[baseline]
    t_stat = p_value = resolvable = low = high = ci_low = ci_high = math.nan
    if len(pairs) >= 2:
        spread = float(differences.std(ddof=1))
        resolvable = resolvable_difference(spread, len(pairs))
        low, high = resolvable_range(spread, len(pairs))
        # Identical differences have no variance: scipy returns +-inf or NaN and warns.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            result = stats.ttest_rel(pairs[label], pairs[baseline])
            interval = result.confidence_interval(0.95)
        t_stat, p_value = float(result.statistic), float(result.pvalue)
        ci_low, ci_high = float(interval.low), float(interval.high)
    return {
        "n_pairs": len(pairs),
        "mean_diff": float(differences.mean()) if len(pairs) else math.nan,
        "ci_low": ci_low,
        "ci_high": ci_high,
        "t_statistic": t_stat,
        "p_value": p_value,
        **dict(zip(RESOLVABLE_COLUMNS, (resolvable, low, high), strict=True)),
    }


def with_significance(table: pd.DataFrame, tests: pd.DataFrame) -> pd.DataFrame:
    """``table`` carrying each cell's paired test against the baseline (``paired_test``):
    its Holm-adjusted p-value (``attrs["significance"]``: ``{(row, column): p}``),
    which the renderers show as marks, the raw one (``attrs["p_raw"]``), the Δ's 95%
    confidence interval (``attrs["ci"]``: ``{(row, column): (low, high)}``) and the
    smallest difference each test detects at 80% power (``attrs["resolvable"]``) with
    its 95% range (``attrs["resolvable_range"]``), which the notes state."""
    rows_key, cols_key = table.attrs["rows_key"], table.attrs["cols_key"]
    lines = tests.to_dict(orient="records")
    table.attrs["significance"] = {
        (line[rows_key], line[cols_key]): float(line["p_holm"]) for line in lines
    }
    table.attrs["p_raw"] = {
        (line[rows_key], line[cols_key]): float(line["p_value"]) for line in lines
    }
    table.attrs["ci"] = {
        (line[rows_key], line[cols_key]): (float(line["ci_low"]), float(line["ci_high"]))
        for line in lines
    }
    table.attrs["resolvable"] = {
        (line[rows_key], line[cols_key]): float(line["resolvable"]) for line in lines
    }
    table.attrs["resolvable_range"] = {
        (line[rows_key], line[cols_key]): (line["resolvable_low"], line["resolvable_high"])
        for line in lines
    }
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


def grid_edges(rows: pd.DataFrame) -> dict[str, dict[str, str]]:
    """Each loss whose stage-1 choice sits at an edge of its grid (``setup_tune_grid``):
    ``{"ce": {"learning_rate": "lowest of {0.0001, 0.0003}"}}``, which says the grid may
    have been too narrow (the project's method notes, §3); empty without one."""
    if f"{PREFIX}tune_grid" not in rows or "loss" not in rows:
        return {}
    edges: dict[str, dict[str, str]] = {}
    for label, group in rows.groupby("loss", sort=False):
        grids = parse_tune_grid(str(group[f"{PREFIX}tune_grid"].dropna().iloc[0]))
        for name, values in grids.items():
            column = f"tuned_{name}"
            if column not in group or group[column].isna().all() or len(values) < 2:
                continue
            chosen = float(group[column].dropna().iloc[0])
            shown = "{" + ", ".join(format_value(v) for v in values) + "}"
            if math.isclose(chosen, min(values)):
                edges.setdefault(str(label), {})[name] = f"lowest of {shown}"
            elif math.isclose(chosen, max(values)):
                edges.setdefault(str(label), {})[name] = f"highest of {shown}"
    return dict(sorted(edges.items(), key=lambda item: sort_key(item[0])))


def tuned_settings(rows: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Each loss's settings chosen by stage 1 of a two-stage sweep, as its rows carry
    them (``tuned_<setting>``): ``{"ce": {"learning_rate": 3e-05}}``; empty without."""
    columns = [column for column in rows.columns if column.startswith("tuned_")]
    if not columns or "loss" not in rows:
        return {}
    tuned: dict[str, dict[str, Any]] = {}
    for label, group in rows.groupby("loss", sort=False):
        values = {
            column.removeprefix("tuned_"): _plain_number(group[column].dropna().iloc[0])
            for column in columns
            if group[column].notna().any()
        }
        if values:
            tuned[str(label)] = values
    return dict(sorted(tuned.items(), key=lambda item: sort_key(item[0])))


def _plain_number(value: Any) -> Any:
    """A pandas/numpy scalar as a plain int or float (JSON and messages show it)."""
    number = float(value)
    return int(number) if number.is_integer() and abs(number) >= 1 else number


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
