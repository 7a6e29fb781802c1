"""``/docs`` (``serve --docs`` only): Swagger UI from files the installed package
``swagger-ui-py`` ships, never a script from a CDN. The page lives on the origin
where the status page's sign-in cookie works: a script fetched from elsewhere at view
time (unpinned, as FastAPI's default page does) could read every page as the signed-in
user. Here every script comes from this server (the vendored bundle and a small
initializer, no inline script), under a Content-Security-Policy that allows no other."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from gate.errors import NotFound

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin"}
ASSETS = {"swagger-ui.css": "text/css", "swagger-ui-bundle.js": "text/javascript"}
PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>prompt-gate API</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script></body></html>
"""
INIT = """window.ui = SwaggerUIBundle({url: "/openapi.json", dom_id: "#swagger-ui",
  presets: [SwaggerUIBundle.presets.apis], layout: "BaseLayout", queryConfigEnabled: false});
"""


def assets_dir() -> Path:
    """The swagger-ui dist files the package ``swagger-ui-py`` installs."""
    from importlib.resources import files

    return Path(str(files("swagger_ui") / "static"))


def router() -> APIRouter:
    assets = assets_dir()
    missing = [name for name in ASSETS if not (assets / name).is_file()]
    if missing:
        raise RuntimeError(f"swagger-ui-py lacks {', '.join(missing)}: reinstall prompt-gate")
    docs = APIRouter(include_in_schema=False)

    @docs.get("/docs")
    def page() -> HTMLResponse:
        return HTMLResponse(PAGE, headers={**HEADERS, "Cache-Control": "no-store"})

    @docs.get("/docs/init.js")
    def init() -> Response:
        return Response(INIT, media_type="text/javascript", headers=HEADERS)

    @docs.get("/docs/assets/{name}")
    def asset(name: str) -> Response:
        if name not in ASSETS:  # the two files named, never a path into the package
            raise NotFound(f"no asset {name[:80]!r}")
        return Response(
            (assets / name).read_bytes(), media_type=ASSETS[name], headers={**HEADERS, "Cache-Control": "max-age=3600"}
        )

    return docs
