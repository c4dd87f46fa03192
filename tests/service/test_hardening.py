"""Hardening of what the service hands out, over the real store and MLflow: exports
that escape their own format whatever the names and reasons hold; the security
headers; the sign-in form's origin check; a limit on wrong keys per client; the
sign-in cookie ``Secure`` behind a trusted TLS proxy (uvicorn as ``serve`` runs it)."""

from __future__ import annotations

import csv
import io
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import uvicorn
from mlflow.tracking import MlflowClient
from sqlalchemy.orm import Session

from sweep_service.serve import uvicorn_options
from sweep_service.store import Owner, create_api_key, create_sweep
from tests.service.api_fixtures import Api, FakeTrial, MakeApi, bearer, write_trials
from tests.service.factories import make_draft

# A data-set name as a spreadsheet formula (names of older sweeps, or of trial runs
# written to MLflow by hand, are not checked by today's schema), and a failure's reason
# that breaks out of a LaTeX comment into live LaTeX and out of a Markdown table.
FORMULA = '=HYPERLINK("http://x")|x'
INJECTED = "diverged\n\\input{/etc/passwd}\n| a | b |"


def test_every_export_escapes_its_own_format(
    api: Api, session: Session, alice: Owner, tracking: MlflowClient
) -> None:
    sweep = create_sweep(session, alice.id, make_draft(trials=3)).sweep
    write_trials(
        tracking,
        sweep.id,
        [
            FakeTrial({"name": "ce"}, dataset=FORMULA, eval_f1=80.0),
            FakeTrial({"name": "dsc", "alpha": 0.1}, dataset=FORMULA, eval_f1=82.0),
            FakeTrial({"name": "focal"}, dataset=FORMULA, status="FAILED", reason=INJECTED),
        ],
    )
    headers = bearer(create_api_key(session, alice.id).plain_key)

    def export(fmt: str) -> str:
        answer = api.client.get(f"/v1/sweeps/{sweep.id}/grid?format={fmt}", headers=headers)
        assert answer.status_code == 200, answer.text
        return answer.text

    latex = export("latex")
    live = [line for line in latex.splitlines() if not line.startswith("%")]
    assert not any("\\input" in line for line in live), latex
    cells = [cell for row in csv.reader(io.StringIO(export("csv"))) for cell in row]
    assert f"'{FORMULA}" in cells
    assert not any(cell.startswith(("=", "+", "@")) for cell in cells)
    markdown = export("markdown")
    assert not any(line.startswith(("\\input", "| a |")) for line in markdown.splitlines())
    assert '=HYPERLINK("http://x")\\|x' in markdown


# --- headers, the sign-in form's origin, failed sign-ins, the cookie behind TLS ------


def test_every_answer_carries_the_security_headers(api: Api) -> None:
    for path in ("/", "/login", "/v1/sweeps", "/docs", "/redoc", "/openapi.json"):
        answer = api.client.get(path, follow_redirects=False)
        assert answer.headers["x-content-type-options"] == "nosniff", path
        assert answer.headers["x-frame-options"] == "DENY", path
        assert answer.headers["cache-control"] == "no-store", path
        assert "frame-ancestors 'none'" in answer.headers["content-security-policy"], path
    page = api.client.get("/login")
    policy = page.headers["content-security-policy"]
    assert (
        "script-src 'self';" in policy
        and "'unsafe-inline'" not in policy.split("style-src-attr")[0]
    )
    # The page's own script and style load under it: same-origin files, none inline.
    sources = re.findall(r'<(?:script|link)[^>]*(?:src|href)="([^"]+)"', page.text)
    assert sources and all(source.startswith("/assets/") for source in sources), sources
    assert "<script>" not in page.text and "<style" not in page.text
    for source in sources:
        asset = api.client.get(source)
        assert asset.status_code == 200, source
        assert "no-store" not in asset.headers.get("cache-control", "")
    # The offline docs' own assets load too.
    docs = api.client.get("/docs").text
    for source in re.findall(r"(?:src|href)='?\"?(/assets/docs/[^'\" ]+)", docs):
        assert api.client.get(source).status_code == 200, source


def test_a_trailing_slash_is_not_redirected_to_the_host_the_request_named(api: Api) -> None:
    # Starlette's redirect would build its Location from the Host header.
    for path in ("/v1/sweeps/", "/v1/search-spaces/", "/docs/", "/login/", "/metrics/"):
        answer = api.client.get(path, headers={"host": "evil.example"}, follow_redirects=False)
        assert answer.status_code == 404, path
        assert "location" not in answer.headers, path
        assert answer.json() == {"detail": "Not Found", "code": "not_found"}


def test_a_sign_in_posted_from_another_site_is_refused(
    api: Api, session: Session, alice: Owner
) -> None:
    key = create_api_key(session, alice.id).plain_key
    for header, value in (
        ("origin", "https://evil.example"),
        ("referer", "https://evil.example/x"),
    ):
        refused = api.client.post(
            "/login", data={"key": key}, headers={header: value}, follow_redirects=False
        )
        assert refused.status_code == 403, refused.text
        assert "set-cookie" not in refused.headers
    own = api.client.post(
        "/login", data={"key": key}, headers={"origin": "http://testserver"}, follow_redirects=False
    )
    assert own.status_code == 303 and "dicesweep_key=" in own.headers["set-cookie"]


def test_a_client_sending_wrong_keys_is_held_off(
    make_api: MakeApi, session: Session, alice: Owner
) -> None:
    api = make_api(sign_in_failures=3, sign_in_window_s=600)
    key = create_api_key(session, alice.id).plain_key
    for _ in range(3):
        assert api.client.post("/login", data={"key": "ds_wrong"}).status_code == 401
    held = api.client.post("/login", data={"key": "ds_wrong"}, follow_redirects=False)
    assert held.status_code == 429, held.text  # every wrong key, until the window ends
    assert "set-cookie" not in held.headers
    refused = api.client.get("/v1/sweeps", headers=bearer("ds_wrong"))
    assert refused.status_code == 429
    assert refused.json()["code"] == "too_many_failures"
    # A lock-out never shuts the owner out: the right key is accepted.
    assert api.client.get("/v1/sweeps", headers=bearer(key)).status_code == 200
    own = api.client.post("/login", data={"key": key}, follow_redirects=False)
    assert own.status_code == 303 and "dicesweep_key=" in own.headers["set-cookie"]


def test_the_cookie_is_secure_behind_a_trusted_tls_proxy(
    make_api: MakeApi, session: Session, alice: Owner
) -> None:
    key = create_api_key(session, alice.id).plain_key
    forwarded = {"x-forwarded-proto": "https", "x-forwarded-for": "203.0.113.7"}

    def cookie(**settings: Any) -> str:
        api = make_api(**settings)
        config = uvicorn.Config(api.client.app, **{**uvicorn_options(api.settings), "port": 0})
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        try:
            while not server.started:
                time.sleep(0.05)
            port = server.servers[0].sockets[0].getsockname()[1]
            answer = httpx.post(
                f"http://127.0.0.1:{port}/login", data={"key": key}, headers=forwarded
            )
            assert answer.status_code == 303, answer.text
            return answer.headers["set-cookie"]
        finally:
            server.should_exit = True
            thread.join(10)

    assert "secure" in cookie(trusted_proxies="127.0.0.1").lower()  # the ingress, trusted
    assert "secure" not in cookie(trusted_proxies="10.0.0.1").lower()  # anyone else: not
    # A public https URL makes it Secure whatever the last hop said.
    public = cookie(trusted_proxies="10.0.0.1", public_url="https://sweeps.example.org")
    assert "secure" in public.lower()


def test_a_png_grid_is_drawn_once_per_sweep_state_off_the_request_threads(
    api: Api, session: Session, alice: Owner, tracking: MlflowClient
) -> None:
    sweep = create_sweep(session, alice.id, make_draft(trials=3)).sweep
    write_trials(tracking, sweep.id, [FakeTrial({"name": "ce"}, eval_f1=80.0)])
    headers = bearer(create_api_key(session, alice.id).plain_key)
    path = f"/v1/sweeps/{sweep.id}/grid?format=png"
    renderer = api.client.app.state.services.png  # type: ignore[attr-defined]
    with ThreadPoolExecutor(8) as pool:  # a burst of the same plot: one drawing
        answers = list(pool.map(lambda _: api.client.get(path, headers=headers), range(8)))
    assert {a.status_code for a in answers} == {200}
    assert {a.content for a in answers} == {answers[0].content}
    assert answers[0].content.startswith(b"\x89PNG")
    assert renderer.drawn == 1
    write_trials(tracking, sweep.id, [FakeTrial({"name": "dsc", "alpha": 0.1}, eval_f1=84.0)])
    changed = api.client.get(path, headers=headers)  # a trial finished: drawn again
    assert changed.status_code == 200 and changed.content != answers[0].content
    assert renderer.drawn == 2
