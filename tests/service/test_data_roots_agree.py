"""The service and its jobs confine reads to the same folders: a local data set the
API accepts is accepted again by the driver its job runs, with the environment
``dicesweep serve`` and the runner give that job (one function computes the roots:
``search_spaces.data_roots.confined_roots``), and a folder that became another
owner's after submission is refused by the driver as a missing one is."""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path
from typing import Any, ClassVar

import pytest
from sqlalchemy.orm import Session, sessionmaker

from search_spaces.contract import experiment_name
from search_spaces.data_roots import allowed_roots
from search_spaces.errors import SpecError
from search_spaces.settings import DicesweepSettings
from sweep_service.runner import RayJobRunner
from sweep_service.serve import job_environment
from sweep_service.settings import ServiceSettings
from sweep_service.store import Sweep
from tests.service.api_fixtures import MakeApi
from trainables.driver.spec_loading import load_spec


def conll_folder(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for name in ("train.conll", "dev.conll"):
        (folder / name).write_text("EU B-ORG\nrejects O\n\nPeter B-PER\n")
    return folder


def stored_spec(session_factory: sessionmaker[Session], sweep_id: str) -> dict[str, object]:
    with session_factory() as session:
        sweep = session.get(Sweep, sweep_id)
        assert sweep is not None
        return sweep.resolved_spec


class RecordingJobs:
    """Ray's Jobs API client as ``RayJobRunner`` uses it: no job exists, and each one
    submitted has its environment recorded."""

    env_vars: ClassVar[dict[str, str]] = {}

    def __init__(self, address: str) -> None:
        self.address = address

    def get_job_info(self, job: str) -> Any:
        raise RuntimeError(f"Job {job} does not exist")

    def submit_job(self, *, runtime_env: dict[str, Any], **job: Any) -> None:
        RecordingJobs.env_vars = dict(runtime_env["env_vars"])


def job_settings(
    settings: ServiceSettings, owner: str, monkeypatch: pytest.MonkeyPatch
) -> DicesweepSettings:
    """The settings a driver of ``owner``'s sweep reads from its job's environment, as
    the service's runner submits that job with ``dicesweep serve``'s environment."""
    for name in [name for name in os.environ if name.startswith("DICESWEEP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setattr("ray.job_submission.JobSubmissionClient", RecordingJobs)
    runner = RayJobRunner("http://127.0.0.1:8265", job_environment(settings))
    runner.submit("job", "sweep", {}, experiment_name(owner))
    for name, value in RecordingJobs.env_vars.items():
        if name.startswith("DICESWEEP_"):
            monkeypatch.setenv(name, value)
    return DicesweepSettings()


def drive(spec: dict[str, object], job: DicesweepSettings, folder: Path) -> None:
    """Load ``spec`` as a service's driver does (``--resolved-spec``); raises SpecError
    when the driver refuses it."""
    spec_file = folder / "spec.json"
    spec_file.write_text(json.dumps(spec))
    args = argparse.Namespace(resolved_spec=str(spec_file), spec=None, preset=None)
    load_spec(args, job)


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
    base = tmp_path / "home" / "datasets" / "local" if where == "home" else tmp_path / "team"
    folder = conll_folder(base / "my_ner")
    for path in ("my_ner", str(folder)):
        task = {"kind": "ner", "dataset": {"path": path, "format": "conll"}}
        accepted = api.client.post("/v1/sweeps", json={"extends": "smoke", "task": task})
        assert accepted.status_code == 201, accepted.text
        job = job_settings(api.settings, "local", monkeypatch)
        drive(stored_spec(session_factory, accepted.json()["id"]), job, tmp_path)
    assert allowed_roots(job) == [
        api.settings.datasets_dir / "local",
        tmp_path / "home" / "datasets" / "local",
        tmp_path / "team",
    ]


def test_a_driver_refuses_a_folder_linked_to_another_owners_as_a_missing_one(
    make_api: MakeApi,
    session_factory: sessionmaker[Session],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Accepted in the owner's own folder, then replaced by a link to another owner's
    folder before the driver starts: the driver refuses it with the words it has for a
    folder that is gone."""
    api = make_api(home=tmp_path / "home")
    datasets = api.settings.datasets_dir
    own = conll_folder(datasets / "local" / "my_ner")
    conll_folder(datasets / "alice" / "my_ner")
    task = {"kind": "ner", "dataset": {"path": "my_ner", "format": "conll"}}
    accepted = api.client.post("/v1/sweeps", json={"extends": "smoke", "task": task})
    assert accepted.status_code == 201, accepted.text
    spec = stored_spec(session_factory, accepted.json()["id"])
    job = job_settings(api.settings, "local", monkeypatch)

    def refusal() -> str:
        with pytest.raises(SpecError) as refused:
            drive(spec, job, tmp_path)
        [issue] = refused.value.issues
        assert issue.path == "task.dataset[0].path"
        return issue.message

    shutil.rmtree(own)
    own.symlink_to(datasets / "alice" / "my_ner")
    linked = refusal()
    own.unlink()
    assert linked == refusal()
    assert "'my_ner' is not a folder in your own data folders" in linked
    assert "alice" not in linked
