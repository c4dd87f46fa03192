"""``/docs`` (Swagger UI) and ``/redoc`` with no internet: FastAPI's own pages, their
scripts and styles served from the ``fastapi-offline`` package instead of a CDN."""

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


@router.get("/docs", response_class=HTMLResponse)
def swagger_ui(request: Request) -> HTMLResponse:
    """Swagger UI over the API's OpenAPI schema."""
    root = request.scope.get("root_path", "")
    return get_swagger_ui_html(
        openapi_url=root + OPENAPI_URL,
        title="dicesweep API",
        swagger_js_url=f"{root}{DOCS_ASSETS}/swagger-ui-bundle.js",
        swagger_css_url=f"{root}{DOCS_ASSETS}/swagger-ui.css",
        swagger_favicon_url=f"{root}{ASSETS}/web/favicon.svg",
    )


@router.get("/redoc", response_class=HTMLResponse)
def redoc(request: Request) -> HTMLResponse:
    """ReDoc over the API's OpenAPI schema, in the system's fonts."""
    root = request.scope.get("root_path", "")
    return get_redoc_html(
        openapi_url=root + OPENAPI_URL,
        title="dicesweep API",
        redoc_js_url=f"{root}{DOCS_ASSETS}/redoc.standalone.js",
        redoc_favicon_url=f"{root}{ASSETS}/web/favicon.svg",
        with_google_fonts=False,
    )


def mount_assets(app: FastAPI) -> None:
    """Serve the pages' assets and the docs' from this package and ``fastapi-offline``."""
    docs_assets = Path(fastapi_offline.__file__).with_name("static")
    app.mount(DOCS_ASSETS, StaticFiles(directory=docs_assets), name="docs-assets")
    web_assets = Path(__file__).with_name("static")
    app.mount(f"{ASSETS}/web", StaticFiles(directory=web_assets), name="web-assets")
