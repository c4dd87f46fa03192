"""The seeds-until-decided rule (search_spaces.sequential.rule): its verdicts on
hand-made sequences, what its intervals and p-values claim, and its settings' errors."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from search_spaces.errors import SpecError
from search_spaces.sequential import (
    FUTILITY_POWER,
    SeedsUntilDecided,
    Verdict,
    design,
    look_statistics,
    run_rule,
)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_sequential import sequential  # noqa: E402

RULE = SeedsUntilDecided(delta_min=0.5)


def verdicts(differences: list[float], rule: SeedsUntilDecided = RULE) -> list[Verdict]:
    return [look.verdict for look in run_rule(differences, rule)]


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_large_effect_is_decided_at_the_first_look(sign: float) -> None:
    (look,) = run_rule([sign * 5.0, sign * 5.01, sign * 4.99, 9.0], RULE)
    assert (look.verdict, look.look, look.seeds) == (Verdict.DECIDED, 1, 3)
    assert look.p_value < 0.05
    assert (look.ci_low > 0) if sign > 0 else (look.ci_high < 0)


def test_a_zero_effect_with_a_tight_spread_is_futile_at_the_first_look() -> None:
    (look,) = run_rule([0.01, -0.02, 0.0, 0.01, -0.01], RULE)
    assert look.verdict is Verdict.FUTILE
    assert look.conditional_power < FUTILITY_POWER
    assert look.p_value > 0.05


def test_a_small_precise_effect_is_futile_when_its_interval_lies_inside_delta_min() -> None:
    # Look 1: t 3.46, far from its boundary (118) but with conditional power near 1.
    # Look 2: mean 0.2, se 0.0316, t 6.32 < 6.61; its repeated CI 0.2 ± 0.209 lies
    # inside ±0.5: no difference of interest, whichever its sign.
    first, second = run_rule([0.1, 0.2, 0.3, 0.2, 0.2, 0.2], RULE)
    assert first.verdict is Verdict.CONTINUE and first.conditional_power > 0.9
    assert second.verdict is Verdict.FUTILE and "inside ±0.5" in second.reason
    assert second.ci_low == pytest.approx(0.2 - design(RULE).t[1] * math.sqrt(0.005 / 5))
    assert -0.5 < second.ci_low < second.ci_high < 0.5


def test_a_noisy_small_effect_runs_to_max() -> None:
    differences = [0.4, -0.3, 1.2, 1.2, 0.4, -0.2, 0.8, -1.9, 1.3, 1.1]
    looks = run_rule(differences, SeedsUntilDecided())
    assert [look.verdict for look in looks] == [Verdict.CONTINUE] * 3 + [Verdict.MAX]
    assert [look.seeds for look in looks] == [3, 5, 7, 10]
    assert all(look.conditional_power >= FUTILITY_POWER for look in looks[:3])
    last = looks[-1]
    assert last.ci_low < 0 < last.ci_high and last.p_value > 0.05


def test_the_looks_end_where_the_differences_do() -> None:
    assert run_rule([1.0, 2.0], RULE) == []  # fewer than min
    looks = run_rule([1.0, 2.0, 1.5, 1.2], RULE)  # 4: look 1 only, then no more seeds
    assert [look.verdict for look in looks] == [Verdict.CONTINUE]


def test_the_conditional_power_follows_the_current_trend() -> None:
    # CP = Φ((T/√t − c_K)/√(1 − t)) + Φ((−T/√t − c_K)/√(1 − t)), t = 3/10.
    (look,) = run_rule([1.0, 2.0, 1.5], RULE)
    trend, spread, last = look.t_statistic / math.sqrt(0.3), math.sqrt(0.7), design(RULE).t[-1]
    expected = stats.norm.cdf((trend - last) / spread) + stats.norm.cdf((-trend - last) / spread)
    assert look.conditional_power == pytest.approx(expected)
    assert look.t_statistic == pytest.approx(1.5 / (0.5 / math.sqrt(3)))


def test_no_verdict_claims_more_than_the_rule() -> None:
    # At every look: decided ⟺ p ≤ α ⟺ the repeated CI excludes 0.
    rng = np.random.default_rng(7)
    for effect in (0.0, 1.0, 2.5):
        for _ in range(3):
            for look in run_rule(rng.normal(effect, 1.0, 10).tolist(), SeedsUntilDecided()):
                decided = look.verdict is Verdict.DECIDED
                assert decided == (look.p_value <= 0.05)
                assert decided == (look.ci_low > 0 or look.ci_high < 0)


def test_the_benchmark_runs_the_same_rule() -> None:
    rng = np.random.default_rng(11)
    differences = rng.normal(0.8, 1.0, size=(12, 10))
    outcome = sequential(differences, RULE, futility=True)
    for row, decided, futile, seeds in zip(
        differences, outcome.decided, outcome.futile, outcome.seeds, strict=True
    ):
        last = run_rule(row.tolist(), RULE)[-1]
        assert (last.seeds, last.verdict is Verdict.DECIDED) == (seeds, decided)
        assert (last.verdict is Verdict.FUTILE) == futile


def test_a_zero_spread_is_infinitely_sure_of_a_nonzero_mean() -> None:
    plan = design(RULE)
    figures = look_statistics(plan, 0, np.asarray([1.0, 0.0]), np.asarray([0.0, 0.0]))
    assert figures.t_statistic.tolist() == [math.inf, 0.0]
    assert figures.decided.tolist() == [True, False]
    assert figures.futile.tolist() == [False, True]


@pytest.mark.parametrize(
    ("settings", "field", "rule"),
    [
        ({"min": 1, "looks": (1, 5, 7, 10)}, "seeds.min", "needs 2 seeds"),
        ({"max": 2}, "seeds.max", "at least min (3)"),
        ({"looks": (3, 5, 5, 10)}, "seeds.looks", "rise strictly from min (3) to max (10)"),
        ({"looks": (2, 5, 10)}, "seeds.looks", "got [2, 5, 10]"),
        ({"looks": (3, 5, 7)}, "seeds.looks", "to max (10)"),
        ({"alpha": 0.0}, "seeds.alpha", "(0, 1)"),
        ({"alpha": True}, "seeds.alpha", "(0, 1)"),
        ({"delta_min": -0.1}, "seeds.delta_min", "at least 0"),
        ({"delta_min": math.inf}, "seeds.delta_min", "finite"),
        ({"looks": (3, 5.5, 10)}, "seeds", "whole numbers"),
    ],
)
def test_settings_errors_name_the_field_and_the_rule(
    settings: dict[str, object], field: str, rule: str
) -> None:
    with pytest.raises(SpecError) as raised:
        SeedsUntilDecided(**settings)  # type: ignore[arg-type]
    issue = raised.value.issues[0]  # max below min breaks the looks' rule too
    assert issue.path == field
    assert rule in issue.message


def test_every_broken_setting_is_reported_at_once() -> None:
    with pytest.raises(SpecError) as raised:
        SeedsUntilDecided(alpha=2.0, delta_min=-1.0)
    assert [issue.path for issue in raised.value.issues] == ["seeds.alpha", "seeds.delta_min"]


def test_looks_given_as_a_list_are_kept_as_a_tuple() -> None:
    rule = SeedsUntilDecided(looks=[3, 5, 7, 10])  # type: ignore[arg-type]
    assert rule.looks == (3, 5, 7, 10) and design(rule) is design(SeedsUntilDecided())
