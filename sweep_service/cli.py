"""The dicesweep command: run sweeps here or through the service, follow them, render
their tables, open MLflow.

Torch is imported only by ``dicesweep run``, which runs the sweep driver
(``trainables.driver.run``) in this process; the service's commands never import it.
Every import beyond the standard library is made by the command that needs it: the
commands that talk to a service (``submit``, ``status``, ...) load the client and no
more, so a refusal is said within a fraction of a second.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from search_spaces.settings import DicesweepSettings
    from sweep_service.store.models import ApiKey

# Report formats; the renderers (pandas) are imported only by the commands that use them.
FORMATS = ("markdown", "csv", "latex", "html", "json", "png")
JSON_HELP = "print the API's JSON"


def cmd_run(args: argparse.Namespace) -> int:
    """Run a sweep in the foreground with its live display; the table prints at the end."""
    started_at = time.time()  # the display's clock: from here, not after the imports
    from search_spaces.settings import DicesweepSettings, isolate_local_ray
    from sweep_service.home import make_home_private

    settings = DicesweepSettings()
    make_home_private(settings.home)  # its MLflow store and results, its user's only
    isolate_local_ray(settings)  # before the driver's modules import Ray
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
    """The presets, one line each; ``--json`` as ``GET /v1/search-spaces`` answers."""
    from search_spaces.resolve import list_presets

    presets = list_presets()
    if args.json:
        data = [preset.model_dump() for preset in presets]
        print(json.dumps({"data": data, "count": len(data)}, indent=2))
        return 0
    width = max(len(p.name) for p in presets)
    print(f"{'name':<{width}}  trials  description")
    for preset in presets:
        print(f"{preset.name:<{width}}  {preset.trial_count:>6}  {preset.description}")
    return 0


def cmd_grid(args: argparse.Namespace) -> int:
    """Render a sweep's table from its MLflow runs, or several sweeps' merged into one,
    in the paper's layout by default, with the paired tests' marks: the API's table
    (``sweep_service.tables.grid_of``), read from the tracking store directly."""
    from mlflow.tracking import MlflowClient

    from search_spaces import reports
    from search_spaces.settings import DicesweepSettings
    from sweep_service.results import merged_rows
    from sweep_service.tables import TEXT_RENDERERS, GridQueryError, NoResultsError, grid_of

    settings = DicesweepSettings()
    client = MlflowClient(str(settings.mlflow_tracking_uri))
    sweep_ids = list(dict.fromkeys(args.sweep_id))
    names = ", ".join(sweep_ids)
    try:
        # The trial runs do not say how stage 1 sampled: the text states the assumption.
        table = grid_of(
            merged_rows(client, sweep_ids),
            names,
            " + ".join(sweep_ids),
            args.rows,
            args.cols,
            args.metric,
            random_sampling=None,
            paper=args.paper,
        )
    except NoResultsError:  # none yet, or only stage 1's
        print(f"dicesweep grid: no finished trials found for {names}", file=sys.stderr)
        return 1
    except GridQueryError as error:
        print(f"dicesweep grid: {error}", file=sys.stderr)
        return 2
    if args.format == "png":
        if args.output is None:
            print("dicesweep grid: --format png needs --output FILE", file=sys.stderr)
            return 2
        args.output.write_bytes(reports.to_png(table))
        return 0
    # --json: the API's grid JSON (GET /v1/grid)
    text = TEXT_RENDERERS["json" if args.json else args.format](table)
    if args.output is None:
        print(text)
    else:
        args.output.write_text(text)
    return 0


def cmd_ui(args: argparse.Namespace) -> int:
    """The MLflow UI over the sweeps' tracking store (``sweep_service.ui_command``)."""
    from sweep_service.ui_command import serve_ui

    return serve_ui(args.host, args.port)


def cmd_serve(args: argparse.Namespace) -> int:
    """The REST API with the embedded defaults (or the configured cluster and stores)."""
    import logging

    from search_spaces.settings import UnsafeSecretError
    from sweep_service.serve import serve
    from sweep_service.settings import ServiceSettings
    from sweep_service.store import StoreError

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    overrides = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    try:
        serve(ServiceSettings(**overrides))
    except (UnsafeSecretError, StoreError) as refused:  # one line: what to do is in it
        print(f"dicesweep serve: {refused}", file=sys.stderr)
        return 1
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    """Create, list or revoke API keys in the service's store; a refusal (an unknown
    owner or prefix) is said in one line, exit 1."""
    from search_spaces.settings import DicesweepSettings
    from sweep_service.mlflow_ui import OwnerExperimentError
    from sweep_service.store import StoreError

    try:
        _keys(args, DicesweepSettings())
    except (StoreError, OwnerExperimentError) as error:
        detail = error.args[0] if error.args else error
        print(f"dicesweep keys: {detail}", file=sys.stderr)
        return 1
    return 0


def _keys(args: argparse.Namespace, settings: DicesweepSettings) -> None:
    """``cmd_keys``'s work, in the store at ``settings.database_url``."""
    from sweep_service import store
    from sweep_service.home import make_home_private

    make_home_private(settings.home)
    store.upgrade(settings.database_url)
    sessions = store.create_session_factory(store.create_engine_for(settings.database_url))
    with sessions() as session:
        if args.action == "create":
            from sweep_service.mlflow_ui import prepare_owner

            store.check_owner_name(args.owner)
            # The owner's MLflow experiment first: a key whose experiment cannot be
            # made is not issued, and nothing is left half-made.
            sign_in = prepare_owner(settings, args.owner)
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
            for line in sign_in:
                print(line, file=sys.stderr)
        elif args.action == "list":
            owner_id = (
                None if args.owner is None else store.get_owner_by_name(session, args.owner).id
            )
            keys = store.list_api_keys(session, owner_id)
            if args.json:
                print(json.dumps([_key_json(key) for key in keys], indent=2))
                return
            for key in keys:
                revoked = f" revoked {key.revoked_at:%Y-%m-%d}" if key.revoked_at else ""
                created = f"created {key.created_at:%Y-%m-%d %H:%M}"
                print(f"{key.prefix}  {key.owner.name}  {created}{revoked}")
        else:
            store.revoke_api_key(session, args.prefix)


def _key_json(key: ApiKey) -> dict[str, Any]:
    """An API key as ``keys list --json`` prints it: never the key, only its prefix."""
    revoked = key.revoked_at.isoformat() if key.revoked_at else None
    return {
        "prefix": key.prefix,
        "owner": key.owner.name,
        "created_at": key.created_at.isoformat(),
        "revoked_at": revoked,
    }


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
        return remote.list_sweeps(args.limit, args.json)
    if args.command == "status":
        return remote.status(args.sweep_id, args.json, args.log)
    if args.command == "trials":
        return remote.trials(args.sweep_id, args.json)
    return remote.cancel(args.sweep_id)


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
    presets.add_argument("--json", action="store_true", help=JSON_HELP)
    presets.set_defaults(handler=cmd_presets)
    grid = sub.add_parser("grid", help="a sweep's table (or several merged) from MLflow")
    grid.add_argument("sweep_id", nargs="+", help="one sweep id, or several to merge")
    grid.add_argument("--format", choices=FORMATS, default="markdown")
    grid.add_argument("--rows", help="row key (default: the paper's layout)")
    grid.add_argument("--cols", help="column key (default: the paper's layout)")
    grid.add_argument("--metric", default="eval_f1")
    grid.add_argument("--output", type=Path, help="write here instead of standard output")
    grid.add_argument("--json", action="store_true", help="--format json: the API's JSON")
    grid.add_argument(
        "--paper", action="store_true", help="the paper's Δ beside each cell it reports"
    )
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
    listing.add_argument("--json", action="store_true", help=JSON_HELP)
    listing.set_defaults(handler=_remote)
    for name, text in (
        ("status", "a submitted sweep's status, trial counts and best trial"),
        ("trials", "a submitted sweep's trials, with failure reasons"),
        ("cancel", "stop a submitted sweep"),
    ):
        command = sub.add_parser(name, help=text)
        command.add_argument("sweep_id")
        command.set_defaults(handler=_remote)
        if name in ("status", "trials"):
            command.add_argument("--json", action="store_true", help=JSON_HELP)
        if name == "status":
            command.add_argument("--log", action="store_true", help="print its driver's log too")
    keys = sub.add_parser(
        "keys", help="API keys: create --owner NAME, list [--owner NAME], revoke PREFIX"
    )
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
    owned = keys_sub.add_parser("list", help="every owner's keys, or one owner's")
    owned.add_argument("--owner", help="this owner's keys only")
    owned.add_argument("--json", action="store_true", help="prefixes, owners and dates as JSON")
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

    try:
        code = args.handler(args)
        sys.stdout.flush()  # here, so that a closed pipe is caught below
    except BrokenPipeError:
        # `dicesweep presets | head -1`: the reader took what it wanted; no error.
        _quiet_closed_stdout()
        sys.exit(0)
    except ClientError as error:
        if isinstance(error, InvalidSpecError):  # in the words of `dicesweep run`
            print(error, file=sys.stderr)
        else:  # a refusal, said in one line
            print(f"dicesweep {args.command}: {error}", file=sys.stderr)
        sys.exit(error.exit_code)
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
