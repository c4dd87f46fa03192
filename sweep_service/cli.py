"""The dicesweep command: run sweeps here or through the service, follow them, render
their tables, open MLflow.

Torch is imported only by ``dicesweep run``, which runs the sweep driver
(``trainables.driver.run``) in this process; the service's commands never import it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from search_spaces.settings import MLFLOW_UI_FILE, DicesweepSettings

# Report formats; the renderers (pandas) are imported only by the commands that use them.
FORMATS = ("markdown", "csv", "latex", "html", "json", "png")


def cmd_run(args: argparse.Namespace) -> int:
    """Run a sweep in the foreground with its live display; the table prints at the end."""
    started_at = time.time()  # the display's clock: from here, not after the imports
    from search_spaces.settings import isolate_local_ray

    isolate_local_ray(DicesweepSettings())  # before the driver's modules import Ray
    from trainables.driver.run import main as run_sweep

    argv = ["--preset", args.preset] if args.preset else [args.spec]
    if args.sweep_id:
        argv += ["--sweep-id", args.sweep_id]
    if args.num_cpus:
        argv += ["--num-cpus", str(args.num_cpus)]
    try:
        run_sweep(argv, started_at)
    except SystemExit as done:  # the driver ends with its exit code
        return done.code if isinstance(done.code, int) else 1
    return 0


def cmd_presets(args: argparse.Namespace) -> int:
    from search_spaces.presets import list_presets

    presets = list_presets()
    width = max(len(p.name) for p in presets)
    print(f"{'name':<{width}}  trials  description")
    for preset in presets:
        print(f"{preset.name:<{width}}  {preset.trial_count:>6}  {preset.description}")
    return 0


def cmd_grid(args: argparse.Namespace) -> int:
    """Render a sweep's table from its MLflow runs, or several sweeps' merged into one,
    in the paper's layout by default, with the paired tests' marks."""
    from mlflow.tracking import MlflowClient

    from search_spaces import reports
    from search_spaces.reports import final_rows
    from sweep_service.results import merged_rows

    settings = DicesweepSettings()
    client = MlflowClient(str(settings.mlflow_tracking_uri))
    sweep_ids = list(dict.fromkeys(args.sweep_id))
    rows = reports.final_rows(merged_rows(client, sweep_ids))  # no stage-1 trials
    finished = rows[rows["status"] == "FINISHED"]
    if final_rows(finished).empty:  # none yet, or only stage 1's
        names = ", ".join(sweep_ids)
        print(f"dicesweep grid: no finished trials found for {names}", file=sys.stderr)
        return 1
    table = reports.paper_table(
        final_rows(finished), args.metric, args.rows, args.cols, title=" + ".join(sweep_ids)
    )
    # The trial runs do not say how stage 1 sampled: the text states the assumption.
    table = reports.with_budget_curves(table, finished, random_sampling=None)
    table = reports.with_failures(table, reports.failed_trials(rows))
    if args.format == "png":
        if args.output is None:
            print("dicesweep grid: --format png needs --output FILE", file=sys.stderr)
            return 2
        args.output.write_bytes(reports.to_png(table))
        return 0
    render = {
        "markdown": reports.to_markdown,
        "csv": reports.to_csv,
        "latex": reports.to_latex,
        "html": reports.to_html,
        "json": reports.to_json,
    }[args.format]
    text = render(table)
    if args.output is None:
        print(text)
    else:
        args.output.write_text(text)
    return 0


def cmd_ui(args: argparse.Namespace) -> int:
    """The MLflow UI over the same tracking store the sweeps write to, its address printed
    first; a tracking URI that is an MLflow server has its own UI, which is named instead."""
    settings = DicesweepSettings()
    store = str(settings.mlflow_tracking_uri)
    if store.startswith(("http://", "https://")):
        print(
            f"the sweeps' store is the MLflow server {store}; its UI: {settings.mlflow_ui}",
            file=sys.stderr,
        )
        return 0
    url = f"http://{args.host}:{args.port}"
    print(f"MLflow UI at {url} (the sweeps' store {store})", file=sys.stderr, flush=True)
    if settings.mlflow_ui_url and settings.mlflow_ui_url != url:
        print(
            f"the service's links go to {settings.mlflow_ui_url} (DICESWEEP_MLFLOW_UI_URL): "
            f"set it to {url}, or unset it, for them to come here",
            file=sys.stderr,
            flush=True,
        )
    elif not settings.mlflow_ui_url:
        # The service reads this file whenever it makes a link: no restart needed.
        settings.home.mkdir(parents=True, exist_ok=True)
        (settings.home / MLFLOW_UI_FILE).write_text(url + "\n", encoding="utf-8")
        print(
            f"the service's links come here (written to {settings.home / MLFLOW_UI_FILE})",
            file=sys.stderr,
            flush=True,
        )
    command = [
        sys.executable,
        "-m",
        "mlflow",
        "ui",
        "--backend-store-uri",
        store,
        "--host",
        args.host,
        "--port",
        str(args.port),
    ]
    if store.startswith("sqlite:"):
        command += ["--default-artifact-root", settings.mlflow_artifact_root.as_uri()]
    from sweep_service.mlflow_ui import protect_embedded_ui

    command += protect_embedded_ui(settings, args.host, args.port)
    return _serve_until_stopped(command)


UI_STOP_GRACE_S = 3.0  # the UI's server waits on open browser connections past this


def _serve_until_stopped(command: list[str]) -> int:
    """Run the UI's server until it ends, or until Ctrl-C or SIGTERM here, which stop it
    and every process it started (some in sessions of their own, which a signal to its
    group misses and which held the terminal for 30-50 s) within ``UI_STOP_GRACE_S``,
    without a traceback; 130 then, as a shell reports Ctrl-C."""
    import psutil

    # Both a KeyboardInterrupt, SIGINT even where this process was started ignoring it
    # (a background job of a script), as Python then leaves it.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.default_int_handler)
    with subprocess.Popen(command, start_new_session=True) as server:
        try:
            return server.wait()
        except KeyboardInterrupt:
            tree = [psutil.Process(server.pid)]
            with contextlib.suppress(psutil.NoSuchProcess):
                tree += tree[0].children(recursive=True)
            for process in tree:
                with contextlib.suppress(psutil.NoSuchProcess):
                    process.terminate()
            _, alive = psutil.wait_procs(tree, timeout=UI_STOP_GRACE_S)
            for process in alive:
                with contextlib.suppress(psutil.NoSuchProcess):
                    process.kill()
            print("MLflow UI stopped", file=sys.stderr)
            return 130


def cmd_serve(args: argparse.Namespace) -> int:
    """The REST API with the embedded defaults (or the configured cluster and stores)."""
    import logging

    from search_spaces.settings import UnsafeSecretError
    from sweep_service.serve import serve
    from sweep_service.settings import ServiceSettings

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    overrides = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    try:
        serve(ServiceSettings(**overrides))
    except UnsafeSecretError as refused:  # said in one line: what to do is in it
        print(f"dicesweep serve: {refused}", file=sys.stderr)
        return 1
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    """Create, list or revoke API keys in the service's store."""
    from sweep_service import store

    settings = DicesweepSettings()
    settings.home.mkdir(parents=True, exist_ok=True)
    store.upgrade(settings.database_url)
    sessions = store.create_session_factory(store.create_engine_for(settings.database_url))
    with sessions() as session:
        if args.action == "create":
            try:
                owner = store.get_owner_by_name(session, args.owner)
            except store.NotFoundError:
                owner = store.create_owner(session, args.owner)
            quotas = {q: getattr(args, q) for q in store.QUOTAS if getattr(args, q) is not None}
            if quotas:
                owner = store.set_quotas(session, owner.id, **quotas)
            issued = store.create_api_key(session, owner.id)
            print(issued.plain_key)
            print(
                f"key {issued.api_key.prefix} for owner {owner.name}; shown once", file=sys.stderr
            )
            from sweep_service.mlflow_ui import print_sign_in

            print_sign_in(settings, owner.name)
        elif args.action == "list":
            owner = store.get_owner_by_name(session, args.owner)
            for key in store.list_api_keys(session, owner.id):
                revoked = f" revoked {key.revoked_at:%Y-%m-%d}" if key.revoked_at else ""
                print(f"{key.prefix}  created {key.created_at:%Y-%m-%d %H:%M}{revoked}")
        else:
            store.revoke_api_key(session, args.prefix)
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    """Submit a spec to the service; ``--wait`` follows the sweep to its end."""
    from search_spaces.spec_file import SpecFileError, read_spec_file
    from sweep_service import remote

    try:
        spec = read_spec_file(args.spec)
    except SpecFileError as error:
        print(error, file=sys.stderr)
        return 2
    return remote.submit(spec, args.wait, args.json)


def _remote(args: argparse.Namespace) -> int:
    """``status``, ``list``, ``trials`` and ``cancel`` (``sweep_service.remote``)."""
    from sweep_service import remote

    if args.command == "list":
        return remote.list_sweeps(args.limit)
    if args.command == "status":
        return remote.status(args.sweep_id, args.json)
    action = {"trials": remote.trials, "cancel": remote.cancel}
    return action[args.command](args.sweep_id)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dicesweep", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"dicesweep {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run (or resume) a sweep here, on a local Ray head")
    run.add_argument("spec", nargs="?", help="YAML/JSON spec file, or - for stdin")
    run.add_argument("--preset", help="a preset by name (see: dicesweep presets)")
    run.add_argument("--sweep-id", help="resume this sweep, or give a new one its id")
    run.add_argument("--num-cpus", type=int, help="CPUs for the local Ray head")
    run.set_defaults(handler=cmd_run)
    presets = sub.add_parser("presets", help="list the presets and their trial counts")
    presets.set_defaults(handler=cmd_presets)
    grid = sub.add_parser("grid", help="a sweep's table (or several merged) from MLflow")
    grid.add_argument("sweep_id", nargs="+", help="one sweep id, or several to merge")
    grid.add_argument("--format", choices=FORMATS, default="markdown")
    grid.add_argument("--rows", help="row key (default: the paper's layout)")
    grid.add_argument("--cols", help="column key (default: the paper's layout)")
    grid.add_argument("--metric", default="eval_f1")
    grid.add_argument("--output", type=Path, help="write here instead of standard output")
    grid.set_defaults(handler=cmd_grid)
    serve = sub.add_parser("serve", help="the REST API (a local Ray head unless configured)")
    serve.add_argument("--host", help="default: DICESWEEP_HOST or 127.0.0.1")
    serve.add_argument("--port", type=int, help="default: DICESWEEP_PORT or 8000")
    serve.set_defaults(handler=cmd_serve)
    # The service's address: DICESWEEP_API_URL, else DICESWEEP_HOST and DICESWEEP_PORT.
    submit = sub.add_parser("submit", help="submit a spec to the service")
    submit.add_argument("spec", help="YAML/JSON spec file, or - for stdin")
    submit.add_argument(
        "--wait", action="store_true", help="follow it to its end; exit 0 if it succeeded"
    )
    submit.add_argument("--json", action="store_true", help="print the service's JSON")
    submit.set_defaults(handler=cmd_submit)
    listing = sub.add_parser("list", help="the service's sweeps, newest first")
    listing.add_argument("--limit", type=int, default=20)
    listing.set_defaults(handler=_remote)
    for name, text in (
        ("status", "a submitted sweep's status, trial counts and best trial"),
        ("trials", "a submitted sweep's trials, with failure reasons"),
        ("cancel", "stop a submitted sweep"),
    ):
        command = sub.add_parser(name, help=text)
        command.add_argument("sweep_id")
        command.set_defaults(handler=_remote)
        if name == "status":
            command.add_argument("--json", action="store_true", help="print the service's JSON")
    keys = sub.add_parser("keys", help="API keys: create OWNER, list OWNER, revoke PREFIX")
    keys_sub = keys.add_subparsers(dest="action", required=True)
    create = keys_sub.add_parser("create", help="a new key for an owner (created if new)")
    create.add_argument("--owner", required=True)
    for quota, kind in (
        ("max_concurrent_sweeps", int),
        ("max_trials_per_sweep", int),
        ("max_gpus_per_trial", float),
    ):
        create.add_argument(
            "--" + quota.replace("_", "-"),
            dest=quota,
            type=kind,
            help="set the owner's quota (new or existing owner)",
        )
    owned = keys_sub.add_parser("list", help="an owner's keys")
    owned.add_argument("--owner", required=True)
    revoke = keys_sub.add_parser("revoke", help="revoke a key by its prefix")
    revoke.add_argument("prefix")
    keys.set_defaults(handler=cmd_keys)
    ui = sub.add_parser(
        "ui",
        help="the MLflow UI over the sweeps' tracking store",
        description=(
            "Serve the MLflow UI over the store the sweeps write to "
            "(DICESWEEP_MLFLOW_TRACKING_URI) and print its address. The service's links "
            "into the UI go where this command last served (it writes its address under "
            "the home; the running service follows it), by default http://127.0.0.1:5000; "
            "DICESWEEP_MLFLOW_UI_URL, when set, overrides both: set it when the UI runs "
            "elsewhere (another host or port, behind a proxy)."
        ),
    )
    ui.add_argument("--host", default="127.0.0.1", help="address to listen on")
    ui.add_argument("--port", type=int, default=5000, help="port to listen on")
    ui.set_defaults(handler=cmd_ui)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if args.command == "run" and bool(args.spec) == bool(args.preset):
        build_parser().error("run: give a spec file or --preset, not both")
    from sweep_service.client import ClientError, InvalidSpecError
    from sweep_service.store.errors import StoreError

    try:
        code = args.handler(args)
        sys.stdout.flush()  # here, so that a closed pipe is caught below
    except BrokenPipeError:
        _quiet_closed_stdout()
        sys.exit(1)
    except ClientError as error:
        if isinstance(error, InvalidSpecError):  # in the words of `dicesweep run`
            print(error, file=sys.stderr)
        else:  # a refusal, said in one line
            print(f"dicesweep {args.command}: {error}", file=sys.stderr)
        sys.exit(error.exit_code)
    except StoreError as error:
        detail = error.args[0] if error.args else error
        print(f"dicesweep {args.command}: {detail}", file=sys.stderr)
        sys.exit(1)
    sys.exit(code)


def _quiet_closed_stdout() -> None:
    """Point standard output at /dev/null: its reader (``| head``) has gone, and
    Python's last flush at exit would fail again with a traceback."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dicesweep")
    except PackageNotFoundError:
        return "unknown (not installed)"


if __name__ == "__main__":
    main()
