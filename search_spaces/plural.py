"""A count and its noun in words, the noun plural unless the count is one."""

from __future__ import annotations


def counted(count: float, noun: str) -> str:
    """``counted(1, "CPU")`` is ``"1 CPU"``, ``counted(2, "CPU")`` ``"2 CPUs"`` and
    ``counted(0.5, "GPU")`` ``"0.5 GPUs"``; a float is shown as ``:g`` shows it."""
    shown = f"{count:g}" if isinstance(count, float) else str(count)
    return f"{shown} {noun}" if count == 1 else f"{shown} {noun}s"
