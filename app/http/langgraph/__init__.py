"""LangGraph's own HTTP API (`/assistants`, `/threads`, `/runs`, `/store`, `/info`, `/ok`), served
beside `/api` on the same run core: the routes translate, `encoding` converts."""

from __future__ import annotations

from fastapi import APIRouter

from app.http.langgraph import assistants, info, runs, store, thread_stream, threads


def langgraph_api() -> APIRouter:
    """Every route of LangGraph's API, behind the same guards as `/api`."""
    router = APIRouter()
    for module in (info, assistants, threads, runs, thread_stream, store):
        router.include_router(module.api)
    return router
