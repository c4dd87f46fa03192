"""Write one benchmark's section into docs/benchmarks.md, leaving the others as they are."""

from __future__ import annotations

import re
from pathlib import Path

HEADER = "# Benchmarks\n\nEach section is written by the script it names; rerun it to refresh.\n"


def write_section(path: Path, title: str, body: str) -> None:
    """Replace (or append) the ``## title`` section of ``path`` with ``body``."""
    text = path.read_text() if path.exists() else HEADER
    section = f"## {title}\n\n{body.rstrip()}\n"
    pattern = re.compile(rf"^## {re.escape(title)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text).rstrip() + "\n"
    else:
        text = text.rstrip() + "\n\n" + section
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
