"""Why a sweep's driver job failed, in one line for the sweep's ``message``.

Ray's message for a failed job carries up to 20,000 characters of the driver's log:
tracebacks, Ray's own lines, absolute paths of the server. The sweep's message keeps
the reason only: the driver's exit code (the Jobs API's ``driver_exit_code``) and its
last line of its own (a traceback's last line is its exception), server paths cut to
their last part. The whole log
stays with the job, for the sweep's owner (``GET /v1/sweeps/{id}/log``).
"""

from __future__ import annotations

import re

MAX_REASON_CHARS = 300
# Ray's preamble before the log tail it quotes.
_RAY_PREAMBLE = re.compile(r"^.*?last available logs[^:\n]*:\s*", re.S)
# A traceback's lines and Ray's own that say nothing of the reason.
_NOISE = re.compile(
    r"^(Traceback \(most recent call last\)|File \"|\^+$|~+|During handling|"
    r"Job entrypoint command failed|"
    r"The above exception|\(\w+ pid=|\[\d{4}-\d\d-\d\d|\d{4}-\d\d-\d\d \d\d:)"
)
# An absolute path (two parts or more): shown by its last part.
_ABSOLUTE_PATH = re.compile(r"(?<![\w.~])/(?:[^\s/'\"(),:;]+/)+([^\s/'\"(),:;]*)")


def driver_failure(message: str, exit_code: int | None) -> str:
    """``"exit code 2: SpecError: task.dataset[0].path '…/train.conll' is not under
    …"``: the driver's ``exit_code`` (None: it did not exit, e.g. its job was stopped)
    and the last line of the log ``message`` (Ray's, for a failed job) quotes that is
    neither a traceback's frame nor Ray's, its absolute paths cut to ``…/<last part>``,
    at most ``MAX_REASON_CHARS``; Ray's own first line when it quotes no log."""
    tail = _RAY_PREAMBLE.sub("", message, count=1)
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    reasons = [line for line in lines if not _NOISE.match(line)]
    reason = reasons[-1] if reasons else (message.strip().splitlines() or ["no reason given"])[0]
    reason = _ABSOLUTE_PATH.sub(lambda found: f"…/{found.group(1)}", reason)
    if len(reason) > MAX_REASON_CHARS:
        reason = reason[: MAX_REASON_CHARS - 1] + "…"
    return reason if exit_code is None else f"exit code {exit_code}: {reason}"
