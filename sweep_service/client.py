"""The ``dicesweep`` commands that talk to a running service over REST: ``submit``
(``--wait`` follows the sweep to its end), ``status``, ``list``, ``trials``, ``cancel``.

The address is ``DICESWEEP_API_URL``, else ``http://DICESWEEP_HOST:DICESWEEP_PORT``
(127.0.0.1:8000 by default, as ``dicesweep serve`` listens); ``DICESWEEP_API_KEY`` is
sent as a bearer token. A service that cannot be reached, or a refusal, is one line
on standard error naming the address or the service's reason.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import httpx

POLL_SECONDS = 2.0
FINISHED = {"succeeded", "failed", "cancelled"}
NO_TRIAL_LEARNED = "no trial learned"  # no best: every scored trial is degenerate


class ClientError(Exception):
    """A request that did not succeed, as one line for the terminal."""

    exit_code = 1


class InvalidSpecError(ClientError):
    """The service refused the spec: said as ``dicesweep run`` says it, with its exit code."""

    exit_code = 2


def api_url() -> str:
    """The service's address: ``DICESWEEP_API_URL``, else host and port."""
    if url := os.environ.get("DICESWEEP_API_URL"):
        return url.rstrip("/")
    host = os.environ.get("DICESWEEP_HOST", "127.0.0.1")
    host = "127.0.0.1" if host in ("0.0.0.0", "::") else host  # where a server listens
    return f"http://{host}:{os.environ.get('DICESWEEP_PORT', '8000')}"


class Api:
    """An HTTP client of the service whose failures are ``ClientError``s."""

    def __init__(self, http: httpx.Client) -> None:
        self.http = http

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as error:
            raise ClientError(
                f"cannot reach the dicesweep service at {self.http.base_url} "
                f"({type(error).__name__}: {error}); start it with `dicesweep serve` or set "
                "DICESWEEP_API_URL"
            ) from None
        if response.is_success:
            return response.json()
        if refused := _spec_refusal(response):
            raise InvalidSpecError(refused)
        raise ClientError(f"{method} {path}: HTTP {response.status_code}: {_reason(response)}")

    def absolute(self, link: str) -> str:
        """A link of the service's (``/sweeps/ID``) as an address to open."""
        return str(self.http.base_url.join(link))


def _spec_refusal(response: httpx.Response) -> str | None:
    """An ``invalid_spec`` refusal's issues in the words of ``SpecError``, else None."""
    from search_spaces.errors import SpecError, SpecIssue, format_path

    try:
        body = response.json()
    except ValueError:
        return None
    if not isinstance(body, dict) or body.get("code") != "invalid_spec":
        return None
    issues = [
        SpecIssue(format_path(item.get("loc", [])[1:]), str(item.get("msg")))  # after "body"
        for item in body.get("detail") or []
    ]
    return str(SpecError(issues))


def _reason(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason_phrase
    detail = body.get("detail") if isinstance(body, dict) else body
    if isinstance(detail, list):  # validation issues: field and rule each
        return "; ".join(
            f"{'.'.join(str(p) for p in item.get('loc', [])[1:])}: {item.get('msg')}"
            for item in detail
        )
    return str(detail)


@contextmanager
def connect() -> Iterator[Api]:
    key = os.environ.get("DICESWEEP_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with httpx.Client(base_url=api_url(), headers=headers, timeout=30) as http:
        yield Api(http)


def submit(spec: dict[str, Any], wait: bool, as_json: bool = False) -> int:
    """Submit ``spec``; print the sweep (``as_json``: the service's JSON), or with ``wait``
    follow it to its end (exit 0 when it succeeded, 1 otherwise)."""
    with connect() as api:
        sweep = api.call("POST", "/v1/sweeps", json=spec)
        if as_json and not wait:
            print(json.dumps(sweep, indent=2))
            return 0
        print(f"sweep {sweep['id']} ({sweep['name']}): {sweep['trial_count']} trials")
        if not wait:
            print(f"status: {sweep['status']}")
            print(f"page:   {api.absolute(sweep['links']['page'])}")
            print(f"follow: dicesweep status {sweep['id']}")
            return 0
        final = follow(api, sweep["id"], sweep["trial_count"])
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


def follow(api: Api, sweep_id: str, total: int) -> dict[str, Any]:
    """Poll the sweep until it has finished, with a progress bar on a terminal and a
    line per change otherwise; returns its last state."""
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    interactive = sys.stdout.isatty()
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[state]}"),
    )
    last_line = ""
    with Progress(*columns, disable=not interactive, transient=False) as progress:
        task = progress.add_task("trials", total=total, state="")
        while True:
            sweep = api.call("GET", f"/v1/sweeps/{sweep_id}")
            counts = sweep["trials"]
            best = sweep.get("best_trial")
            tuning = sweep.get("tuning")  # a two-stage sweep: which stage runs
            stage = f" (stage {tuning['stage']})" if tuning else ""
            state = (
                f"{sweep['status']}{stage}: {counts['done']} done, {counts['running']} running, "
            )
            state += f"{counts['failed']} failed"
            if best:
                state += f", best eval_f1 {best['eval_f1']:.2f}"
            elif counts["done"]:
                state += f", {NO_TRIAL_LEARNED}"
            progress.update(task, completed=counts["done"] + counts["failed"], state=state)
            if not interactive and state != last_line:
                print(state, flush=True)
                last_line = state
            if sweep["status"] in FINISHED:
                return dict(sweep)
            time.sleep(POLL_SECONDS)


def status(sweep_id: str, as_json: bool = False) -> int:
    """A sweep's status, trial counts, best trial and links (``as_json``: the service's JSON)."""
    with connect() as api:
        sweep = api.call("GET", f"/v1/sweeps/{sweep_id}")
        page = api.absolute(sweep["links"]["page"])
    if as_json:
        print(json.dumps(sweep, indent=2))
        return 0
    counts, best = sweep["trials"], sweep.get("best_trial")
    lines = [
        ("sweep", f"{sweep['id']} ({sweep['name']})"),
        ("status", sweep["status"]),
        (
            "trials",
            f"{counts['done']} done, {counts['running']} running, {counts['failed']} failed, "
            f"{counts['pending']} pending of {sweep['trial_count']}",
        ),
        ("best", _best(best) if best else "none yet"),
        ("message", sweep.get("message") or ""),
        ("page", page),
        ("mlflow", sweep["links"].get("mlflow_run") or ""),
    ]
    for label, value in lines:
        if value:
            print(f"{label + ':':<8} {value}")
    return 0


def _best(best: dict[str, Any]) -> str:
    """``dsc(alpha=0.1) seed=0 eval_f1=84.21 (mrpc, original)``."""
    return (
        f"{best['loss']} seed={best['seed']} eval_f1={best['eval_f1']:.2f} "
        f"({best['dataset']}, {best['variant']})"
    )


def list_sweeps(limit: int) -> int:
    """The newest ``limit`` sweeps, one line each."""
    with connect() as api:
        page = api.call("GET", "/v1/sweeps", params={"limit": limit})
    rows = [
        (s["id"], s["name"], s["status"], str(s["trial_count"]), s["created_at"][:19])
        for s in page["data"]
    ]
    _table(("id", "name", "status", "trials", "submitted"), rows)
    if page["count"] > len(rows):
        print(f"({len(rows)} of {page['count']}; --limit shows more)", file=sys.stderr)
    return 0


def trials(sweep_id: str) -> int:
    """A sweep's trials, one line each: the optimiser steps each ran and why it stopped,
    with why a failed one failed or why a degenerate one is."""
    with connect() as api:
        found, token = [], None
        while True:
            params = {"limit": 100, **({"page_token": token} if token else {})}
            page = api.call("GET", f"/v1/sweeps/{sweep_id}/trials", params=params)
            found += page["data"]
            token = page["next_page_token"]
            if token is None:
                break
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
    with connect() as api:
        sweep = api.call("POST", f"/v1/sweeps/{sweep_id}/cancel")
    print(f"sweep {sweep['id']}: {sweep['status']}")
    return 0


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    from tabulate import tabulate

    print(tabulate(rows, headers=header, tablefmt="plain", disable_numparse=True))
