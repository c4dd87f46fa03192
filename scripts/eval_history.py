"""Every evaluation of a sweep's trials, read from the MLflow store it tracked to, as
a CSV (loss, stage, seed, learning rate, status, run id, step, and the metric at that
step): the whole curve behind a trial's last evaluations in ``NAME-trials.csv``
(scripts/publish_study.py). A trial that reports its best evaluation (``checkpoint:
best``, early stopping) logs that evaluation's figures at its last step and the last
evaluation's own value as ``last_<metric>``: the curve takes the latter at that step.
A two-stage sweep's stage-1 trials train at ``seeds[0]`` as its first seed does; the
stage, the rate and the run id tell their curves apart.

    python scripts/eval_history.py SWEEP_ID OUT.csv --tracking-uri sqlite:////tmp/dsws/mlflow.db
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path
from typing import Any

from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from search_spaces.contract import (
    LOSS_LABEL_TAG,
    ROLE_TAG,
    STAGE_TAG,
    SWEEP_TAG,
    dicesweep_experiments,
)


def curve(client: MlflowClient, run_id: str, metric: str) -> list[Metric]:
    """``metric``'s evaluations by one run in step order, each the value evaluated at
    its step: where the run logged ``last_<metric>`` (its final report, which carries
    the best evaluation's figures under ``metric``), that value stands at its step."""
    points = {point.step: point for point in client.get_metric_history(run_id, metric)}
    for point in client.get_metric_history(run_id, f"last_{metric}"):
        points[point.step] = Metric(metric, point.value, point.timestamp, point.step)
    return [points[step] for step in sorted(points)]


def history(tracking_uri: str, sweep_id: str, metric: str) -> list[dict[str, Any]]:
    """One row per evaluation of ``metric`` by a trial of ``sweep_id``, stage 1's trials
    before stage 2's, each trial's in step order."""
    client = MlflowClient(tracking_uri)
    query = f"tags.`{SWEEP_TAG}` = '{sweep_id}' and tags.`{ROLE_TAG}` = 'trial'"
    rows = [
        {
            "loss": run.data.tags.get(LOSS_LABEL_TAG, ""),
            "stage": run.data.tags.get(STAGE_TAG, "final"),
            "seed": run.data.params.get("seed", ""),
            "learning_rate": run.data.params.get("training.learning_rate", ""),
            "status": run.info.status,
            "run_id": run.info.run_id,
            "step": point.step,
            metric: round(point.value, 3),
        }
        for run in client.search_runs(dicesweep_experiments(client), query, max_results=10_000)
        for point in curve(client, run.info.run_id, metric)
    ]
    rows.sort(
        key=lambda row: (
            row["loss"],
            row["stage"] != "tune",  # stage 1 first
            row["seed"],
            row["learning_rate"],
            row["run_id"],
            row["step"],
        )
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep_id")
    parser.add_argument("out", type=Path)
    parser.add_argument("--tracking-uri", required=True)
    parser.add_argument("--metric", default="eval_f1")
    args = parser.parse_args()
    rows = history(args.tracking_uri, args.sweep_id, args.metric)
    if not rows:
        raise SystemExit(f"no {args.metric} of sweep {args.sweep_id}'s trials in MLflow")
    with args.out.open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"{len(rows)} evaluations written to {args.out}")


if __name__ == "__main__":
    main()
