"""The browser UI: the Vite build of `web/` (in `app/http/static`) served at `/`.

`index.html` is revalidated on every load (a new build renames its assets), the
hashed files under `/assets` are cached for a year. Without a build, `/` answers a
short page saying how to make one instead of a 404.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
from fastapi import FastAPI
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles
from starlette.responses import Response

WEB_DIST = Path(__file__).parent / "static"

INDEX_CACHE = "no-cache"
ASSET_CACHE = "public, max-age=31536000, immutable"

# The page only loads its own scripts and talks to its own origin; anything a model or
# tool manages to smuggle into the DOM still cannot run or phone home.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)

PAGE_HEADERS = {
    "Cache-Control": INDEX_CACHE,
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

NOT_BUILT = """<!doctype html>
<html lang="zh-CN"><head><meta charset="utf-8"><title>React Agent</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: system-ui, sans-serif; max-width: 40rem; margin: 4rem auto;
padding: 0 1rem; line-height: 1.6">
<h1>网页界面尚未构建</h1>
<p>请在项目目录运行 <code>make install</code>（需要 Node.js 与 npm），然后重启服务。</p>
<p>The web UI is not built yet: run <code>make install</code> (needs Node.js and npm),
then restart the service. The API works without it: see <a href="/docs">/docs</a>.</p>
</body></html>
"""


class _Assets(StaticFiles):
    """Hashed build files: immutable, and a missing build is a 404 rather than an error."""

    async def check_config(self) -> None:
        if self.directory is not None and await anyio.Path(self.directory).is_dir():
            await super().check_config()

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers["Cache-Control"] = ASSET_CACHE
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response


def mount_web_ui(app: FastAPI, dist: Path = WEB_DIST) -> None:
    """Serve the UI from `dist` at `/` (call after the API routes so they win)."""

    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    def web_index() -> Response:
        page = dist / "index.html"
        if not page.is_file():
            return HTMLResponse(NOT_BUILT, status_code=503, headers={"Cache-Control": "no-store"})
        return FileResponse(page, media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)

    app.mount("/assets", _Assets(directory=dist / "assets", check_dir=False), name="web-assets")
