"""The catalogue of named data sets, and the words every data set is described in.

The catalogue is pure data, shared by the service (to validate a spec's data-set
names) and the trainables (to read the files). Its paths are relative to
``DICESWEEP_DATASETS_DIR``, except a sample shipped in the package (``packaged``), under
``SAMPLES_DIR``. A researcher's own folders and hub data sets are in
``search_spaces.dataset_refs``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

TaskKind = Literal["pi", "ner", "pos", "mrc"]
Split = Literal["train", "eval", "test"]
FileFormat = Literal["glue_tsv", "conll2003", "conllu", "squad_json", "pairs_tsv", "jsonl", "hub"]
# The data-set variants of the paper's Table 8 (binary data sets only), in its column order.
Variant = Literal["original", "+positive", "+negative", "-negative", "+positive&negative"]
VARIANTS: tuple[Variant, ...] = (
    "original",
    "+positive",
    "+negative",
    "-negative",
    "+positive&negative",
)


# Samples shipped inside the package (package data): the smoke preset runs anywhere.
SAMPLES_DIR = Path(__file__).parent / "samples"


class UnknownDatasetError(ValueError):
    """A data-set name that the catalogue does not know."""


@dataclass(frozen=True)
class DatasetInfo:
    """One named data set.

    ``files`` maps a split to a path relative to the data-sets folder. A data set
    whose ``split_by_article_from`` is set ships no train file: its train and eval
    splits are carved deterministically out of that one file (SQuAD v1.1 dev).
    """

    name: str
    kind: TaskKind
    file_format: FileFormat
    files: dict[Split, str]
    hub_id: str = ""  # "": none on the hub
    hub_config: str | None = None
    description: str = ""
    binary: bool = False  # a binary classification set: the Table 8 variants apply
    split_by_article_from: str | None = None
    labels: tuple[str, ...] = field(default_factory=tuple)
    local: bool = False  # a researcher's folder: ``files`` are absolute paths, read as they are
    packaged: bool = False  # shipped in the package: ``files`` are under ``SAMPLES_DIR``

    def root(self, datasets_dir: Path) -> Path:
        """The folder ``files`` are relative to: ``SAMPLES_DIR`` for a packaged sample,
        else ``datasets_dir``."""
        return SAMPLES_DIR if self.packaged else datasets_dir

    def path(self, datasets_dir: Path, split: Split) -> Path:
        """Absolute path of ``split`` under ``root``; raises ``KeyError`` if absent."""
        return self.root(datasets_dir) / self.files[split]


def _splits(pattern: str, test: bool = True) -> dict[Split, str]:
    """Files named alike: ``pattern`` with ``train``, ``dev`` and (with ``test``) ``test``
    in it, as the train, eval and test splits' files."""
    names: dict[Split, str] = {"train": "train", "eval": "dev", "test": "test"}
    return {split: pattern.format(name) for split, name in names.items() if test or split != "test"}


DATASETS: dict[str, DatasetInfo] = {
    info.name: info
    for info in (
        DatasetInfo(
            name="mrpc",
            kind="pi",
            file_format="glue_tsv",
            files={
                "train": "mrpc/train.tsv",
                "eval": "mrpc/dev.tsv",
                "test": "mrpc/msr_paraphrase_test.txt",
            },
            hub_id="nyu-mll/glue",
            hub_config="mrpc",
            description="Microsoft Research Paraphrase Corpus (GLUE split), 67% positive",
            binary=True,
            labels=("0", "1"),
        ),
        DatasetInfo(
            name="qqp",
            kind="pi",
            file_format="glue_tsv",
            files=_splits("qqp/{}.tsv", test=False),
            hub_id="nyu-mll/glue",
            hub_config="qqp",
            description="Quora Question Pairs (GLUE), the paper's Table 8 data set, 37% positive",
            binary=True,
            labels=("0", "1"),
        ),
        DatasetInfo(
            name="conll2003",
            kind="ner",
            file_format="conll2003",
            files={
                "train": "conll2003/train.txt",
                "eval": "conll2003/valid.txt",
                "test": "conll2003/test.txt",
            },
            hub_id="eriktks/conll2003",
            description="CoNLL-2003 English NER, IOB2 tags (PER, LOC, ORG, MISC)",
        ),
        DatasetInfo(
            name="ud_en_ewt",
            kind="pos",
            file_format="conllu",
            files=_splits("ud_english_ewt/en_ewt-ud-{}.conllu"),
            hub_id="universal_dependencies",
            hub_config="en_ewt",
            description="UD English EWT, 17 UPOS tags",
        ),
        DatasetInfo(
            name="ud_en_ewt_sample",
            kind="pos",
            file_format="conllu",
            files=_splits("ud_en_ewt_sample/en_ewt-ud-{}.conllu", test=False),
            description="UD English EWT's 2,000 training and 500 dev sentences that the smoke "
            "preset reads, shipped in the package (CC BY-SA 4.0, its LICENSE.txt beside them)",
            packaged=True,
        ),
        DatasetInfo(
            name="ud_zh_gsd",
            kind="pos",
            file_format="conllu",
            files=_splits("ud_chinese_gsd/r1.4/zh-ud-{}.conllu"),
            hub_id="universal_dependencies",
            hub_config="zh_gsd",
            description="UD Chinese GSD r1.4 (the paper's UD1.4), UPOS tags",
        ),
        # The paper's other data sets: read when their files are in the data-sets
        # folder with these names (docs/datasets.md says where each comes from).
        DatasetInfo(
            name="ontonotes4_zh",
            kind="ner",
            file_format="conll2003",
            files=_splits("ontonotes4/{}.char.bmes"),
            description="Chinese OntoNotes 4.0 NER, one character and its BMES tag a line "
            "(the Lattice LSTM split); the paper's Table 10 NER set",
        ),
        DatasetInfo(
            name="msra_ner",
            kind="ner",
            file_format="conll2003",
            files=_splits("msra/{}.char.bmes"),
            description="MSRA Chinese NER, one character and its BMES tag a line",
        ),
        DatasetInfo(
            name="ctb5_pos",
            kind="pos",
            file_format="conll2003",
            files=_splits("ctb5/{}.char.bmes"),
            description="Chinese Treebank 5.0 POS, one character and its BMES-POS tag a line "
            "(joint segmentation and tagging, scored on words as spans)",
        ),
        DatasetInfo(
            name="ctb6_pos",
            kind="pos",
            file_format="conll2003",
            files=_splits("ctb6/{}.char.bmes"),
            description="Chinese Treebank 6.0 POS, as ctb5_pos",
        ),
        DatasetInfo(
            name="quoref",
            kind="mrc",
            file_format="squad_json",
            files={"train": "quoref/quoref-train-v0.1.json", "eval": "quoref/quoref-dev-v0.1.json"},
            hub_id="allenai/quoref",
            description="QuoRef (coreference-heavy reading comprehension, SQuAD-style JSON); "
            "the paper's Table 10 MRC set",
        ),
        DatasetInfo(
            name="squad_v2",
            kind="mrc",
            file_format="squad_json",
            files={"train": "squad_v2/train-v2.0.json", "eval": "squad_v2/dev-v2.0.json"},
            hub_id="rajpurkar/squad_v2",
            description="SQuAD v2.0: a third of the questions have no answer (predicted empty)",
        ),
        DatasetInfo(
            name="squad_v1",
            kind="mrc",
            file_format="squad_json",
            files={"train": "squad/dev-v1.1.json", "eval": "squad/dev-v1.1.json"},
            hub_id="rajpurkar/squad",
            description="SQuAD v1.1; only dev is local: split by article into train and eval",
            split_by_article_from="squad/dev-v1.1.json",
        ),
    )
}


def get_dataset(name: str) -> DatasetInfo:
    """Look a data set up by name; the error lists the valid names."""
    try:
        return DATASETS[name]
    except KeyError:
        valid = ", ".join(sorted(DATASETS))
        raise UnknownDatasetError(f"unknown dataset {name!r}; valid: {valid}") from None


def resolve_inside(datasets_dir: Path, relative: str) -> Path:
    """Resolve ``relative`` under ``datasets_dir``, refusing paths that escape it."""
    root = datasets_dir.resolve()
    target = (root / relative).resolve()
    if not target.is_relative_to(root):
        raise ValueError(f"data path {relative!r} is outside the data-sets folder {root}")
    return target
