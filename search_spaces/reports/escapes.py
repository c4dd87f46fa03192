"""What a name or a reason from a trial run may not do in an export: start a line of
its own, close a Markdown cell, become a link or an image, run as a spreadsheet
formula. Names of older sweeps and of runs written to MLflow by hand are not checked
by today's schema, so every export escapes what it quotes.
"""

from __future__ import annotations

from typing import Any

# Markdown's inline links and images (``[t](url)``, ``![t](url)``) need a bracket
# closed right before a parenthesis: escaped there, neither is one. (A reference link
# needs its definition at the start of a line, which no quoted text has: ``one_line``.)
LINK_CLOSE = "]("

# A spreadsheet runs a cell that starts with one of these as a formula, and skips the
# spaces and line breaks before it (" =1+1" runs too).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def one_line(text: Any) -> str:
    """``text`` on one line: every line break and control character a space (a name or
    a failure's reason must not start a line of its own in any export)."""
    return "".join(char if char.isprintable() else " " for char in str(text))


def markdown_text(text: Any) -> str:
    """One line, a table cell's ``|`` and the ``](`` of Markdown's links and images
    escaped, no raw HTML (renderers show it)."""
    escaped = one_line(text).replace("\\", "\\\\").replace("|", "\\|")
    escaped = escaped.replace(LINK_CLOSE, "\\" + LINK_CLOSE)
    return escaped.replace("<", "&lt;").replace(">", "&gt;")


def csv_text(value: Any) -> Any:
    """``value`` with a ``'`` before it when a spreadsheet would run it as a formula
    (OWASP's guard), leading spaces and line breaks included."""
    if isinstance(value, str) and (
        value.startswith(FORMULA_STARTS) or value.lstrip(" \n\r\t").startswith(FORMULA_STARTS)
    ):
        return f"'{value}"
    return value
