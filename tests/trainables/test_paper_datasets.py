"""The paper's other data sets in the catalogue (Chinese OntoNotes 4.0, MSRA, CTB5/6,
QuoRef, SQuAD v2): read when their files lie in the documented layout. Their real
files are licensed or not here, so each layout is written from the real data that is
(UD Chinese GSD characters, SQuAD v1.1 dev)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from search_spaces.checks import dataset_issues
from search_spaces.datasets import get_dataset
from search_spaces.resolve import resolve_spec
from tests.trainables.test_train import squad_v2_folder
from trainables.data import QAExample, TaggedSentence, label_list, load_split
from trainables.tasks import build_task
from trainables.tasks.tagging import Tagging


def gsd_words(datasets_dir: Path, split: str) -> list[list[tuple[str, str]]]:
    """(word, UPOS) per sentence of UD Chinese GSD r1.4."""
    path = datasets_dir / f"ud_chinese_gsd/r1.4/zh-ud-{split}.conllu"
    sentences, words = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        columns = line.split("\t")
        if len(columns) == 10 and columns[0].isdigit():
            words.append((columns[1], columns[3]))
        elif not line.strip() and words:
            sentences.append(words)
            words = []
    return sentences


def char_bmes(sentences: list[list[tuple[str, str]]], tag_of: dict[str, str] | None) -> str:
    """One character and its BMES tag a line: the word's UPOS (CTB's joint segmentation
    and tagging), or with ``tag_of`` an entity type for some UPOS and O elsewhere (NER)."""
    lines = []
    for words in sentences:
        for word, upos in words:
            kind = upos if tag_of is None else tag_of.get(upos)
            for index, char in enumerate(word):
                if kind is None:
                    lines.append(f"{char} O")
                    continue
                last = len(word) - 1
                prefix = "S" if last == 0 else "B" if index == 0 else "E" if index == last else "M"
                lines.append(f"{char} {prefix}-{kind}")
        lines.append("")
    return "\n".join(lines) + "\n"


def install(root: Path, name: str, texts: dict[str, str]) -> None:
    for split, text in texts.items():
        path = root / get_dataset(name).files[split]  # type: ignore[index]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.mark.data
@pytest.mark.parametrize("name", ["ontonotes4_zh", "msra_ner", "ctb5_pos", "ctb6_pos"])
def test_the_chinese_character_sets_read_in_their_layout(
    datasets_dir: Path, tmp_path: Path, name: str
) -> None:
    tag_of = {"PROPN": "NAME"} if get_dataset(name).kind == "ner" else None
    install(
        tmp_path,
        name,
        {
            "train": char_bmes(gsd_words(datasets_dir, "train")[:200], tag_of),
            "eval": char_bmes(gsd_words(datasets_dir, "dev")[:50], tag_of),
        },
    )
    spec = resolve_spec({"extends": "smoke", "task": {"kind": None, "dataset": name}})
    assert dataset_issues(spec, tmp_path) == []  # present: accepted
    assert dataset_issues(spec, tmp_path / "elsewhere")  # absent: refused before running
    train = load_split(name, "train", tmp_path)
    assert len(train) == 200 and all(isinstance(s, TaggedSentence) for s in train)
    first = train[0]
    assert isinstance(first, TaggedSentence)
    assert "".join(first.tokens) == "".join(w for w, _ in gsd_words(datasets_dir, "train")[0])
    labels = label_list(name, tmp_path)
    assert all(tag == "O" or tag[:2] in ("B-", "I-") for tag in labels)  # BMES read as IOB2
    # CTB's character spans are scored as spans (a word right in extent and tag), as NER.
    assert isinstance(task := build_task(get_dataset(name).kind, labels), Tagging)
    assert task.kind == "ner" or task.spans
    assert not build_task("pos", label_list("ud_zh_gsd", datasets_dir)).spans  # type: ignore[attr-defined]


@pytest.mark.data
def test_quoref_and_squad_v2_read_as_squad_json(datasets_dir: Path, tmp_path: Path) -> None:
    v2 = squad_v2_folder(datasets_dir, tmp_path / "v2")
    install(
        tmp_path / "root",
        "squad_v2",
        {"train": (v2 / "train.json").read_text(), "eval": (v2 / "dev.json").read_text()},
    )
    questions = load_split("squad_v2", "eval", tmp_path / "root")
    assert any(isinstance(q, QAExample) and not q.answers for q in questions)

    articles = json.loads((datasets_dir / "squad/dev-v1.1.json").read_text())["data"]
    quoref = {"version": "0.1", "data": articles[:2]}
    install(
        tmp_path / "root",
        "quoref",
        {"train": json.dumps(quoref), "eval": json.dumps({**quoref, "data": articles[2:3]})},
    )
    train = load_split("quoref", "train", tmp_path / "root")
    assert len(train) == sum(len(p["qas"]) for a in articles[:2] for p in a["paragraphs"])
