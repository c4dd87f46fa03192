"""The one way out of ``python -m trainables.driver``: the exit codes are the
contract's (``search_spaces.contract.DriverExit``), which the service reads."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from typing import NoReturn

from search_spaces.contract import DriverExit
from trainables.driver.mlflow_wait import TrackingAwayError


def run_declared(main: Callable[[], object]) -> NoReturn:
    """Run ``main`` and exit with the code it declares (``sys.exit(n)``); a failure it
    did not declare exits ``NO_TRACKING`` (MLflow away) or ``CRASHED``, its
    traceback on stderr and its reason on the last line (what the sweep's message
    shows)."""
    try:
        main()
    except SystemExit as exiting:
        if exiting.code is None or isinstance(exiting.code, int):
            raise
        # sys.exit("text") from a library: Python would print it and exit 1.
        print(exiting.code, file=sys.stderr)
        sys.exit(DriverExit.CRASHED)
    except TrackingAwayError as away:
        print(one_line(away), file=sys.stderr, flush=True)
        sys.exit(DriverExit.NO_TRACKING)
    except Exception as error:
        traceback.print_exc()
        print(one_line(error), file=sys.stderr, flush=True)
        sys.exit(DriverExit.CRASHED)
    sys.exit(DriverExit.DONE)


def one_line(error: BaseException) -> str:
    """``"ValidationError: 1 validation error ... cluster_wait_s Input should be ..."``:
    the error's type and its message's lines joined, the last line of the driver's log
    (what the sweep's message shows, ``sweep_service.failures``)."""
    said = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
    return f"{type(error).__name__}: {said}" if said else type(error).__name__
