"""Every evaluation of a sweep's trials, read from the MLflow store it tracked to, as
a CSV (loss, seed, status, step, and the metric at that step): the whole curve behind
a trial's last evaluations in ``NAME-trials.csv`` (scripts/publish_study.py).

    python scripts/eval_history.py SWEEP_ID OUT.csv --tracking-uri sqlite:////tmp/dsws/mlflow.db
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from mlflow.tracking import MlflowClient

from search_spaces.lineage import LOSS_LABEL_TAG, ROLE_TAG, SWEEP_TAG, dicesweep_experiments


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep_id")
    parser.add_argument("out", type=Path)
    parser.add_argument("--tracking-uri", required=True)
    parser.add_argument("--metric", default="eval_f1")
    args = parser.parse_args()
    client = MlflowClient(args.tracking_uri)
    experiments = dicesweep_experiments(client)
    query = f"tags.`{SWEEP_TAG}` = '{args.sweep_id}' and tags.`{ROLE_TAG}` = 'trial'"
    rows = [
        {
            "loss": run.data.tags.get(LOSS_LABEL_TAG, ""),
            "seed": run.data.params.get("seed", ""),
            "status": run.info.status,
            "step": point.step,
            args.metric: round(point.value, 3),
        }
        for run in client.search_runs(experiments, query, max_results=10_000)
        for point in client.get_metric_history(run.info.run_id, args.metric)
    ]
    if not rows:
        raise SystemExit(f"no {args.metric} of sweep {args.sweep_id}'s trials in MLflow")
    rows.sort(key=lambda row: (row["loss"], row["seed"], row["step"]))
    with args.out.open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"{len(rows)} evaluations written to {args.out}")


if __name__ == "__main__":
    main()
