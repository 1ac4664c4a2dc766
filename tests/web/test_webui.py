"""Serving the built UI: index at `/`, hashed assets cached for good, a hint without a build;
the service serves the UI `make web` builds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.http.server import create_app
from app.http.webui import ASSET_CACHE, mount_web_ui
from app.settings import get_settings


@pytest.fixture
def dist(tmp_path: Path) -> Path:
    root = tmp_path / "dist"
    (root / "assets").mkdir(parents=True)
    (root / "index.html").write_text(
        '<!doctype html><script type="module" src="/assets/index-abc123.js"></script>'
    )
    (root / "assets" / "index-abc123.js").write_text("console.log('ui')")
    return root


def _client(dist: Path) -> TestClient:
    app = FastAPI()

    @app.get("/api/ping")
    def ping() -> dict[str, str]:
        return {"pong": "yes"}

    mount_web_ui(app, dist)
    return TestClient(app)


def test_the_index_is_served_at_the_root_and_revalidated_on_every_load(dist: Path) -> None:
    response = _client(dist).get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["cache-control"] == "no-cache"
    assert "script-src 'self'" in response.headers["content-security-policy"]
    assert "/assets/index-abc123.js" in response.text


def test_hashed_assets_are_cached_for_a_year(dist: Path) -> None:
    client = _client(dist)
    response = client.get("/assets/index-abc123.js")
    assert response.status_code == 200
    assert response.headers["cache-control"] == ASSET_CACHE
    assert "javascript" in response.headers["content-type"]
    assert client.get("/assets/missing.js").status_code == 404


def test_without_a_build_the_root_says_how_to_make_one(tmp_path: Path) -> None:
    client = _client(tmp_path / "not-built")
    response = client.get("/")
    assert response.status_code == 503
    assert "make install" in response.text
    assert client.get("/assets/index.js").status_code == 404
    assert client.get("/api/ping").json() == {"pong": "yes"}


@pytest.mark.processes  # `make web`
def test_the_service_serves_the_built_ui_and_its_assets_beside_its_api_routes(
    built_ui: Path,
) -> None:
    # Addressed as localhost: the Host allow-list refuses TestClient's "testserver".
    with TestClient(create_app(get_settings()), base_url="http://localhost") as client:
        graphs = client.get("/api/graphs")
        assert graphs.status_code == 200
        assert {graph["id"] for graph in graphs.json()} >= {"weather", "tushare"}
        page = client.get("/")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert page.text == built_ui.read_text()
        assets = re.findall(r'(?:src|href)="(/assets/[^"]+)"', page.text)
        assert assets, page.text
        for asset in assets:
            served = client.get(asset)
            assert served.status_code == 200, asset
            assert served.content == (built_ui.parent / asset.lstrip("/")).read_bytes()
        assert client.get("/healthz").json() == {"status": "ok"}
