"""The data sets a spec may name besides the catalogue's: a researcher's own folder
(``LocalDataset``: ``train.<ext>`` and ``dev.<ext>``, ``valid.<ext>`` or ``validation.<ext>``
files in one of ``LOCAL_FORMATS``) and a Hugging Face hub data set (``HubDataset``, loaded with
``datasets``). ``dataset_info`` describes each kind, catalogue names too, alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Discriminator, Field

from search_spaces.data_roots import OutsideRootsError, inside_roots, local_folder, not_a_folder
from search_spaces.datasets import (
    DATASETS,
    DatasetInfo,
    FileFormat,
    Split,
    TaskKind,
    UnknownDatasetError,
    get_dataset,
)
from search_spaces.errors import ClosedModel, brief, rule_error, shape_tag

PATH_PART_BYTES = 255  # a file name's limit on Linux's and macOS's file systems
MAX_PATH_CHARS = 4096  # Linux's PATH_MAX


def _bounded_parts(value: str) -> str:
    """Refuse a component no file system holds: checking it would fail (ENAMETOOLONG)."""
    for part in value.replace("\\", "/").split("/"):
        if len(part.encode()) > PATH_PART_BYTES:
            raise rule_error(
                f"each part of a path has at most {PATH_PART_BYTES} bytes; "
                f"one has {len(part.encode())}"
            )
    return value


def _one_line(value: str) -> str:
    """Names go into tables of every export format: no line breaks, tabs or controls."""
    if not value.isprintable():
        raise rule_error(
            "a name is one line of printable characters: no line break, tab or control character"
        )
    return value


# A folder or file path of a spec; a label shown in tables, MLflow and the exports.
BoundedPath = Annotated[
    str, Field(min_length=1, max_length=MAX_PATH_CHARS), AfterValidator(_bounded_parts)
]
Label = Annotated[str, Field(min_length=1, max_length=100), AfterValidator(_one_line)]

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
    "eval": ("dev", "valid", "validation"),  # valid: CoNLL-2003's name
    "test": ("test",),
}


class LocalDataset(ClosedModel):
    """A researcher's own data set: a folder and the format of its files.

    ``path`` is absolute or relative: to the current folder for ``dicesweep run``
    (which reads any folder), else looked up in the sweep owner's own data folders,
    then the shared ones (the service reads only inside them:
    ``search_spaces.data_roots``). ``name`` labels it in tables and MLflow (default:
    the folder's name).
    """

    path: BoundedPath
    format: LocalFormat
    name: Label | None = None

    @property
    def label(self) -> str:
        return self.name or Path(self.path).name or self.path

    def folder(self, datasets_dir: Path) -> Path:
        """The folder, relative paths taken under ``datasets_dir``."""
        return datasets_dir / Path(self.path).expanduser()

    def split_files(self, folder: Path) -> dict[Split, Path]:
        """The files of ``folder``'s splits that exist, e.g. ``{"train": .../train.conll}``."""
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


class HubDataset(ClosedModel):
    """A data set on the Hugging Face hub, loaded with ``datasets.load_dataset(hub,
    config)``: its ``train`` and ``validation`` (or ``dev``) splits, records mapped by
    the fields of the ``jsonl`` format (``trainables.data.hub``). ``name`` labels it
    (default: the id's last part, and the config)."""

    hub: str = Field(pattern=HUB_ID_PATTERN, max_length=200)
    config: str | None = Field(None, pattern=r"^[\w.-]{1,100}$")
    name: Label | None = None

    @property
    def label(self) -> str:
        default = self.hub.rsplit("/", 1)[-1] + (f"-{self.config}" if self.config else "")
        return self.name or default


def _dataset_shape(value: Any) -> str | None:
    """Which kind of data set ``value`` is: a mapping with ``hub`` is a hub data set,
    any other mapping a folder; None (neither) fails with the union's one error."""
    if isinstance(value, str):
        return "catalogue name"
    if isinstance(value, HubDataset) or (isinstance(value, dict) and "hub" in value):
        return "hub data set"
    if isinstance(value, LocalDataset | dict):
        return "local folder"
    return None


# Told apart by shape, so that a mistake gets the one error of the member it meant
# (``unknown format 'conl'``) instead of one error per member of the union.
DatasetRef = Annotated[
    Annotated[str, shape_tag("catalogue name")]
    | Annotated[LocalDataset, shape_tag("local folder")]
    | Annotated[HubDataset, shape_tag("hub data set")],
    Discriminator(
        _dataset_shape,
        custom_error_type="dataset_shape",
        custom_error_message=(
            "a data set is a catalogue name, a local folder {path, format[, name]} or a "
            "hub data set {hub[, config, name]}"
        ),
    ),
]


def dataset_label(dataset: DatasetRef | dict) -> str:
    """How tables, progress lines and MLflow name a data set (a trial's config holds a
    local or hub one as a plain dict)."""
    if isinstance(dataset, dict):
        dataset = (HubDataset if "hub" in dataset else LocalDataset).model_validate(dataset)
    return dataset if isinstance(dataset, str) else dataset.label


def check_known(dataset: DatasetRef, path: str = "") -> DatasetRef:
    """``dataset``, once a catalogue name is one the catalogue holds.

    Raises:
        PydanticCustomError: an unknown name, at ``path``, listing the valid ones.
    """
    if isinstance(dataset, str):
        try:
            get_dataset(dataset)
        except UnknownDatasetError as error:
            raise rule_error(str(error), path) from None
    return dataset


def is_binary(dataset: DatasetRef, kind: TaskKind | None) -> bool:
    """Whether the Table 8 variants apply: a binary catalogue set, or a local or hub
    pairs set."""
    return DATASETS[dataset].binary if isinstance(dataset, str) else kind == "pi"


def dataset_info(
    dataset: DatasetRef,
    kind: TaskKind | None,
    datasets_dir: Path,
    roots: Sequence[Path] | None = None,
) -> DatasetInfo:
    """The catalogue's entry of a name, or the description of a local folder (its
    ``kind`` given by the spec). Local files are absolute paths in ``files``; with
    ``roots`` (a service's job) the folder is looked up in them (``local_folder``) and
    each file resolved, inside one of them.

    Raises:
        UnknownDatasetError: an unknown name.
        ValueError: a local data set without ``kind``.
        OutsideRootsError: a local folder or file that is not inside ``roots``.
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
    if roots is None:
        found = dataset.split_files(dataset.folder(datasets_dir))
    else:
        shown = f"data set {dataset.label!r}:"
        folder = local_folder(dataset.path, roots)
        if folder is None:
            raise OutsideRootsError(f"{shown} {brief(dataset.path)} {not_a_folder(roots)}")
        found = dataset.split_files(folder)
        # Opened as resolved here: no link left to follow later.
        found = {s: inside_roots(p, roots, f"{shown} {p.name}") for s, p in found.items()}
    files = {split: str(path) for split, path in found.items()}
    return DatasetInfo(
        name=dataset.label,
        kind=kind,
        file_format=LOCAL_FORMATS[dataset.format][0],
        files=files,
        description=f"local {dataset.format} data set at {dataset.path}",
        binary=is_binary(dataset, kind),
        labels=("0", "1") if kind == "pi" else (),
        local=True,
    )
