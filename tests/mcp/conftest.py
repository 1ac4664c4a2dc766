"""MCP both ways: the service's servers against real MCP peers.

The service's fixtures (`backend`, `Backend`, `serving`, `Api`) come from
tests/service/conftest.py; the MCP servers are PyPI's reference servers (stdio) and the
Tushare double (streamable HTTP and SSE).
"""

from __future__ import annotations

from tests.service.conftest import backend  # noqa: F401  (a fixture, re-exported)
