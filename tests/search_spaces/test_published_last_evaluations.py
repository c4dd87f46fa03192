"""scripts/publish_study.py's last evaluations per trial, read from a real MLflow store:
what a published trials CSV carries so that "converged" can be checked (flat over the
last evaluations) instead of asserted."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def publish_study() -> ModuleType:
    """The script as a module (it is run as a script, not installed)."""
    spec = importlib.util.spec_from_file_location(
        "publish_study", ROOT / "scripts" / "publish_study.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["publish_study"] = module
    spec.loader.exec_module(module)
    return module


def test_last_three_evaluations_in_step_order_with_their_range(tmp_path: Path) -> None:
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("e", artifact_location=str(tmp_path / "artifacts"))
    rising, flat, once, never = (client.create_run(experiment).info.run_id for _ in range(4))
    # Logged out of step order, as a retried trial may: the steps decide the order.
    for step, value in [(878, 86.78), (2634, 90.4), (1756, 89.86), (3512, 91.1)]:
        client.log_batch(rising, metrics=[Metric("eval_f1", value, 0, step)])
    for step, value in [(250, 68.1), (500, 69.0), (750, 69.1), (1000, 69.05)]:
        client.log_batch(flat, metrics=[Metric("eval_f1", value, 0, step)])
    client.log_batch(once, metrics=[Metric("eval_f1", 50.0, 0, 621)])
    client.log_batch(never, metrics=[Metric("eval_loss", 0.3, 0, 621)])

    found = publish_study().last_evaluations(uri, [rising, flat, once, never], "eval_f1")

    assert list(found["last_evaluations"]) == [
        "1756:89.86 2634:90.4 3512:91.1",
        "500:69 750:69.1 1000:69.05",
        "621:50",
        "",
    ]
    assert found["last_evaluations_range"][0] == pytest.approx(1.24)
    assert found["last_evaluations_range"][1] == pytest.approx(0.1)
    assert math.isnan(found["last_evaluations_range"][2])
    assert math.isnan(found["last_evaluations_range"][3])


def test_the_precision_each_trial_trained_in(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("e", artifact_location=str(tmp_path / "artifacts"))
    tags = [{"dicesweep.precision": "bf16"}, {"dicesweep.precision": "fp32"}, {}]
    runs = [client.create_run(experiment, tags=tag).info.run_id for tag in tags]

    assert publish_study().trained_in(uri, runs) == ["bf16", "fp32", ""]
