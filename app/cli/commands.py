"""The `chat`, `graphs` and `tools` commands: the terminal side of the CLI.

Kept apart from `app.main` so that `react-agent serve` never imports the terminal stack.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

from prompt_toolkit.application import create_app_session
from prompt_toolkit.output import create_output
from pydantic import ValidationError
from rich.console import Console

from app.cli.agent import Agent
from app.cli.asking import Asker
from app.cli.chat import EXIT_ERROR, Chat
from app.cli.remote import connect
from app.cli.terminal import ERROR_LINE, Renderer
from app.core.errors import ServiceError
from app.core.observability.logs import formatter_for
from app.core.registry import GraphInfo, available_graphs, describe
from app.settings import Settings, get_settings

logger = logging.getLogger(__name__)

CHAT_LOG: Final = "cli.log"
CONTINUE: Final = "{program} chat {graph_id} --thread {{thread_id}}"
PROGRAM: Final = "react-agent"
BAD_SETTINGS: Final = "配置无效：{errors}"
INTERNAL: Final = "内部错误 {error}（详情见 {log}）"
INTERNAL_NO_LOG: Final = "内部错误 {error}"


def invoked_as() -> str:
    """How to start this program again from this shell: `react-agent` when PATH finds
    this one, else its path (`.venv/bin/react-agent` from the project's directory)."""
    script = Path(sys.argv[0])
    if script.name != PROGRAM:  # `python -m app.main`: no script to point at
        return PROGRAM
    found = shutil.which(PROGRAM)
    if found is not None and Path(found).resolve() == script.resolve():
        return PROGRAM
    try:
        return str(script.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(script.resolve())


def _settings() -> Settings | None:
    try:
        return get_settings()
    except ValidationError as exc:
        errors = "; ".join(
            f"{'.'.join(map(str, error['loc'])).upper()}: {error['msg']}" for error in exc.errors()
        )
        _fail(BAD_SETTINGS.format(errors=errors))
        return None


def _console(*, stderr: bool = False) -> Console:
    console = Console(stderr=stderr, highlight=False)
    # Lines for a pipe or a file are not cut at some guessed width.
    console.soft_wrap = not console.is_terminal
    return console


def _fail(message: str) -> None:
    _console(stderr=True).print(ERROR_LINE.format(message=message), style="bold red", markup=False)


def _log_to(path: Path | None, settings: Settings) -> None:
    """Send log records to `path` (none: drop them), secrets masked; the terminal is for
    the chat."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    if path is None:
        root.addHandler(logging.NullHandler())
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(formatter_for(settings))
        root.addHandler(handler)
        logging.getLogger("app").setLevel(logging.INFO)
    root.setLevel(logging.WARNING)
    logging.captureWarnings(True)


def _credential(args: argparse.Namespace, settings: Settings) -> str | None:
    """What `--server` is sent as a bearer credential: --token, else AGENT_TOKEN, else
    AGENT_API_KEY (the single admin's key, as before users existed); None without any."""
    configured = (settings.agent_token, settings.agent_api_key)
    given = [args.token, *(secret.get_secret_value() for secret in configured if secret)]
    return next((value.strip() for value in given if value and value.strip()), None)


@asynccontextmanager
async def _agent(args: argparse.Namespace, settings: Settings) -> AsyncIterator[Agent]:
    if args.server:
        async with connect(args.server, args.graph, _credential(args, settings)) as remote:
            await remote.check()
            yield remote
    else:
        # Imported here: the model client stack is only needed to run in-process.
        from app.cli.local import open_local

        async with open_local(args.graph, settings) as local:
            yield local


async def _converse(args: argparse.Namespace, settings: Settings) -> int:
    answers = _console()
    # Piped stdout carries the answer alone; everything else goes to stderr.
    status = answers if answers.is_terminal else _console(stderr=True)
    renderer = Renderer(status, answers, show_reasoning=not args.hide_reasoning)
    interactive = sys.stdin.isatty()
    command = CONTINUE.format(program=invoked_as(), graph_id=args.graph)
    if args.server:
        command += " --server " + args.server.replace("{", "{{").replace("}", "}}")
    # Prompts belong on the terminal even when stdout is redirected.
    with create_app_session(output=create_output(always_prefer_tty=True)):
        try:
            async with _agent(args, settings) as agent:
                chat = Chat(
                    agent,
                    renderer,
                    Asker(status) if interactive else None,
                    continue_command=command,
                )
                opening = await chat.open(args.thread)
                if args.message is not None:
                    return await chat.one_shot(args.message, opening)
                return await chat.interactive(opening)
        except ServiceError as exc:
            renderer.close()
            renderer.error(exc.message)
            return EXIT_ERROR


def chat(args: argparse.Namespace) -> int:
    """`react-agent chat`: converse with an agent in the terminal."""
    settings = _settings()
    if settings is None:
        return EXIT_ERROR
    log = None if args.server else settings.agent_db.data_dir / CHAT_LOG
    _log_to(log, settings)
    try:
        return asyncio.run(_converse(args, settings))
    except Exception as exc:  # the top-level handler: one line on screen, the rest in the log
        logger.exception("chat failed")
        error = f"{type(exc).__name__}: {exc}"[:300]
        line = INTERNAL.format(error=error, log=log) if log else INTERNAL_NO_LOG.format(error=error)
        _fail(line)
        return EXIT_ERROR


def graphs(args: argparse.Namespace) -> int:
    """`react-agent graphs`: list the agents, here or on a server."""
    settings = _settings()
    if settings is None:
        return EXIT_ERROR
    _log_to(None, settings)
    if args.server:
        key = _credential(args, settings)

        async def listing() -> list[GraphInfo]:
            async with connect(args.server, "", key) as remote:
                return await remote.graphs()

        try:
            infos = asyncio.run(listing())
        except ServiceError as exc:
            _fail(exc.message)
            return EXIT_ERROR
    else:
        infos = describe(available_graphs(settings))
    console = _console()
    width = max((len(info.id) for info in infos), default=0)
    for info in infos:
        console.print(f"{info.id:<{width}}  {info.description}", markup=False)
    return 0


def tools(args: argparse.Namespace) -> int:
    """`react-agent tools`: every agent's tools, their source and risk (app.cli.tool_list)."""
    settings = _settings()
    if settings is None:
        return EXIT_ERROR
    _log_to(None, settings)  # a server that fails is said by the listing itself
    from app.cli import tool_list

    return tool_list.run(settings)
