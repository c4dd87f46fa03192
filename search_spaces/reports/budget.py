"""Budget curves (Dodge et al., "Show Your Work", EMNLP 2019): how good a loss gets as a
function of how many tuning trials one can afford.

From the ``N`` stage-1 scores of one loss, sorted ascending ``v(1) <= ... <= v(N)``,
the expected best of ``n`` trials drawn at random (with replacement, from the
empirical distribution of the scores) is

    E[max_n] = sum_i v(i) * ((i/N)^n - ((i-1)/N)^n)

with variance ``sum_i v(i)^2 * (same weights) - E[max_n]^2``. The weight of ``v(i)``
is the probability that the ``n`` draws' maximum is the ``i``-th smallest score, so
tied scores split their probability between them and the sum stays exact. The
estimator assumes that stage 1 drew its settings at random; for a grid it is a
resampling of the grid's scores, and the reports say so.

``budget_curves`` reads the stage-1 rows (``stage == "tune"``) of a sweep, one curve
per loss label; ``with_budget_curves`` attaches them to a table, whose renderers then
show the curves' table and one sentence ("dsc overtakes ce at 4 trials"). Without
stage-1 rows nothing is attached and nothing is shown.

A stage-1 trial that a scheduler stopped (``stop_reason == "scheduler"``: ``halving``
or ASHA) counts at the score of its last evaluation, at the rung where it stopped:
below what it would have reached, so the curves are pessimistic where such trials
weigh (small n). Leaving them out would keep only the survivors, the best trials,
and overstate every budget. The notes say how many stopped, where (``stopped_note``).
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from search_spaces.flags import constant_choices

TUNE_STAGE = "tune"  # the rows of stage 1 (the two-stage sweep's row column ``stage``)
CURVE_COLUMNS = ("curve", "trials", "mean", "std")
TIE = 1e-9  # expected bests closer than this are even: neither is ahead
# A gap between two curves at one budget is resolved when it exceeds this many
# standard deviations of the difference of the two bests (their stds combined as
# independent): about a 95% two-sided interval for normal bests.
RESOLVED_AT = 2.0


def expected_best(scores: Sequence[float]) -> list[tuple[float, float]]:
    """``(E[max_n], std)`` of the best of ``n`` random draws from ``scores``, for
    ``n = 1 .. len(scores)``.

    Raises:
        ValueError: no score, or a score that is not a finite number.
    """
    values = sorted(float(score) for score in scores)
    if not values:
        raise ValueError("expected_best needs at least one score")
    if not all(math.isfinite(value) for value in values):
        raise ValueError(f"scores must be finite numbers, got {list(scores)}")
    size = len(values)
    curve = []
    for n in range(1, size + 1):
        weights = [(i / size) ** n - ((i - 1) / size) ** n for i in range(1, size + 1)]
        mean = sum(w * v for w, v in zip(weights, values, strict=True))
        # The centred form of sum w v^2 - mean^2 (the weights sum to 1): equal, and
        # without the cancellation of two large, nearly equal terms.
        variance = sum(w * (v - mean) ** 2 for w, v in zip(weights, values, strict=True))
        curve.append((mean, math.sqrt(variance)))
    return curve


def stage_one_rows(rows: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The stage-1 rows (``stage == "tune"``) that report ``metric``; none without the
    ``stage`` column (a sweep without tuning)."""
    if "stage" not in rows or metric not in rows:
        return rows.iloc[0:0]
    tuned = rows[rows["stage"] == TUNE_STAGE]
    return tuned[pd.to_numeric(tuned[metric], errors="coerce").notna()]


def budget_curves(rows: pd.DataFrame, metric: str) -> pd.DataFrame:
    """One curve per loss label of the stage-1 rows: ``curve`` (the label, with the sweep,
    data set and variant where the rows hold several), ``trials`` (n), ``mean`` and ``std``
    of the expected best ``metric`` of ``n`` trials. Empty without stage-1 rows."""
    tuned = stage_one_rows(rows, metric)
    if tuned.empty:
        return pd.DataFrame(columns=list(CURVE_COLUMNS))
    keys = ["loss"]
    for column in ("sweep", "dataset", "variant"):
        if column in tuned and tuned[column].nunique() > 1:
            keys.append(column)
    lines = []
    for group, block in tuned.groupby(keys, sort=False):
        parts = [str(part) for part in (group if isinstance(group, tuple) else (group,))]
        label = parts[0] if len(parts) == 1 else f"{parts[0]} on {' '.join(parts[1:])}"
        scores = pd.to_numeric(block[metric]).tolist()
        for n, (mean, std) in enumerate(expected_best(scores), start=1):
            lines.append({"curve": label, "trials": n, "mean": mean, "std": std})
    return pd.DataFrame(lines, columns=list(CURVE_COLUMNS))


def reading(curves: pd.DataFrame, baseline: str = "ce") -> str:
    """One sentence per curve against ``baseline`` (the first curve where there is no
    ``baseline``) of the same sweep, data set and variant, over the budgets both
    reach: "dsc overtakes ce at 4 trials", "ce stays ahead of focal at every budget
    (1–6 trials)", "dice is ahead of ce at every budget (1–6 trials)"; curves that
    cross back and forth list where each leads. A curve is ahead at a budget only
    where the gap is resolved (over ``RESOLVED_AT`` stds of the difference of the
    two bests): gaps within the spread read "not resolved at any budget"."""
    blocks = dict(tuple(curves.groupby("curve", sort=False)))
    means = {label: block["mean"].tolist() for label, block in blocks.items()}
    stds = {label: block["std"].fillna(0.0).tolist() for label, block in blocks.items()}
    groups: dict[str, list[str]] = {}
    for label in means:  # a loss label has no spaces: " on " starts the group's name
        groups.setdefault(label.partition(" on ")[2], []).append(label)
    sentences = []
    for where, labels in groups.items():
        wanted = f"{baseline} on {where}" if where else baseline
        base = wanted if wanted in labels else labels[0]
        sentences += [
            _against(label, means[label], base, means[base], _spread(stds[label], stds[base]))
            for label in labels
            if label != base
        ]
    return "; ".join(sentences) + "." if sentences else ""


def _spread(mine: list[float], theirs: list[float]) -> list[float]:
    """Per budget, the gap two curves must exceed to be resolved (metric points)."""
    return [RESOLVED_AT * math.hypot(a, b) for a, b in zip(mine, theirs, strict=False)]


def _against(
    label: str, mine: list[float], base: str, theirs: list[float], spread: list[float]
) -> str:
    budgets = min(len(mine), len(theirs))
    ahead = [mine[n] > theirs[n] + max(TIE, spread[n]) for n in range(budgets)]
    behind = [theirs[n] > mine[n] + max(TIE, spread[n]) for n in range(budgets)]
    span = f"1–{budgets} trials" if budgets > 1 else "1 trial"
    if all(ahead):
        return f"{label} is ahead of {base} at every budget ({span})"
    if all(behind):
        return f"{base} stays ahead of {label} at every budget ({span})"
    if not any(ahead) and not any(behind):
        if all(abs(mine[n] - theirs[n]) <= TIE for n in range(budgets)):
            return f"{label} and {base} are even at every budget ({span})"
        return (
            f"{label} and {base} differ by less than {RESOLVED_AT:g} stds of their bests"
            f" at every budget ({span}): not resolved"
        )
    first = ahead.index(True) if any(ahead) else budgets
    if any(ahead) and all(ahead[first:]) and not any(ahead[:first]):
        return f"{label} overtakes {base} at {first + 1} trials"
    first = behind.index(True) if any(behind) else budgets
    if any(behind) and all(behind[first:]) and not any(behind[:first]):
        return f"{base} overtakes {label} at {first + 1} trials"
    leads = _ranges([n + 1 for n in range(budgets) if ahead[n]])
    return f"{label} and {base} cross more than once ({label} ahead at {leads} trials)"


def _ranges(numbers: list[int]) -> str:
    """``[1, 4, 5, 6]`` -> ``"1, 4–6"``."""
    spans: list[list[int]] = []
    for number in numbers:
        if spans and number == spans[-1][-1] + 1:
            spans[-1].append(number)
        else:
            spans.append([number])
    return ", ".join(str(s[0]) if len(s) == 1 else f"{s[0]}–{s[-1]}" for s in spans)


SCHEDULER_STOP = "scheduler"  # the stop reason the driver gives a trial a scheduler stopped


def stopped_note(rows: pd.DataFrame, metric: str) -> str | None:
    """Which stage-1 trials a scheduler stopped, per loss, and where: "ce: 3 of 5
    stopped (rung 1: 2, rung 3: 1)", by ``stop_rung`` where the rows have it (a rung
    named by the evaluations a trial ran to reach it, ``sweep_service.results``), else
    by the optimiser steps they ran; and how the curves count them. None where none
    stopped."""
    tuned = stage_one_rows(rows, metric)
    if tuned.empty or "stop_reason" not in tuned:
        return None
    parts = []
    for loss, block in tuned.groupby("loss", sort=False):
        stopped = block[block["stop_reason"] == SCHEDULER_STOP]
        if stopped.empty:
            continue
        by_rung = "stop_rung" in stopped and stopped["stop_rung"].notna().all()
        column, name = ("stop_rung", "rung") if by_rung else ("optimizer_steps", "after")
        places = pd.to_numeric(stopped.get(column, pd.Series(dtype=float)), errors="coerce")
        counts = places.dropna().astype(int).value_counts().sort_index()
        where = ", ".join(
            f"{name} {place}{' steps' if name == 'after' else ''}: {count}"
            for place, count in counts.items()
        )
        parts.append(
            f"{loss}: {len(stopped)} of {len(block)} stopped" + (f" ({where})" if where else "")
        )
    if not parts:
        return None
    return (
        "Stage-1 trials stopped by the scheduler: " + "; ".join(parts) + ". The curves count "
        "each at its last evaluation's score, below what it would have reached."
    )


def stage_one_is_random(spec: Mapping[str, Any]) -> bool:
    """Whether a resolved spec's stage 1 drew its settings at random, which the
    estimator assumes: where its ``tune`` section's budget is drawn from distributions
    or lists (``search_spaces.tuning.tune_method``), not run as their grid."""
    from search_spaces.tuning import TuneSpec, tune_method

    tune = {key: value for key, value in (spec.get("tune") or {}).items() if value is not None}
    if not tune:
        return False
    return tune_method(TuneSpec.model_validate(tune)) == "random"


def with_budget_curves(
    table: pd.DataFrame, rows: pd.DataFrame, random_sampling: bool | None
) -> pd.DataFrame:
    """``table`` carrying the budget curves of the stage-1 rows among ``rows`` for its
    metric (``attrs["budget"]``: ``metric``, ``random_sampling``, ``curves`` as
    records, ``reading``), which the renderers show; unchanged without stage-1 rows.
    ``random_sampling``: whether stage 1 drew at random (``stage_one_is_random``), or
    None where the caller cannot tell (the renderers then state the assumption). The
    losses stage 1 chose among constant trials only are in ``attrs["tuned_constant"]``
    (``flags.constant_choices``), which the tuned settings' note names."""
    metric = str(table.attrs["metric"])
    constant = constant_choices(rows.to_dict("records"), metric)
    if constant:
        table.attrs["tuned_constant"] = constant
    curves = budget_curves(rows, metric)
    if curves.empty:
        return table
    table.attrs["budget"] = {
        "metric": metric,
        "random_sampling": random_sampling,
        "curves": [
            {"curve": str(c), "trials": int(n), "mean": float(m), "std": float(s)}
            for c, n, m, s in curves.itertuples(index=False)
        ],
        "reading": reading(curves),
        "stopped": stopped_note(rows, metric),
    }
    return table


def budget_frame(table: pd.DataFrame) -> pd.DataFrame:
    """The curves a table carries (``with_budget_curves``), as ``CURVE_COLUMNS``;
    empty where it carries none."""
    budget = table.attrs.get("budget") or {}
    return pd.DataFrame(budget.get("curves") or [], columns=list(CURVE_COLUMNS))


def budget_lines(table: pd.DataFrame) -> list[str]:
    """What a table's renderers write under it about its budget curves: a heading
    sentence, the reading, the caveat for a grid, and one line per curve
    (``ce: 81.20 ± 1.10, 83.00 ± 0.70, ...`` for n = 1, 2, ...); none without curves."""
    budget = table.attrs.get("budget") or {}
    if not budget.get("curves"):
        return []
    lines = [_caption(budget).removesuffix(".") + ", n = 1, 2, ...:"]
    curves = budget_frame(table)
    for label, block in curves.groupby("curve", sort=False):
        pairs = zip(block["mean"], block["std"], strict=True)
        points = ", ".join(f"{mean:.2f} ± {std:.2f}" for mean, std in pairs)
        lines.append(f"- {label}: {points}")
    if budget.get("reading"):
        lines.append(f"Reading: {budget['reading']}")
    return [*lines, *(line for line in (_caveat(budget), budget.get("stopped")) if line)]


def budget_grid(table: pd.DataFrame) -> pd.DataFrame:
    """The curves a table carries as display text: one line per budget ``trials``
    (n), one column per curve, each cell ``"83.20 ± 0.70"`` (empty past a shorter
    curve's end)."""
    curves = budget_frame(table)
    curves["cell"] = [
        f"{m:.2f} ± {s:.2f}" for m, s in zip(curves["mean"], curves["std"], strict=True)
    ]
    grid = curves.pivot(index="trials", columns="curve", values="cell").fillna("")
    grid = grid[list(dict.fromkeys(curves["curve"]))]
    grid.columns.name = None
    return grid


def _caption(budget: Mapping[str, Any]) -> str:
    return (
        f"Budget curves: the expected best {budget['metric']} of n stage-1 tuning trials "
        "± 1 std (Dodge et al. 2019)."
    )


def _caveat(budget: Mapping[str, Any]) -> str | None:
    """What to keep in mind about stage 1's sampling: nothing where it drew at random."""
    if budget.get("random_sampling") is None:
        return (
            "The estimator assumes stage 1 drew its settings at random; "
            "for a grid, these curves resample the grid's scores."
        )
    if budget["random_sampling"]:
        return None
    return (
        "Stage 1 ran a grid, not random draws: the estimator assumes random sampling, "
        "so these curves resample the grid's scores."
    )


def budget_markdown(table: pd.DataFrame) -> str:
    """The budget curves under a Markdown table: a caption, the curves (a line per
    budget, a column per loss), the reading, the caveat for a grid; "" without curves."""
    budget = table.attrs.get("budget") or {}
    if not budget.get("curves"):
        return ""
    grid = budget_grid(table).reset_index()
    text = f"\n\n{_caption(budget)}\n\n{grid.to_markdown(index=False)}"
    for line in (
        f"Reading: {budget['reading']}" if budget.get("reading") else None,
        _caveat(budget),
        budget.get("stopped"),
    ):
        text += f"\n\n{line}" if line else ""
    return text


def budget_html(table: pd.DataFrame) -> str:
    """The budget curves under an HTML table: ``<table class="grid budget">`` captioned,
    the reading and the caveat for a grid in ``<p>``; "" without curves."""
    budget = table.attrs.get("budget") or {}
    if not budget.get("curves"):
        return ""
    grid = budget_grid(table)
    escape = html.escape
    head = "".join(f"<th>{escape(str(name))}</th>" for name in ["trials", *grid.columns])
    body = "".join(
        f"<tr><th>{n}</th>" + "".join(f"<td>{escape(cell)}</td>" for cell in line) + "</tr>"
        for n, line in zip(grid.index, grid.itertuples(index=False), strict=True)
    )
    text = (
        f'<section class="budget"><table class="grid budget"><caption>'
        f"{escape(_caption(budget))}</caption><thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table>"
    )
    if budget.get("reading"):
        text += f'<p class="budget-reading">{escape(budget["reading"])}</p>'
    caveat = _caveat(budget)
    if caveat:
        text += f'<p class="budget-caveat">{escape(caveat)}</p>'
    if budget.get("stopped"):
        text += f'<p class="budget-stopped">{escape(budget["stopped"])}</p>'
    return text + "</section>"


BUDGET_INCHES = 4.0  # the height the budget curves add to a table's figure


def draw_budget_curves(axes: Any, table: pd.DataFrame) -> None:
    """The curves a table carries on matplotlib ``axes``: one line per curve, its
    expected best against the number of trials, ±1 std shaded; titled with the
    reading and, for a grid, the caveat."""
    budget = table.attrs["budget"]
    curves = budget_frame(table)
    for label, block in curves.groupby("curve", sort=False):
        trials, mean, std = block["trials"], block["mean"], block["std"]
        line = axes.plot(trials, mean, marker="o", markersize=3, label=str(label))[0]
        axes.fill_between(
            trials, mean - std, mean + std, color=line.get_color(), alpha=0.2, linewidth=0
        )
    axes.set_xlabel("stage-1 tuning trials (n)")
    axes.set_ylabel(f"expected best {budget['metric']} ± std")
    axes.xaxis.get_major_locator().set_params(integer=True)
    title = "Budget curves" + (
        " (grid: the estimator assumes random draws)" if budget["random_sampling"] is False else ""
    )
    if budget.get("reading"):
        title += "\n" + str(budget["reading"])
    axes.set_title(title, fontsize=9)
    axes.legend(title="loss", fontsize=8)
    axes.grid(alpha=0.3)
