"""Data sets from the Hugging Face hub: ``{hub, config}`` in a spec, records read by the
jsonl format's fields (and the hub's usual names), refused up front when neither the
hub nor its cache can serve them."""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest
import yaml

from search_spaces.checks import dataset_issues
from search_spaces.dataset_refs import HubDataset, dataset_info
from search_spaces.errors import SpecError
from search_spaces.resolve import resolve_spec
from tests.trainables.test_local_datasets import dicesweep_run
from tests.trainables.test_sweep import environment
from trainables.data import load_split
from trainables.data.hub import map_records


def hub_spec(dataset: dict[str, str], kind: str = "pi") -> object:
    return resolve_spec(
        {"extends": "smoke", "task": {"kind": kind, "dataset": dataset, "variant": "original"}}
    )


def test_a_hub_data_set_is_named_by_its_id_and_config_and_needs_a_kind() -> None:
    spec = hub_spec({"hub": "nyu-mll/glue", "config": "mrpc"})
    (dataset,) = spec.task.dataset  # type: ignore[attr-defined]
    assert dataset == HubDataset(hub="nyu-mll/glue", config="mrpc")
    assert dataset.label == "glue-mrpc"
    with pytest.raises(SpecError) as caught:
        resolve_spec(
            {"extends": "smoke", "task": {"kind": None, "dataset": {"hub": "nyu-mll/glue"}}}
        )
    assert "task.kind" in str(caught.value)
    with pytest.raises(SpecError) as bad:
        hub_spec({"hub": "../../etc/passwd"})
    assert "task.dataset" in str(bad.value) and "hub" in str(bad.value)


@pytest.mark.data
def test_hub_records_read_as_the_local_readers_read_the_same_rows(datasets_dir: Path) -> None:
    """MRPC and CoNLL-2003 rows as the hub serves them (GLUE's sentence1/sentence2,
    conll2003's ClassLabel tag ids) map to the examples the file readers give."""
    pairs = load_split("mrpc", "eval", datasets_dir)[:20]
    glue = datasets.Dataset.from_dict(
        {
            "sentence1": [p.text_a for p in pairs],
            "sentence2": [p.text_b for p in pairs],
            "label": [p.label for p in pairs],
            "idx": list(range(len(pairs))),
        },
        features=datasets.Features(
            sentence1=datasets.Value("string"),
            sentence2=datasets.Value("string"),
            label=datasets.ClassLabel(names=["not_equivalent", "equivalent"]),
            idx=datasets.Value("int32"),
        ),
    )
    info = dataset_info(HubDataset(hub="nyu-mll/glue", config="mrpc"), "pi", datasets_dir)
    mapped = map_records(info, glue, glue.features)
    assert [(m.text_a, m.text_b, m.label) for m in mapped] == [
        (p.text_a, p.text_b, p.label) for p in pairs
    ]

    sentences = load_split("conll2003", "eval", datasets_dir)[:30]
    names = sorted({tag for s in sentences for tag in s.tags})
    conll = datasets.Dataset.from_dict(
        {
            "tokens": [list(s.tokens) for s in sentences],
            "ner_tags": [[names.index(tag) for tag in s.tags] for s in sentences],
        },
        features=datasets.Features(
            tokens=datasets.Sequence(datasets.Value("string")),
            ner_tags=datasets.Sequence(datasets.ClassLabel(names=names)),
        ),
    )
    info = dataset_info(HubDataset(hub="eriktks/conll2003"), "ner", datasets_dir)
    assert map_records(info, conll, conll.features) == sentences


def test_a_record_without_the_fields_of_its_kind_is_named() -> None:
    records = datasets.Dataset.from_dict({"premise": ["a"], "hypothesis": ["b"], "label": [1]})
    info = dataset_info(HubDataset(hub="org/nli"), "pi", Path("."))
    with pytest.raises(ValueError, match="record 0 needs 'label' and one of text_a/text_b"):
        map_records(info, records, records.features)


@pytest.fixture
def offline_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The hub off, over a cache that holds one data set as ``datasets`` downloads it."""
    from huggingface_hub import constants

    cache = tmp_path / "hf-cache"
    snapshot = cache / "datasets--org--cached" / "snapshots" / ("0" * 40) / "data"
    snapshot.mkdir(parents=True)
    (snapshot / "train-00000-of-00001.parquet").write_bytes(b"PAR1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


def test_offline_a_hub_data_set_outside_the_cache_is_refused_up_front(
    offline_hub: Path, tmp_path: Path
) -> None:
    missing = dataset_issues(hub_spec({"hub": "nyu-mll/glue", "config": "mrpc"}), tmp_path)
    assert [(issue.path, issue.message) for issue in missing] == [
        (
            "task.dataset[0].hub",
            f"data set 'glue-mrpc': 'nyu-mll/glue' is not in the Hugging Face cache "
            f"({offline_hub}), and the hub is off (HF_HUB_OFFLINE=1): download it first "
            "(hf download nyu-mll/glue --repo-type dataset) or give a folder",
        )
    ]
    assert dataset_issues(hub_spec({"hub": "org/cached"}), tmp_path) == []


def test_dicesweep_run_refuses_an_uncached_hub_data_set_offline(
    tmp_path: Path, short_home: Path
) -> None:
    spec = {
        "extends": "smoke",
        "task": {"kind": "ner", "dataset": {"hub": "eriktks/conll2003"}, "variant": "original"},
    }
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    env = environment(short_home, tmp_path)
    env.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(tmp_path / "empty-hf-cache"))
    result = dicesweep_run(tmp_path, env)
    assert result.returncode == 2
    assert "task.dataset[0].hub: data set 'conll2003': 'eriktks/conll2003' is not in" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr
    assert not (short_home / "mlflow.db").exists()  # nothing started
