"""The store pulls in neither torch, transformers, the trainables, Ray nor FastAPI."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("torch", "transformers", "trainables", "ray", "fastapi")

PROBE = f"""
import json, sys
import sweep_service.store
print(json.dumps([name for name in {HEAVY!r} if name in sys.modules]))
"""


def test_importing_the_store_leaves_heavy_packages_out() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(completed.stdout.strip().splitlines()[-1]) == []
