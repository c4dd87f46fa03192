"""A sweep's progress as ``Sweep.wait`` and ``dicesweep submit --wait`` show it: a bar of
the trials ended with the sweep's state beside it (tqdm's notebook widget in Jupyter
where ipywidgets is installed, text elsewhere), or a line per change in a log.

tqdm, not rich: in Jupyter without ipywidgets (no extra installs it) rich draws nothing,
tqdm its text bar."""

from __future__ import annotations

import warnings
from typing import Any

NO_TRIAL_LEARNED = "no trial learned"  # no best: every scored trial is degenerate


def state_line(sweep: dict[str, Any]) -> str:
    """``running (stage tune): 1 done, 1 running, 0 failed, best eval_f1 84.21``."""
    counts = sweep["trials"]
    best = sweep.get("best_trial")
    tuning = sweep.get("tuning")  # a two-stage sweep: which stage runs
    stage = f" (stage {tuning['stage']})" if tuning else ""
    state = f"{sweep['status']}{stage}: {counts['done']} done, {counts['running']} running, "
    state += f"{counts['failed']} failed"
    if counts.get("stopped"):
        state += f", {counts['stopped']} stopped"
    if best:
        state += f", best eval_f1 {best['eval_f1']:.2f}"
    elif counts["done"]:
        state += f", {NO_TRIAL_LEARNED}"
    return state


class TrialsBar:
    """A bar over ``total`` trials, shown while used as a context manager when
    ``enabled``; ``show`` moves it to a sweep's state (the API's JSON). Without the bar,
    ``lines`` prints the state (``state_line``) on stdout each time it changes."""

    def __init__(self, total: int, enabled: bool = True, lines: bool = False) -> None:
        self.total, self.enabled, self.lines = total, enabled, lines
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
        """Trials ended (done, failed, stopped) and the state in words (``state_line``);
        drawn again only when they change (a notebook keeps every drawing in its output)."""
        counts = sweep["trials"]
        # stopped: absent from a service of before the count
        ended = counts["done"] + counts["failed"] + counts.get("stopped", 0)
        state = state_line(sweep)
        if (ended, state) == self._shown:
            return
        self._shown = (ended, state)
        if self._bar is None:
            if self.lines:
                print(state, flush=True)
            return
        self._bar.n = ended
        self._bar.set_postfix_str(state, refresh=False)
        self._bar.refresh()
