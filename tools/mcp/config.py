"""AGENT_MCP_CONFIG: MCP servers declared in a JSON file, in the format MCP clients use.

    {"mcpServers": {"time": {"command": "mcp-server-time", "args": [], "env": {},
                             "agents": ["weather"], "risk": {"convert_time": "high"}},
                    "search": {"url": "https://...", "transport": "streamable_http",
                               "headers": {"Authorization": "Bearer ${SEARCH_TOKEN}"},
                               "agents": ["weather"], "include": ["search"], "timeout_s": 20}}}

Beside the connection keys, each server takes ours: `agents` (the graph ids that get its
tools; none by default), `include` / `exclude` (tool names), `risk` per tool (`low`, or
`high`: confirmed by the user first) and `timeout_s` (per call). `${VAR}` is read from the
environment (then the `.env` files); what it stands for in `env` or `headers` joins the
secrets the redactor masks, as does a literal `Authorization` header.

Reading never raises: a file that cannot be used is one problem, a server that cannot be
used is one problem naming it, and every other server is kept.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from dotenv import dotenv_values
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from tools.interrupts import Risk

SERVERS_KEY = "mcpServers"
NOT_FOUND = "cannot read it ({reason})"
BAD_JSON = "not valid JSON ({reason})"
NOT_AN_OBJECT = 'expected an object with "mcpServers": {{name: server, ...}}'
NO_CONNECTION = 'give "command" (a local program, over stdio) or "url" (a server over HTTP)'
BOTH_CONNECTIONS = 'give "command" or "url", not both'
UNSET_VARIABLE = "${{{name}}} is not set in the environment"
BAD_NAME = (
    "a server's name is 1-40 letters, digits, _ or - (it may prefix its tools' names, "
    "which models take in that alphabet only)"
)
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
PROBLEM = "AGENT_MCP_CONFIG {path}: {what}"
SERVER_PROBLEM = "AGENT_MCP_CONFIG {path}: server {name!r}: {reason}"

# What `risk` says, as the tools node's risk levels: `high` is confirmed before it runs.
RISKS: dict[str, Risk] = {"low": "safe", "high": "sensitive"}
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class _Ours(BaseModel):
    """The keys this service adds to a server's entry."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agents: tuple[str, ...] = ()
    include: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()
    risk: dict[str, Literal["low", "high"]] = Field(default_factory=dict)
    timeout_s: float = Field(30.0, gt=0)


class _Stdio(_Ours):
    command: str = Field(min_length=1)
    args: tuple[str, ...] = ()
    env: dict[str, str] | None = None
    cwd: str | None = None


class _Http(_Ours):
    url: str = Field(pattern=r"^https?://")
    transport: Literal["streamable_http", "sse"] = "streamable_http"
    headers: dict[str, str] = Field(default_factory=dict)


class McpServer(BaseModel):
    """One usable server: how to reach it (langchain-mcp-adapters' connection) and ours."""

    model_config = ConfigDict(frozen=True)

    name: str
    connection: dict[str, Any]
    agents: tuple[str, ...]
    include: frozenset[str] | None
    exclude: frozenset[str]
    risk: dict[str, Risk]
    timeout_s: float

    def offers(self, tool_name: str) -> bool:
        """Whether `include`/`exclude` let the server's tool `tool_name` through."""
        if self.include is not None and tool_name not in self.include:
            return False
        return tool_name not in self.exclude


class McpConfig(BaseModel):
    """What AGENT_MCP_CONFIG declared: the usable servers, one line per problem, and the
    secrets its values hold (a `SecretStr` tuple, so the redactor finds them)."""

    model_config = ConfigDict(frozen=True)

    path: str | None = None
    servers: tuple[McpServer, ...] = ()
    problems: tuple[str, ...] = ()
    secrets: tuple[SecretStr, ...] = ()

    def for_agent(self, graph_id: str) -> tuple[McpServer, ...]:
        """The servers whose tools `graph_id` gets, in the file's order."""
        return tuple(server for server in self.servers if graph_id in server.agents)


def load_mcp_config(path: str | Path) -> McpConfig:
    """Read and check the file at `path`; never raises (see `McpConfig.problems`)."""
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        return _broken(where, NOT_FOUND.format(reason=exc.strerror or type(exc).__name__))
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        return _broken(where, BAD_JSON.format(reason=f"line {exc.lineno}: {exc.msg}"))
    entries = document.get(SERVERS_KEY) if isinstance(document, dict) else None
    if not isinstance(entries, dict) or set(document) - {SERVERS_KEY}:
        return _broken(where, NOT_AN_OBJECT)
    variables = _variables()
    servers: list[McpServer] = []
    problems: list[str] = []
    secrets: list[str] = []
    for name, entry in entries.items():
        try:
            server, found = _server(str(name), entry, variables)
        except ValueError as exc:
            problems.append(SERVER_PROBLEM.format(path=where, name=name, reason=exc))
            continue
        servers.append(server)
        secrets.extend(found)
    return McpConfig(
        path=where,
        servers=tuple(servers),
        problems=tuple(problems),
        secrets=tuple(SecretStr(value) for value in dict.fromkeys(secrets) if value.strip()),
    )


def _broken(path: str, what: str) -> McpConfig:
    return McpConfig(path=path, problems=(PROBLEM.format(path=path, what=what),))


def _variables() -> dict[str, str]:
    """What `${VAR}` may name: the `.env` files' values, the environment's winning."""
    from tools.settings import env_files  # the same files the settings read

    found: dict[str, str] = {}
    for file in env_files():
        if file.is_file():
            found.update({k: v for k, v in dotenv_values(file).items() if v is not None})
    return {**found, **os.environ}


def _expand(value: str, variables: Mapping[str, str], secrets: list[str] | None) -> str:
    """`value` with each `${VAR}` replaced; what replaced it goes to `secrets` if given."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in variables:
            raise ValueError(UNSET_VARIABLE.format(name=name))
        if secrets is not None:
            secrets.append(variables[name])
        return variables[name]

    return _VARIABLE.sub(one, value)


def _server(name: str, entry: object, variables: Mapping[str, str]) -> tuple[McpServer, list[str]]:
    """The usable server of one entry and its secrets; ValueError with the reason."""
    if not _NAME.match(name):
        raise ValueError(BAD_NAME)
    if not isinstance(entry, dict):
        raise ValueError("expected an object")
    if ("command" in entry) == ("url" in entry):
        raise ValueError(BOTH_CONNECTIONS if "command" in entry else NO_CONNECTION)
    try:
        parsed: _Stdio | _Http = (_Stdio if "command" in entry else _Http).model_validate(entry)
    except ValidationError as exc:
        raise ValueError(_reason(exc)) from None
    secrets: list[str] = []
    connection: dict[str, Any]
    if isinstance(parsed, _Stdio):
        connection = {
            "transport": "stdio",
            "command": _expand(parsed.command, variables, None),
            "args": [_expand(arg, variables, None) for arg in parsed.args],
        }
        if parsed.env is not None:
            connection["env"] = {k: _expand(v, variables, secrets) for k, v in parsed.env.items()}
        if parsed.cwd is not None:
            connection["cwd"] = _expand(parsed.cwd, variables, None)
    else:
        headers = {k: _expand(v, variables, secrets) for k, v in parsed.headers.items()}
        secrets.extend(v for k, v in headers.items() if k.lower() == "authorization")
        connection = {
            "transport": parsed.transport,
            "url": _expand(parsed.url, variables, secrets),
            "headers": headers,
            "timeout": parsed.timeout_s,
        }
    server = McpServer(
        name=name,
        connection=connection,
        agents=parsed.agents,
        include=None if parsed.include is None else frozenset(parsed.include),
        exclude=frozenset(parsed.exclude),
        risk={tool: RISKS[level] for tool, level in parsed.risk.items()},
        timeout_s=parsed.timeout_s,
    )
    return server, secrets


def _reason(exc: ValidationError) -> str:
    """A validation error as one readable clause (never the values: they may be secrets)."""
    parts = []
    for error in exc.errors(include_url=False, include_input=False)[:3]:
        where = ".".join(str(part) for part in error["loc"])
        if error["type"] == "extra_forbidden":
            parts.append(f"unknown key {where!r}")
        else:
            parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)
