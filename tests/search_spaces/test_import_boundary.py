"""Importing the shared package pulls in neither torch, FastAPI, transformers nor Ray."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("torch", "fastapi", "transformers", "ray")

PROBE = f"""
import json, sys
import search_spaces.spec, search_spaces.presets, search_spaces.reports
from search_spaces.spec import resolve_spec
resolve_spec({{"extends": "table8"}})
print(json.dumps([name for name in {HEAVY!r} if name in sys.modules]))
"""


def test_importing_search_spaces_leaves_heavy_packages_out() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(completed.stdout.strip().splitlines()[-1]) == []
