"""What the ``dicesweep`` commands print for a person: one line per spec mistake, the
same from ``run`` and ``submit``; tables and short summaries, JSON on ``--json``; a
reader that stops early (``| head``) ends nothing in a traceback. Against the app
behind a real uvicorn server, the command as a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from mlflow.tracking import MlflowClient
from sqlalchemy.orm import Session, sessionmaker

from sweep_service.progress import read_progress
from sweep_service.store import record_progress
from tests.service.api_fixtures import FakeTrial, write_trials
from tests.service.test_regressions import served  # noqa: F401 (the fixture)

CLI = [sys.executable, "-m", "sweep_service.cli"]
# Two trials on the data set the app's folder holds (tests.service.api_fixtures).
SPEC = {
    "name": "probe",
    "task": {"dataset": "mrpc"},
    "model": "tiny-bert",
    "search_space": {"losses": [{"name": "ce"}, {"name": "dice"}]},
    "resources": {"gpus_per_trial": 0},
}
# The app's store on SQLite only: what is tested here is the command, not the store.
pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def dicesweep(url: str, home: Path, *args: str, **popen: Any) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DICESWEEP_")}
    env.update(DICESWEEP_HOME=str(home), DICESWEEP_API_URL=url, HF_HUB_OFFLINE="1")
    return subprocess.run(
        [*CLI, *args], env=env, capture_output=True, text=True, timeout=300, check=False, **popen
    )


# A mistake in each union of the spec, and the one line both commands say.
MISTAKES = {
    "format": (
        {"task": {"kind": "ner", "dataset": [{"path": "mine", "format": "conl"}]}},
        "task.dataset[0].format: unknown format 'conl'; "
        "valid: conll, conllu, pairs-tsv, squad-json, jsonl",
    ),
    "loss": (
        {"search_space": {"losses": [{"name": "dics"}]}},
        "search_space.losses[0].name: unknown loss 'dics'; "
        "valid: ce, dice, dsc, focal, tversky, wce",
    ),
    "task kind": (
        {"task": {"kind": "nerr", "dataset": "mrpc"}},
        "task.kind: unknown kind 'nerr'; valid: pi, ner, pos, mrc",
    ),
    "data set kind": (
        {"task": {"kind": "ner", "dataset": [["mine"]]}},
        "task.dataset[0]: a data set is a catalogue name, a local folder "
        "{path, format[, name]} or a hub data set {hub[, config, name]}",
    ),
    "misspelt key": (
        {"trainig": {"epochs": 1}},
        "trainig: unknown key; did you mean 'training'?",
    ),
}


@pytest.mark.parametrize("case", sorted(MISTAKES))
def test_run_and_submit_say_a_spec_mistake_in_the_same_one_line(
    served: str,  # noqa: F811
    tmp_path: Path,
    short_home: Path,
    case: str,
) -> None:
    mistake, line = MISTAKES[case]
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump({**SPEC, **mistake}))
    ran = dicesweep(served, short_home, "run", "spec.yaml", cwd=tmp_path)
    submitted = dicesweep(served, short_home, "submit", "spec.yaml", cwd=tmp_path)
    assert ran.stderr == f"invalid sweep spec: {line}\n"
    assert submitted.stderr == ran.stderr
    assert ran.returncode == submitted.returncode == 2
    assert ran.stdout == submitted.stdout == ""


def test_submit_and_status_print_a_summary_and_json_on_request(
    served: str,  # noqa: F811
    tmp_path: Path,
    tracking: MlflowClient,
    session_factory: sessionmaker[Session],
) -> None:
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(SPEC))
    submitted = dicesweep(served, tmp_path, "submit", "spec.yaml", cwd=tmp_path)
    assert submitted.returncode == 0, submitted.stderr
    first, *rest = submitted.stdout.splitlines()
    assert first.startswith("sweep sw-") and first.endswith(" (probe): 2 trials")
    sweep_id = first.split()[1]
    assert rest == [
        "status: pending",
        f"page:   {served}/sweeps/{sweep_id}",
        f"follow: dicesweep status {sweep_id}",
    ]
    write_trials(
        tracking,
        sweep_id,
        [FakeTrial({"name": "ce"}, eval_f1=81.5), FakeTrial({"name": "dice"}, status="RUNNING")],
    )
    with session_factory() as session:  # what the reconciler stores from MLflow
        record_progress(session, sweep_id, read_progress(tracking, sweep_id))
    status = dicesweep(served, tmp_path, "status", sweep_id)
    assert status.returncode == 0, status.stderr
    assert "{" not in status.stdout
    assert status.stdout.splitlines()[:4] == [
        f"sweep:   {sweep_id} (probe)",
        "status:  pending",
        "trials:  1 done, 1 running, 0 failed, 0 pending of 2",
        "best:    ce seed=0 eval_f1=81.50 (mrpc, original)",
    ]
    as_json = json.loads(dicesweep(served, tmp_path, "status", "--json", sweep_id).stdout)
    assert as_json["id"] == sweep_id and as_json["trials"]["done"] == 1
    again = dicesweep(served, tmp_path, "submit", "--json", "spec.yaml", cwd=tmp_path)
    assert json.loads(again.stdout)["status"] == "pending"


def test_trials_give_the_reason_of_a_trial_that_learned_nothing(
    served: str,  # noqa: F811
    tmp_path: Path,
    tracking: MlflowClient,
) -> None:
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(SPEC))
    submitted = dicesweep(served, tmp_path, "submit", "--json", "spec.yaml", cwd=tmp_path)
    sweep_id = json.loads(submitted.stdout)["id"]
    constant, learned = write_trials(
        tracking,
        sweep_id,
        [FakeTrial({"name": "ce"}, eval_f1=81.2), FakeTrial({"name": "dice"}, eval_f1=84.0)],
    )
    stamp = int(time.time() * 1000)
    tracking.log_metric(constant, "eval_distinct_predictions", 1, stamp)
    tracking.log_metric(learned, "eval_distinct_predictions", 2, stamp)
    listed = dicesweep(served, tmp_path, "trials", sweep_id).stdout.splitlines()
    rows = {line.split()[0]: line for line in listed[1:]}
    assert rows["ce"].endswith("constant predictions (the same for every input)")
    assert rows["dice"].rstrip().endswith("84.00")


def test_a_reader_that_stops_early_ends_no_command_in_a_traceback(
    served: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    # `dicesweep submit … | head -3`: the reader has gone before the command writes.
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(SPEC))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DICESWEEP_")}
    env.update(DICESWEEP_HOME=str(tmp_path), DICESWEEP_API_URL=served)
    for args in (["submit", "--json", "spec.yaml"], ["presets"]):
        read, write = os.pipe()
        os.close(read)  # nobody will read what the command writes
        with subprocess.Popen(
            [*CLI, *args], cwd=tmp_path, env=env, stdout=write, stderr=subprocess.PIPE, text=True
        ) as command:
            os.close(write)
            _, errors = command.communicate(timeout=300)
        assert "Traceback" not in errors and "BrokenPipeError" not in errors, errors
        assert command.returncode == 0, (args, errors)
