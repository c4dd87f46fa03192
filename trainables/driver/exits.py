"""The driver's exit codes, and the one way out of ``python -m trainables.driver``.

Final (the service marks the sweep failed, ``sweep_service.reconciler``), declared by
the driver: 1, some trials failed; 2, an invalid spec, or a trial larger than any node
the cluster can have. Any other is tried again (the service submits the sweep again,
at most ``max_resubmissions`` times): 3, the service's release differs from the
cluster's; 4, no node that holds a trial joined within ``DICESWEEP_CLUSTER_WAIT_S``;
5, MLflow did not answer within ``DICESWEEP_MLFLOW_OUTAGE_S``; 70, anything else the
driver did not foresee (Python's own 1 for an unhandled exception would read as
"trials failed"); 130, interrupted; a signal's, the driver killed.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from typing import NoReturn

from trainables.driver.mlflow_wait import TrackingAwayError

# 1, some trials failed (``run.report``); 2, an invalid spec or too large a trial: the
# service's ``FINAL_EXIT_CODES`` are these.
FINAL_EXIT_CODES = frozenset({1, 2})
EXIT_NO_TRACKING = 5
EXIT_CRASHED = 70  # sysexits' EX_SOFTWARE


def run_declared(main: Callable[[], object]) -> NoReturn:
    """Run ``main`` and exit with the code it declares (``sys.exit(n)``); a failure it
    did not declare exits ``EXIT_NO_TRACKING`` (MLflow away) or ``EXIT_CRASHED``, its
    traceback on stderr and its reason on the last line (what the sweep's message
    shows)."""
    try:
        main()
    except SystemExit as exiting:
        if exiting.code is None or isinstance(exiting.code, int):
            raise
        # sys.exit("text") from a library: Python would print it and exit 1.
        print(exiting.code, file=sys.stderr)
        sys.exit(EXIT_CRASHED)
    except TrackingAwayError as away:
        print(one_line(away), file=sys.stderr, flush=True)
        sys.exit(EXIT_NO_TRACKING)
    except Exception as error:
        traceback.print_exc()
        print(one_line(error), file=sys.stderr, flush=True)
        sys.exit(EXIT_CRASHED)
    sys.exit(0)


def one_line(error: BaseException) -> str:
    """``"ValidationError: 1 validation error ... cluster_wait_s Input should be ..."``:
    the error's type and its message's lines joined, the last line of the driver's log
    (what the sweep's message shows, ``sweep_service.failures``)."""
    said = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
    return f"{type(error).__name__}: {said}" if said else type(error).__name__
