"""The sweep's tables, tests and plot, written as artifacts of its parent run."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd
from mlflow.tracking import MlflowClient

from search_spaces.reports import to_csv, to_json, to_latex, to_markdown, to_png
from search_spaces.spec import SweepSpec, expand_losses


def default_layout(spec: SweepSpec) -> tuple[str, str]:
    """The paper's layout for this spec: (rows, columns) of the table.

    Several variants: Table 8 (loss x variant). One loss whose parameter varies,
    e.g. Tversky's alpha: Table 10 (the parameter x data set). Otherwise loss x
    data set.
    """
    if len(spec.task.variant) > 1:
        return "loss", "variant"
    if spec.search.algorithm == "grid":
        losses = expand_losses(spec)
        if len({loss["name"] for loss in losses}) == 1 and len(losses) > 1:
            varying = sorted(
                key
                for key in losses[0]
                if key != "name" and len({str(loss.get(key)) for loss in losses}) > 1
            )
            if varying:
                return f"param_{varying[0]}", "dataset"
    return "loss", "dataset"


def write_reports(
    client: MlflowClient,
    run_id: str,
    rows: pd.DataFrame,
    table: pd.DataFrame,
    tests: pd.DataFrame,
) -> None:
    """Attach the table (Markdown, CSV, LaTeX, JSON, PNG), the paired tests and the rows."""
    kind = "line" if str(table.index.name or "").startswith("param_") else "heatmap"
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        (out / "grid.md").write_text(to_markdown(table))
        (out / "grid.csv").write_text(to_csv(table))
        (out / "grid.tex").write_text(to_latex(table))
        (out / "grid.json").write_text(to_json(table))
        (out / "grid.png").write_bytes(to_png(table, kind=kind))
        tests.to_csv(out / "paired_tests.csv", index=False)
        rows.to_csv(out / "trials.csv", index=False)
        client.log_artifacts(run_id, folder, artifact_path="report")
