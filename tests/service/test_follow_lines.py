"""``dicesweep submit --wait`` away from a terminal (a log, a pipe): one line per change
of the sweep's state, in the words of ``state_line``, on the client's own polling."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sweep_service import remote
from sweep_service.client import Sweep


def state(status: str, done: int, running: int, best: float | None = None) -> dict[str, Any]:
    trials = {"done": done, "running": running, "failed": 0, "pending": 2 - done - running}
    best_trial = None if best is None else {"loss": "dsc", "eval_f1": best}
    return {"id": "sw-1", "status": status, "trials": trials, "best_trial": best_trial}


class PolledSweep(Sweep):
    """A sweep whose polls answer ``answers`` in turn (no service, no sleeping)."""

    def __init__(self, answers: list[dict[str, Any]]) -> None:
        super().__init__(client=None, info={"id": "sw-1", "trial_count": 2})  # type: ignore[arg-type]
        self.answers = answers

    def states(self, poll_s: float = 0.0) -> Iterator[dict[str, Any]]:
        for answer in self.answers:
            self.info = answer
            yield answer


def test_following_away_from_a_terminal_prints_each_change_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    sweep = PolledSweep(
        [
            state("pending", 0, 0),
            state("running", 0, 2),
            state("running", 0, 2),  # unchanged: not printed again
            state("running", 1, 1, best=84.213),
            state("succeeded", 2, 0, best=85.0),
        ]
    )
    final = remote.follow(sweep)
    assert final["status"] == "succeeded"
    assert capsys.readouterr().out.splitlines() == [
        "pending: 0 done, 0 running, 0 failed",
        "running: 0 done, 2 running, 0 failed",
        "running: 1 done, 1 running, 0 failed, best eval_f1 84.21",
        "succeeded: 2 done, 0 running, 0 failed, best eval_f1 85.00",
    ]
