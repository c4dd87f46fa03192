"""A one-trial run whose model cannot load ends at its start in one line naming the
``model`` field and what was tried, before any data is read (the data-sets folder here
is empty: reading it would fail otherwise). The command as a real process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tcp_proxy import free_port
from trainables.model_source import ModelUnavailableError, check_model

TRIAL = [sys.executable, "-m", "trainables.train", "--task", "ner", "--dataset", "conll2003"]


def one_trial(tmp_path: Path, model: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m trainables.train`` with ``model``, an empty Hugging Face cache and an
    empty data-sets folder."""
    (tmp_path / "datasets").mkdir(exist_ok=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DICESWEEP_", "HF_"))}
    base.update(
        DICESWEEP_HOME=str(tmp_path / "home"),
        DICESWEEP_DATASETS_DIR=str(tmp_path / "datasets"),
        HF_HOME=str(tmp_path / "hf"),
        **env,
    )
    return subprocess.run(
        [*TRIAL, "--model", model],
        cwd=tmp_path,
        env=base,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_an_uncached_hub_model_offline_is_one_line_at_the_start(tmp_path: Path) -> None:
    ended = one_trial(tmp_path, "bert-base-cased", HF_HUB_OFFLINE="1")
    assert ended.returncode == 1
    assert ended.stderr.count("\n") == 1, ended.stderr
    assert ended.stderr.startswith("trainables.train: model: 'bert-base-cased' is not a folder")
    assert f"({tmp_path}/hf/hub)" in ended.stderr and "HF_HUB_OFFLINE is set" in ended.stderr
    assert "'tiny-bert'" in ended.stderr


def test_an_unreachable_hub_is_said_without_retrying(tmp_path: Path) -> None:
    hub = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    ended = one_trial(tmp_path, "bert-base-cased", HF_ENDPOINT=hub)
    assert ended.returncode == 1
    assert ended.stderr.count("\n") == 1, ended.stderr  # no retry warnings
    assert f"the hub at {hub} cannot be reached" in ended.stderr


@pytest.mark.parametrize(
    ("model", "said"),
    [
        ("./no-such-model", "model: no folder './no-such-model' here"),
        ("not a repo id!", "model: 'not a repo id!' is no folder and"),
    ],
)
def test_a_model_that_names_nothing_is_one_line(tmp_path: Path, model: str, said: str) -> None:
    ended = one_trial(tmp_path, model, HF_HUB_OFFLINE="1")
    assert ended.returncode == 1
    assert ended.stderr.count("\n") == 1 and said in ended.stderr, ended.stderr


def test_tiny_bert_and_a_saved_model_folder_pass(tmp_path: Path) -> None:
    check_model("tiny-bert")
    (tmp_path / "saved").mkdir()
    with pytest.raises(ModelUnavailableError, match=r"holds no config\.json"):
        check_model(str(tmp_path / "saved"))
    (tmp_path / "saved" / "config.json").write_text('{"model_type": "bert"}')
    check_model(str(tmp_path / "saved"))
