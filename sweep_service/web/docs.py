"""``/docs`` (Swagger UI) and ``/redoc`` with no internet: FastAPI's own pages, their
scripts and styles served from the ``fastapi-offline`` package instead of a CDN, under
the request's ``root_path``.

Only the package's assets are used, not its ``FastAPIOffline``: that builds the app
itself, titles the pages after ``app.title`` (``dicesweep - Swagger UI``, not what the
page is) and gives a browser without JavaScript a blank page; these two routes do the
rest with FastAPI's own page builders."""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/assets"
DOCS_ASSETS = f"{ASSETS}/docs"
OPENAPI_URL = "/openapi.json"

router = APIRouter(include_in_schema=False)


def _said_without_script(page: HTMLResponse, what: str, root: str) -> HTMLResponse:
    """``page`` with a line for a browser without JavaScript, which both viewers need:
    what the page is and where the schema is without it."""
    line = (
        f"<noscript><p>This is {what}, the interactive reference of the dicesweep REST API; "
        f"it needs JavaScript. The API's schema without it: "
        f'<a href="{root}{OPENAPI_URL}">{OPENAPI_URL}</a>.</p></noscript>'
    )
    html = bytes(page.body).decode().replace("<body>", f"<body>\n{line}", 1)
    return HTMLResponse(html)


@router.get("/docs", response_class=HTMLResponse)
def swagger_ui(request: Request) -> HTMLResponse:
    """Swagger UI over the API's OpenAPI schema."""
    root = request.scope.get("root_path", "")
    page = get_swagger_ui_html(
        openapi_url=root + OPENAPI_URL,
        title="dicesweep API reference (Swagger UI)",
        swagger_js_url=f"{root}{DOCS_ASSETS}/swagger-ui-bundle.js",
        swagger_css_url=f"{root}{DOCS_ASSETS}/swagger-ui.css",
        swagger_favicon_url=f"{root}{ASSETS}/web/favicon.svg",
    )
    return _said_without_script(page, "Swagger UI", root)


@router.get("/redoc", response_class=HTMLResponse)
def redoc(request: Request) -> HTMLResponse:
    """ReDoc over the API's OpenAPI schema, in the system's fonts."""
    root = request.scope.get("root_path", "")
    page = get_redoc_html(
        openapi_url=root + OPENAPI_URL,
        title="dicesweep API reference (ReDoc)",
        redoc_js_url=f"{root}{DOCS_ASSETS}/redoc.standalone.js",
        redoc_favicon_url=f"{root}{ASSETS}/web/favicon.svg",
        with_google_fonts=False,
    )
    return _said_without_script(page, "ReDoc", root)


def mount_assets(app: FastAPI) -> None:
    """Serve the pages' assets and the docs' from this package and ``fastapi-offline``."""
    docs_assets = Path(fastapi_offline.__file__).with_name("static")
    app.mount(DOCS_ASSETS, StaticFiles(directory=docs_assets), name="docs-assets")
    web_assets = Path(__file__).with_name("static")
    app.mount(f"{ASSETS}/web", StaticFiles(directory=web_assets), name="web-assets")
