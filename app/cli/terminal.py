"""AG-UI events -> the terminal: streamed Markdown, tool spinners, one-line tool results.

The renderer only draws; it never decides anything about the run. The same events
come from the in-process transformer (`app.events.stream_run`) and from a server's
SSE stream, so both paths draw identical screens.

On a terminal, assistant text streams into a live view that shows the tail of the
rendered Markdown (so it never outgrows the screen); at the end of the message the
live view is replaced by the full Markdown. Elsewhere (a pipe, a file) the text is
written as it arrives, unrendered, which is what scripts want.

A reply's reasoning (REASONING_* events, a thread's reasoning messages) is drawn
dimmed before what it led to, live the same way, and always on the status console:
piped stdout carries the answer alone. `show_reasoning=False` leaves it out.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    Message,
    ReasoningMessage,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.markdown import Markdown
from rich.padding import Padding
from rich.segment import Segment
from rich.spinner import Spinner
from rich.text import Text

from app.cli.names import shown_name
from app.core.runs.threads import STOPPED_KEY

THINKING: Final = "思考中..."
RUNNING: Final = "正在执行 {names}..."
STOPPED: Final = "已停止"
ERROR_LINE: Final = "错误：{message}"
USER_PREFIX: Final = "你> "
HISTORY_RULE: Final = "以上是历史记录"
REASONING_TITLE: Final = "思考过程"
REASONING_STYLE: Final = "dim"
EARLIER_OMITTED: Final = "（省略了更早的 {count} 条消息）"

ASK_TOOL_PREFIX: Final = "ask_"
MAX_ARG_CHARS: Final = 40
DATE_KEY: Final = re.compile(r"(^|_)date$")
COMPACT_DATE: Final = re.compile(r"\d{8}")
REFRESH_PER_SECOND: Final = 12


@dataclass(slots=True)
class _Call:
    name: str
    args: list[str] = field(default_factory=list)


class _Tail:
    """The last screenful of `renderable` rendered, so a live view fits on the screen."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = console.render_lines(self.renderable, options.reset_height(), pad=False)
        keep = max(1, console.size.height - 2)
        for index, line in enumerate(lines[-keep:]):
            if index:
                yield Segment.line()
            yield from line


def thought(text: str) -> Group:
    """A reply's reasoning as drawn: its title, then its text indented, all dimmed."""
    return Group(
        Text(REASONING_TITLE, style=REASONING_STYLE),
        Padding(Text(text.strip("\n"), style=REASONING_STYLE), (0, 0, 0, 2), expand=False),
    )


def args_summary(arguments: str) -> str:
    """Tool-call arguments (JSON text) as `key=value, ...`, long values cut."""
    try:
        parsed: Any = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return _cut(arguments.strip())
    if not isinstance(parsed, dict):
        return _cut(json.dumps(parsed, ensure_ascii=False))
    return _pairs(parsed)


def result_summary(content: str) -> str:
    """A tool result on one line: a JSON object as `key=value, ...` like the arguments,
    other text with its non-empty lines joined (the console cuts the rest)."""
    try:
        parsed: Any = json.loads(content)
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict) and parsed:
        return _pairs(parsed)
    lines = [" ".join(line.split()) for line in content.splitlines()]
    return " · ".join(line for line in lines if line) or "（无输出）"


def shown_value(key: str, value: Any) -> str:
    """One value as a reader takes it: a string as it is, a date-named key's YYYYMMDD
    (Tushare's dates: `date`, `start_date`, ...) as YYYY-MM-DD, anything else as JSON."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if DATE_KEY.search(key) and COMPACT_DATE.fullmatch(text):
        try:
            return dt.datetime.strptime(text, "%Y%m%d").date().isoformat()
        except ValueError:
            pass  # eight digits but no calendar day: as it came
    return text


def _pairs(values: dict[str, Any]) -> str:
    return ", ".join(f"{key}={_cut(shown_value(key, value))}" for key, value in values.items())


def did_fail(metadata: Any, error: str | None = None) -> bool:
    """Whether a tool result's data says the call did not succeed (`metadata.outcome`)."""
    outcome = metadata.get("outcome") if isinstance(metadata, dict) else None
    if isinstance(outcome, str):
        return outcome != "ok"
    return error is not None


def _cut(value: str, limit: int = MAX_ARG_CHARS) -> str:
    value = " ".join(value.split())
    return value if len(value) <= limit else value[: limit - 1] + "…"


class Renderer:
    """Draws one conversation's events; `console` for status, `answers` for the text.

    Give both the same console on a terminal. When stdout is not a terminal, pass a
    stderr console as `console` so stdout carries the assistant's text alone.
    """

    def __init__(
        self, console: Console, answers: Console | None = None, *, show_reasoning: bool = True
    ) -> None:
        self.console = console
        self.answers = answers or console
        self.show_reasoning = show_reasoning
        self._live: Live | None = None
        self._text: list[str] = []
        self._thought: list[str] | None = None  # the reasoning being streamed, if any
        self._calls: dict[str, _Call] = {}
        self._running: list[str] = []

    @property
    def _animated(self) -> bool:
        return self.console.is_terminal and not self.console.is_dumb_terminal

    @property
    def _live_text(self) -> bool:
        return (
            self.answers is self.console
            and self.answers.is_terminal
            and not self.answers.is_dumb_terminal
        )

    # --- events ----------------------------------------------------------------------

    def event(self, event: BaseEvent) -> None:
        """Draw one event of a run."""
        if isinstance(event, TextMessageContentEvent):
            self._text_delta(event.delta)
        elif isinstance(event, ReasoningMessageContentEvent):
            self._thought_delta(event.delta)
        elif isinstance(event, ToolCallArgsEvent):
            call = self._calls.get(event.tool_call_id)
            if call is not None:
                call.args.append(event.delta)
        elif isinstance(event, ReasoningMessageStartEvent):
            self._thought_start()
        elif isinstance(event, ReasoningMessageEndEvent):
            self._thought_end()
        elif isinstance(event, TextMessageStartEvent):
            self._text_start()
        elif isinstance(event, TextMessageEndEvent):
            self._text_end()
        elif isinstance(event, ToolCallStartEvent):
            self._calls[event.tool_call_id] = _Call(event.tool_call_name)
        elif isinstance(event, ToolCallEndEvent):
            self._tool_running(event.tool_call_id)
        elif isinstance(event, ToolCallResultEvent):
            content = event.content if isinstance(event.content, str) else ""
            self._tool_result(event.tool_call_id, content, failed=did_fail(event.metadata))
        elif isinstance(event, RunStartedEvent):
            self._spin(THINKING)
        elif isinstance(event, RunFinishedEvent):
            self.close()
        elif isinstance(event, RunErrorEvent):
            self.close()
            self.error(event.message)

    def close(self) -> None:
        """End whatever is live (a half-streamed text is kept as it stands)."""
        if self._thought is not None:
            self._thought_end(resume_spinner=False)
        if self._text:
            self._text_end()
        self._stop_live()
        self._running.clear()

    def stopped(self) -> None:
        """The user stopped the run."""
        self.close()
        self.console.print(Text(STOPPED, style="yellow"))

    # --- lines -----------------------------------------------------------------------

    def note(self, text: str | Text) -> None:
        """A status line (thread id, hints)."""
        self.console.print(text if isinstance(text, Text) else Text(text, style="dim"))

    def command(self, command: str) -> None:
        """A command line to copy: on a line of its own, never wrapped or cut."""
        self.console.print(Text(command, style="bold"), soft_wrap=True)

    def error(self, message: str) -> None:
        """One red error line."""
        self.console.print(Text(ERROR_LINE.format(message=message), style="bold red"))

    def history(self, messages: Sequence[Message], *, older: int = 0) -> None:
        """A thread's earlier messages, drawn as they were live, after a line saying how
        many `older` ones are left out."""
        if not messages:
            return
        calls: dict[str, _Call] = {}
        if older:
            self.note(EARLIER_OMITTED.format(count=older))
        for message in messages:
            if isinstance(message, AssistantMessage):
                for tool_call in message.tool_calls or ():
                    function = tool_call.function
                    calls[tool_call.id] = _Call(function.name, [function.arguments])
        answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
        # A call without a result is waiting for a question: its result comes in a later run.
        self._calls.update({key: call for key, call in calls.items() if key not in answered})
        for message in messages:
            if isinstance(message, UserMessage):
                content = message.content if isinstance(message.content, str) else ""
                self.console.print(Text(USER_PREFIX + content, style="bold"))
            elif isinstance(message, ReasoningMessage):
                if self.show_reasoning and message.content:
                    self.console.print(thought(message.content))
            elif isinstance(message, AssistantMessage):
                if message.content:
                    self._print_markdown(message.content)
                if (message.metadata or {}).get(STOPPED_KEY):  # as it was shown live
                    self.console.print(Text(STOPPED, style="yellow"))
            elif isinstance(message, ToolMessage):
                content = message.content if isinstance(message.content, str) else ""
                call = calls.get(message.tool_call_id) or _Call("tool")
                self._summary(call, content, failed=did_fail(message.metadata, message.error))
        self.console.rule(Text(HISTORY_RULE, style="dim"), style="dim")

    # --- reasoning -------------------------------------------------------------------

    def _thought_start(self) -> None:
        if self.show_reasoning:
            self._thought = []

    def _thought_delta(self, delta: str) -> None:
        if not self.show_reasoning:
            return  # the thinking spinner stays
        if self._thought is None:
            self._thought = []
        if not self._thought and self._live is not None:
            self._stop_live()  # the thinking spinner gives way to the thought
        self._thought.append(delta)
        if self._animated:
            view = _Tail(thought("".join(self._thought)))
            if self._live is None:
                self._start_live(view)
            else:
                self._live.update(view)

    def _thought_end(self, *, resume_spinner: bool = True) -> None:
        if not self.show_reasoning:
            return
        text, self._thought = "".join(self._thought or ()), None
        self._stop_live()
        if text.strip():
            self.console.print(thought(text))
        if resume_spinner:
            self._spin(THINKING)  # the answer or the tool calls come next

    # --- text ------------------------------------------------------------------------

    def _text_start(self) -> None:
        self._stop_live()
        self._text = []

    def _text_delta(self, delta: str) -> None:
        if not self._text and self._live is not None:
            self._stop_live()  # the thinking spinner gives way to the text
        self._text.append(delta)
        if self._live_text:
            markdown = Markdown("".join(self._text))
            if self._live is None:
                self._start_live(_Tail(markdown))
            else:
                self._live.update(_Tail(markdown))
        else:
            self.answers.file.write(delta)
            self.answers.file.flush()

    def _text_end(self) -> None:
        text, self._text = "".join(self._text), []
        if self._live_text:
            self._stop_live()
            if text:
                self._print_markdown(text)
        elif text:
            self.answers.file.write("\n")
            self.answers.file.flush()

    def _print_markdown(self, text: str) -> None:
        if self.answers.is_terminal:
            self.answers.print(Markdown(text))
        else:
            self.answers.file.write(text if text.endswith("\n") else text + "\n")
            self.answers.file.flush()

    # --- tools -----------------------------------------------------------------------

    def _tool_running(self, tool_call_id: str) -> None:
        call = self._calls.get(tool_call_id)
        if call is None:
            return
        self._running.append(tool_call_id)
        self._spin(RUNNING.format(names=", ".join(self._names(self._running))))

    def _tool_result(self, tool_call_id: str, content: str, *, failed: bool) -> None:
        call = self._calls.pop(tool_call_id, None) or _Call("tool")
        if tool_call_id in self._running:
            self._running.remove(tool_call_id)
        self._stop_live()
        self._summary(call, content, failed=failed)
        if self._running:
            self._spin(RUNNING.format(names=", ".join(self._names(self._running))))
        else:
            self._spin(THINKING)  # the model reads the results next

    def _names(self, call_ids: Iterable[str]) -> list[str]:
        return [
            shown_name(self._calls[call_id].name) for call_id in call_ids if call_id in self._calls
        ]

    def _summary(self, call: _Call, content: str, *, failed: bool) -> None:
        """A finished call on one line, drawn the same live and in a thread's history."""
        line = Text("  ")
        line.append("✗ " if failed else "✓ ", style="red" if failed else "green")
        line.append(shown_name(call.name), style="bold")
        # An ask tool's arguments are its question, which the user answered at the prompt
        # (its echo line stays on screen); the result says what the answer was.
        if not call.name.startswith(ASK_TOOL_PREFIX):
            line.append(f"({args_summary(''.join(call.args))})", style="dim")
        line.append(" → ", style="dim")
        line.append(result_summary(content), style="red" if failed else "")
        self.console.print(line, no_wrap=True, overflow="ellipsis", crop=True)

    # --- live views ------------------------------------------------------------------

    def _spin(self, label: str) -> None:
        if not self._animated:
            return
        spinner = Spinner("dots", text=Text(label, style="cyan"))
        if self._live is not None and isinstance(self._live.renderable, Spinner):
            self._live.update(spinner, refresh=True)
            return
        self._stop_live()
        self._start_live(spinner)

    def _start_live(self, renderable: Spinner | _Tail) -> None:
        live = Live(
            renderable,
            console=self.console,
            transient=True,
            refresh_per_second=REFRESH_PER_SECOND,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        # Drawn at once: a tool that finishes within a refresh tick is still seen.
        live.start(refresh=True)
        self._live = live

    def _stop_live(self) -> None:
        live, self._live = self._live, None
        if live is not None:
            live.stop()
