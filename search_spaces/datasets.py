"""The data sets a spec can name: the catalogue, and a researcher's own folders.

The catalogue is pure data, shared by the service (to validate a spec's data-set
names) and the trainables (to read the files). Its paths are relative to
``DICESWEEP_DATASETS_DIR``. A ``LocalDataset`` is a folder of
``train.<ext>`` and ``dev.<ext>`` (or ``validation.<ext>``) files in one of
``LOCAL_FORMATS``; a ``HubDataset`` is a Hugging Face hub id (and config) loaded with
``datasets``; ``dataset_info`` describes each kind alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

TaskKind = Literal["pi", "ner", "pos", "mrc"]
Split = Literal["train", "eval", "test"]
FileFormat = Literal["glue_tsv", "conll2003", "conllu", "squad_json", "pairs_tsv", "jsonl", "hub"]
LocalFormat = Literal["conll", "conllu", "pairs-tsv", "squad-json", "jsonl"]
# A local format's reader and the file extensions it looks for, in order.
LOCAL_FORMATS: dict[LocalFormat, tuple[FileFormat, tuple[str, ...]]] = {
    "conll": ("conll2003", ("conll", "txt")),
    "conllu": ("conllu", ("conllu",)),
    "pairs-tsv": ("pairs_tsv", ("tsv",)),
    "squad-json": ("squad_json", ("json",)),
    "jsonl": ("jsonl", ("jsonl",)),
}
SPLIT_STEMS: dict[Split, tuple[str, ...]] = {
    "train": ("train",),
    "eval": ("dev", "validation"),
    "test": ("test",),
}
# The data-set variants of the paper's Table 8 (binary data sets only), in its column order.
Variant = Literal["original", "+positive", "+negative", "-negative", "+positive&negative"]
VARIANTS: tuple[Variant, ...] = (
    "original",
    "+positive",
    "+negative",
    "-negative",
    "+positive&negative",
)


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
    hub_id: str
    hub_config: str | None = None
    description: str = ""
    binary: bool = False  # a binary classification set: the Table 8 variants apply
    split_by_article_from: str | None = None
    labels: tuple[str, ...] = field(default_factory=tuple)
    local: bool = False  # a researcher's folder: ``files`` are absolute paths, read as they are

    def path(self, datasets_dir: Path, split: Split) -> Path:
        """Absolute path of ``split`` under ``datasets_dir``; raises ``KeyError`` if absent."""
        return datasets_dir / self.files[split]


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
            files={"train": "qqp/train.tsv", "eval": "qqp/dev.tsv"},
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
            files={
                "train": "ud_english_ewt/en_ewt-ud-train.conllu",
                "eval": "ud_english_ewt/en_ewt-ud-dev.conllu",
                "test": "ud_english_ewt/en_ewt-ud-test.conllu",
            },
            hub_id="universal_dependencies",
            hub_config="en_ewt",
            description="UD English EWT, 17 UPOS tags",
        ),
        DatasetInfo(
            name="ud_zh_gsd",
            kind="pos",
            file_format="conllu",
            files={
                "train": "ud_chinese_gsd/r1.4/zh-ud-train.conllu",
                "eval": "ud_chinese_gsd/r1.4/zh-ud-dev.conllu",
                "test": "ud_chinese_gsd/r1.4/zh-ud-test.conllu",
            },
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
            files={
                "train": "ontonotes4/train.char.bmes",
                "eval": "ontonotes4/dev.char.bmes",
                "test": "ontonotes4/test.char.bmes",
            },
            hub_id="",
            description="Chinese OntoNotes 4.0 NER, one character and its BMES tag a line "
            "(the Lattice LSTM split); the paper's Table 10 NER set",
        ),
        DatasetInfo(
            name="msra_ner",
            kind="ner",
            file_format="conll2003",
            files={
                "train": "msra/train.char.bmes",
                "eval": "msra/dev.char.bmes",
                "test": "msra/test.char.bmes",
            },
            hub_id="",
            description="MSRA Chinese NER, one character and its BMES tag a line",
        ),
        DatasetInfo(
            name="ctb5_pos",
            kind="pos",
            file_format="conll2003",
            files={
                "train": "ctb5/train.char.bmes",
                "eval": "ctb5/dev.char.bmes",
                "test": "ctb5/test.char.bmes",
            },
            hub_id="",
            description="Chinese Treebank 5.0 POS, one character and its BMES-POS tag a line "
            "(joint segmentation and tagging, scored on words as spans)",
        ),
        DatasetInfo(
            name="ctb6_pos",
            kind="pos",
            file_format="conll2003",
            files={
                "train": "ctb6/train.char.bmes",
                "eval": "ctb6/dev.char.bmes",
                "test": "ctb6/test.char.bmes",
            },
            hub_id="",
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


class LocalDataset(BaseModel):
    """A researcher's own data set: a folder and the format of its files.

    ``path`` is relative to the data-sets folder or absolute (the service accepts only
    folders under its data roots; ``dicesweep run`` any folder). ``name`` labels it in
    tables and MLflow (default: the folder's name).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(min_length=1, max_length=4096)
    format: LocalFormat
    name: str | None = Field(None, min_length=1, max_length=100)

    @property
    def label(self) -> str:
        return self.name or Path(self.path).name or self.path

    def folder(self, datasets_dir: Path) -> Path:
        """The folder, relative paths taken under ``datasets_dir``."""
        return datasets_dir / Path(self.path).expanduser()

    def split_files(self, datasets_dir: Path) -> dict[Split, Path]:
        """The files of the folder's splits that exist, e.g. ``{"train": .../train.conll}``."""
        folder = self.folder(datasets_dir)
        extensions = LOCAL_FORMATS[self.format][1]
        found: dict[Split, Path] = {}
        for split, stems in SPLIT_STEMS.items():
            candidates = [folder / f"{stem}.{ext}" for stem in stems for ext in extensions]
            existing = [path for path in candidates if path.is_file()]
            if existing:
                found[split] = existing[0]
        return found

    def expected_files(self, split: Split) -> str:
        """The names a split may have, for messages: ``dev.conll, dev.txt, ...``."""
        extensions = LOCAL_FORMATS[self.format][1]
        return ", ".join(f"{stem}.{ext}" for stem in SPLIT_STEMS[split] for ext in extensions)


HUB_ID_PATTERN = r"^[A-Za-z0-9][\w.-]{0,95}(/[\w.-]{1,96})?$"


class HubDataset(BaseModel):
    """A data set on the Hugging Face hub, loaded with ``datasets.load_dataset(hub,
    config)``: its ``train`` and ``validation`` (or ``dev``) splits, records mapped by
    the fields of the ``jsonl`` format (``trainables.data.hub``). ``name`` labels it
    (default: the id's last part, and the config)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hub: str = Field(pattern=HUB_ID_PATTERN, max_length=200)
    config: str | None = Field(None, pattern=r"^[\w.-]{1,100}$")
    name: str | None = Field(None, min_length=1, max_length=100)

    @property
    def label(self) -> str:
        default = self.hub.rsplit("/", 1)[-1] + (f"-{self.config}" if self.config else "")
        return self.name or default


DatasetRef = str | LocalDataset | HubDataset


def dataset_label(dataset: DatasetRef | dict) -> str:
    """How tables, progress lines and MLflow name a data set (a trial's config holds a
    local or hub one as a plain dict)."""
    if isinstance(dataset, dict):
        dataset = (HubDataset if "hub" in dataset else LocalDataset).model_validate(dataset)
    return dataset if isinstance(dataset, str) else dataset.label


def is_binary(dataset: DatasetRef, kind: TaskKind | None) -> bool:
    """Whether the Table 8 variants apply: a binary catalogue set, or a local or hub
    pairs set."""
    return DATASETS[dataset].binary if isinstance(dataset, str) else kind == "pi"


def dataset_info(dataset: DatasetRef, kind: TaskKind | None, datasets_dir: Path) -> DatasetInfo:
    """The catalogue's entry of a name, or the description of a local folder (its
    ``kind`` given by the spec). Local files are absolute paths in ``files``.

    Raises:
        UnknownDatasetError: an unknown name.
        ValueError: a local data set without ``kind``.
    """
    if isinstance(dataset, str):
        return get_dataset(dataset)
    if kind is None:
        raise ValueError(f"data set {dataset.label!r} needs task.kind (pi, ner, pos, mrc)")
    if isinstance(dataset, HubDataset):
        return DatasetInfo(
            name=dataset.label,
            kind=kind,
            file_format="hub",
            files={},
            hub_id=dataset.hub,
            hub_config=dataset.config,
            description=f"hub data set {dataset.hub}"
            + (f" ({dataset.config})" if dataset.config else ""),
            binary=kind == "pi",
            labels=("0", "1") if kind == "pi" else (),
        )
    files = {split: str(path) for split, path in dataset.split_files(datasets_dir).items()}
    return DatasetInfo(
        name=dataset.label,
        kind=kind,
        file_format=LOCAL_FORMATS[dataset.format][0],
        files=files,
        hub_id="",
        description=f"local {dataset.format} data set at {dataset.path}",
        binary=is_binary(dataset, kind),
        labels=("0", "1") if kind == "pi" else (),
        local=True,
    )


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
