"""AGENT_MCP_CONFIG's file as `tools.mcp.config` reads it: every problem is one line
naming the file (and the server), and the usable servers are kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.mcp.config import load_mcp_config
from tools.secrets import redactor_for
from tools.settings import McpSettings


def test_a_file_that_is_not_json_is_one_problem_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {"time": ')

    config = load_mcp_config(path)

    assert config.servers == ()
    [problem] = config.problems
    assert problem.startswith(f"AGENT_MCP_CONFIG {path}: not valid JSON (line 1")


def test_a_missing_file_is_one_problem_naming_it(tmp_path: Path) -> None:
    config = load_mcp_config(tmp_path / "absent.json")

    assert config.problems == (
        f"AGENT_MCP_CONFIG {tmp_path / 'absent.json'}: cannot read it (No such file or directory)",
    )


def test_a_bad_server_is_left_out_and_the_others_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    path = tmp_path / "mcp.json"
    servers = {
        "good": {"url": "http://127.0.0.1:9/mcp", "agents": ["weather"]},
        "both": {"command": "x", "url": "http://127.0.0.1:9/mcp"},
        "unset": {"url": "http://127.0.0.1:9/mcp", "headers": {"X-Key": "${NOT_SET_ANYWHERE}"}},
        "risky": {"command": "x", "risk": {"t": "medium"}},
        "local": {"command": "x", "timeout_s": 0},
        "my server": {"command": "x"},
    }
    path.write_text(json.dumps({"mcpServers": servers}))

    config = load_mcp_config(path)

    assert [server.name for server in config.servers] == ["good"]
    assert config.problems == (
        f'AGENT_MCP_CONFIG {path}: server \'both\': give "command" or "url", not both',
        f"AGENT_MCP_CONFIG {path}: server 'unset': ${{NOT_SET_ANYWHERE}} is not set in the "
        "environment",
        f"AGENT_MCP_CONFIG {path}: server 'risky': risk.t: Input should be 'low' or 'high'",
        f"AGENT_MCP_CONFIG {path}: server 'local': timeout_s: Input should be greater than 0",
        f"AGENT_MCP_CONFIG {path}: server 'my server': a server's name is 1-40 letters, "
        "digits, _ or - (it may prefix its tools' names, which models take in that alphabet "
        "only)",
    )


def test_values_read_from_the_environment_into_headers_and_env_are_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEARCH_TOKEN", "search-token-5c2e9b")
    monkeypatch.setenv("DB_PASSWORD", "db-pass-81f0aa")
    monkeypatch.setenv("SERVER_DIR", "/srv/mcp")
    path = tmp_path / "mcp.json"
    servers = {
        "search": {
            "url": "http://127.0.0.1:9/mcp",
            "headers": {"Authorization": "Bearer ${SEARCH_TOKEN}"},
        },
        "db": {"command": "${SERVER_DIR}/db", "env": {"PASSWORD": "${DB_PASSWORD}"}},
    }
    path.write_text(json.dumps({"mcpServers": servers}))
    monkeypatch.setenv("AGENT_MCP_CONFIG", str(path))

    settings = McpSettings()
    redact = redactor_for(settings)

    search, db = settings.agent_mcp_config.servers
    assert search.connection["headers"] == {"Authorization": "Bearer search-token-5c2e9b"}
    assert db.connection["command"] == "/srv/mcp/db"
    assert db.connection["env"] == {"PASSWORD": "db-pass-81f0aa"}
    masked = redact("sent search-token-5c2e9b and db-pass-81f0aa, the end")
    assert "search-token" not in masked and "db-pass" not in masked and "***" in masked
    assert masked.endswith(", the end")
    assert redact("/srv/mcp/db") == "/srv/mcp/db"  # a path in `command` is no secret


def test_the_example_config_reads_without_a_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SEARCH_API_KEY", "LEGACY_KEY"):
        monkeypatch.setenv(name, f"{name.lower()}-value-123")

    config = load_mcp_config(Path(__file__).parents[2] / "deploy" / "mcp.example.json")

    assert config.problems == ()
    assert [server.name for server in config.servers] == [
        "time",
        "fetch",
        "files",
        "search",
        "legacy",
    ]
    assert [server.name for server in config.for_agent("weather")] == ["time", "fetch", "search"]
    files = config.servers[2]
    assert files.risk["write_file"] == "sensitive" and not files.offers("move_file")
