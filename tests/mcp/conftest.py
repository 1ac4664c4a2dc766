"""MCP both ways: the service's servers against real MCP peers.

The service's fixtures (`backend`, `Backend`, `serving`, `Api`) come from
tests/service/conftest.py, the terminal's (`cli`, `cli_env`) from tests/cli/conftest.py;
the MCP servers are PyPI's reference servers (stdio) and the Tushare double (streamable
HTTP and SSE), the MCP clients the python-sdk's and npm's MCP Inspector.
"""

from __future__ import annotations

# Fixtures, re-exported: the service's storage backend, the terminal's CLI.
from tests.cli.conftest import cli as cli
from tests.cli.conftest import cli_env as cli_env
from tests.service.conftest import backend as backend
