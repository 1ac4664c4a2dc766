"""The `react-agent` command: `serve` runs the HTTP server, `chat`/`graphs`/`tools` the
terminal, `prune` the checkpoint retention, `users` the users and their keys."""

from __future__ import annotations

import argparse
import asyncio
import errno
import ipaddress
import logging
import os
import signal
import socket
import sys
from collections.abc import Sequence
from types import FrameType
from typing import TYPE_CHECKING, NamedTuple

from pydantic import ValidationError

from app.core.registry import GRAPH_MODULES
from app.settings import get_settings

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI

# What each worker process of `serve --workers N` imports and calls for its app.
WORKER_APP = "app.main:worker_app"
# How long a `--workers` child may take to start before its supervisor gives up on it.
WORKER_STARTUP_S = 60

CONFIGURATION_ERROR = "react-agent: configuration error: {where}: {what}\n"
PORT_TAKEN = (
    "{where} is already in use (another server?): stop it, or choose another port with "
    "--port or PORT"
)
CANNOT_LISTEN = "cannot listen on {where} ({reason}): choose another address with --host or HOST"
OPEN_TO_OTHERS = (
    "{where} would let anyone on the network use the agents without a key: set "
    "AGENT_API_KEY, add a user (`react-agent users add NAME`), or set AGENT_JWT_JWKS_URL or "
    "AGENT_TRUSTED_USER_HEADER; or listen on 127.0.0.1"
)
EXIT_CONFIGURATION = 2  # a setting, the database or the address is wrong: nothing started


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="react-agent", description="LangGraph ReAct agents.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve the HTTP API and the web UI")
    serve.add_argument("--host", help="listen address (default: HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (default: PORT or 8000)")
    serve.add_argument(
        "--workers",
        type=_at_least_one,
        default=1,
        metavar="N",
        help="worker processes accepting on one socket, each with its own service on "
        "AGENT_DB (default: 1, no supervisor)",
    )
    chat = commands.add_parser(
        "chat",
        help="chat with an agent in the terminal",
        description="Chat with an agent: streamed answers, prompts for its questions. "
        "Ctrl-C stops a run or cancels a question; Ctrl-D or /exit leaves.",
    )
    chat.add_argument("graph", choices=list(GRAPH_MODULES), help="the agent")
    chat.add_argument("--thread", metavar="ID", help="continue this thread (and its question)")
    chat.add_argument(
        "--server", metavar="URL", help="talk to a running `react-agent serve` at URL"
    )
    _token_argument(chat)
    chat.add_argument(
        "-m",
        "--message",
        metavar="TEXT",
        help="one shot: send TEXT, print the answer, exit (3: it needs an answer and "
        "stdin is not a terminal)",
    )
    chat.add_argument(
        "--hide-reasoning",
        action="store_true",
        help="do not show the model's reasoning (shown dimmed before each answer by default)",
    )
    graphs = commands.add_parser("graphs", help="list the agents")
    graphs.add_argument("--server", metavar="URL", help="list the agents of a running server")
    _token_argument(graphs)
    commands.add_parser(
        "tools",
        help="list every agent's tools, where each comes from (built-in, an MCP server) and "
        "its risk",
    )
    prune = commands.add_parser(
        "prune",
        help="remove old checkpoints and idle threads",
        description="Keep the latest N checkpoints of each thread's history and remove the "
        "threads idle for more than D days (their runs and event logs too); a thread with "
        "a run in progress is left alone. Defaults: AGENT_PRUNE_KEEP, AGENT_PRUNE_IDLE_DAYS.",
    )
    prune.add_argument(
        "--keep", type=_at_least_one, metavar="N", help="checkpoints kept per thread"
    )
    prune.add_argument(
        "--idle-days", type=_positive, metavar="D", help="remove threads idle for more than D days"
    )
    prune.add_argument("--dry-run", action="store_true", help="count what would go; remove nothing")
    users = commands.add_parser(
        "users",
        help="manage users and their keys",
        description="The users of this service's keys, in AGENT_DB. A key is printed once, "
        "alone on the last line; the database keeps only its digest.",
    )
    actions = users.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", help="add a user and print its key")
    add.add_argument("name", help="1-64 of a-z 0-9 . _ -")
    add.add_argument("--admin", action="store_true", help="sees and manages every thread")
    actions.add_parser("list", help="the users, whether admins, and their open key's id")
    revoke = actions.add_parser("revoke", help="refuse a user's keys, or one key, from now on")
    revoke.add_argument("target", metavar="NAME|KEY_ID")
    rotate = actions.add_parser("rotate", help="give a user a new key, revoking its others")
    rotate.add_argument("name")
    usage = actions.add_parser("usage", help="runs and model tokens per user per day (UTC)")
    usage.add_argument("--days", type=_at_least_one, default=7, help="the last N days (default 7)")
    return parser


def _token_argument(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--token",
        metavar="TOKEN",
        help="your key or token for --server, sent as a bearer credential "
        "(default: AGENT_TOKEN, else AGENT_API_KEY)",
    )


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is less than 1")
    return value


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:  # NaN too
        raise argparse.ArgumentTypeError(f"{text} is not more than 0")
    return value


def _serve(args: argparse.Namespace, sock: socket.socket) -> int:
    import uvicorn
    from uvicorn.config import STARTUP_FAILURE

    from app.core.observability.logs import configure_logging

    # One line per run from app.core.runs.events; per-request lines (access log, httpx) would
    # only cost time on the hot path. AGENT_LOG_FORMAT picks text or JSON lines.
    settings = get_settings()
    configure_logging(settings)
    if args.workers > 1:
        return _supervise(_uvicorn_config(WORKER_APP, args, workers=args.workers), sock)

    from app.http.server import create_app

    app = create_app(settings)

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            _announce(self.config, sock)  # uvicorn says it only for sockets it bound

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            _begin_shutdown(app)
            super().handle_exit(sig, frame)

    server = Server(_uvicorn_config(app, args))
    server.run(sockets=[sock])
    return 0 if server.started else STARTUP_FAILURE  # the app's start-up failed


def _uvicorn_config(
    app: FastAPI | str, args: argparse.Namespace, *, workers: int | None = None
) -> uvicorn.Config:
    """The server's uvicorn settings; `app` is an import string of a factory with `workers`."""
    import uvicorn

    from app.http.deadlines import http_protocol

    settings = get_settings()
    return uvicorn.Config(
        app,
        # uvicorn's protocol with a deadline for each request's head and a connection cap.
        http=http_protocol(),
        host=args.host or settings.host,
        port=settings.port if args.port is None else args.port,
        factory=workers is not None,
        workers=workers,
        log_level="info",
        # uvicorn's own records (its tracebacks too) go through the one masking handler.
        log_config=None,
        access_log=False,
        # Streams get the grace period (sse-starlette), then the runs are left to resume.
        timeout_graceful_shutdown=int(settings.agent_shutdown_grace_s) + 2,
        # A worker imports the graphs and opens its database before it answers the
        # supervisor; on a loaded machine that took over uvicorn's 5 s, and the supervisor
        # killed and restarted it, again and again.
        timeout_worker_healthcheck=WORKER_STARTUP_S,
    )


def _announce(config: uvicorn.Config, sock: socket.socket) -> None:
    """Log the address as uvicorn does for a socket it binds (clients read the port here)."""
    host = f"[{config.host}]" if ":" in config.host else config.host
    logging.getLogger("uvicorn.error").info(
        "Uvicorn running on http://%s:%d (Press CTRL+C to quit)", host, sock.getsockname()[1]
    )


def _supervise(config: uvicorn.Config, sock: socket.socket) -> int:
    """Run `config.workers` worker processes on one socket bound here; the exit status.

    uvicorn's own supervisor: it forwards SIGINT/SIGTERM to every worker and waits for
    them all; the kernel hands each connection to whichever worker accepts first.
    """
    from uvicorn.config import STARTUP_FAILURE
    from uvicorn.supervisors import Multiprocess

    _announce(config, sock)  # as uvicorn's own bind does: the children listen on it soon
    supervisor = Multiprocess(config, sockets=[sock])
    try:
        supervisor.run()
    finally:
        sock.close()
    # A worker that failed before serving (its database, say) stopped them all: not clean.
    if any(worker.exitcode == STARTUP_FAILURE for worker in supervisor.processes):
        return STARTUP_FAILURE
    return 0


def worker_app() -> FastAPI:
    """The app of one `serve --workers N` worker process (uvicorn calls it there)."""
    from app.core.observability.logs import configure_logging
    from app.http.server import create_app

    # A spawned worker starts with nothing of the parent's: no logging, no settings.
    settings = get_settings()
    configure_logging(settings)
    app = create_app(settings)
    # Each worker runs a plain uvicorn.Server (no handle_exit to override), which calls
    # this factory after installing its signal handlers: ours go in front of them.
    for sig in (signal.SIGINT, signal.SIGTERM):
        _begin_shutdown_on(sig, app)
    return app


def _begin_shutdown_on(sig: signal.Signals, app: FastAPI) -> None:
    """On `sig`, refuse new runs first, then call the handler installed before."""
    then = signal.getsignal(sig)
    if not callable(then):  # no server handler to chain: the default action stays
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        _begin_shutdown(app)
        then(signum, frame)

    signal.signal(sig, handler)


def _begin_shutdown(app: FastAPI) -> None:
    """Refuse new runs from the signal on, not once the connections drain."""
    service = getattr(app.state, "service", None)
    if service is not None:
        service.begin_shutdown()


def _database_unreachable() -> str | None:
    """Why the database AGENT_DB names cannot be opened (no password shown), or None.

    Checked before the service starts, so that a wrong path, URL or password is one line
    and exit status 2, like any other configuration error.
    """
    settings = get_settings()
    from app.core.errors import StorageUnavailable
    from app.core.storage.backends import check_database
    from tools.secrets import redactor_for

    try:
        asyncio.run(check_database(settings.agent_db))
    except StorageUnavailable as exc:
        return redactor_for(settings)(exc.message)
    return None


def _unguarded(args: argparse.Namespace) -> str | None:
    """Why `serve` must not start: it would listen beyond this machine with no way to sign
    in configured (no AGENT_API_KEY, identity provider, trusted proxy, or key in AGENT_DB)."""
    settings = get_settings()
    host = args.host or settings.host
    try:
        local = host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        local = False
    guarded = (
        settings.agent_api_key or settings.agent_jwt_jwks_url or settings.agent_trusted_user_header
    )
    if local or guarded:
        return None
    from app.core.storage.backends import open_storage

    async def open_keys() -> int:
        async with open_storage(settings) as storage:
            return await storage.runs.open_keys()

    if asyncio.run(open_keys()) > 0:
        return None
    return OPEN_TO_OTHERS.format(where=host)


class NoSocket(NamedTuple):
    """Why `serve` cannot listen: the variable to change, and the line saying so."""

    variable: str
    message: str


def _listen(args: argparse.Namespace) -> socket.socket | NoSocket:
    """The listening socket `serve` will accept on, or why there is none (the port taken,
    an address not of this machine), found before anything starts."""
    settings = get_settings()
    host = args.host or settings.host
    port = settings.port if args.port is None else args.port
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if exc.errno == errno.EADDRINUSE:
            return NoSocket("PORT", PORT_TAKEN.format(where=where))
        return NoSocket("HOST", CANNOT_LISTEN.format(where=where, reason=exc.strerror or exc))
    sock.set_inheritable(True)  # `--workers` children accept on it
    return sock


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    args = _parser().parse_args(argv)
    if args.command == "serve" and args.host:
        # `--host` wins over HOST for all that reads it, the Host allow-list's default
        # (HOST plus the loopback names) included: here and in `--workers` children.
        os.environ["HOST"] = args.host
        get_settings.cache_clear()
    try:
        get_settings()
    except ValidationError as exc:
        for error in exc.errors(include_url=False, include_input=False):
            where = ".".join(str(part) for part in error["loc"]).upper()
            sys.stderr.write(CONFIGURATION_ERROR.format(where=where, what=error["msg"]))
        return EXIT_CONFIGURATION
    if args.command == "serve" or (args.command == "chat" and not args.server):
        unreachable = _database_unreachable()
        if unreachable is not None:
            sys.stderr.write(CONFIGURATION_ERROR.format(where="AGENT_DB", what=unreachable))
            return EXIT_CONFIGURATION
    if args.command == "serve":
        listening = _listen(args)
        if isinstance(listening, NoSocket):
            sys.stderr.write(
                CONFIGURATION_ERROR.format(where=listening.variable, what=listening.message)
            )
            return EXIT_CONFIGURATION
        unguarded = _unguarded(args)
        if unguarded is not None:
            listening.close()
            sys.stderr.write(CONFIGURATION_ERROR.format(where="HOST", what=unguarded))
            return EXIT_CONFIGURATION
        return _serve(args, listening)
    if args.command == "prune":
        from app.cli import prune

        return prune.run(args)
    if args.command == "users":
        from app.cli import users

        return users.run(args)
    # The terminal stack is imported only for the commands that use it.
    from app.cli import commands
    from app.cli.chat import EXIT_STOPPED

    try:
        if args.command == "chat":
            return commands.chat(args)
        if args.command == "graphs":
            return commands.graphs(args)
        if args.command == "tools":
            return commands.tools(args)
    except KeyboardInterrupt:
        return EXIT_STOPPED
    return 2


if __name__ == "__main__":
    sys.exit(main())
