"""Readers of the formats a researcher's own folder may use besides the catalogue's:
a sentence-pair TSV with a named header, and JSON lines (``search_spaces.datasets.
LOCAL_FORMATS``). Malformed input raises ``ValueError`` naming the file and line."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from trainables.data.examples import Answer, Example, PairExample, QAExample, TaggedSentence
from trainables.data.readers import MRPC_HEADER, QQP_HEADER, read_glue_tsv, to_iob2


def read_pairs_tsv(path: Path) -> list[PairExample]:
    """Read a sentence-pair TSV: a header naming ``label``, ``text_a`` and ``text_b``
    (other columns are ignored; an ``id`` column names the pairs), or the MRPC/QQP
    layouts. Labels are 0 (negative) and 1 (positive).

    Raises:
        ValueError: a header without the three columns, or a row with a label other
            than 0/1 or a missing text, naming the line.
    """
    with path.open(encoding="utf-8-sig", newline="") as handle:
        rows = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = tuple(next(rows, ()))
        if header in (MRPC_HEADER, QQP_HEADER):
            return read_glue_tsv(path)
        missing = [name for name in ("label", "text_a", "text_b") if name not in header]
        if missing:
            raise ValueError(
                f"{path}:1: a pairs TSV header needs the columns label, text_a and text_b "
                f"(missing: {', '.join(missing)}), or the MRPC/QQP header; "
                f"got {len(header)} columns"
            )
        examples = []
        for line_no, row in enumerate(rows, start=2):
            if not any(row):
                continue
            record = dict(zip(header, row, strict=False))
            examples.append(_pair(path, line_no, record))
    return examples


def _pair(path: Path, line_no: int, record: dict[str, Any]) -> PairExample:
    label, text_a, text_b = (record.get(k) for k in ("label", "text_a", "text_b"))
    if str(label) not in ("0", "1") or not text_a or not text_b:
        raise ValueError(f"{path}:{line_no}: a pair needs label 0 or 1 and two non-empty texts")
    return PairExample(str(record.get("id", line_no)), str(text_a), str(text_b), int(label))


def read_jsonl(path: Path) -> list[Example]:
    """Read one example a line, its fields saying its kind:

    - pairs (``pi``): ``{"text_a": ..., "text_b": ..., "label": 0 or 1}``
    - tagging (``ner``, ``pos``): ``{"tokens": [...], "tags": [...]}``
    - reading comprehension (``mrc``): ``{"id", "question", "context",
      "answers": [{"text", "answer_start"}]}`` (``title`` optional)

    Raises:
        ValueError: a line that is not a JSON object of one of those shapes.
    """
    examples: list[Example] = []
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{line_no}: not JSON ({error.msg})") from None
            examples.append(_record_example(path, line_no, record))
    return examples


def _record_example(path: Path, line_no: int, record: Any) -> Example:
    if isinstance(record, dict) and "tokens" in record:
        tokens, tags = record["tokens"], record.get("tags")
        if not isinstance(tokens, list) or not isinstance(tags, list) or len(tokens) != len(tags):
            raise ValueError(f"{path}:{line_no}: 'tokens' and 'tags' must be lists of one length")
        return TaggedSentence([str(t) for t in tokens], to_iob2([str(t) for t in tags]))
    if isinstance(record, dict) and "question" in record:
        answers = [Answer(a["text"], int(a["answer_start"])) for a in record.get("answers", [])]
        title = str(record.get("title", record.get("id", line_no)))
        return QAExample(
            str(record.get("id", line_no)), title, record["context"], record["question"], answers
        )
    if isinstance(record, dict) and "text_a" in record:
        return _pair(path, line_no, record)
    raise ValueError(
        f"{path}:{line_no}: a line needs 'text_a'/'text_b'/'label' (pairs), 'tokens'/'tags' "
        "(tagging) or 'question'/'context'/'answers' (reading comprehension)"
    )
