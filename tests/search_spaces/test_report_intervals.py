"""Each Δ's 95% confidence interval and the Holm-adjusted marks, against values computed
here by hand from their definitions (scipy's t and nothing else)."""

from __future__ import annotations

import io
import json
import math

import pandas as pd
import pytest
from scipy import stats

from search_spaces.reports import paper_table, to_csv, to_json, to_markdown

# Per-seed F1 of three losses on one data set; the differences against ce are what the
# intervals and tests are of.
F1 = {
    "ce": (80.0, 81.0, 82.0, 83.0),
    "dice": (80.5, 82.5, 82.0, 84.5),  # differences 0.5, 1.5, 0.0, 1.5
    "dsc": (82.0, 82.2, 84.3, 84.3),  # differences 2.0, 1.2, 2.3, 1.3
    "focal": (79.0, 81.5, 80.0, 83.5),  # differences -1.0, 0.5, -2.0, 0.5
}


def rows() -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"loss": loss, "loss_name": loss, "dataset": "mrpc", "variant": "original"}
            | {"seed": seed, "eval_f1": value}
            for loss, values in F1.items()
            for seed, value in enumerate(values)
        ]
    )


def by_hand(loss: str) -> tuple[float, float, float, float]:
    """Mean difference, its 95% paired t interval and the two-sided p, from the formulas."""
    differences = [a - b for a, b in zip(F1[loss], F1["ce"], strict=True)]
    k = len(differences)
    mean = sum(differences) / k
    spread = math.sqrt(sum((d - mean) ** 2 for d in differences) / (k - 1))
    half = stats.t.ppf(0.975, k - 1) * spread / math.sqrt(k)
    t_value = mean / (spread / math.sqrt(k))
    return mean, mean - half, mean + half, 2 * stats.t.sf(abs(t_value), k - 1)


def holm_by_hand(p_values: dict[str, float]) -> dict[str, float]:
    """Holm's step-down: the i-th smallest p times (m - i + 1), kept monotone, at most 1."""
    ordered = sorted(p_values.items(), key=lambda item: item[1])
    adjusted, running = {}, 0.0
    for index, (name, p) in enumerate(ordered):
        running = max(running, (len(ordered) - index) * p)
        adjusted[name] = min(1.0, running)
    return adjusted


def test_each_delta_carries_its_paired_interval() -> None:
    table = paper_table(rows())
    for loss in ("dice", "dsc", "focal"):
        mean, low, high, _ = by_hand(loss)
        assert table.at[loss, ("mrpc", "delta")] == pytest.approx(mean)
        assert table.attrs["ci"][(loss, "mrpc")] == pytest.approx((low, high))
    mean, low, high, _ = by_hand("dsc")
    assert f"dsc {mean:+.2f} [{low:+.2f}, {high:+.2f}]" in to_markdown(table)
    cells = {c["row"]: c for c in json.loads(to_json(table))["cells"]}
    assert cells["dsc"]["ci"] == pytest.approx([low, high])
    assert cells["ce"]["ci"] is None


def test_marks_are_holm_adjusted_and_the_raw_p_is_kept() -> None:
    table = paper_table(rows())
    raw = {loss: by_hand(loss)[3] for loss in ("dice", "dsc", "focal")}
    adjusted = holm_by_hand(raw)
    for loss in raw:
        assert table.attrs["p_raw"][(loss, "mrpc")] == pytest.approx(raw[loss])
        assert table.attrs["significance"][(loss, "mrpc")] == pytest.approx(adjusted[loss])
    # dsc's raw p is under 0.01; times three it is not: † where the raw p would give ‡.
    assert raw["dsc"] < 0.01 < adjusted["dsc"] < 0.05
    assert "(+1.70)**†" in to_markdown(table)
    assert "Holm-adjusted over the table's 3 tested Δs" in to_markdown(table)
    written = pd.read_csv(io.StringIO(to_csv(table))).set_index("loss")
    assert written.at["dsc", "p_value"] == pytest.approx(raw["dsc"])
    assert written.at["dsc", "p_holm"] == pytest.approx(adjusted["dsc"])
    assert math.isnan(written.at["ce", "p_holm"])
