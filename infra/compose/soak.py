"""The compose topology under steady use for a while: smoke sweeps submitted one after
another (two at a time), the pages and the API polled, and the memory (RSS) and open
file descriptors of the API's process (the reconciler is a thread of it) and of the
Ray head's own processes (GCS, raylet, dashboard; the sweeps' drivers and job
supervisors come and go and are left out) sampled every 30 s. Flat means the last
five minutes' median within 10% of the median of the five minutes after warm-up.

    python infra/compose/soak.py [--minutes 40] [--write] [--no-build] [--project NAME]
                                 [--replay LOG]

Prints the samples and a summary table; ``--write`` puts the summary into
docs/reliability.md between its ``compose-soak`` markers. Exits non-zero when a
figure is not flat or a sweep failed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import psutil
from check import PROJECT, Phases, Stack, bring_up, datasets_dir, project_name, run
from faults import REPORT, Api

SAMPLE_S = 30
WARM_UP_S = 300
WINDOW_S = 300
MARKS = ("<!-- compose-soak: start -->", "<!-- compose-soak: end -->")
# The samples of the run in docs/reliability.md, one JSON object a line, and its line
# on the load: ``--replay`` summarises them again.
SAMPLES = REPORT.parent / "soak-samples.log"
# The Ray head's own programs (its dashboard's modules run as ``ray-dashboard-*``).
HEAD_PROGRAMS = ("gcs_server", "raylet", "dashboard.py", "log_monitor.py", "monitor.py")
# Ray's log monitor keeps the log files of new workers open until it holds
# RAY_LOG_MONITOR_MAX_OPEN_FILES (200) of them, then closes them all and moves the dead
# workers' files aside: its count climbs with the sweeps and falls back, by design.
LOG_MONITOR = "log_monitor.py"


def _container_tree(stack: Stack, service: str) -> list[psutil.Process]:
    pid = int(run(["docker", "inspect", "-f", "{{.State.Pid}}", stack.container(service)]).strip())
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def _footprint(processes: list[psutil.Process]) -> tuple[float, int]:
    rss, fds = 0, 0
    for process in processes:
        try:
            rss += process.memory_info().rss
            fds += process.num_fds()
        except psutil.NoSuchProcess:
            continue
    return rss / 2**20, fds


def _label(program: str) -> str | None:
    """A head program's name in the figures, or None for a process that is not one of
    the head's own (drivers, workers, ``ray start``)."""
    if program.startswith("ray-dashboard-"):
        return "dashboard modules"
    return program if program in HEAD_PROGRAMS else None


def _head_program(command: list[str]) -> str | None:
    """Which of the head's own programs a process runs (its script's name for Python,
    its executable's otherwise), labelled as ``_label`` does."""
    scripts = [part for part in command if part.endswith(".py")]
    program = (scripts[0] if scripts else command[0] if command else "").rsplit("/", 1)[-1]
    return _label(program)


def replay(log: Path) -> tuple[list[dict[str, float]], str]:
    """The samples an earlier run printed (a JSON object a line) with the head's open
    files summed again over the head's own programs, and the run's line on its load.
    (Its RSS stays as sampled then.)"""
    samples, load_line = [], ""
    for line in log.read_text().splitlines():
        if line.startswith("{"):
            recorded = json.loads(line)
            figures = {k: v for k, v in recorded.items() if not k.startswith("fds ")}
            for key, value in recorded.items():
                label = _label(key.removeprefix("fds ")) if key.startswith("fds ") else None
                if label is not None:
                    figures[f"fds {label}"] = figures.get(f"fds {label}", 0) + value
            programs = [v for k, v in figures.items() if k.startswith("fds ")]
            figures["head_fds"] = sum(programs)
            figures["head_fds_steady"] = sum(programs) - figures.get(f"fds {LOG_MONITOR}", 0)
            samples.append(figures)
        elif "smoke sweeps submitted over" in line:
            load_line = line
    return samples, load_line


def sample(stack: Stack) -> dict[str, float]:
    api = [p for p in _container_tree(stack, "api") if "dicesweep" in " ".join(p.cmdline())]
    head: dict[str, list[psutil.Process]] = {}
    for process in _container_tree(stack, "ray-head"):
        try:
            program = _head_program(process.cmdline())
        except psutil.NoSuchProcess:
            continue
        if program is not None:
            head.setdefault(program, []).append(process)
    api_rss, api_fds = _footprint(api)
    head_rss, head_fds = _footprint([p for group in head.values() for p in group])
    figures = {"api_rss": api_rss, "api_fds": api_fds, "head_rss": head_rss, "head_fds": head_fds}
    # Each head program's open files, to tell which one a change in the total comes from.
    for program, processes in sorted(head.items()):
        figures[f"fds {program}"] = _footprint(processes)[1]
    figures["head_fds_steady"] = head_fds - figures.get(f"fds {LOG_MONITOR}", 0)
    return figures


class Load:
    """Sweeps submitted one after another, two at a time, and pollers reading the
    pages and the API once a second, until stopped."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.stopping = threading.Event()
        self.submitted: list[str] = []
        self.polls = 0
        self.poll_errors = 0
        self.error_kinds: Counter[str] = Counter()  # "503 GET /v1/sweeps", "ReadTimeout GET /"

    def submitter(self) -> None:
        active: list[str] = []
        while not self.stopping.is_set():
            ended = []
            for sweep in active:
                state = self.api.get(f"/v1/sweeps/{sweep}")
                if state and state["status"] in ("succeeded", "failed", "cancelled"):
                    ended.append(sweep)
            active = [s for s in active if s not in ended]
            while len(active) < 2:
                answer = self.api.client.post("/v1/sweeps", json={"extends": "smoke"})
                if answer.status_code != 201:
                    break
                active.append(answer.json()["id"])
                self.submitted.append(active[-1])
            self.stopping.wait(3)

    def poller(self) -> None:
        while not self.stopping.is_set():
            latest = self.submitted[-1] if self.submitted else None
            paths = ["/", "/v1/sweeps"]
            if latest:
                paths += [f"/sweeps/{latest}", f"/v1/sweeps/{latest}/trials"]
            for path in paths:
                where = path.replace(latest, "{id}") if latest else path  # one kind per route
                try:
                    answer = self.api.client.get(path)
                    if answer.status_code >= 500:
                        self.poll_errors += 1
                        self.error_kinds[f"{answer.status_code} GET {where}"] += 1
                except Exception as error:
                    self.poll_errors += 1
                    self.error_kinds[f"{type(error).__name__} GET {where}"] += 1
                self.polls += 1
            self.stopping.wait(1)


def window(samples: list[dict[str, float]], key: str, start: float, end: float) -> float:
    values = [s[key] for s in samples if start <= s["t"] < end and key in s]
    return statistics.median(values) if values else float("nan")


def summary(samples: list[dict[str, float]], minutes: float) -> tuple[str, bool]:
    end = minutes * 60
    lines = [
        "| figure | after warm-up (median, min 5-10) | last 5 min (median) | change | flat |",
        "|---|---:|---:|---:|---|",
    ]
    flat_all = True
    names = {
        "api_rss": "API process RSS (MB)",
        "api_fds": "API process open FDs",
        "head_rss": "Ray head's processes RSS (MB)",
        "head_fds_steady": "Ray head's processes open FDs, the log monitor's aside",
        "head_fds": "Ray head's processes open FDs, all",
    }
    # The total and each head program's share: shown, not judged on their own (the log
    # monitor's count is a saw-tooth under its cap; the others add up to the judged row).
    programs = sorted({key for s in samples for key in s if key.startswith("fds ")})
    for key in programs:
        names[key] = f"open FDs of the head's `{key.removeprefix('fds ')}`"
    for key, name in names.items():
        judged = not key.startswith("fds ") and key != "head_fds"
        first = window(samples, key, WARM_UP_S, WARM_UP_S + WINDOW_S)
        last = window(samples, key, end - WINDOW_S, end + SAMPLE_S)
        change = (last - first) / first if first else float("nan")
        flat = abs(change) <= 0.10
        verdict = ("yes" if flat else "**no**") if judged else ("(yes)" if flat else "(no)")
        flat_all &= flat or not judged
        lines.append(f"| {name} | {first:.0f} | {last:.0f} | {change:+.1%} | {verdict} |")
    return "\n".join(lines), flat_all


def write(text: str) -> None:
    """Put ``text`` into docs/reliability.md between its compose-soak markers."""
    doc = REPORT.read_text()
    start, end = (doc.index(mark) for mark in MARKS)
    REPORT.write_text(doc[: start + len(MARKS[0])] + "\n" + text + "\n" + doc[end:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=40)
    parser.add_argument("--write", action="store_true", help="put the summary in the docs")
    parser.add_argument("--no-build", action="store_true", help="use the images already built")
    parser.add_argument(
        "--project", help=f"compose project (default: $COMPOSE_PROJECT_NAME, {PROJECT})"
    )
    parser.add_argument(
        "--replay", type=Path, help="summarise the samples an earlier run printed to this log"
    )
    args = parser.parse_args()
    if args.replay:
        samples, load_line = replay(args.replay)
        text, flat = summary(samples, args.minutes)
        text += f"\n\n{load_line}\n\nSummarised from the run's samples (`--replay {args.replay}`)."
        print(text)
        if args.write:
            write(text)
        return 0 if flat else 1
    phases = Phases(args.minutes * 60 + 1800)  # the image build aside
    stack = Stack(datasets_dir(), project_name(args.project))
    samples: list[dict[str, float]] = []
    try:
        key = bring_up(stack, phases, build=not args.no_build)
        load = Load(Api(stack, key))
        with phases.phase(f"soak for {args.minutes:g} min"):
            threads = [
                threading.Thread(target=t, daemon=True) for t in (load.submitter, load.poller)
            ]
            for thread in threads:
                thread.start()
            began = time.monotonic()
            while (elapsed := time.monotonic() - began) < args.minutes * 60:
                figures = {"t": elapsed, **sample(stack)}
                samples.append(figures)
                print(json.dumps({k: round(v, 1) for k, v in figures.items()}), flush=True)
                time.sleep(SAMPLE_S)
            load.stopping.set()
            for thread in threads:
                thread.join(timeout=30)
        states = [load.api.get(f"/v1/sweeps/{sweep}") or {} for sweep in load.submitted]
        counts = Counter(state.get("status", "unknown") for state in states)
    finally:
        with phases.phase("compose down (volumes removed)"):
            stack.down()
        print(phases.table())
    text, flat = summary(samples, args.minutes)
    failed = counts.get("failed", 0)
    text += (
        f"\n\n{len(load.submitted)} smoke sweeps submitted over {args.minutes:g} min "
        f"({', '.join(f'{n} {s}' for s, n in sorted(counts.items()))}); "
        f"{load.polls} polls, {load.poll_errors} answered 5xx or failed"
        f"{_kinds(load.error_kinds)}; "
        f"{len(samples)} samples, one every {SAMPLE_S} s."
    )
    print(text)
    if args.write:
        write(text)
        lines = [json.dumps({k: round(v, 1) for k, v in s.items()}) for s in samples]
        SAMPLES.write_text("\n".join([*lines, text.rsplit("\n", 1)[-1]]) + "\n")
    return 0 if flat and not failed and load.poll_errors == 0 else 1


def _kinds(kinds: Counter[str]) -> str:
    return f" ({', '.join(f'{n} {kind}' for kind, n in kinds.most_common())})" if kinds else ""


if __name__ == "__main__":
    sys.exit(main())
