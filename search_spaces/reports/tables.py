"""Tables over a sweep's trial rows: pure functions (see ``search_spaces.reports``)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from search_spaces.dataset_refs import dataset_label
from search_spaces.reports.formats import STATS, format_value, ordered, sort_key

METRICS = (
    "eval_f1",
    "eval_precision",
    "eval_recall",
    "eval_accuracy",
    "eval_exact_match",
    "train_loss",
    "epoch",
    # The sanity of a trial's result (``collapse_reason``).
    "eval_baseline_f1",
    "eval_distinct_predictions",
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
    its ``stage`` (``tune`` or ``final``) and each tuned training setting as
    ``tuned_<setting>`` among them."""
    loss = config["loss"]
    tuned = {f"tuned_{name}": config["training"][name] for name in config.get("tuned", [])}
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
    """Mean, std (n-1) and count of ``metric`` over the rows of each cell, and the delta
    of the mean against the ``baseline`` row in the same column.

    Returns a frame indexed by the ``rows_key`` values, with columns ``(col, stat)`` for
    each ``cols_key`` value and stat in ``STATS``; ``delta`` is NaN on the baseline row
    (and everywhere when ``baseline`` is None). Rows with a NaN metric (failed trials)
    are left out. ``attrs`` keeps ``metric``, ``rows_key``, ``cols_key``, ``baseline``.

    Raises:
        ValueError: a missing column, or a ``baseline`` that is not among the rows.
    """
    _require(rows, (rows_key, cols_key, metric))
    data = rows.dropna(subset=[metric])
    stats = data.groupby([rows_key, cols_key])[metric].agg(["mean", "std", "count"])
    means = stats["mean"].unstack(cols_key)
    if baseline is not None and baseline not in means.index:
        raise ValueError(f"baseline {baseline!r} is not a {rows_key}; have {list(means.index)}")
    frames = {stat: stats[stat].unstack(cols_key) for stat in ("mean", "std", "count")}
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
    }
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
    ``cols_key``, ``n_pairs``, ``mean_diff`` (row - baseline), ``t_statistic``,
    ``p_value`` (two-sided); the last two are NaN with fewer than 2 pairs.

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
    columns = [rows_key, cols_key, "n_pairs", "mean_diff", "t_statistic", "p_value"]
    return pd.DataFrame(lines, columns=columns)


def _paired(block: pd.DataFrame, label: Any, baseline: Any) -> dict[str, float]:
    """The paired test of column ``label`` against ``baseline`` over the seeds (rows) of
    ``block``; seeds missing either are left out."""
    from scipy import stats

    pairs = block[[label, baseline]].dropna()
    differences = pairs[label] - pairs[baseline]
    t_stat = p_value = math.nan
    if len(pairs) >= 2:
        # Identical differences have no variance: scipy returns +-inf or NaN and warns.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            result = stats.ttest_rel(pairs[label], pairs[baseline])
        t_stat, p_value = float(result.statistic), float(result.pvalue)
    return {
        "n_pairs": len(pairs),
        "mean_diff": float(differences.mean()) if len(pairs) else math.nan,
        "t_statistic": t_stat,
        "p_value": p_value,
    }


def with_significance(table: pd.DataFrame, tests: pd.DataFrame) -> pd.DataFrame:
    """``table`` carrying the p-value of each cell's paired test against the baseline
    (``attrs["significance"]``: ``{(row, column): p}`` from ``paired_test``), which
    the renderers show as marks."""
    rows_key, cols_key = table.attrs["rows_key"], table.attrs["cols_key"]
    table.attrs["significance"] = {
        (line[rows_key], line[cols_key]): float(line["p_value"])
        for line in tests.to_dict(orient="records")
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
    name) captions it. Collapsed trials (``collapse_reason``) are left out of the
    means and the tests and listed with their reason (``attrs["collapsed"]``, counted
    per cell in ``attrs["collapsed_cells"]``); each data set's trivial baseline is in
    ``attrs["baselines"]``.

    Raises:
        ValueError: what ``pivot_table`` raises.
    """
    inferred_rows, inferred_cols, _ = infer_layout(rows)
    rows_key, cols_key = rows_key or inferred_rows, cols_key or inferred_cols
    collapsed = rows.apply(lambda row: collapse_reason(row, metric), axis=1).dropna()
    kept = rows.drop(index=collapsed.index)
    baseline = "ce" if rows_key == "loss" and "ce" in set(kept["loss"]) else None
    table = pivot_table(kept, rows_key, cols_key, metric=metric, baseline=baseline)
    attrs = table.attrs
    # Every label stays, a cell whose every seed collapsed included.
    index, columns = ordered(rows[rows_key], baseline), ordered(rows[cols_key])
    table = table.reindex(index=index, columns=pd.MultiIndex.from_product([columns, STATS]))
    table.index.name, table.columns.names, table.attrs = rows_key, [cols_key, "stat"], attrs
    if baseline is not None:
        table = with_significance(table, paired_test(kept, rows_key, cols_key, metric, baseline))
    table.attrs["title"] = title
    table.attrs["collapsed"] = [
        {
            **{key: rows.at[i, key] for key in COLLAPSED_KEYS[:3]},
            "seed": int(rows.at[i, "seed"]),
            "value": float(rows.at[i, metric]),
            "reason": reason,
        }
        for i, reason in collapsed.items()
    ]
    table.attrs["collapsed"].sort(
        key=lambda e: (str(e["loss"]), str(e["dataset"]), sort_key(e["variant"]), e["seed"])
    )
    table.attrs["collapsed_cells"] = (
        rows.loc[collapsed.index].groupby([rows_key, cols_key]).size().to_dict()
    )
    table.attrs["baselines"] = trivial_baselines(rows) if metric == "eval_f1" else {}
    table.attrs["tuned"] = tuned_settings(rows)
    return table


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


COLLAPSED_KEYS = ("loss", "dataset", "variant", "seed", "value", "reason")
BASELINE_METRIC = "eval_baseline_f1"  # what always-positive / the majority tag / nothing scores
DISTINCT_METRIC = "eval_distinct_predictions"


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def collapse_reason(metrics: Mapping[str, Any], metric: str = "eval_f1") -> str | None:
    """Why a trial's final result says its model learned nothing, or None: its
    predictions are constant (one class, tag or answer for every input), or its F1 is
    at or below its data set's trivial baseline (always-positive F1 for paraphrase
    identification, the majority tag for POS, 0 for NER and MRC), both reported by the
    trial with its metrics."""
    distinct = _number(metrics.get(DISTINCT_METRIC))
    if distinct is not None and distinct <= 1:
        return "constant predictions (the same for every input)"
    baseline = _number(metrics.get(BASELINE_METRIC)) if metric == "eval_f1" else None
    value = _number(metrics.get(metric))
    if baseline is not None and value is not None and value <= baseline + 1e-9:
        return f"{metric} {value:.2f} at or below the trivial baseline {baseline:.2f}"
    return None


def trivial_baselines(rows: pd.DataFrame) -> dict[str, float]:
    """Each data set's trivial baseline F1 (``BASELINE_METRIC``), as its trials report it."""
    if BASELINE_METRIC not in rows or rows[BASELINE_METRIC].isna().all():
        return {}
    means = rows.dropna(subset=[BASELINE_METRIC]).groupby("dataset")[BASELINE_METRIC].mean()
    return {str(name): float(value) for name, value in means.items()}


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
        }
        for (_, row), reason in zip(failed.iterrows(), reasons, strict=True)
    ]


def with_failures(table: pd.DataFrame, failed: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """``table`` carrying the trials that failed (``attrs["failed"]``, sorted), which
    are not in its cells: the renderers list them under the table."""
    listed = [{key: entry[key] for key in FAILED_KEYS} for entry in failed]
    table.attrs["failed"] = sorted(
        listed, key=lambda e: (str(e["loss"]), str(e["dataset"]), str(e["variant"]), e["seed"])
    )
    return table
