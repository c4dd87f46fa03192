"""The home made its user's only by every command that creates it or a store in it
(``serve``, ``keys``, ``ui``, ``run``); the standard library only, so a command pays
for no import of the server's."""

from __future__ import annotations

import os
from pathlib import Path

# The home's stores: its user's only. (Ray's token is not made private here but
# refused when others may read it: they may know it already.)
PRIVATE_FILES = ("dicesweep.db", "mlflow.db")


def make_home_private(home: Path) -> None:
    """The home and what the service makes in it, its user's only: a umask of 077 for
    this process and its children (the Ray head, drivers, trials), the home 0700, and
    the stores a former version left readable, 0600."""
    os.umask(0o077)
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    home.chmod(0o700)
    for relative in PRIVATE_FILES:
        for path in home.glob(f"{relative}*"):  # SQLite's -wal and -shm files too
            if path.is_file() and path.stat().st_uid == os.getuid():
                path.chmod(0o600)
