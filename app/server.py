"""The FastAPI application (the HTTP service issue fills in the API)."""

from __future__ import annotations

from fastapi import FastAPI


def create_app() -> FastAPI:
    """Build the ASGI app."""
    app = FastAPI(title="react-agent")

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app
