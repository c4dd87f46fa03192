"""A researcher's own data sets: folders of train/dev files in five formats, read by the
trainables, checked up front, and run end to end through ``dicesweep run``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from mlflow.tracking import MlflowClient

from search_spaces.checks import dataset_issues
from search_spaces.dataset_refs import LocalDataset, dataset_info
from search_spaces.errors import SpecError
from search_spaces.resolve import resolve_spec
from tests.trainables.test_sweep import environment, runs
from trainables.data import PairExample, QAExample, TaggedSentence, label_list, load_split, to_iob2

CLI = [sys.executable, "-m", "sweep_service.cli"]


# --- cutting small real data sets out of ../shared/data ------------------------------


def _blocks(path: Path) -> list[str]:
    """Blank-line separated blocks (sentences) of a CoNLL-style file, comments kept."""
    text = path.read_text(encoding="utf-8")
    return [block for block in text.split("\n\n") if block.strip()]


def cut_conll(datasets_dir: Path, folder: Path, n_train: int = 80, n_dev: int = 24) -> Path:
    folder.mkdir(parents=True)
    train = [b for b in _blocks(datasets_dir / "conll2003/train.txt") if "-DOCSTART-" not in b]
    dev = [b for b in _blocks(datasets_dir / "conll2003/valid.txt") if "-DOCSTART-" not in b]
    (folder / "train.conll").write_text("\n\n".join(train[:n_train]) + "\n")
    (folder / "dev.conll").write_text("\n\n".join(dev[:n_dev]) + "\n")
    return folder


def cut_conllu(datasets_dir: Path, folder: Path, n_train: int = 80, n_dev: int = 24) -> Path:
    folder.mkdir(parents=True)
    source = datasets_dir / "ud_english_ewt"
    train = _blocks(source / "en_ewt-ud-train.conllu")[:n_train]
    dev = _blocks(source / "en_ewt-ud-dev.conllu")[:n_dev]
    (folder / "train.conllu").write_text("\n\n".join(train) + "\n\n")
    (folder / "validation.conllu").write_text("\n\n".join(dev) + "\n\n")  # the other name
    return folder


def cut_pairs(datasets_dir: Path, folder: Path, n_train: int = 96, n_dev: int = 32) -> Path:
    """MRPC rows rewritten with the generic header, columns in another order."""
    folder.mkdir(parents=True)
    for name, count in (("train.tsv", n_train), ("dev.tsv", n_dev)):
        rows = (datasets_dir / "mrpc" / name).read_text(encoding="utf-8-sig").splitlines()[1:]
        lines = ["text_a\tlabel\tid\ttext_b"]
        for row in rows[:count]:
            quality, id_a, id_b, text_a, text_b = row.split("\t")
            lines.append(f"{text_a}\t{quality}\t{id_a}-{id_b}\t{text_b}")
        (folder / name).write_text("\n".join(lines) + "\n")
    return folder


def cut_squad(datasets_dir: Path, folder: Path) -> Path:
    """Two articles' first paragraphs to train, a third's to dev."""
    folder.mkdir(parents=True)
    articles = json.loads((datasets_dir / "squad/dev-v1.1.json").read_text())["data"]

    def part(chosen: list[dict[str, Any]]) -> dict[str, Any]:
        data = [{**a, "paragraphs": a["paragraphs"][:3]} for a in chosen]
        return {"version": "1.1", "data": data}

    (folder / "train.json").write_text(json.dumps(part(articles[:2])))
    (folder / "dev.json").write_text(json.dumps(part(articles[2:3])))
    return folder


# --- readers -------------------------------------------------------------------------


def test_to_iob2_reads_iob1_bioes_and_bmes_alike() -> None:
    assert to_iob2(["I-PER", "I-PER", "O", "I-LOC", "B-LOC"]) == [
        "B-PER",
        "I-PER",
        "O",
        "B-LOC",
        "B-LOC",
    ]
    assert to_iob2(["S-PER", "B-LOC", "M-LOC", "E-LOC", "S-LOC", "O"]) == [
        "B-PER",
        "B-LOC",
        "I-LOC",
        "I-LOC",
        "B-LOC",
        "O",
    ]
    assert to_iob2(["NOUN", "-NONE-", "PRP$"]) == ["NOUN", "-NONE-", "PRP$"]


@pytest.mark.data
def test_each_local_format_reads_its_folder(datasets_dir: Path, tmp_path: Path) -> None:
    cases = {
        "conll": (cut_conll(datasets_dir, tmp_path / "ner"), "ner", TaggedSentence, 80, 24),
        "conllu": (cut_conllu(datasets_dir, tmp_path / "pos"), "pos", TaggedSentence, 80, 24),
        "pairs-tsv": (cut_pairs(datasets_dir, tmp_path / "pi"), "pi", PairExample, 96, 32),
        "squad-json": (cut_squad(datasets_dir, tmp_path / "mrc"), "mrc", QAExample, None, None),
    }
    for fmt, (folder, kind, example_type, n_train, n_dev) in cases.items():
        info = dataset_info(LocalDataset(path=str(folder), format=fmt), kind, tmp_path)  # type: ignore[arg-type]
        train, dev = load_split(info, "train", tmp_path), load_split(info, "eval", tmp_path)
        assert all(isinstance(e, example_type) for e in train + dev), fmt
        if n_train is not None:
            assert (len(train), len(dev)) == (n_train, n_dev), fmt
        else:
            assert train and dev, fmt
    ner = dataset_info(LocalDataset(path=str(tmp_path / "ner"), format="conll"), "ner", tmp_path)
    labels = label_list(ner, tmp_path)  # read from the training file, "O" first
    assert labels[0] == "O" and "B-PER" in labels and "I-PER" in labels
    pairs = load_split(
        dataset_info(LocalDataset(path=str(tmp_path / "pi"), format="pairs-tsv"), "pi", tmp_path),
        "train",
        tmp_path,
    )
    first = pairs[0]
    assert isinstance(first, PairExample) and first.label in (0, 1) and "-" in first.guid


def test_jsonl_reads_every_kind_and_names_the_line_of_a_bad_record(tmp_path: Path) -> None:
    path = tmp_path / "train.jsonl"
    records = [
        {"text_a": "a cat", "text_b": "the cat", "label": 1},
        {"tokens": ["John", "runs"], "tags": ["I-PER", "O"]},
        {
            "id": "q1",
            "question": "Who runs?",
            "context": "John runs.",
            "answers": [{"text": "John", "answer_start": 0}],
        },
    ]
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    info = dataset_info(LocalDataset(path=str(tmp_path), format="jsonl"), "pi", tmp_path)
    pair, sentence, question = load_split(info, "train", tmp_path)
    assert isinstance(pair, PairExample) and pair.label == 1
    assert isinstance(sentence, TaggedSentence) and sentence.tags == ("B-PER", "O")
    assert isinstance(question, QAExample) and question.answers[0].text == "John"
    path.write_text(json.dumps({"words": []}) + "\n")
    with pytest.raises(ValueError, match=r"train.jsonl:1: a line needs 'text_a'"):
        load_split(info, "train", tmp_path)


def test_pairs_tsv_header_without_its_columns_is_refused(tmp_path: Path) -> None:
    (tmp_path / "train.tsv").write_text("sentence1\tsentence2\tgold\nA\tB\t1\n")
    info = dataset_info(LocalDataset(path=str(tmp_path), format="pairs-tsv"), "pi", tmp_path)
    with pytest.raises(ValueError, match=r"train.tsv:1: .*missing: label, text_a, text_b"):
        load_split(info, "train", tmp_path)


# --- checks up front ---------------------------------------------------------------------


def local_spec(path: str, fmt: str = "conll", kind: str | None = "ner") -> Any:
    task: dict[str, Any] = {"dataset": {"path": path, "format": fmt}}
    if kind:
        task["kind"] = kind
    return resolve_spec(
        {
            "name": "own",
            "task": task,
            "model": "tiny-bert",
            "search_space": {"losses": [{"name": "ce"}]},
        }
    )


def test_a_local_data_set_needs_its_kind() -> None:
    with pytest.raises(SpecError) as caught:
        local_spec("mine", kind=None)
    assert "task.kind" in str(caught.value) and "local or hub data set needs task.kind" in str(
        caught.value
    )


def test_folder_checks_name_the_field_and_the_rule(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "mine").mkdir(parents=True)
    (root / "mine" / "train.conll").write_text("EU B-ORG\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "train.conll").write_text("EU B-ORG\n")
    (outside / "dev.conll").write_text("EU B-ORG\n")
    (root / "link").symlink_to(outside)

    def problems(path: str, roots: list[Path] | None = None) -> list[str]:
        issues = dataset_issues(local_spec(path), root, [root] if roots is None else roots)
        return [f"{issue.path}: {issue.message}" for issue in issues]

    assert problems("mine") == [
        "task.dataset[0].path: data set 'mine': 'mine' has no eval file "
        "(one of: dev.conll, dev.txt, valid.conll, valid.txt, validation.conll, validation.txt)"
    ]
    assert "'..' is not allowed" in problems("mine/../../outside")[0]
    # Outside the roots (as written, or through a link) is refused as missing is.
    missing = f"is not a folder in your own data folders or the shared ones (looked in: {root};"
    for path in (str(outside), "link", "absent"):
        assert missing in problems(path)[0], path
    assert problems(str(outside), roots=[root, outside]) == []  # another allowed root
    assert problems("mine", roots=[outside, root])[0].endswith(
        "'mine' has no eval file "
        "(one of: dev.conll, dev.txt, valid.conll, valid.txt, validation.conll, validation.txt)"
    )
    # The command line reads any folder (no roots).
    assert dataset_issues(local_spec(str(outside)), root, None) == []


# --- end to end through ``dicesweep run`` -------------------------------------------------


def dicesweep_run(folder: Path, env: dict[str, str], *flags: str) -> subprocess.CompletedProcess:
    """``dicesweep run spec.yaml FLAGS`` in ``folder``, its output captured."""
    return subprocess.run(
        [*CLI, "run", "spec.yaml", *flags],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


RUN_TRAINING = {
    "epochs": 1,
    "learning_rate": 2.0e-3,
    "batch_size": 16,
    "max_seq_length": 64,
    "warmup_ratio": 0.0,
}


@pytest.mark.data
@pytest.mark.parametrize(
    ("fmt", "kind", "cut"),
    [
        ("conll", "ner", cut_conll),
        ("conllu", "pos", cut_conllu),
        ("pairs-tsv", "pi", cut_pairs),
        ("squad-json", "mrc", cut_squad),
    ],
)
@pytest.mark.e2e
def test_dicesweep_run_trains_on_a_local_folder(
    datasets_dir: Path, tmp_path: Path, short_home: Path, fmt: str, kind: str, cut: Any
) -> None:
    cut(datasets_dir, tmp_path / "my_data")
    spec = {
        "name": f"own-{kind}",
        "task": {"kind": kind, "dataset": {"path": "my_data", "format": fmt}},
        "model": "tiny-bert",
        "training": RUN_TRAINING,
        "search_space": {"losses": [{"name": "ce"}]},
        "seeds": [0],
        "resources": {"cpus_per_trial": 1, "max_concurrent_trials": 1},
    }
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    # A relative path is read from the current folder; the data-sets folder is elsewhere.
    env = environment(short_home, tmp_path / "no-catalogue-here")
    result = dicesweep_run(tmp_path, env, "--sweep-id", f"own-{kind}", "--num-cpus", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{short_home / 'mlflow.db'}")
    (trial,) = runs(client, f"own-{kind}", "trial")
    assert trial.info.status == "FINISHED"
    assert trial.data.tags["dicesweep.dataset"] == "my_data"
    assert "eval_f1" in trial.data.metrics
    assert "my_data" in result.stdout  # the table names the data set


def test_dicesweep_run_refuses_a_missing_folder_before_starting(
    tmp_path: Path, short_home: Path
) -> None:
    spec = {
        "name": "nowhere",
        "task": {"kind": "ner", "dataset": {"path": "nowhere", "format": "conll"}},
        "model": "tiny-bert",
        "search_space": {"losses": [{"name": "ce"}]},
    }
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = dicesweep_run(tmp_path, environment(short_home, tmp_path))
    assert result.returncode == 2
    assert "task.dataset[0].path" in result.stderr and "is not a folder" in result.stderr
    assert not (short_home / "mlflow.db").exists()  # nothing started


def test_dicesweep_run_refuses_an_uncached_model_offline_before_starting(
    tmp_path: Path, short_home: Path
) -> None:
    spec = {"extends": "smoke", "model": "roberta-base"}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    env = environment(short_home, tmp_path)
    env.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(tmp_path / "empty-hf-cache"))
    result = dicesweep_run(tmp_path, env)
    assert result.returncode == 2
    # The smoke sample ships with the package, so the model is the spec's only problem.
    assert "invalid sweep spec: model: 'roberta-base' is not a folder and not in the Hugging" in (
        result.stderr
    )
    assert "the hub is off (HF_HUB_OFFLINE=1)" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (short_home / "mlflow.db").exists()  # nothing started


@pytest.mark.parametrize("command", ["run", "submit"])
def test_a_yaml_syntax_error_is_one_line_naming_file_line_and_column(
    tmp_path: Path, short_home: Path, command: str
) -> None:
    (tmp_path / "spec.yaml").write_text("name: broken\ntask:\n  dataset: [mrpc\nseeds: [0]\n")
    result = subprocess.run(
        [*CLI, command, "spec.yaml"],
        cwd=tmp_path,
        env=environment(short_home, tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr == (
        "spec.yaml:3:12: invalid YAML: the '[' opened here is not closed "
        "(expected ',' or ']', but got ':' at line 4, column 6)\n"
    )


# --- the README's own-data example, as written ------------------------------------------


def readme_own_data_example() -> str:
    """The YAML block of README.md's own-data example (the first after its lead-in)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    after = readme.split("Your own data set is a folder", 1)[1]
    return after.split("```yaml\n", 1)[1].split("```", 1)[0]


def conll2003_piece(datasets_dir: Path, folder: Path) -> None:
    """The first sentences of CoNLL-2003, laid out as it is (``train.txt``, ``valid.txt``,
    ``test.txt``)."""
    folder.mkdir(parents=True)
    for name, sentences in (("train.txt", 320), ("valid.txt", 80), ("test.txt", 20)):
        blocks = (datasets_dir / "conll2003" / name).read_text().split("\n\n")
        (folder / name).write_text("\n\n".join(blocks[:sentences]) + "\n")


@pytest.mark.e2e
@pytest.mark.data
def test_the_readmes_own_data_example_runs_as_written(
    datasets_dir: Path, tmp_path: Path, short_home: Path
) -> None:
    """Extracted from README.md and run by ``dicesweep run`` on a CPU machine, offline,
    next to a small ``my_ner`` folder cut from CoNLL-2003."""
    example = readme_own_data_example()
    spec = yaml.safe_load(example)
    assert spec["task"]["dataset"]["path"] == "my_ner"
    conll2003_piece(datasets_dir, tmp_path / "my_ner")
    (tmp_path / "my_sweep.yaml").write_text(example)
    env = {**environment(short_home, tmp_path / "no-catalogue-here"), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [*CLI, "run", "my_sweep.yaml", "--sweep-id", "readme-own", "--num-cpus", "2"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{short_home / 'mlflow.db'}")
    trials = runs(client, "readme-own", "trial")
    assert len(trials) == 3 and all(t.info.status == "FINISHED" for t in trials)
    assert {t.data.tags["dicesweep.dataset"] for t in trials} == {"my_ner"}
    # Described as what it ran, not as the preset it extends.
    (parent,) = runs(client, "readme-own", "sweep")
    assert parent.data.tags["mlflow.note.content"] == (
        "ce, focal and dsc on my_ner (ner), tiny-bert, 1 seed (3 trials)"
    )
    assert "| my_ner" in result.stdout or "my_ner |" in result.stdout
