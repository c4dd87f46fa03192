"""The sweep's tables, tests and plot, written as artifacts of its parent run."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from search_spaces.reports import to_csv, to_json, to_latex, to_markdown, to_png


def write_reports(
    client: Any,  # an mlflow.tracking.MlflowClient
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
