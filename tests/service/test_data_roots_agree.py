"""The service and its jobs confine reads to the same folders: a local data set the
API accepts is accepted again by the driver its job runs, with the environment
``dicesweep serve`` gives that job (one function computes the roots:
``search_spaces.data_roots.confined_roots``)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from search_spaces.data_roots import allowed_roots
from search_spaces.settings import DicesweepSettings
from sweep_service.serve import job_environment
from sweep_service.store import Sweep
from tests.service.api_fixtures import MakeApi
from trainables.driver.spec_loading import load_spec


def conll_folder(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for name in ("train.conll", "dev.conll"):
        (folder / name).write_text("EU B-ORG\nrejects O\n\nPeter B-PER\n")
    return folder


@pytest.mark.parametrize("where", ["home", "team"])
def test_a_data_set_the_service_accepts_its_driver_accepts(
    make_api: MakeApi,
    session_factory: sessionmaker[Session],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
) -> None:
    # Seen: $DICESWEEP_HOME/datasets accepted at submission, the job's driver exited 2
    # ("not under the data-sets folder or another allowed root").
    api = make_api(home=tmp_path / "home", data_roots=[tmp_path / "team"])
    assert api.settings.datasets_dir != tmp_path / "home" / "datasets"
    base = tmp_path / "home" / "datasets" if where == "home" else tmp_path / "team"
    folder = conll_folder(base / "my_ner")
    task = {"kind": "ner", "dataset": {"path": str(folder), "format": "conll"}}
    accepted = api.client.post("/v1/sweeps", json={"extends": "smoke", "task": task})
    assert accepted.status_code == 201, accepted.text
    with session_factory() as session:
        sweep = session.get(Sweep, accepted.json()["id"])
        assert sweep is not None
        stored = sweep.resolved_spec

    for name in [name for name in os.environ if name.startswith("DICESWEEP_")]:
        monkeypatch.delenv(name)
    for name, value in job_environment(api.settings).items():
        monkeypatch.setenv(name, value)
    job = DicesweepSettings()  # the driver's settings, read from its job's environment
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(stored))
    args = argparse.Namespace(resolved_spec=str(spec_file), spec=None, preset=None)
    spec = load_spec(args, job)  # raises SpecError when the driver refuses the folder
    assert spec.task.dataset[0].path == str(folder)
    assert allowed_roots(job) == [
        api.settings.datasets_dir,
        tmp_path / "home" / "datasets",
        tmp_path / "team",
    ]
