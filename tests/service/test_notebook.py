"""docs/notebooks/smoke_sweep.ipynb executed (nbclient, a real ipykernel) against a real
``dicesweep serve`` with its own local Ray head and MLflow store, and no data-sets
folder (the smoke preset's sample ships in the package): it runs the smoke sweep
through ``sweep_service.Client`` and plots its table. The client's DataFrames are then
checked against the API's JSON. ``DICESWEEP_NOTEBOOKS=docs/notebooks`` keeps the
executed notebook (how the one in docs/ was made)."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from sweep_service import Client
from tests.service.test_e2e import Service

NOTEBOOK = Path(__file__).parents[2] / "docs" / "notebooks" / "smoke_sweep.ipynb"
EXECUTE_TIMEOUT_S = 600  # a cell; the wait for the sweep is the longest

pytestmark = pytest.mark.e2e


@pytest.fixture
def bare_service(short_home: Path) -> Iterator[Service]:
    """``dicesweep serve`` whose data-sets folder is empty."""
    running = Service(short_home, short_home / "no-datasets")
    running.start()
    try:
        yield running
    finally:
        running.stop()


def executed(notebook: nbformat.NotebookNode, service: Service) -> nbformat.NotebookNode:
    """``notebook`` run top to bottom in a kernel that sees only ``service``'s settings.

    Raises:
        nbclient.exceptions.CellExecutionError: a cell raised.
    """
    kernel_env = {k: v for k, v in os.environ.items() if not k.startswith("DICESWEEP_")}
    kernel_env.update(
        DICESWEEP_API_URL=str(service.http.base_url).rstrip("/"),
        DICESWEEP_HOME=str(service.home),  # the service's MLflow store, for mlflow_runs()
        MPLBACKEND="module://matplotlib_inline.backend_inline",
    )
    runner = NotebookClient(
        notebook,
        timeout=EXECUTE_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(service.home)}},
    )
    with pytest.MonkeyPatch.context() as patch:  # the kernel inherits this environment
        for name in [k for k in os.environ if k.startswith("DICESWEEP_")]:
            patch.delenv(name)
        for name, value in kernel_env.items():
            patch.setenv(name, value)
        return runner.execute()


def outputs(notebook: nbformat.NotebookNode, kind: str) -> list[dict]:
    return [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if kind in output.get("data", {})
    ]


def test_the_notebook_runs_the_smoke_sweep_and_plots_its_table(bare_service: Service) -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    for cell in notebook.cells:  # what the test runs is the source, not stored outputs
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    done = executed(notebook, bare_service)
    errors = [o for cell in done.cells for o in cell.get("outputs", []) if o.output_type == "error"]
    assert errors == []
    assert len(outputs(done, "image/png")) == 1  # the table's plot
    (sweep_id,) = [s["id"] for s in bare_service.http.get("/v1/sweeps").json()["data"]]
    assert f"<Sweep {sweep_id} 'smoke'" in str(outputs(done, "text/plain")[0]["data"])

    with Client(str(bare_service.http.base_url)) as client:
        sweep = client.sweep(sweep_id)
        assert sweep.status == "succeeded"
        served_grid = client.request("GET", f"/v1/sweeps/{sweep_id}/grid")
        table = sweep.grid()
        served_trials = sweep.trials_json()
        trials = sweep.trials()
    assert table["loss"].tolist() == [cell["row"] for cell in served_grid["cells"]]
    for stat in ("mean", "std", "count", "seeds", "delta"):
        expected = [math.nan if c[stat] is None else c[stat] for c in served_grid["cells"]]
        assert table[stat].tolist() == pytest.approx(expected, nan_ok=True)
    assert trials["run_id"].tolist() == [trial["run_id"] for trial in served_trials]
    assert trials["eval_f1"].tolist() == pytest.approx(
        [trial["metrics"]["eval_f1"] for trial in served_trials]
    )
    assert trials["degenerate"].tolist() == [
        trial["degenerate_reason"] is not None for trial in served_trials
    ]
    if kept := os.environ.get("DICESWEEP_NOTEBOOKS"):
        nbformat.write(done, Path(kept) / NOTEBOOK.name)
