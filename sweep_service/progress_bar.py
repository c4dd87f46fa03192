"""``Sweep.wait``'s progress: a bar of the trials ended, with the sweep's state beside it
(tqdm's notebook widget in Jupyter where ipywidgets is installed, text elsewhere)."""

from __future__ import annotations

import warnings
from typing import Any


class TrialsBar:
    """A bar over ``total`` trials, shown while used as a context manager when
    ``enabled``; ``show`` moves it to a sweep's state (the API's JSON)."""

    def __init__(self, total: int, enabled: bool = True) -> None:
        self.total, self.enabled = total, enabled
        self._bar: Any = None
        self._shown: tuple[int, str] | None = None

    def __enter__(self) -> TrialsBar:
        if self.enabled:
            with warnings.catch_warnings():
                # Without ipywidgets tqdm.auto draws text, and warns that it does.
                warnings.simplefilter("ignore")
                from tqdm.auto import tqdm

                self._bar = tqdm(total=self.total, unit="trial", desc="trials")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.close()

    def show(self, sweep: dict[str, Any]) -> None:
        """Trials ended (done, failed, stopped) and the status, counts and best in words;
        drawn again only when they change (a notebook keeps every drawing in its output)."""
        if self._bar is None:
            return
        counts = sweep["trials"]
        stopped = counts.get("stopped", 0)  # absent from a service of before the count
        ended = counts["done"] + counts["failed"] + stopped
        state = f"{sweep['status']}; {counts['running']} running, {counts['failed']} failed"
        state += f", {stopped} stopped" if stopped else ""
        if best := sweep.get("best_trial"):
            state += f", best {best['loss']} eval_f1 {best['eval_f1']:.2f}"
        if (ended, state) == self._shown:
            return
        self._shown = (ended, state)
        self._bar.n = ended
        self._bar.set_postfix_str(state, refresh=False)
        self._bar.refresh()
