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
    logger = TrialLogger(LINK, outage_s=0)  # a failing write is given up at once
    made: list[tuple[int, str]] = []

    def write(n: int) -> None:
        made.append((n, threading.current_thread().name))

    logger.later(lambda: write(1))
    logger.later(lambda: 1 / 0)
    logger.later(lambda: write(2))
    with caplog.at_level(logging.ERROR, logger="trainables.driver.outage"):
        logger.flush()
    assert [n for n, _ in made] == [1, 2]
    assert {thread for _, thread in made} == {"trial-logger"}
    assert "MLflow write" in caplog.text and "ZeroDivisionError" in caplog.text


def test_a_write_the_store_refuses_is_not_tried_again(caplog: pytest.LogCaptureFixture) -> None:
    from mlflow.exceptions import RestException

    logger = TrialLogger(LINK)  # an outage would be waited out for an hour
    tries: list[int] = []

    def refused_write() -> None:
        tries.append(1)
        raise RestException({"error_code": "INVALID_PARAMETER_VALUE", "message": "too long"})

    made: list[int] = []
    logger.later(refused_write)
    logger.later(lambda: made.append(2))
    with caplog.at_level(logging.ERROR, logger="trainables.driver.outage"):
        logger.flush()
    assert tries == [1] and made == [2]
    assert "MLflow refused a write" in caplog.text and "too long" in caplog.text


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


def test_the_table_as_parent_metrics_with_safe_names() -> None:
    import pandas as pd

    from search_spaces.reports import paper_table
    from trainables.driver.reports import metric_key, table_metrics

    assert metric_key("dsc(alpha=0.1)") == "dsc_alpha0.1"
    assert metric_key("+positive&negative") == "plus_positive_and_negative"
    assert metric_key("-negative") == "-negative"
    assert metric_key(0.3) == "0.3"
    rows = pd.DataFrame(
        [
            {
                "loss": loss,
                "loss_name": loss[:3],
                "dataset": "mrpc",
                "variant": variant,
                "seed": seed,
                "eval_f1": value + seed,
            }
            for loss, variant, value in (
                ("ce", "original", 80.0),
                ("ce", "+positive", 70.0),
                ("dsc(alpha=0.1)", "original", 83.0),
                ("dsc(alpha=0.1)", "+positive", 75.0),
            )
            for seed in (0, 2)
        ]
    )
    metrics = table_metrics(paper_table(rows))
    assert metrics["best_eval_f1/ce"] == 81.0
    assert metrics["best_eval_f1/dsc_alpha0.1"] == 84.0
    assert metrics["grid/dsc_alpha0.1/plus_positive/delta"] == 5.0
    assert metrics["grid/ce/original/std"] == pytest.approx(2**0.5)
    assert "grid/ce/original/delta" not in metrics  # the baseline has none
    assert len(metrics) == 2 + 4 * 2 + 2


def test_a_cell_with_degenerate_seeds_counts_them_on_the_parent() -> None:
    import pandas as pd

    from search_spaces.reports import paper_table
    from trainables.driver.reports import table_metrics

    rows = pd.DataFrame(
        [
            {
                "loss": loss,
                "loss_name": loss,
                "dataset": "mrpc",
                "variant": "original",
                "seed": seed,
                "eval_f1": f1,
                "eval_baseline_f1": 81.2,
                "eval_baseline_accuracy": 68.4,
                "eval_top_prediction_share": 99.5 if f1 == 89.0 else 80.0,
            }
            for loss, seed, f1 in (("ce", 0, 84.0), ("ce", 1, 86.0), ("dsc", 0, 89.0))
        ]
    )
    metrics = table_metrics(paper_table(rows))
    assert metrics["grid/ce/mrpc/mean"] == 85.0 and metrics["best_eval_f1/ce"] == 85.0
    # dsc's constant seed: counted, out of its cell's mean (none left), no best of its row.
    assert metrics["grid/dsc/mrpc/degenerate"] == 1.0
    assert "grid/dsc/mrpc/mean" not in metrics and "best_eval_f1/dsc" not in metrics
