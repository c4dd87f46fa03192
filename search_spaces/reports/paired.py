"""Each row of a table against its baseline: paired t-tests over seeds, their
Holm-adjusted p-values, intervals and resolvable differences, and a table carrying
them (``with_significance``), which its renderers mark and its notes state."""

from __future__ import annotations

import math
import warnings
from typing import Any

import pandas as pd

from search_spaces.reports.cells import require_columns
from search_spaces.reports.formats import ordered
from search_spaces.reports.resolution import resolvable_difference, resolvable_range


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
    require_columns(rows, (rows_key, cols_key, "seed", metric))
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
