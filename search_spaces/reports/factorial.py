"""Which of two changes moves a loss's Δ against the baseline? A 2 × 2 factorial of
set-ups (the formulation, tagger or MRC-NER, crossed with the loss's recipe, per position
or set-level): in each of its four cells the loss's per-seed Δ (loss − baseline, same
seed, ``interaction.per_seed_deltas``), and three contrasts over the cells' mean Δs
``m[a][b]`` (``a``, ``b`` each 0 or 1):

- the first factor's main effect ``((m[1][0] + m[1][1]) − (m[0][0] + m[0][1])) / 2``;
- the second factor's main effect ``((m[0][1] + m[1][1]) − (m[0][0] + m[1][0])) / 2``;
- their interaction ``(m[1][1] − m[1][0]) − (m[0][1] − m[0][0])``;
- each factor's simple effect at each level of the other (``m[1][j] − m[0][j]``,
  ``m[i][1] − m[i][0]``), which needs only its two cells: while a cell has not run, the
  contrasts its cells allow are given and the others named as waiting for it.

The cells are separate runs, so a contrast ``L = Σ c·m`` is tested as Welch's test is,
generalised: ``SE² = Σ c²·s²/n`` over the cells, ν by Welch–Satterthwaite
``SE⁴ / Σ (c²·s²/n)² / (n − 1)``, the 95% interval ``L ± t(0.975, ν)·SE`` and the
two-sided p of ``L / SE`` under ``t(ν)``. Each contrast changes one factor (averaged
over, or crossed with, the other) while the data, the encoder and the seeds stay: that
is what it isolates, and nothing that moves together with a factor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

# The contrasts' coefficients on the cells (first factor's level, second's): the main
# effects, the interaction, then the simple effects ("first@0": the first factor's
# effect at the second's level 0).
CONTRASTS: dict[str, dict[tuple[int, int], float]] = {
    "first": {(0, 0): -0.5, (0, 1): -0.5, (1, 0): 0.5, (1, 1): 0.5},
    "second": {(0, 0): -0.5, (1, 0): -0.5, (0, 1): 0.5, (1, 1): 0.5},
    "interaction": {(0, 0): 1.0, (0, 1): -1.0, (1, 0): -1.0, (1, 1): 1.0},
    "first@0": {(0, 0): -1.0, (1, 0): 1.0},
    "first@1": {(0, 1): -1.0, (1, 1): 1.0},
    "second@0": {(0, 0): -1.0, (0, 1): 1.0},
    "second@1": {(1, 0): -1.0, (1, 1): 1.0},
}
CELLS = ((0, 0), (0, 1), (1, 0), (1, 1))


@dataclass(frozen=True)
class Contrast:
    """One contrast over the cells' mean Δs, with its Welch-type interval and test."""

    name: str
    estimate: float
    standard_error: float
    degrees_of_freedom: float
    ci_low: float
    ci_high: float
    p_value: float


@dataclass(frozen=True)
class Factorial:
    """The cells' per-seed Δs (keyed by their levels' indices), the contrasts those
    cells allow, and the cells not run yet."""

    factors: tuple[str, str]  # the two factors' names ("formulation", "dsc recipe")
    levels: tuple[tuple[str, str], tuple[str, str]]  # each factor's two levels, in order
    cells: dict[tuple[int, int], pd.Series]
    contrasts: dict[str, Contrast]
    missing: tuple[tuple[int, int], ...] = ()


def contrast(name: str, cells: dict[tuple[int, int], pd.Series]) -> Contrast:
    """The contrast ``name`` of ``CONTRASTS`` over ``cells`` (the module's docstring
    says how it is tested).

    Raises:
        ValueError: a cell with fewer than 2 Δs (no spread to test with).
    """
    from scipy import stats

    for key, deltas in cells.items():
        if len(deltas) < 2:
            raise ValueError(f"cell {key} has {len(deltas)} seed(s): a contrast needs 2 or more")
    weights = CONTRASTS[name]
    estimate = sum(weight * cells[key].mean() for key, weight in weights.items())
    parts = {key: w**2 * cells[key].var(ddof=1) / len(cells[key]) for key, w in weights.items()}
    variance = sum(parts.values())
    error = math.sqrt(variance)
    if error == 0:
        nan = math.nan
        return Contrast(name, float(estimate), 0.0, nan, nan, nan, nan)
    dof = variance**2 / sum(part**2 / (len(cells[key]) - 1) for key, part in parts.items())
    half = float(stats.t.ppf(0.975, dof)) * error
    p_value = float(2 * stats.t.sf(abs(estimate) / error, dof))
    return Contrast(
        name, float(estimate), error, float(dof), estimate - half, estimate + half, p_value
    )


def factorial(
    cells: dict[tuple[int, int], pd.Series],
    factors: tuple[str, str],
    levels: tuple[tuple[str, str], tuple[str, str]],
) -> Factorial:
    """The factorial over cells of per-seed Δs, keyed ``(i, j)``: ``levels[0][i]`` of
    ``factors[0]`` crossed with ``levels[1][j]`` of ``factors[1]``; every contrast whose
    cells have all run.

    Raises:
        ValueError: a cell keyed outside the four, or one with fewer than 2 Δs.
    """
    unknown = sorted(set(cells) - set(CELLS))
    if unknown:
        raise ValueError(f"cells are keyed (0 or 1, 0 or 1); got {unknown}")
    found = {
        name: contrast(name, cells)
        for name, weights in CONTRASTS.items()
        if set(weights) <= set(cells)
    }
    missing = tuple(key for key in CELLS if key not in cells)
    return Factorial(factors=factors, levels=levels, cells=cells, contrasts=found, missing=missing)


def factorial_markdown(found: Factorial, metric: str = "eval_f1") -> str:
    """The cells' Δs and the contrasts they allow as two Markdown tables, then the
    cells not run yet."""
    (first, second), (firsts, seconds) = found.factors, found.levels
    lines = [
        f"| {first} | {second} | seeds | mean Δ | std of Δ | Δ per seed |",
        "|---|---|---:|---:|---:|---|",
    ]
    for (i, j), deltas in sorted(found.cells.items()):
        seeds = ", ".join(f"{seed}: {value:+.2f}" for seed, value in deltas.items())
        lines.append(
            f"| {firsts[i]} | {seconds[j]} | {len(deltas)} | {deltas.mean():+.2f}"
            f" | {deltas.std(ddof=1):.2f} | {seeds} |"
        )
    names = {
        "first": f"{first}: {firsts[1]} − {firsts[0]}, averaged over {second}",
        "second": f"{second}: {seconds[1]} − {seconds[0]}, averaged over {first}",
        "interaction": f"interaction: ({second}'s effect in {firsts[1]}) − (in {firsts[0]})",
        "first@0": f"{first}: {firsts[1]} − {firsts[0]}, at {seconds[0]}",
        "first@1": f"{first}: {firsts[1]} − {firsts[0]}, at {seconds[1]}",
        "second@0": f"{second}: {seconds[1]} − {seconds[0]}, in {firsts[0]}",
        "second@1": f"{second}: {seconds[1]} − {seconds[0]}, in {firsts[1]}",
    }
    lines += [
        "",
        f"| contrast ({metric}) | estimate | 95% CI (Welch) | ν | p |",
        "|---|---:|---|---:|---:|",
    ]
    for key, label in names.items():
        if key not in found.contrasts:
            continue
        c = found.contrasts[key]
        lines.append(
            f"| {label} | {c.estimate:+.2f} | {c.ci_low:+.2f} to {c.ci_high:+.2f}"
            f" | {c.degrees_of_freedom:.1f} | {c.p_value:.3f} |"
        )
    if found.missing:
        waiting = "; ".join(f"{firsts[i]} × {seconds[j]}" for i, j in found.missing)
        lines += ["", f"Not run yet: {waiting}; the contrasts that need it wait for it."]
    return "\n".join(lines)
