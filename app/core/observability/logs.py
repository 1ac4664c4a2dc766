"""The service's log lines: human-readable or one JSON object a line, ids attached, secrets masked.

Contract:

- `configure_logging(settings)` installs one handler on the root logger (stderr):
  `AGENT_LOG_FORMAT=text` (the default) keeps `time LEVEL logger: message`;
  `json` writes one JSON object per record with `time`, `level`, `logger`, `message`
  and, for a record made while a run executes, `thread_id`, `run_id` and `trace_id`
  (the last only when traces are exported), plus `exc_info` for a traceback.
  In text lines a run's trace id is appended as `trace=<id>`.
- `bind_run(thread_id, run_id, trace_id)` marks the current task (and every task it
  starts) as executing that run; the run core calls it at the start of a run's task.
- `bind_user(user_id)` marks the current request (and the runs it starts) as acting for
  that user: its records carry ` user=<id>` (text) or `user_id` (JSON).
- Secrets never reach a line: every secret of the settings (`OPENAI_API_KEY`,
  `TUSHARE_TOKEN`, `AGENT_API_KEY`, ...) and `LANGSMITH_API_KEY` from the environment,
  whole or in pieces (`tools.secrets.Redactor`), becomes `***` in the message and the
  traceback, whatever logger wrote them.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime

from app.settings import Settings
from tools.secrets import Redactor, secrets_of

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Loggers that say one line per HTTP request: only their warnings are worth a line.
CHATTY = ("httpx", "httpx2")


@dataclass(frozen=True, slots=True)
class RunContext:
    """The run a record was made in."""

    thread_id: str
    run_id: str
    trace_id: str | None = None


_run: ContextVar[RunContext | None] = ContextVar("agent_run", default=None)
_user: ContextVar[str | None] = ContextVar("agent_user", default=None)


def bind_run(thread_id: str, run_id: str, trace_id: str | None = None) -> None:
    """Mark the current task as executing this run (its records carry the ids)."""
    _run.set(RunContext(thread_id, run_id, trace_id))


def bind_user(user_id: str) -> None:
    """Mark the current task (a request, and the runs it starts) as acting for this user:
    its records carry the user's id (never a key)."""
    _user.set(user_id)


def current_run() -> RunContext | None:
    return _run.get()


def redactor_for(settings: Settings) -> Redactor:
    """Masks every secret of the settings, and LangSmith's key from the environment."""
    secrets = secrets_of(settings)
    secrets.append(os.environ.get("LANGSMITH_API_KEY") or os.environ.get("LANGCHAIN_API_KEY", ""))
    return Redactor(secret for secret in secrets if secret)


class TextFormatter(logging.Formatter):
    """`time LEVEL logger: message`, ` trace=<id>` for a run's records, secrets masked."""

    def __init__(self, redact: Redactor) -> None:
        super().__init__(TEXT_FORMAT)
        self._redact = redact

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        user = _user.get()
        if user is not None:
            line = f"{line} user={user}"
        run = _run.get()
        if run is not None and run.trace_id:
            line = f"{line} trace={run.trace_id}"
        return self._redact(line)


class JsonFormatter(logging.Formatter):
    """One JSON object per record; a run's ids on each of its records; secrets masked."""

    def __init__(self, redact: Redactor) -> None:
        super().__init__()
        self._redact = redact

    def format(self, record: logging.LogRecord) -> str:
        mask = self._redact
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": mask(record.getMessage()),
        }
        run = _run.get()
        if run is not None:
            line["thread_id"] = run.thread_id
            line["run_id"] = run.run_id
            if run.trace_id:
                line["trace_id"] = run.trace_id
        user = _user.get()
        if user is not None:
            line["user_id"] = user
        if record.exc_info:
            line["exc_info"] = mask(self.formatException(record.exc_info))
        elif record.exc_text:
            line["exc_info"] = mask(record.exc_text)
        if record.stack_info:
            line["stack_info"] = mask(self.formatStack(record.stack_info))
        return json.dumps(line, ensure_ascii=False)


def formatter_for(settings: Settings) -> logging.Formatter:
    """The formatter `AGENT_LOG_FORMAT` asks for, masking the settings' secrets."""
    redact = redactor_for(settings)
    if settings.agent_log_format == "json":
        return JsonFormatter(redact)
    return TextFormatter(redact)


def configure_logging(settings: Settings, *, level: int = logging.INFO) -> None:
    """One stderr handler on the root logger, in the configured format (replaces others)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter_for(settings))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(True)  # a library's warning is a record too, in the same format
    for chatty in CHATTY:
        logging.getLogger(chatty).setLevel(logging.WARNING)
