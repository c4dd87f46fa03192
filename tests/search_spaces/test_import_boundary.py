"""Importing the shared package pulls in neither torch, FastAPI, transformers nor Ray."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("torch", "fastapi", "transformers", "ray")

PROBE = f"""
import json, sys
import search_spaces.spec, search_spaces.presets, search_spaces.reports
from search_spaces.presets import resolve_spec
resolve_spec({{"extends": "table8"}})
print(json.dumps([name for name in {HEAVY!r} if name in sys.modules]))
"""


def test_importing_search_spaces_leaves_heavy_packages_out() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(completed.stdout.strip().splitlines()[-1]) == []


def test_the_spec_never_imports_the_presets() -> None:
    """One direction: ``presets`` resolves specs with ``spec``; ``spec`` knows no presets."""
    probe = "import sys, search_spaces.spec; print('search_spaces.presets' in sys.modules)"
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert completed.stdout.strip() == "False"
