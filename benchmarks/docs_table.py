"""Write one benchmark's section into docs/benchmarks.md, leaving the others as they are."""

from __future__ import annotations

import os
import platform
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


def write_page_section(results: Path, page: str, title: str, body: str) -> None:
    """Replace (or append) the ``## title`` section of the results page ``page``
    (``results/page.md``), a new page headed ``# page``."""
    path = results / f"{page}.md"
    if not path.exists():
        path.write_text(f"# {page}\n")
    write_section(path, title, body)


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (the architecture where it cannot be read)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.machine()


def cpu_family() -> str:
    """The CPU's model name without trademarks and ``Processor`` ("Intel Xeon", "AMD
    EPYC 9B14"), for a section heading that keeps one host's figures apart from another's."""
    name = re.sub(r"\((R|TM)\)|\bProcessor\b|\bCPU\b", " ", cpu_model())
    return " ".join(name.split()) or platform.machine()


def machine_description() -> str:
    """CPU model, core count and memory, for the line that says where figures come from."""
    model = cpu_model()
    memory = ""
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        kib = int(meminfo.read_text().split()[1])
        memory = f", {kib / 2**20:.0f} GiB"
    return f"{model}, {os.cpu_count()} cores{memory}, Python {platform.python_version()}"
