"""The F1 a binary study's trials would have scored on the other class: a trial reports
precision and recall of its scored class on dev, which with dev's class counts fix the
whole confusion matrix. Used to set a study scored in the paper's direction (MRPC's
minority, label 0) beside figures scored the GLUE way (label 1).

    python scripts/other_class_f1.py docs/results/study2-mrpc-original-ce-focal-trials.csv
        [--dataset mrpc] [--scored 0]   # dev read from DICESWEEP_DATASETS_DIR

prints one line per final-stage trial (loss, variant, seed, F1 as scored, F1 of the
other class) and each loss's mean.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import pandas as pd

from search_spaces.settings import DicesweepSettings
from trainables.data.loading import load_split


def other_class_f1(precision: float, recall: float, scored: int, other: int) -> float:
    """F1 (in %) of the other class, from the scored class's precision and recall (in %)
    over a dev set holding ``scored`` pairs of the scored class and ``other`` of the other."""
    hits = recall / 100 * scored  # scored-class pairs predicted as such
    false_alarms = hits / (precision / 100) - hits if precision else 0.0
    misses = scored - hits
    # The other class's hits are its pairs not taken for the scored class; its false
    # alarms are the scored class's misses, and its misses the scored class's false alarms.
    other_hits = other - false_alarms
    return 200 * other_hits / (2 * other_hits + misses + false_alarms)


def dev_counts(dataset: str, datasets_dir: Path) -> Counter[int]:
    return Counter(int(example.label) for example in load_split(dataset, "eval", datasets_dir))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trials", type=Path, help="a published study's NAME-trials.csv")
    parser.add_argument("--dataset", default="mrpc")
    parser.add_argument("--scored", type=int, default=0, help="the label the study scored")
    args = parser.parse_args()
    counts = dev_counts(args.dataset, DicesweepSettings().datasets_dir)
    scored, other = counts[args.scored], counts[1 - args.scored]
    rows = pd.read_csv(args.trials)
    rows = rows[rows["stage"] != "tune"] if "stage" in rows else rows
    rows = rows.assign(
        other_f1=[
            other_class_f1(p, r, scored, other)
            for p, r in zip(rows["eval_precision"], rows["eval_recall"], strict=True)
        ]
    )
    print(f"dev: {scored} pairs of label {args.scored}, {other} of label {1 - args.scored}")
    for row in rows.itertuples():
        print(f"{row.loss} {row.variant} seed={row.seed}: {row.eval_f1:.2f} -> {row.other_f1:.2f}")
    means = rows.groupby(["loss", "variant"])[["eval_f1", "other_f1"]].agg(["mean", "std"])
    print(means.round(2).to_string())


if __name__ == "__main__":
    main()
