"""``load_split`` and ``label_list``: a data set's splits and labels, read by format
from the catalogue's folder or a researcher's own (``search_spaces.datasets``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from search_spaces.datasets import DatasetInfo, Split, get_dataset, resolve_inside
from trainables.data.examples import Example, QAExample, TaggedSentence
from trainables.data.hub import load_from_hub
from trainables.data.own_formats import read_jsonl, read_pairs_tsv
from trainables.data.readers import (
    read_conll2003,
    read_conllu,
    read_glue_tsv,
    read_squad,
    split_squad_by_article,
)

READERS: dict[str, Callable[[Path], Sequence[Example]]] = {
    "glue_tsv": read_glue_tsv,
    "conll2003": read_conll2003,
    "conllu": read_conllu,
    "squad_json": read_squad,
    "pairs_tsv": read_pairs_tsv,
    "jsonl": read_jsonl,
}


def load_split(dataset: DatasetInfo | str, split: Split, datasets_dir: Path) -> list[Example]:
    """Read one split of a data set: a catalogue name or entry, read from the data-sets
    folder, or a local folder's description (``search_spaces.datasets.dataset_info``).

    For a set with ``split_by_article_from`` (SQuAD v1.1) train and eval are the
    two sides of ``split_by_article_from``'s by-article split at the defaults.

    Raises:
        UnknownDatasetError: ``name`` is not in the catalogue.
        ValueError: the data set has no such split (the message lists its splits).
        FileNotFoundError: the file is missing; the message names the data set,
            the expected path and the setting ``DICESWEEP_DATASETS_DIR``.
    """
    info = get_dataset(dataset) if isinstance(dataset, str) else dataset
    if info.file_format == "hub":
        return load_from_hub(info, split)
    if split not in info.files:
        raise ValueError(
            f"data set {info.name!r} has no {split!r} split; available: {', '.join(info.files)}"
        )
    relative = info.split_by_article_from or info.files[split]
    path = _existing_file(info, split, datasets_dir, relative)
    examples = list(READERS[info.file_format](path))
    if info.split_by_article_from is None:
        return examples
    questions = [example for example in examples if isinstance(example, QAExample)]
    train, evaluation = split_squad_by_article(questions)
    return list(train if split == "train" else evaluation)


def _existing_file(info: DatasetInfo, split: Split, datasets_dir: Path, relative: str) -> Path:
    path = Path(relative) if info.local else resolve_inside(info.root(datasets_dir), relative)
    if not path.is_file():
        raise FileNotFoundError(
            f"data set {info.name!r} ({split} split): file not found at {path}; "
            f"set DICESWEEP_DATASETS_DIR to the folder that holds {relative!r} "
            f"(now {datasets_dir})"
        )
    return path


def label_list(dataset: DatasetInfo | str, datasets_dir: Path) -> list[str]:
    """The label names of a data set, index = class id.

    Paraphrase sets: the catalogue's labels (``["0", "1"]``). Tagging sets: the
    tag inventory of the local train split (see ``tag_inventory``).

    Raises:
        ValueError: a span-extraction (``mrc``) set, which has no label list.
        FileNotFoundError: as ``load_split``.
    """
    info = get_dataset(dataset) if isinstance(dataset, str) else dataset
    if info.kind == "pi":
        return list(info.labels)
    if info.kind == "mrc":
        raise ValueError(f"data set {info.name!r} is span extraction (mrc): it has no label list")
    sentences = [
        s for s in load_split(info, "train", datasets_dir) if isinstance(s, TaggedSentence)
    ]
    return tag_inventory(sentences, outside_first=info.kind == "ner")


def tag_inventory(sentences: Sequence[TaggedSentence], outside_first: bool = False) -> list[str]:
    """The sorted set of tags in ``sentences``; with ``outside_first``, ``"O"`` leads.

    NER keeps ``"O"`` at index 0 so that the majority "no entity" class has a
    fixed id whatever the entity types.
    """
    tags = sorted({tag for sentence in sentences for tag in sentence.tags})
    if outside_first and "O" in tags:
        tags.remove("O")
        tags.insert(0, "O")
    return tags
