"""The rounds of a sweep whose seeds run until decided (``seeds: {until: decided}``):
further stages of the sweep (its final one, after stage 1 with ``tune``), one ``Tuner``
per round over the losses and seeds the rule still needs
(``search_spaces.sequential.rounds``), each in its own folder ``<sweep id>/look-<k>``.

A round that ran to its end is read back from its folder, never run again; the next
round is planned again from the trials read back, so a driver killed between looks
resumes at the round it was in, without rerunning a finished seed. Each round's trials
are the sweep's: one trial logger, one MLflow run each, in the one table.
"""

from __future__ import annotations

import sys
from typing import Any

from search_spaces.contract import said
from search_spaces.reports import final_rows, loss_label
from search_spaces.reports.sequential import loss_looks
from search_spaces.sequential import Round, first_round, next_round
from search_spaces.settings import DicesweepSettings
from search_spaces.spec import BASELINE, SweepSpec, expand_losses
from search_spaces.tuning import loss_key
from trainables.driver.cluster import count_unfinished, with_configs
from trainables.driver.reports import collect_rows
from trainables.driver.stages import StageInterrupted, new_tuner, restored_tuner, trainable_of


def round_path(storage: str, sweep_id: str, look: int) -> str:
    """Where Tune keeps round ``look``'s experiment."""
    return f"{storage}/{sweep_id}/look-{look}"


def run_rounds(
    spec: SweepSpec,
    sweep_id: str,
    logger: Any,
    settings: DicesweepSettings,
    started_at: float,
    chosen: dict[str, dict[str, Any]] | None = None,
) -> list[Any]:
    """Every round's results, in order, each round run (or resumed, or read back) in
    turn until the rule stops every loss; with ``tune``, the losses stage 1 ``chosen``
    settings for, at them.

    Raises:
        StageInterrupted: a round stopped with trials unfinished.
    """
    assert spec.seeds_until is not None  # only seeds until decided run in rounds
    rule = spec.seeds_until.rule()
    points = {
        loss_label(point): point
        for point in expand_losses(spec)
        if chosen is None or loss_key(point) in chosen
    }
    baseline = loss_label(BASELINE)
    others = [label for label in points if label != baseline]
    results: list[Any] = []
    current: Round | None = first_round(rule, baseline, others)
    while current is not None:
        results += run_round(spec, sweep_id, logger, settings, started_at, current, points, chosen)
        rows, _ = collect_rows(results)
        looks = loss_looks(final_rows(rows), spec.search.metric, spec.seeds_until)
        current = next_round(rule, current, looks)
    return results


def run_round(
    spec: SweepSpec,
    sweep_id: str,
    logger: Any,
    settings: DicesweepSettings,
    started_at: float,
    planned: Round,
    points: dict[str, dict[str, Any]],
    chosen: dict[str, dict[str, Any]] | None,
) -> list[Any]:
    """One round's results: read back when it ran to its end, else run (or resumed).

    Raises:
        StageInterrupted: the round stopped with trials unfinished.
    """
    from ray import tune

    from trainables.driver.tune_search import round_param_space

    path = round_path(settings.storage_path, sweep_id, planned.look)
    seeds = f"seeds {planned.seeds[0]}-{planned.seeds[-1]}"
    if tune.Tuner.can_restore(path) and not count_unfinished(path, planned.trials):
        print(said(sweep_id, f"look {planned.look} done, read back from {path}"), file=sys.stderr)
        restored = tune.Tuner.restore(path, trainable=trainable_of(spec)).get_results()
        return with_configs(restored, path)
    print(
        said(sweep_id, f"round {planned.look}: {', '.join(planned.labels)} at {seeds}"),
        file=sys.stderr,
    )
    if tune.Tuner.can_restore(path):
        tuner = restored_tuner(spec, sweep_id, path)
    else:
        losses = [points[label] for label in planned.labels]
        space = round_param_space(spec, losses, planned.seeds, sweep_id=sweep_id, chosen=chosen)
        folder = (f"look-{planned.look}", f"{settings.storage_path}/{sweep_id}")
        tuner = new_tuner(spec, space, folder, planned.trials, logger, started_at, "final")
    results = tuner.fit()
    logger.flush()
    unfinished = count_unfinished(path, planned.trials)
    if unfinished:
        raise StageInterrupted(unfinished)
    return with_configs(results, path)
