"""A service's driver and trials read only inside the data roots (the sweep owner's
own data folders and the shared ones): a file linked out of them after submission is
refused where it is opened, and no reader's error quotes a line of the file it read
(errors reach MLflow, the service's pages and its API)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from search_spaces.data_roots import OutsideRootsError
from search_spaces.dataset_refs import LocalDataset, dataset_info
from search_spaces.resolve import resolve_spec
from search_spaces.settings import DicesweepSettings
from tests.trainables.test_train import Recorder, toy_config
from trainables.data import load_split
from trainables.train import run_trial

SECRET = "root:x:0:0:a-line-no-message-may-quote"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The owner alice's data folder (``<data-sets folder>/alice``) with ``own/`` (a
    CoNLL set whose train file links out of it) and ``models/linked/`` (a model folder
    whose config links out), and the linked file outside."""
    secret = tmp_path / "outside" / "passwd"
    secret.parent.mkdir()
    secret.write_text(f"{SECRET}\n")
    folder = tmp_path / "datasets" / "alice"
    (folder / "own").mkdir(parents=True)
    (folder / "own" / "train.conll").symlink_to(secret)
    (folder / "own" / "dev.conll").write_text("EU B-ORG\n")
    (folder / "models" / "linked").mkdir(parents=True)
    (folder / "models" / "linked" / "config.json").symlink_to(secret)
    return folder


def confined(root: Path, home: Path) -> DicesweepSettings:
    """A service's job's settings for alice's sweep: reads confined to her folder."""
    return DicesweepSettings(
        home=home, datasets_dir=root.parent, data_roots=[], data_owner=root.name
    )


def own_config(**changes: Any) -> dict[str, Any]:
    dataset = {"path": "own", "format": "conll"}
    return {**toy_config(epochs=1), "dataset": dataset, "kind": "ner", **changes}


def test_a_trial_refuses_a_split_file_linked_out_of_the_roots(root: Path, tmp_path: Path) -> None:
    with pytest.raises(OutsideRootsError) as refused:
        run_trial(own_config(), Recorder(), confined(root, tmp_path / "home"))
    assert "data set 'own': train.conll lies outside your own data folders" in str(refused.value)
    assert SECRET not in str(refused.value)


def test_a_trial_refuses_a_model_folder_with_a_file_linked_out(root: Path, tmp_path: Path) -> None:
    (root / "own" / "train.conll").unlink()
    (root / "own" / "train.conll").write_text("EU B-ORG\n")
    model = str(root / "models" / "linked")  # the driver makes a model folder absolute
    with pytest.raises(OutsideRootsError, match=r"linked'/config\.json lies outside"):
        run_trial(own_config(model=model), Recorder(), confined(root, tmp_path / "home"))


def test_without_roots_a_reader_quotes_no_line_of_what_it_read(root: Path) -> None:
    # ``dicesweep run`` reads any folder; its readers still quote nothing of a file.
    info = dataset_info(LocalDataset(path="own", format="conll"), "ner", root)
    with pytest.raises(ValueError, match=r"train\.conll:1: expected 'token \.\.\. tag'") as refused:
        load_split(info, "train", root)
    assert SECRET not in str(refused.value)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("train.tsv", f"{SECRET}\tb\n"),  # not the pairs header
        ("train.jsonl", json.dumps({"text_a": SECRET, "text_b": "b", "label": SECRET}) + "\n"),
    ],
)
def test_a_malformed_file_is_refused_quoting_none_of_it(
    tmp_path: Path, name: str, text: str
) -> None:
    (tmp_path / name).write_text(text)
    local_format = "pairs-tsv" if name.endswith(".tsv") else "jsonl"
    info = dataset_info(LocalDataset(path=str(tmp_path), format=local_format), "pi", tmp_path)
    with pytest.raises(ValueError, match=f"{name}:1") as refused:
        load_split(info, "train", tmp_path)
    assert SECRET not in str(refused.value)


def test_a_services_driver_checks_the_files_again_before_any_trial(
    root: Path, short_home: Path
) -> None:
    task = {"kind": "ner", "dataset": {"path": "own", "format": "conll"}}
    spec = {"extends": "smoke", "task": task}
    (short_home / "spec.json").write_text(resolve_spec(spec).model_dump_json())
    env = {k: v for k, v in os.environ.items() if not k.startswith("DICESWEEP_")}
    env.update(
        DICESWEEP_HOME=str(short_home),
        DICESWEEP_DATASETS_DIR=str(root.parent),
        DICESWEEP_DATA_ROOTS="[]",
        DICESWEEP_DATA_OWNER=root.name,
        PYTHONPATH=str(Path.cwd()),
    )
    done = subprocess.run(
        [sys.executable, "-m", "trainables.driver", "--resolved-spec", "spec.json"],
        cwd=short_home,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "task.dataset[0].path" in done.stderr
    assert "'own/train.conll' lies outside your own data folders" in done.stderr
    assert SECRET not in done.stderr
    assert not (short_home / "mlflow.db").exists()  # refused before anything started
