"""The ``dicesweep`` commands that talk to a running service, on ``sweep_service.Client``:
``submit`` (``--wait`` follows the sweep to its end), ``status``, ``list``, ``trials``,
``cancel``. What they print is for a person; ``--json`` prints the API's JSON. A failed
sweep's ``status`` says its reason first and exits 1; ``--log`` adds its driver's log.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from sweep_service.client import FINISHED, Client, Sweep
from sweep_service.progress_bar import NO_TRIAL_LEARNED, TrialsBar


def submit(spec: dict[str, Any], wait: bool, as_json: bool = False) -> int:
    """Submit ``spec``; print the sweep (``as_json``: the service's JSON), or with ``wait``
    follow it to its end (exit 0 when it succeeded, 1 otherwise). Ctrl-C while
    following stops following, not the sweep, and says so (exit 130)."""
    with Client() as client:
        sweep = client.submit(spec)
        if as_json and not wait:
            print(json.dumps(sweep.info, indent=2))
            return 0
        info = sweep.info
        headline = f"sweep {sweep.id} ({info['name']}): {info['trial_count']} trials"
        if not wait:
            print(headline)
            print(f"status: {info['status']}")
            print(f"page:   {client.absolute(info['links']['page'])}")
            print(f"follow: dicesweep status {sweep.id}")
            return 0
        try:  # from its first line: a Ctrl-C once the sweep is named is a follower's
            print(headline, flush=True)
            final = follow(sweep)
        except KeyboardInterrupt:
            print(
                f"stopped following; sweep {sweep.id} goes on running "
                f"(dicesweep status {sweep.id}; dicesweep cancel {sweep.id} stops it)",
                file=sys.stderr,
            )
            return 130
    best = final.get("best_trial")
    if best:
        shown = f"; best {best['loss']} seed={best['seed']} eval_f1={best['eval_f1']:.2f}"
    else:
        shown = f"; {NO_TRIAL_LEARNED}" if final["trials"]["done"] else ""
    print(f"sweep {final['id']}: {final['status']}{shown}")
    chosen = (final.get("tuning") or {}).get("chosen") or {}
    constant = (final.get("tuning") or {}).get("constant") or []
    for label, settings in chosen.items():
        shown = ", ".join(f"{name}={value:g}" for name, value in settings.items())
        flag = " (every stage-1 trial constant: the best of them)" if label in constant else ""
        print(f"  {label}: {shown}{flag}")
    if final.get("message") and final["status"] != "succeeded":
        print(final["message"], file=sys.stderr)
    return 0 if final["status"] == "succeeded" else 1


def follow(sweep: Sweep) -> dict[str, Any]:
    """Poll the sweep until it has finished, with ``Sweep.wait``'s bar on a terminal and
    a line per change otherwise; returns its last state."""
    interactive = sys.stdout.isatty()
    total = int(sweep.info["trial_count"])
    with TrialsBar(total, enabled=interactive, lines=not interactive) as bar:
        for state in sweep.states():
            bar.show(state)
    return sweep.info


def status(sweep_id: str, as_json: bool = False, log: bool = False) -> int:
    """A sweep's status, trial counts, best trial and links (``as_json``: the service's
    JSON); with ``log``, its driver's log after them. Exit 1 for a failed sweep, whose
    reason is the first line, 0 otherwise."""
    with Client() as client:
        handle = client.sweep(sweep_id)
        sweep = handle.info
        page = client.absolute(sweep["links"]["page"])
        driver_log = handle.log() if log else ""
    failed = sweep["status"] == "failed"
    if as_json:
        print(json.dumps(sweep, indent=2))
    else:
        _summary(sweep, page, failed)
    if log:
        print(driver_log.rstrip("\n") or "(no log yet: the sweep's job has not started)")
    elif failed and not as_json:
        print(f"its log: dicesweep status --log {sweep['id']}")
    return 1 if failed else 0


def _summary(sweep: dict[str, Any], page: str, failed: bool) -> None:
    """``status``'s lines for a person; a failed sweep's reason first."""
    if failed:
        print(f"failed: {sweep.get('message') or 'no reason recorded'}")
    counts, best = sweep["trials"], sweep.get("best_trial")
    lines = [
        ("sweep", f"{sweep['id']} ({sweep['name']})"),
        ("status", sweep["status"]),
        (
            "trials",
            f"{counts['done']} done, {counts['running']} running, {counts['failed']} failed, "
            f"{counts['pending']} pending of {sweep['trial_count']}",
        ),
        ("best", _best(best) if best else _no_best(sweep)),
        ("message", "" if failed else sweep.get("message") or ""),
        ("page", page),
        ("mlflow", sweep["links"].get("mlflow_run") or ""),
    ]
    for label, value in lines:
        if value:
            print(f"{label + ':':<8} {value}")


def _no_best(sweep: dict[str, Any]) -> str:
    """``status``'s best line without a best trial: ``none yet`` while the sweep runs,
    ``none (the sweep ended)`` once it has, naming why where trials were done."""
    if sweep["status"] not in FINISHED:
        return "none yet"
    learned = f"; {NO_TRIAL_LEARNED}" if sweep["trials"]["done"] else ""
    return f"none (the sweep ended{learned})"


def _best(best: dict[str, Any]) -> str:
    """``dsc(alpha=0.1) seed=0 eval_f1=84.21 (mrpc, original)``."""
    return (
        f"{best['loss']} seed={best['seed']} eval_f1={best['eval_f1']:.2f} "
        f"({best['dataset']}, {best['variant']})"
    )


def list_sweeps(limit: int, as_json: bool = False) -> int:
    """The newest ``limit`` sweeps, one line each (``as_json``: the API's page)."""
    with Client() as client:
        page = client.sweeps(limit)
    if as_json:
        print(json.dumps(page, indent=2))
        return 0
    rows = [
        (s["id"], s["name"], s["status"], str(s["trial_count"]), s["created_at"][:19])
        for s in page["data"]
    ]
    _table(("id", "name", "status", "trials", "submitted"), rows)
    if page["count"] > len(rows):
        print(f"({len(rows)} of {page['count']}; --limit shows more)", file=sys.stderr)
    return 0


def trials(sweep_id: str, as_json: bool = False) -> int:
    """A sweep's trials, one line each: the optimiser steps each ran and why it stopped,
    with why a failed one failed or why a degenerate one is (``as_json``: the API's
    trials, every page's in one ``{"data", "count"}``)."""
    with Client() as client:
        found = Sweep(client, {"id": sweep_id}).trials_json()
    if as_json:
        print(json.dumps({"data": found, "count": len(found)}, indent=2))
        return 0
    # A two-stage sweep's trials say their stage and the settings they trained at.
    staged = any(trial.get("tuned") for trial in found)
    rows = []
    for trial in found:
        f1, steps = trial["metrics"].get("eval_f1"), trial["metrics"].get("optimizer_steps")
        stage = [f"{trial['stage']}({_settings(trial['tuned'])})"] if staged else []
        rows.append(
            (
                trial["loss"],
                trial["dataset"],
                trial["variant"],
                str(trial["seed"]),
                *stage,
                trial["status"],
                "" if f1 is None else f"{f1:.2f}",
                "" if steps is None else str(int(steps)),
                trial.get("failure_reason")
                or _degenerate(trial.get("degenerate_reason"))
                or trial.get("stop_reason")
                or "",
            )
        )
    header = ("loss", "dataset", "variant", "seed", *(["stage"] if staged else []))
    _table((*header, "status", "eval_f1", "steps", "reason"), rows)
    return 0


def _settings(tuned: dict[str, float]) -> str:
    """``learning_rate=3e-05,epochs=2``: a trial's tuned settings, without spaces."""
    return ",".join(f"{name}={value:g}" for name, value in tuned.items())


def _degenerate(reason: str | None) -> str:
    """A degenerate trial's reason as the ``trials`` table shows it, else nothing."""
    return f"degenerate: {reason}" if reason else ""


def cancel(sweep_id: str) -> int:
    with Client() as client:
        sweep = Sweep(client, {"id": sweep_id}).cancel()
    print(f"sweep {sweep['id']}: {sweep['status']}")
    return 0


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    from tabulate import tabulate

    print(tabulate(rows, headers=header, tablefmt="plain", disable_numparse=True))
