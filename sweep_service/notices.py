"""What a running sweep's driver says it waits for, read from its job's log into the
sweep's message.

While a driver waits (for MLflow to answer, ``trainables.driver.mlflow_wait``; for a
node that holds a trial) it prints ``sweep <id>: waiting for ...`` every 15 s. Such a
line is the driver's current notice while no other line of the driver's own follows
it: ``sweep <id>: ...`` (``MLflow answered at ...`` ends that wait), or a line of its
progress display (``[0:01:12] 3/8 trials (38%): ...``, once trials are scheduled).
"""

from __future__ import annotations

import re

WAITING = "waiting for "
MAX_NOTICE_CHARS = 300
# A line of the driver's progress display (``trainables.driver.progress``), piped.
PROGRESS_LINE = r"\[\d+:\d\d:\d\d\] \d+/\d+ trials.*"


def current_notice(log: str, sweep_id: str) -> str | None:
    """The text of the last ``sweep <sweep_id>: waiting for ...`` line of ``log`` when
    it is the driver's last line of its own, at most ``MAX_NOTICE_CHARS``; else None."""
    own = re.compile(rf"^(?:sweep {re.escape(sweep_id)}: (.*)|{PROGRESS_LINE})$", re.M)
    said = own.findall(log)
    if not said or not said[-1].startswith(WAITING):
        return None
    notice = str(said[-1]).strip()
    return notice if len(notice) <= MAX_NOTICE_CHARS else notice[: MAX_NOTICE_CHARS - 1] + "…"


def is_notice(message: str | None) -> bool:
    """Whether a sweep's stored message is a driver's notice (``current_notice``)."""
    return bool(message) and str(message).startswith(WAITING)
