"""What a fresh interpreter has imported after running a piece of code: the tests that
keep heavy packages (torch, Ray, the service's) out of light import paths."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence


def loaded_by(code: str, names: Sequence[str], timeout: float = 120) -> list[str]:
    """Which of ``names`` are in ``sys.modules`` once ``code`` has run in a new
    interpreter (an error in ``code`` fails the call)."""
    shown = f"print(json.dumps([n for n in {tuple(names)!r} if n in sys.modules]))"
    probe = f"{code}\nimport json, sys\n{shown}\n"
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=timeout
    )
    loaded: list[str] = json.loads(completed.stdout.strip().splitlines()[-1])
    return loaded
