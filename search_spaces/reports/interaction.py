"""Does a loss's difference from the baseline depend on the set-up? The interaction of
two sweeps run in two set-ups (the softmax tagger and MRC-NER, say), each holding the
loss and the baseline at the same seeds.

In each set-up the loss's Δ is taken seed by seed (loss − baseline, as ``paired_test``
pairs them); the interaction is the second set-up's mean Δ less the first's. The two
set-ups are separate runs, so their Δs are not paired across set-ups: the test is
Welch's (``scipy.stats.ttest_ind`` with unequal variances) on the two sets of per-seed
Δs, with the difference's 95% Welch interval ``± t(0.975, ν) · SE``; the difference
it detects at 5% with 80% power is ``(t(0.975, ν) + t(0.80, ν)) · SE``,
``SE = √(s₁²/n₁ + s₂²/n₂)``, ν the Welch–Satterthwaite degrees of freedom. That
figure rests on two estimated spreads; its 95% range is taken as the paired
test's is (``resolution.resolvable_range``), with ν in place of k − 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from search_spaces.reports.tables import final_rows


@dataclass(frozen=True)
class Interaction:
    """One loss's Δ against the baseline in two set-ups, and their difference."""

    loss: str
    baseline: str
    first: pd.Series  # the first set-up's per-seed Δs (index: seed)
    second: pd.Series
    difference: float  # mean(second) − mean(first)
    p_value: float  # Welch's, two-sided; NaN with fewer than 2 Δs in a set-up
    resolvable: float
    resolvable_low: float
    resolvable_high: float
    degrees_of_freedom: float
    ci_low: float = math.nan  # the difference's 95% Welch interval
    ci_high: float = math.nan
    metric: str = "eval_f1"


def per_seed_deltas(
    rows: pd.DataFrame, loss: str, baseline: str = "ce", metric: str = "eval_f1"
) -> pd.Series:
    """``loss`` − ``baseline`` per seed over a sweep's final-stage rows, keyed by the
    losses' names (``loss_name``: the two set-ups' recipes of one loss carry different
    parameters); seeds missing either are left out, several rows of a seed averaged.

    Raises:
        ValueError: ``loss`` or ``baseline`` not among the rows' ``loss_name``.
    """
    rows = final_rows(rows).dropna(subset=[metric])
    wide = rows.groupby(["seed", "loss_name"])[metric].mean().unstack("loss_name")
    for name in (loss, baseline):
        if name not in wide.columns:
            raise ValueError(f"loss_name {name!r} is not among {sorted(wide.columns)}")
    pairs = wide[[loss, baseline]].dropna()
    return (pairs[loss] - pairs[baseline]).rename(f"{loss} - {baseline}")


def interaction(
    first: pd.DataFrame,
    second: pd.DataFrame,
    loss: str,
    baseline: str = "ce",
    metric: str = "eval_f1",
) -> Interaction:
    """The interaction of ``loss`` against ``baseline`` between the set-up of ``first``'s
    rows and that of ``second``'s (the module's docstring says how it is tested)."""
    from scipy import stats

    one = per_seed_deltas(first, loss, baseline, metric)
    two = per_seed_deltas(second, loss, baseline, metric)
    difference = float(two.mean() - one.mean()) if len(one) and len(two) else math.nan
    p_value = resolvable = low = high = dof = ci_low = ci_high = math.nan
    if len(one) >= 2 and len(two) >= 2:
        v1, v2 = one.var(ddof=1) / len(one), two.var(ddof=1) / len(two)
        error = math.sqrt(v1 + v2)
        if error > 0:
            dof = (v1 + v2) ** 2 / (v1**2 / (len(one) - 1) + v2**2 / (len(two) - 1))
            p_value = float(stats.ttest_ind(two, one, equal_var=False).pvalue)
            half = float(stats.t.ppf(0.975, dof) * error)
            ci_low, ci_high = difference - half, difference + half
            resolvable = float((stats.t.ppf(0.975, dof) + stats.t.ppf(0.80, dof)) * error)
            low = resolvable * math.sqrt(dof / stats.chi2.ppf(0.975, dof))
            high = resolvable * math.sqrt(dof / stats.chi2.ppf(0.025, dof))
    return Interaction(
        loss=loss,
        baseline=baseline,
        first=one,
        second=two,
        difference=difference,
        p_value=p_value,
        resolvable=resolvable,
        resolvable_low=float(low),
        resolvable_high=float(high),
        degrees_of_freedom=float(dof),
        ci_low=float(ci_low),
        ci_high=float(ci_high),
        metric=metric,
    )


def interaction_markdown(found: Interaction, first_name: str, second_name: str) -> str:
    """The interaction as a small table and one sentence saying what it shows."""

    def side(name: str, deltas: pd.Series) -> str:
        spread = f"{deltas.std(ddof=1):.2f}" if len(deltas) >= 2 else "–"
        seeds = ", ".join(f"{seed}: {value:+.2f}" for seed, value in deltas.items())
        return f"| {name} | {len(deltas)} | {deltas.mean():+.2f} | {spread} | {seeds} |"

    label = f"{found.loss} − {found.baseline}"
    lines = [
        f"| set-up | seeds | mean Δ ({label}) | std of Δ | Δ per seed |",
        "|---|---:|---:|---:|---|",
        side(first_name, found.first),
        side(second_name, found.second),
    ]
    if math.isnan(found.resolvable):
        verdict = "no test: each set-up needs at least 2 seeds with a spread"
    else:
        interval = f"95% CI {found.ci_low:+.2f} to {found.ci_high:+.2f} (Welch)"
        test = "significant at 5%" if found.p_value < 0.05 else "not significant"
        verdict = (
            f"{interval}, Welch's p {found.p_value:.3f}, {test}; the smallest difference"
            f" these seeds detect at 80% power is {found.resolvable:.2f} (plausibly"
            f" {found.resolvable_low:.2f}–{found.resolvable_high:.2f}), a planning figure."
            " A difference of two set-ups: it names no cause unless they differ in one"
            " thing alone"
        )
    sentence = (
        f"Interaction (Δ in {second_name} − Δ in {first_name}): "
        f"**{found.difference:+.2f}** ({found.metric}); {verdict}."
    )
    return "\n".join(lines) + "\n\n" + sentence
