"""One version of dicesweep, Ray and Python on the API, the driver and every Ray node.

A Ray cluster refuses a node whose Ray or Python differs from the head's (``ray
start`` exits naming both). What Ray cannot see is the service: ``dicesweep serve``
checks the cluster's Ray version over the Jobs API before it starts, and every job it
submits carries the service's versions (``SUBMITTER_ENV``), which the sweep's driver
compares with its own image's before it does anything.
"""

from __future__ import annotations

import json
import os
import sys
from importlib.metadata import PackageNotFoundError, version

SUBMITTER_ENV = "DICESWEEP_SUBMITTER_VERSIONS"  # JSON: the service's ``stack_versions()``


def package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "absent"


def stack_versions() -> dict[str, str]:
    """The versions that must agree across the deployment (read without importing Ray)."""
    return {
        "dicesweep": package_version("dicesweep"),
        "ray": package_version("ray"),
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
    }


def skew(ours: dict[str, str], theirs: dict[str, str], here: str, there: str) -> str | None:
    """A message naming every version that differs between ``here`` and ``there``, or None."""
    differing = [
        f"{name} {theirs[name]} on {there} but {ours.get(name, 'absent')} on {here}"
        for name in sorted(theirs)
        if theirs[name] != ours.get(name)
    ]
    if not differing:
        return None
    return (
        f"version skew: {'; '.join(differing)}. Deploy one release of the images "
        "(API, Ray head and workers) together"
    )


def submitter_skew() -> str | None:
    """In a sweep's driver: how its versions differ from the service that submitted it
    (None when they agree, or when no service submitted it)."""
    submitted = os.environ.get(SUBMITTER_ENV)
    if not submitted:
        return None
    return skew(stack_versions(), json.loads(submitted), "the Ray cluster", "the service")
