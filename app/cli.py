"""The `react-agent` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from app.settings import get_settings


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="react-agent", description="LangGraph ReAct agents.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve the HTTP API and the web UI")
    serve.add_argument("--host", help="listen address (default: HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (default: PORT or 8000)")
    return parser


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from app.server import create_app

    settings = get_settings()
    uvicorn.run(
        create_app(),
        host=args.host or settings.host,
        port=settings.port if args.port is None else args.port,
        log_level="info",
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    args = _parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
