"""The trial logger's queue: writes in the order Tune's hooks came, failures logged."""

from __future__ import annotations

import logging
import pickle
import threading

import pytest

from search_spaces.sections import TrackingLink
from trainables.driver.tracking import TrialLogger

LINK = TrackingLink(tracking_uri="sqlite:///unused.db", experiment_id="1", parent_run_id="p")


def test_writes_run_in_order_on_another_thread_and_a_failure_does_not_stop_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = TrialLogger(LINK)
    made: list[tuple[int, str]] = []

    def write(n: int) -> None:
        made.append((n, threading.current_thread().name))

    logger.later(lambda: write(1))
    logger.later(lambda: 1 / 0)
    logger.later(lambda: write(2))
    with caplog.at_level(logging.ERROR, logger="trainables.driver.tracking"):
        logger.flush()
    assert [n for n, _ in made] == [1, 2]
    assert {thread for _, thread in made} == {"trial-logger"}
    assert "MLflow write" in caplog.text and "ZeroDivisionError" in caplog.text


def test_a_restored_logger_starts_its_own_queue() -> None:
    logger = TrialLogger(LINK)
    logger.later(lambda: None)
    logger.flush()
    restored = pickle.loads(pickle.dumps(logger))  # as Tune saves and resumes it
    restored.flush()  # nothing queued: returns at once
    made: list[int] = []
    restored.later(lambda: made.append(1))
    restored.flush()
    assert made == [1]
