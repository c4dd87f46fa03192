"""The GPU check's verdicts and what it shows: each check (``Check``), the install step's
resolution read from pip's dry-run reports (``resolution``) and the one-screen summary."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TIMED_OUT = 124  # timeout(1)'s exit status: the index did not answer in time


@dataclass
class Check:
    """One verdict of the check: its name, whether it passed, and what was seen."""

    name: str
    ok: bool
    detail: str


def pip_report(
    folder: Path, name: str, wait_s: float = 0.0
) -> tuple[dict[str, Any] | None, Check | None]:
    """The report of ``scripts/gpu-check.sh``'s resolution ``name`` (``NAME.json``; its
    exit status and seconds in ``NAME.rc``, written when it ends, waited for up to
    ``wait_s``; its output in ``NAME.log``), or None with the check that says why: a
    resolution that timed out is said and passes (a slow index is not the project's
    failure), one that failed or never ended fails."""
    done = folder / f"{name}.rc"
    deadline = time.monotonic() + wait_s
    while not done.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    if not done.exists():
        return None, Check(f"resolve {name}", False, f"no answer from pip in {wait_s:.0f} s")
    status, seconds = (int(word) for word in done.read_text().split())
    if status == TIMED_OUT:
        return None, Check(f"resolve {name}", True, "skipped: the index did not answer in time")
    if status != 0:
        log = (folder / f"{name}.log").read_text().strip().splitlines()
        errors = [line for line in log if line.startswith("ERROR")] or log[-1:]
        return None, Check(f"resolve {name}", False, " ".join(errors)[:300])
    report = json.loads((folder / f"{name}.json").read_text())
    return {**report, "seconds": seconds}, None


def cuda_torch(report: dict[str, Any]) -> tuple[dict[str, Any], Check]:
    """The torch wheel pip chose for a Linux x86-64 GPU worker, and whether it is the
    CUDA build: no local version (``+cpu``) and NVIDIA's or CUDA's libraries among its
    requirements."""
    (torch,) = [p for p in report["install"] if p["metadata"]["name"] == "torch"]
    requires = torch["metadata"].get("requires_dist", [])
    cuda = [r.split(";")[0].strip() for r in requires if r.startswith(("nvidia-", "cuda-"))]
    version = torch["metadata"]["version"]
    wheel = torch["download_info"]["url"].rsplit("/", 1)[-1]
    ok = "+" not in version and bool(cuda)
    names = [re.sub(r"\[.*?\]", "", requirement) for requirement in cuda]  # extras left out
    shown = f"{wheel}, requires {', '.join(names) or 'no CUDA library'}"
    return {"wheel": wheel, "version": version, "cuda_requires": cuda}, Check(
        "resolve CUDA torch", ok, shown
    )


def extras(report: dict[str, Any]) -> tuple[dict[str, Any], Check]:
    """What the project with its train and service extras resolves to."""
    versions = {p["metadata"]["name"]: p["metadata"]["version"] for p in report["install"]}
    found = {name: versions.get(name) for name in ("dicesweep", "torch", "ray", "transformers")}
    ok = all(found.values())
    shown = f"{len(versions)} packages; " + ", ".join(f"{k} {v}" for k, v in found.items())
    return {"packages": len(versions), **found}, Check("resolve extras", ok, shown)


def resolution(folder: Path, wait_s: float) -> tuple[dict[str, Any], list[Check]]:
    """The install step's three resolutions (CUDA torch's metadata, the project's
    extras, MiniLM-L6's package) read from ``folder`` (each waited for up to ``wait_s``),
    and their checks."""
    figures: dict[str, Any] = {}
    checks: list[Check] = []
    readers = {"torch-cuda": cuda_torch, "extras": extras}
    for name in ("torch-cuda", "extras", "minilm"):
        report, failed = pip_report(folder, name, wait_s)
        if report is None:
            checks.append(failed)  # type: ignore[arg-type]
            continue
        if name in readers:
            figures[name], check = readers[name](report)
        else:
            (package,) = report["install"]
            figures[name] = {"version": package["metadata"]["version"]}
            check = Check(f"resolve {name}", True, package["download_info"]["url"].rsplit("/")[-1])
        figures[name]["seconds"] = report["seconds"]
        checks.append(check)
    return figures, checks


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def trials_table(precision: dict[str, Any]) -> Any:
    """The precision trials, one row each."""
    from rich.table import Table

    table = Table("precision", "steps", "steps/s", "peak MiB", "final loss", "vs fp32", "dev F1")
    for t in precision.get("trials", []):
        gap = t.get("loss_vs_fp32")
        table.add_row(
            t["precision"], str(t["steps"]), f"{t['steps_per_s']:.2f}", _mib(t["peak_gpu_mib"]),
            f"{t['final_loss']:.4f}", "-" if gap is None else f"{gap:.1%}", f"{t['eval_f1']:.1f}",
        )  # fmt: skip
    return table


def sweep_table(sweep: dict[str, Any]) -> Any:
    """The shared run and the one-at-a-time run of the sweep, one row each."""
    from rich.table import Table

    table = Table("sweep", "trials", "most at once", "nodes", "GPU ids", "wall s")
    for label, key in (("shared", "together"), ("one at a time", "apart")):
        if key in sweep:
            run = sweep[key]
            table.add_row(
                label, str(len(run["trials"])), str(run["most_at_once"]), str(len(run["nodes"])),
                " ".join(run["gpus"]), f"{run['wall_s']:.1f}",
            )  # fmt: skip
    if "speedup" in sweep:
        table.caption = f"gpus_per_trial {sweep['gpus_per_trial']:g}: {sweep['speedup']:.2f}x"
    return table


def print_summary(figures: dict[str, Any], checks: list[Check], out: Path) -> None:
    """The figures on one screen: the trials, the sweep, the checks."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    facts = figures["machine"]
    where = facts.get("gpu") or "CPU (dry run)"
    console.print(f"[bold]gpu-check[/] on {where}, torch {facts['torch']} (CUDA {facts['cuda']})")
    console.print(trials_table(figures["precision"]), sweep_table(figures["sweep"]))
    verdicts = Table("check", "", "seen")
    for check in checks:
        verdict = "[green]ok[/]" if check.ok else "[red]FAIL[/]"
        verdicts.add_row(escape(check.name), verdict, escape(check.detail))
    console.print(verdicts)
    failed = sum(not c.ok for c in checks)
    verdict = f"{failed} of {len(checks)} checks failed" if failed else "every check passed"
    console.print(f"gpu-check: {verdict} ({figures['seconds']:.0f} s); figures in {out}")
