"""The `react-agent` command: `serve` runs the HTTP server, `chat`/`graphs` the terminal."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import FrameType

from pydantic import ValidationError

from app.core.registry import GRAPH_MODULES
from app.settings import get_settings


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="react-agent", description="LangGraph ReAct agents.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve the HTTP API and the web UI")
    serve.add_argument("--host", help="listen address (default: HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (default: PORT or 8000)")
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
    return parser


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from app.core.logs import configure_logging
    from app.http.server import create_app

    # One line per run from app.core.events; per-request lines (access log, httpx) would
    # only cost time on the hot path. AGENT_LOG_FORMAT picks text or JSON lines.
    settings = get_settings()
    configure_logging(settings)
    app = create_app(settings)

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            # New runs are refused from the signal on, not once the connections drain.
            service = getattr(app.state, "service", None)
            if service is not None:
                service.begin_shutdown()
            super().handle_exit(sig, frame)

    config = uvicorn.Config(
        app,
        host=args.host or settings.host,
        port=settings.port if args.port is None else args.port,
        log_level="info",
        # uvicorn's own records (its tracebacks too) go through the one masking handler.
        log_config=None,
        access_log=False,
        # Streams get the grace period (sse-starlette), then the runs are left to resume.
        timeout_graceful_shutdown=int(settings.agent_shutdown_grace_s) + 2,
    )
    Server(config).run()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    args = _parser().parse_args(argv)
    try:
        get_settings()
    except ValidationError as exc:
        for error in exc.errors(include_url=False, include_input=False):
            where = ".".join(str(part) for part in error["loc"]).upper()
            sys.stderr.write(f"react-agent: configuration error: {where}: {error['msg']}\n")
        return 2
    if args.command == "serve":
        return _serve(args)
    # The terminal stack is imported only for the commands that use it.
    from app.cli import commands
    from app.cli.chat import EXIT_STOPPED

    try:
        if args.command == "chat":
            return commands.chat(args)
        if args.command == "graphs":
            return commands.graphs(args)
    except KeyboardInterrupt:
        return EXIT_STOPPED
    return 2


if __name__ == "__main__":
    sys.exit(main())
