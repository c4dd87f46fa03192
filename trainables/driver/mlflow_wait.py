"""A driver's start through an MLflow outage: it waits for an MLflow server that does
not answer, as the trial logger waits mid-run, rather than dying on its first request.

While it waits it says so every ``NOTICE_EVERY_S`` on a line of its own,
``sweep <id>: waiting for MLflow since 13:52:07 UTC: ...``, a notice the service reads
from the job's log into the sweep's message (``search_spaces.contract.current_notice``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import urlsplit

from search_spaces.contract import WAITING

T = TypeVar("T")

# How often the driver asks MLflow while it waits, and tells so.
POLL_S = 2.0
NOTICE_EVERY_S = 15.0
# One probe's wait for an answer: a server that answers at all does so at once.
PROBE_TIMEOUT_S = 5


class TrackingAwayError(RuntimeError):
    """MLflow did not answer within the driver's outage bound (``mlflow_outage_s``)."""


def shown_uri(tracking_uri: str) -> str:
    """``tracking_uri`` without a user or password it may carry."""
    parts = urlsplit(tracking_uri)
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=host).geturl()


def answers(tracking_uri: str) -> bool:
    """Whether the tracking store at ``tracking_uri`` answers: an MLflow server's
    ``/health`` with any status below 500 within ``PROBE_TIMEOUT_S`` (a refusal is an
    answer), asked once, without the client's retries; always for a store that is no
    server (a local file or database: nothing to wait for)."""
    if urlsplit(tracking_uri).scheme not in ("http", "https"):
        return True
    from mlflow.utils.credentials import get_default_host_creds
    from mlflow.utils.rest_utils import http_request

    try:
        response = http_request(
            get_default_host_creds(tracking_uri),
            "/health",
            "GET",
            max_retries=0,
            timeout=PROBE_TIMEOUT_S,
            raise_on_status=False,
        )
    except Exception:  # what the transport raises: refused, reset, timed out
        return False
    return int(response.status_code) < 500


def utc_clock(seconds: float) -> str:
    """``13:52:07`` (UTC) of ``seconds`` since the epoch."""
    return time.strftime("%H:%M:%S", time.gmtime(seconds))


def through_outage(
    step: Callable[[], T],
    tracking_uri: str,
    outage_s: float,
    notify: Callable[[str], object],
) -> T:
    """``step()`` (requests to MLflow) once the server at ``tracking_uri`` answers. While
    it does not, ``notify`` gets ``waiting for MLflow since HH:MM:SS UTC: ...`` at once
    and every ``NOTICE_EVERY_S``, and ``MLflow answered at ...`` when it does. A step
    that fails while the server answers (a refusal, a bug) fails at once.

    Raises:
        TrackingAwayError: the server did not answer for ``outage_s`` seconds.
        Exception: what ``step`` raised while the server answered.
    """
    since: float | None = None  # time.time() of the first failure
    started = noticed = 0.0  # time.monotonic() of that failure and of the last notice
    while True:
        if answers(tracking_uri):
            try:
                result = step()
            except Exception:
                if answers(tracking_uri):
                    raise
            else:
                if since is not None:
                    waited = time.monotonic() - started
                    notify(f"MLflow answered at {utc_clock(time.time())} UTC, after {waited:.0f} s")
                return result
        now = time.monotonic()
        if since is None:
            since, started, noticed = time.time(), now, now - NOTICE_EVERY_S
        waited = now - started
        where = f"{shown_uri(tracking_uri)} does not answer"
        if waited >= outage_s:
            raise TrackingAwayError(
                f"MLflow at {shown_uri(tracking_uri)} did not answer from {utc_clock(since)} "
                f"UTC for {outage_s:g} s (DICESWEEP_MLFLOW_OUTAGE_S)"
            )
        if now - noticed >= NOTICE_EVERY_S:
            notify(
                f"{WAITING}MLflow since {utc_clock(since)} UTC: {where} "
                f"({waited:.0f} s of {outage_s:g}, DICESWEEP_MLFLOW_OUTAGE_S)"
            )
            noticed = now
        time.sleep(POLL_S)
