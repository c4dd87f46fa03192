"""Importing the shared package pulls in neither torch, FastAPI, transformers nor Ray."""

from __future__ import annotations

import subprocess
import sys

from tests.imports import loaded_by

HEAVY = ("torch", "fastapi", "transformers", "ray")

PROBE = """
import search_spaces.spec, search_spaces.presets, search_spaces.resolve, search_spaces.reports
from search_spaces.resolve import resolve_spec
resolve_spec({"extends": "table8"})
"""


def test_importing_search_spaces_leaves_heavy_packages_out() -> None:
    assert loaded_by(PROBE, HEAVY) == []


def test_no_module_of_search_spaces_imports_ray_or_optuna() -> None:
    """A spec in Ray Tune's terms is the driver's: every module of the shared package,
    the lazily imported ones too, names neither Ray nor Optuna."""
    import ast
    from pathlib import Path

    package = Path(__file__).resolve().parents[2] / "search_spaces"
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            found += [f"{path.name}: {n}" for n in names if n.split(".")[0] in ("ray", "optuna")]
    assert found == []


def loaded_after(module: str) -> list[str]:
    """Which of ``search_spaces``' spec modules importing ``module`` alone loads."""
    probe = (
        f"import sys, {module}; names = ('search_spaces.spec', 'search_spaces.presets', "
        "'search_spaces.resolve'); print(' '.join(n for n in names if n in sys.modules))"
    )
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return completed.stdout.split()


def test_the_spec_never_imports_the_presets() -> None:
    """Downwards only: ``resolve`` applies the presets, then validates with ``spec``;
    ``spec`` knows neither, and ``presets`` does not know the spec's model."""
    assert loaded_after("search_spaces.spec") == ["search_spaces.spec"]
    assert loaded_after("search_spaces.presets") == ["search_spaces.presets"]
