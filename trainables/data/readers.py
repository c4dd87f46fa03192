"""Readers of the catalogue's file formats: GLUE TSV (MRPC and QQP), CoNLL-2003 (any
``token ... tag`` file), CoNLL-U and SQuAD v1.1 JSON (``trainables.data.own_formats``
has the others; ``trainables.data.loading`` picks one by format). Each reads a whole
file into the example types of ``trainables.data.examples``; malformed input raises
``ValueError`` naming the file, the line and the rule it breaks, never quoting the
file's text (a message reaches MLflow and the service's pages).
"""

from __future__ import annotations

import csv
import json
import logging
import random
from collections.abc import Iterable, Sequence
from pathlib import Path

from trainables.data.examples import Answer, PairExample, QAExample, TaggedSentence

logger = logging.getLogger(__name__)

MRPC_HEADER = ("Quality", "#1 ID", "#2 ID", "#1 String", "#2 String")
QQP_HEADER = ("id", "qid1", "qid2", "question1", "question2", "is_duplicate")
CONLLU_COLUMNS = 10
CONLLU_UPOS = 3  # 0-based column of the universal part-of-speech tag


def read_glue_tsv(path: Path) -> list[PairExample]:
    """Read a labelled GLUE paraphrase TSV: MRPC (``msr_paraphrase_*.txt`` too) or QQP.

    The format is told by the header row. MRPC rows must all be well formed; QQP's
    train file has a few broken rows (missing questions), which are skipped and
    counted in a warning on this module's logger.

    Raises:
        ValueError: an unknown header (e.g. an unlabelled GLUE test file), or a
            malformed MRPC row.
    """
    # utf-8-sig drops the BOM some MRPC files start with; QUOTE_NONE because the
    # text holds bare '"' characters that are not CSV quoting.
    with path.open(encoding="utf-8-sig", newline="") as handle:
        rows = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = tuple(next(rows, ()))
        if header == MRPC_HEADER:
            return _mrpc_rows(path, rows)
        if header == QQP_HEADER:
            return _qqp_rows(path, rows)
    raise ValueError(
        f"{path}: unknown GLUE TSV header of {len(header)} columns; expected MRPC {MRPC_HEADER!r} "
        f"or QQP {QQP_HEADER!r} (unlabelled test files cannot be read)"
    )


def _mrpc_rows(path: Path, rows: Iterable[list[str]]) -> list[PairExample]:
    examples = []
    for line_no, row in enumerate(rows, start=2):
        if len(row) != len(MRPC_HEADER) or row[0] not in ("0", "1"):
            raise ValueError(
                f"{path}:{line_no}: an MRPC row needs 5 tab-separated columns with "
                f"Quality 0 or 1; got {len(row)} columns"
            )
        quality, id_a, id_b, text_a, text_b = row
        examples.append(PairExample(f"{id_a}-{id_b}", text_a, text_b, int(quality)))
    return examples


def _qqp_rows(path: Path, rows: Iterable[list[str]]) -> list[PairExample]:
    examples, skipped = [], 0
    for row in rows:
        if len(row) != len(QQP_HEADER) or row[5] not in ("0", "1") or not row[3] or not row[4]:
            skipped += 1
            continue
        examples.append(PairExample(row[0], row[3], row[4], int(row[5])))
    if skipped:
        logger.warning(
            "%s: skipped %d malformed QQP rows (need 6 columns, two questions and "
            "is_duplicate 0 or 1); kept %d",
            path,
            skipped,
            len(examples),
        )
    return examples


def read_conll2003(path: Path) -> list[TaggedSentence]:
    """Read CoNLL-2003 (``token POS chunk NER`` per line): tokens and their NER tags.

    Blank lines end sentences and ``-DOCSTART-`` lines are document markers, not
    sentences. The tag is the last column, so two-column ``token tag`` files read too.
    Tags come back in IOB2 (``to_iob2``: IOB1, BIOES and BMES files read alike).

    Raises:
        ValueError: a non-blank line with fewer than two columns.
    """
    sentences: list[TaggedSentence] = []
    tokens: list[str] = []
    tags: list[str] = []
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            columns = line.split()
            if not columns or columns[0] == "-DOCSTART-":
                if tokens:
                    sentences.append(TaggedSentence(tokens, tags))
                tokens, tags = [], []
                continue
            if len(columns) < 2:
                raise ValueError(
                    f"{path}:{line_no}: expected 'token ... tag', got one word of "
                    f"{len(line.strip())} characters"
                )
            tokens.append(columns[0])
            tags.append(columns[-1])
    if tokens:
        sentences.append(TaggedSentence(tokens, tags))
    return [TaggedSentence(s.tokens, to_iob2(s.tags)) for s in sentences]


def read_conllu(path: Path) -> list[TaggedSentence]:
    """Read CoNLL-U: the word forms of each sentence and their UPOS tags.

    Comment lines (``#``), multiword-token ranges (``1-2``) and empty nodes
    (``8.1``) are skipped: the tags belong to the syntactic words only.

    Raises:
        ValueError: a token line without the 10 tab-separated CoNLL-U columns.
    """
    sentences: list[TaggedSentence] = []
    tokens: list[str] = []
    tags: list[str] = []
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            line = line.rstrip("\n")
            if not line.strip():
                if tokens:
                    sentences.append(TaggedSentence(tokens, tags))
                tokens, tags = [], []
                continue
            if line.startswith("#"):
                continue
            columns = line.split("\t")
            if len(columns) != CONLLU_COLUMNS:
                raise ValueError(
                    f"{path}:{line_no}: a CoNLL-U token line needs {CONLLU_COLUMNS} "
                    f"tab-separated columns, got {len(columns)}"
                )
            if "-" in columns[0] or "." in columns[0]:
                continue
            tokens.append(columns[1])
            tags.append(columns[CONLLU_UPOS])
    if tokens:
        sentences.append(TaggedSentence(tokens, tags))
    return sentences


def read_squad(path: Path) -> list[QAExample]:
    """Read a SQuAD v1.1 JSON file: one example per question, in file order.

    Raises:
        ValueError: the file has no top-level ``data`` list.
    """
    with path.open(encoding="utf-8") as handle:
        document = json.load(handle)
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        raise ValueError(f"{path}: a SQuAD file needs a top-level 'data' list of articles")
    examples = []
    for article in document["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                answers = [Answer(a["text"], int(a["answer_start"])) for a in qa["answers"]]
                examples.append(
                    QAExample(
                        qa["id"], article["title"], paragraph["context"], qa["question"], answers
                    )
                )
    return examples


def split_squad_by_article(
    examples: Sequence[QAExample], eval_fraction: float = 0.2, seed: int = 0
) -> tuple[list[QAExample], list[QAExample]]:
    """Split questions into (train, eval) by article title, deterministically for ``seed``.

    ``round(eval_fraction * articles)`` articles (at least one, and at least one
    left for train) go to eval; no article has questions on both sides, so eval
    measures reading of unseen articles. Both lists keep the input order.
    SQuAD v1.1 dev: 48 articles -> 38 train, 10 eval at the default fraction.

    Raises:
        ValueError: ``eval_fraction`` outside (0, 1), or fewer than two articles.
    """
    if not 0.0 < eval_fraction < 1.0:
        raise ValueError(f"eval_fraction must lie strictly between 0 and 1, got {eval_fraction}")
    titles = list(dict.fromkeys(example.title for example in examples))
    if len(titles) < 2:
        raise ValueError(f"a by-article split needs at least 2 articles, got {len(titles)}")
    n_eval = min(max(1, round(eval_fraction * len(titles))), len(titles) - 1)
    # Shuffle a sorted copy so that the split depends on the titles and the seed only.
    shuffled = sorted(titles)
    random.Random(seed).shuffle(shuffled)
    eval_titles = set(shuffled[:n_eval])
    train = [example for example in examples if example.title not in eval_titles]
    evaluation = [example for example in examples if example.title in eval_titles]
    return train, evaluation


def to_iob2(tags: Sequence[str]) -> list[str]:
    """Entity tags in IOB2 (every entity starts with ``B-``), from IOB1 (``I-`` starts an
    entity unless it follows the same type), IOB2, BIOES or BMES. Other tags (POS) are
    returned unchanged."""
    converted: list[str] = []
    previous = "O"
    for tag in tags:
        prefix, _, kind = tag.partition("-")
        if not kind or prefix not in ("B", "I", "E", "S", "M"):
            converted.append(tag)
            previous = tag
            continue
        continues = previous != "O" and previous.partition("-")[2] == kind
        ended = previous.startswith(("E-", "S-"))
        begins = prefix in ("B", "S") or not continues or ended
        converted.append(f"{'B' if begins else 'I'}-{kind}")
        previous = tag
    return converted
