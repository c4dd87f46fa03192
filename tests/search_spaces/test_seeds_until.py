"""Seeds until decided in a spec (its errors, its count, its description), the rounds it
plans and the table it makes: each cell's stopping look, reason, repeated CI and p,
recomputed here from ``run_rule`` on the rows' own differences."""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd
import pytest

from search_spaces.errors import SpecError
from search_spaces.reports import paper_table, to_csv, to_html, to_json, to_markdown
from search_spaces.reports.sequential import loss_looks
from search_spaces.resolve import resolve_spec, trial_count
from search_spaces.sections import SeedsUntil
from search_spaces.sequential import (
    Round,
    SeedsUntilDecided,
    Verdict,
    first_round,
    next_round,
    run_rule,
)

LOSSES = [{"name": "ce"}, {"name": "focal", "gamma": 0}, {"name": "dsc", "alpha": 0.1}]
RULE = {"min": 3, "max": 5, "until": "decided", "looks": [3, 5], "delta_min": 1.0}


def spec(**overrides: Any) -> dict[str, Any]:
    return {"extends": "smoke", "search_space": {"losses": LOSSES}, "seeds": RULE} | overrides


def issue_of(data: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as raised:
        resolve_spec(data)
    assert len(raised.value.issues) == 1, raised.value.issues
    return str(raised.value.issues[0])


def test_the_mapping_form_resolves_and_counts_max() -> None:
    resolved = resolve_spec(spec())
    assert resolved.seeds_until == SeedsUntil(**RULE)
    assert resolved.seed_list == [0, 1, 2, 3, 4]
    assert trial_count(resolved) == 3 * 5  # the cap counts every loss at max
    assert "seeds until decided (looks 3, 5; alpha 0.05; delta_min 1)" in resolved.description
    assert "(at most 15 trials)" in resolved.description
    # The stored spec validates again as it is, the rule unchanged.
    assert resolve_spec(resolved.model_dump(mode="json")).seeds == resolved.seeds
    assert resolve_spec(spec(seeds=[0, 1])).seed_list == [0, 1]  # a fixed list as today


def test_a_cap_refuses_what_max_would_run() -> None:
    with pytest.raises(SpecError, match="15 trials"):
        resolve_spec(spec(), max_trials=14)


@pytest.mark.parametrize(
    ("seeds", "expected"),
    [
        ({"min": 3, "max": 5, "until": "decided"}, "seeds.looks: must rise strictly from min (3)"),
        ({"min": 1, "max": 4, "until": "decided", "looks": [1, 4]}, "seeds.min: a paired t"),
        ({"until": "decided", "alpha": 1.5}, "seeds.alpha: must lie in (0, 1)"),
        ({"until": "decided", "delta_min": -1.0}, "seeds.delta_min: must be finite"),
        ({"until": "soon"}, "seeds.until: unknown until 'soon'; valid: decided"),
        ({"min": 3}, "seeds.until: Field required"),
        ({"until": "decided", "rounds": 2}, "seeds.rounds: unknown key"),
    ],
)
def test_a_broken_rule_names_its_field(seeds: dict[str, Any], expected: str) -> None:
    assert issue_of(spec(seeds=seeds)).startswith(expected)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"search_space": {"losses": LOSSES[1:]}}, "search_space.losses: seeds until decided"),
        ({"search_space": {"losses": LOSSES[:1]}}, "search_space.losses: seeds until decided"),
        ({"task": {"kind": "pos", "variant": ["original", "+positive"]}}, "task.variant"),
        (
            {"training": {"epochs": 3}, "scheduler": {"kind": "asha", "grace_period": 1}},
            "scheduler.kind: seeds until",
        ),
    ],
)
def test_the_rule_needs_a_baseline_one_cell_column_and_whole_trials(
    overrides: dict[str, Any], expected: str
) -> None:
    assert issue_of(spec(**overrides)).startswith(expected)


def test_the_rule_text_reads_back() -> None:
    rule = SeedsUntil(**RULE | {"alpha": 0.1, "delta_min": 0.25})
    assert SeedsUntil.parse(rule.describe()) == rule
    assert SeedsUntil.parse("0, 1, 2") is None


def look(verdict: Verdict, n: int) -> Any:
    """The looks ``next_round`` reads: only their count and the last verdict matter."""
    found = run_rule([0.0] * n, SeedsUntilDecided(min=3, max=5, looks=(3, 5)))
    return [found[-1].__class__(**{**vars(found[-1]), "verdict": verdict})]


def test_rounds_run_each_continuing_loss_with_the_baseline_at_the_next_seeds() -> None:
    rule = SeedsUntilDecided(min=3, max=7, looks=(3, 5, 7))
    first = first_round(rule, "ce", ["focal", "dsc"])
    assert first == Round(1, ("ce", "focal", "dsc"), (0, 1, 2)) and first.trials == 9
    looks = {"focal": look(Verdict.FUTILE, 3), "dsc": look(Verdict.CONTINUE, 3)}
    second = next_round(rule, first, looks)
    assert second == Round(2, ("ce", "dsc"), (3, 4))
    # A loss whose seeds fell short of the look (a failed trial) stops; none left: done.
    assert next_round(rule, second, {"dsc": look(Verdict.CONTINUE, 3)}) is None
    assert next_round(rule, first, {"focal": look(Verdict.FUTILE, 3)}) is None
    last = Round(3, ("ce", "dsc"), (5, 6))
    assert next_round(rule, last, {"dsc": look(Verdict.CONTINUE, 3)}) is None


# Per-seed F1: focal equals ce to within noise (futile at look 1); dsc is ahead at every
# seed but not by enough for look 1's boundary, so it runs to look 2 (seeds 3, 4).
F1 = {
    "ce": (80.0, 81.0, 82.0, 83.0, 80.5),
    "focal(gamma=0)": (80.05, 80.95, 82.0),
    "dsc": (81.0, 83.5, 82.5, 85.0, 81.5),
}
TEXT = SeedsUntil(**RULE).describe()


def rows() -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"loss": loss, "loss_name": loss.split("(")[0], "dataset": "mrpc"}
            | {"variant": "original", "seed": seed, "eval_f1": value, "setup_seeds": TEXT}
            for loss, values in F1.items()
            for seed, value in enumerate(values)
        ]
    )


def by_rule(loss: str) -> Any:
    differences = [a - b for a, b in zip(F1[loss], F1["ce"], strict=False)]
    return run_rule(differences, SeedsUntil(**RULE).rule())


def test_the_table_says_where_each_cell_stopped_and_why() -> None:
    table = paper_table(rows())
    ends = table.attrs["sequential"]
    focal, dsc = by_rule("focal(gamma=0)"), by_rule("dsc")
    assert [x.verdict for x in focal] == [Verdict.FUTILE]
    assert [x.verdict for x in dsc] == [Verdict.CONTINUE, Verdict.DECIDED]
    assert ends[("focal(gamma=0)", "mrpc")] == {
        "look": 1,
        "looks": 2,
        "seeds": 3,
        "verdict": "futile",
        "reason": focal[-1].reason,
        "delta": focal[-1].mean,
        "ci": (focal[-1].ci_low, focal[-1].ci_high),
        "p": focal[-1].p_value,
    }
    assert ends[("dsc", "mrpc")]["look"] == 2 and ends[("dsc", "mrpc")]["seeds"] == 5
    # Each Δ is paired at the cell's own seeds, never against the baseline's other seeds.
    assert table.at["focal(gamma=0)", ("mrpc", "delta")] == pytest.approx(0.0)
    assert table.at["dsc", ("mrpc", "delta")] == pytest.approx(1.4)
    # The repeated CI and p replace the fixed-k ones; only a decided cell is marked.
    assert table.attrs["ci"][("dsc", "mrpc")] == (dsc[-1].ci_low, dsc[-1].ci_high)
    assert table.attrs["p_raw"][("focal(gamma=0)", "mrpc")] == focal[-1].p_value
    assert math.isnan(table.attrs["significance"][("focal(gamma=0)", "mrpc")])
    assert table.attrs["significance"][("dsc", "mrpc")] <= 0.05
    # The driver plans its rounds from the same looks.
    planned = loss_looks(rows(), "eval_f1", SeedsUntil(**RULE))
    assert planned == {"focal(gamma=0)": focal, "dsc": dsc}


def test_every_format_names_the_rule_and_each_stop() -> None:
    table = paper_table(rows())
    markdown = to_markdown(table)
    assert "Seeds until decided (looks 3, 5; alpha 0.05; delta_min 1;" in markdown
    assert "focal(gamma=0) at look 1 of 2 (3 seeds), futile (" in markdown
    assert "dsc at look 2 of 2 (5 seeds), decided (" in markdown
    assert "repeated 95% CI [" in markdown
    assert "paired t over seeds):" not in markdown  # no fixed-k interval claimed
    assert "focal(gamma=0) at look 1 of 2 (3 seeds), futile (" in to_html(table)
    cells = {cell["row"]: cell for cell in json.loads(to_json(table))["cells"]}
    assert cells["focal(gamma=0)"]["stopped"]["verdict"] == "futile"
    assert cells["dsc"]["stopped"]["look"] == 2
    assert cells["dsc"]["ci"] == list(table.attrs["ci"][("dsc", "mrpc")])
    assert json.loads(to_json(table))["seeds_until"] == TEXT
    csv = to_csv(table)
    assert "stop_look" in csv.splitlines()[0] and ",futile," in csv


def test_a_fixed_list_keeps_its_fixed_k_intervals() -> None:
    table = paper_table(rows().drop(columns="setup_seeds"))
    assert "sequential" not in table.attrs
    assert "paired t over seeds):" in to_markdown(table)
