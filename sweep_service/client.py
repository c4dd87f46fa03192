"""The dicesweep service over REST from Python: ``from sweep_service import Client``.

    client = Client()                      # DICESWEEP_API_URL / DICESWEEP_API_KEY
    sweep = client.submit({"extends": "smoke"})
    sweep.wait(progress=True)              # Ctrl-C stops waiting; the sweep runs on
    sweep.grid()                           # pandas DataFrames, one row per cell
    sweep.trials(); sweep.budget_curves(); sweep.mlflow_runs()
    client.grid([first.id, second.id])     # several sweeps merged into one table

The address is ``DICESWEEP_API_URL``, else ``http://DICESWEEP_HOST:DICESWEEP_PORT``
(127.0.0.1:8000 by default, as ``dicesweep serve`` listens); ``DICESWEEP_API_KEY`` is
sent as a bearer token. A service that cannot be reached, or a refusal, raises
``ClientError`` with one line naming the address or the service's reason. The
``dicesweep`` commands that talk to a service (``sweep_service.remote``) are built on
this client. It needs the ``client`` extra alone (httpx, pandas, tqdm; no Ray, MLflow
server or FastAPI); httpx is imported by ``Client`` alone, pandas, tqdm and MLflow only by
the methods that use them (MLflow by ``Sweep.mlflow_runs``: the ``notebook`` extra has
its client): ``dicesweep run`` with the train extra alone imports this module for its
errors.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx
    import pandas as pd

POLL_SECONDS = 2.0
FINISHED = {"succeeded", "failed", "cancelled"}


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


class Client:
    """A dicesweep service's REST API: submit sweeps, follow them, read their tables.

    ``url`` and ``api_key`` default to ``DICESWEEP_API_URL`` (``api_url``) and
    ``DICESWEEP_API_KEY``; ``tracking_uri`` is the MLflow store ``Sweep.mlflow_runs``
    reads (default: ``DICESWEEP_MLFLOW_TRACKING_URI``, as ``dicesweep serve`` on this
    machine writes). ``http`` replaces the HTTP client (a test's app client). Use it
    as a context manager, or ``close()`` it.
    """

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        tracking_uri: str | None = None,
        timeout_s: float = 30.0,
        http: httpx.Client | None = None,
    ) -> None:
        import httpx

        key = api_key if api_key is not None else os.environ.get("DICESWEEP_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.http = http or httpx.Client(
            base_url=url or api_url(), headers=headers, timeout=timeout_s
        )
        self.tracking_uri = tracking_uri

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """``method path``'s JSON answer.

        Raises:
            InvalidSpecError: the service refused a spec (its issues, one a line).
            ClientError: the service cannot be reached, or refused (its reason).
        """
        response = self._send(method, path, **kwargs)
        return response.json()

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        import httpx

        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as error:
            raise ClientError(
                f"cannot reach the dicesweep service at {self.http.base_url} "
                f"({type(error).__name__}: {error}); start it with `dicesweep serve` or set "
                "DICESWEEP_API_URL"
            ) from None
        if response.is_success:
            return response
        if refused := _spec_refusal(response):
            raise InvalidSpecError(refused)
        raise ClientError(f"{method} {path}: HTTP {response.status_code}: {_reason(response)}")

    def absolute(self, link: str) -> str:
        """A link of the service's (``/sweeps/ID``) as an address to open."""
        return str(self.http.base_url.join(link))

    def submit(self, spec: Mapping[str, Any] | str | Path) -> Sweep:
        """Submit ``spec`` (a dict such as ``{"extends": "smoke"}``, or the path of a YAML
        or JSON spec file) and return its handle.

        Raises:
            SpecFileError: a spec file that cannot be read.
            InvalidSpecError: the service refused the spec.
        """
        if isinstance(spec, str | Path):
            from search_spaces.spec_file import read_spec_file

            spec = read_spec_file(str(spec))
        return Sweep(self, self.request("POST", "/v1/sweeps", json=dict(spec)))

    def sweep(self, sweep_id: str) -> Sweep:
        """The handle of a sweep submitted before."""
        return Sweep(self, self.request("GET", f"/v1/sweeps/{sweep_id}"))

    def sweeps(self, limit: int = 20) -> dict[str, Any]:
        """The newest ``limit`` sweeps: the API's page, ``{"data", "count", ...}``."""
        return dict(self.request("GET", "/v1/sweeps", params={"limit": limit}))

    def presets(self) -> dict[str, Any]:
        """The presets: ``{"data": [{"name", "description", "trial_count"}], "count"}``."""
        return dict(self.request("GET", "/v1/search-spaces"))

    def grid_json(self, ids: Sequence[str], **query: str | bool | None) -> dict[str, Any]:
        """The table of several sweeps merged (``GET /v1/grid``) as the API's JSON;
        ``query``: ``rows``, ``cols``, ``metric``, ``paper`` (the paper's Δ beside)."""
        params = {"ids": ",".join(ids), **_query(query)}
        return dict(self.request("GET", "/v1/grid", params=params))

    def grid(self, ids: Sequence[str], **query: str | bool | None) -> pd.DataFrame:
        """``grid_json`` as a DataFrame, one row per cell (``frames.grid_frame``)."""
        from sweep_service.frames import grid_frame

        return grid_frame(self.grid_json(ids, **query))


class Sweep:
    """A submitted sweep: ``info`` is its latest state as the API gave it."""

    def __init__(self, client: Client, info: Mapping[str, Any]) -> None:
        self.client, self.info = client, dict(info)
        self.id: str = self.info["id"]

    def __repr__(self) -> str:
        return f"<Sweep {self.id} {self.info.get('name')!r}: {self.info.get('status')}>"

    @property
    def status(self) -> str:
        return str(self.info["status"])

    def refresh(self) -> dict[str, Any]:
        """Its state now (``GET /v1/sweeps/{id}``), kept in ``info``."""
        self.info = dict(self.client.request("GET", f"/v1/sweeps/{self.id}"))
        return self.info

    def states(self, poll_s: float = POLL_SECONDS) -> Iterator[dict[str, Any]]:
        """Its state every ``poll_s`` seconds, the last one finished."""
        while True:
            state = self.refresh()
            yield state
            if state["status"] in FINISHED:
                return
            time.sleep(poll_s)

    def wait(self, progress: bool = True, poll_s: float = POLL_SECONDS) -> dict[str, Any]:
        """Its state once it has finished; with ``progress``, a bar of its trials (a
        notebook's widget where there is one). Ctrl-C stops waiting, not the sweep: it
        says so and raises ``KeyboardInterrupt``."""
        from sweep_service.progress_bar import TrialsBar

        bar = TrialsBar(int(self.info.get("trial_count") or 0), enabled=progress)
        try:
            with bar:
                for state in self.states(poll_s):
                    bar.show(state)
        except KeyboardInterrupt:
            print(
                f"stopped waiting; sweep {self.id} goes on running on the service "
                f"(sweep.cancel() or `dicesweep cancel {self.id}` stops it)",
                file=sys.stderr,
            )
            raise
        return self.info

    def cancel(self) -> dict[str, Any]:
        """Ask the service to stop it; its state after the request."""
        self.info = dict(self.client.request("POST", f"/v1/sweeps/{self.id}/cancel"))
        return self.info

    def log(self) -> str:
        """The end of its driver's log (``GET .../log``): the story behind a failed
        sweep's one-line ``message``; empty before its job started."""
        return self.client._send("GET", f"/v1/sweeps/{self.id}/log").text

    def trials_json(self) -> list[dict[str, Any]]:
        """Every trial as the API gives them (``GET .../trials``, every page)."""
        found: list[dict[str, Any]] = []
        token = None
        while True:
            params = {"limit": 100, **({"page_token": token} if token else {})}
            page = self.client.request("GET", f"/v1/sweeps/{self.id}/trials", params=params)
            found += page["data"]
            token = page["next_page_token"]
            if token is None:
                return found

    def trials(self) -> pd.DataFrame:
        """One row per trial (``frames.trials_frame``)."""
        from sweep_service.frames import trials_frame

        return trials_frame(self.trials_json())

    def grid_json(self, **query: str | bool | None) -> dict[str, Any]:
        """Its table as the API's JSON; ``query``: ``rows``, ``cols``, ``metric``,
        ``paper`` (``True``: the paper's Δ beside each cell it reports)."""
        params = _query(query)
        return dict(self.client.request("GET", f"/v1/sweeps/{self.id}/grid", params=params))

    def grid(self, **query: str | bool | None) -> pd.DataFrame:
        """Its table, one row per cell (``frames.grid_frame``)."""
        from sweep_service.frames import grid_frame

        return grid_frame(self.grid_json(**query))

    def budget_curves(self) -> pd.DataFrame:
        """A two-stage sweep's budget curves (``frames.budget_frame``); no rows without."""
        from sweep_service.frames import budget_frame

        return budget_frame(self.grid_json())

    def mlflow_runs(self) -> pd.DataFrame:
        """Its MLflow runs (the parent and each trial's) through MLflow's own client, in
        the columns of ``mlflow.search_runs``: ``run_id``, ``status``, ``metrics.*``,
        ``params.*``, ``tags.*`` (``frames.runs_frame``)."""
        from sweep_service.frames import runs_frame

        return runs_frame(self.id, self.client.tracking_uri)


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


def _query(query: Mapping[str, str | bool | None]) -> dict[str, str]:
    """A table's query as URL parameters: unset ones left out, flags as ``1``/``0``."""
    return {
        key: ("1" if value else "0") if isinstance(value, bool) else value
        for key, value in query.items()
        if value is not None
    }
