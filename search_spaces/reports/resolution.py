"""How small a difference a few seeds resolve, and how sure that figure is.

With k seeds and the standard deviation s of the per-seed differences (loss − baseline,
same seed), a paired t-test at 5% with 80% power detects a mean difference of about
``(t(0.975, k−1) + t(0.80, k−1)) · s / √k`` (``resolvable_difference``). s is itself
estimated from k values: its 95% interval is ``s·√((k−1)/χ²(0.975, k−1))`` to
``s·√((k−1)/χ²(0.025, k−1))`` (×0.52 to ×6.3 at k = 3), and the resolvable difference,
proportional to s, carries the same factors (``resolvable_range``). A table states
both: "0.16, plausibly 0.08–1.01".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd


def resolvable_difference(spread: float, pairs: int) -> float:
    """The smallest mean difference a paired t-test at 5% (two-sided) detects with 80%
    power over ``pairs`` seeds whose differences have standard deviation ``spread``:
    ``(t(0.975, k-1) + t(0.80, k-1)) * spread / sqrt(k)``, about 3.1 spreads at k = 3.
    A smaller delta is evidence neither way. NaN with fewer than 2 pairs."""
    from scipy import stats

    k = pairs
    if k < 2:
        return math.nan
    return float((stats.t.ppf(0.975, k - 1) + stats.t.ppf(0.80, k - 1)) * spread / math.sqrt(k))


def resolvable_range(spread: float, pairs: int) -> tuple[float, float]:
    """The 95% interval of ``resolvable_difference(spread, pairs)`` from the uncertainty
    of ``spread`` (a sample standard deviation over ``pairs`` values): the figure times
    ``√((k−1)/χ²(0.975, k−1))`` and times ``√((k−1)/χ²(0.025, k−1))``, k = ``pairs``.
    (NaN, NaN) with fewer than 2 pairs."""
    from scipy import stats

    k = pairs
    if k < 2:
        return math.nan, math.nan
    figure = resolvable_difference(spread, k)
    low = figure * math.sqrt((k - 1) / stats.chi2.ppf(0.975, k - 1))
    high = figure * math.sqrt((k - 1) / stats.chi2.ppf(0.025, k - 1))
    return float(low), float(high)


def resolution_text(value: float, low: float, high: float) -> str:
    """``"0.16, plausibly 0.08–1.01"``; without the range where it is NaN."""
    text = f"{value:.2f}"
    return text if math.isnan(low) else f"{text}, plausibly {low:.2f}–{high:.2f}"


def resolvable_line(table: pd.DataFrame) -> str | None:
    """The smallest Δ each paired test resolves at its seeds' spread, with the range
    the spread's uncertainty allows, in a sentence; None without tests
    (``attrs["resolvable"]`` and ``attrs["resolvable_range"]``, ``with_significance``)."""
    ranges: Mapping[Any, tuple[float, float]] = table.attrs.get("resolvable_range") or {}
    found = {
        key: value
        for key, value in (table.attrs.get("resolvable") or {}).items()
        if not math.isnan(value)
    }
    if not found:
        return None
    several = len({column for _, column in found}) > 1
    shown = "; ".join(
        (f"{row} ({column}) " if several else f"{row} ")
        + resolution_text(value, *ranges.get((row, column), (math.nan, math.nan)))
        for (row, column), value in found.items()
    )
    return (
        "The smallest Δ these seeds detect at 80% power (paired t-test at 5%, from the"
        " spread of the per-seed differences, with the 95% range that spread's own"
        " uncertainty allows; a stricter threshold on the same t statistic, not evidence"
        f" of its own): {shown}."
    )


def seeds_to_resolve(spread: float, delta: float, most: int = 100) -> int | None:
    """The fewest seeds (paired differences) at which ``resolvable_difference(spread,
    k)`` is within ``|delta|``: how many a cell needs for its paired test to detect its
    Δ with 80% power, if the spread seen so far is the true one. None where even
    ``most`` seeds do not (or Δ is 0 or NaN)."""
    if not (math.isfinite(spread) and math.isfinite(delta)) or delta == 0:
        return None
    return next(
        (k for k in range(2, most + 1) if resolvable_difference(spread, k) <= abs(delta)), None
    )
