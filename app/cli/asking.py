"""Interrupts as terminal prompts (prompt_toolkit), and the chat's own input line.

One prompt per interrupt payload type (docs/api.md): `input` (a line editor with the placeholder
shown), `select` (arrow keys or numbers, Enter), `multi_select` (space toggles,
Enter submits once `min` are ticked), `confirm` (y/N with the tool, its arguments
and risk; destructive in red). Every answer is checked with the same
`validate_answer` the service applies, and an invalid one asks again. Ctrl-C at a
prompt cancels that interrupt; Ctrl-D leaves the chat with it still pending.

Every prompt is erased when it ends and leaves one echo line, `? question answer`
(the option lists do not stay on screen).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ag_ui.core import Interrupt, ResumeEntry
from prompt_toolkit import PromptSession
from prompt_toolkit.application import Application
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.layout import ConditionalContainer, HSplit, Layout, Window
from prompt_toolkit.layout.controls import FormattedTextControl
from prompt_toolkit.styles import Style
from prompt_toolkit.widgets import Box, CheckboxList, Label, RadioList
from rich.console import Console
from rich.text import Text

from app.cli.terminal import USER_PREFIX
from tools.interrupts import Cancelled, InvalidAnswer, validate_answer

CHAT_PROMPT: Final = USER_PREFIX
KNOWN_TYPES: Final = frozenset({"input", "select", "multi_select", "confirm"})
EXIT_COMMANDS: Final = frozenset({"/exit", "/quit"})
EXIT_HINT: Final = "输入 /exit 或按 Ctrl-D 退出"
CANCELLED_NOTE: Final = "已取消这个问题"
MULTI_HINT: Final = "（空格勾选，回车确认，至少选 {min} 项）"
SELECT_HINT: Final = "（方向键或数字选择，回车确认）"
CONFIRM_QUESTION: Final = "确认执行？"
CONFIRM_PROMPT: Final = CONFIRM_QUESTION + "[y/N]"
CONFIRM_SHOWN: Final = {True: "是", False: "否"}
CHOSEN_SEPARATOR: Final = "、"
CONFIRM_AGAIN: Final = "请输入 y 或 n"
RISK_LABELS: Final = {"safe": "安全", "sensitive": "敏感", "destructive": "危险"}
RISK_STYLES: Final = {"safe": "green", "sensitive": "yellow", "destructive": "bold red"}
MAX_ARG_LINES: Final = 16
MORE_LINES: Final = "…（共 {count} 行）"
YES: Final = frozenset({"y", "yes", "是", "确认"})
NO: Final = frozenset({"", "n", "no", "否", "不"})

STYLE: Final = Style.from_dict(
    {
        "question": "bold",
        "placeholder": "#888888 italic",
        "error": "#ff5555 bold",
        "hint": "#888888",
        "selected-option": "bold",
        "number": "#888888",
    }
)


class Leave(Exception):
    """The user pressed Ctrl-D at a prompt: leave the chat, the question stays pending."""


def payload_of(question: Interrupt) -> dict[str, Any]:
    """The payload (docs/api.md) of an AG-UI interrupt, rebuilt from its fields if absent."""
    payload = (question.metadata or {}).get("payload")
    if isinstance(payload, dict):
        return payload
    return {"type": question.reason, "message": question.message or ""}


def _eof(event: KeyPressEvent) -> None:
    event.app.exit(exception=Leave())


def _cancel(event: KeyPressEvent) -> None:
    event.app.exit(exception=KeyboardInterrupt())


def _list_keys() -> KeyBindings:
    """Ctrl-C cancels a list prompt, Ctrl-D leaves the chat (Enter is the prompt's own)."""
    keys = KeyBindings()
    keys.add("c-c", eager=True)(_cancel)
    keys.add("<sigint>", eager=True)(_cancel)
    keys.add("c-d", eager=True)(_eof)
    return keys


def _options(payload: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A select payload's options as (value, label)."""
    return [
        (str(option["value"]), str(option.get("label", option["value"])))
        for option in payload.get("options", [])
        if isinstance(option, dict) and "value" in option
    ]


def _question(payload: Mapping[str, Any]) -> str:
    """The question an echo line repeats (a confirm's details stay printed above it)."""
    if payload.get("type") == "confirm":
        return CONFIRM_QUESTION
    return str(payload.get("message") or "")


def _shown(payload: Mapping[str, Any], value: Any) -> str:
    """An answer as its echo line shows it: labels for options, 是/否 for a confirm."""
    labels = dict(_options(payload))
    if isinstance(value, bool):
        return CONFIRM_SHOWN[value]
    if isinstance(value, list):
        return CHOSEN_SEPARATOR.join(labels.get(str(item), str(item)) for item in value)
    return labels.get(str(value), str(value))


class Asker:
    """Reads the user's messages and answers interrupts on the terminal."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._chat = PromptSession[str](history=InMemoryHistory(), style=STYLE)

    async def message(self) -> str:
        """The next chat message; raises Leave on Ctrl-D or `/exit`.

        Ctrl-C clears the line, as in a shell.
        """
        while True:
            try:
                text = await self._chat.prompt_async(CHAT_PROMPT)
            except KeyboardInterrupt:
                self.console.print(Text(EXIT_HINT, style="dim"))
                continue
            except EOFError:
                raise Leave from None
            text = text.strip()
            if text in EXIT_COMMANDS:
                raise Leave
            if text:
                return text

    async def answer(self, question: Interrupt) -> ResumeEntry:
        """Ask `question` until the answer is valid; Ctrl-C cancels it, Ctrl-D raises Leave."""
        payload = payload_of(question)
        error = payload.get("error")
        asked = _question(payload)
        while True:
            if isinstance(error, str) and error:
                self.console.print(Text(error, style="bold red"))
            try:
                value = await self._ask(payload)
            except KeyboardInterrupt:
                self._echo(asked, CANCELLED_NOTE, style="yellow")
                return ResumeEntry(interrupt_id=question.id, status="cancelled")
            except Leave:
                self._echo(asked)
                raise
            self._echo(asked, _shown(payload, value))
            answer = {"value": value}
            if payload.get("type") not in KNOWN_TYPES:
                # A question type this client does not know: the agent checks the answer.
                return ResumeEntry(interrupt_id=question.id, status="resolved", payload=answer)
            try:
                validate_answer(payload, answer)
            except Cancelled:
                return ResumeEntry(interrupt_id=question.id, status="cancelled")
            except InvalidAnswer as exc:
                error = str(exc)
                continue
            return ResumeEntry(interrupt_id=question.id, status="resolved", payload=answer)

    def _echo(self, question: str, answer: str = "", *, style: str = "") -> None:
        """The line a finished prompt leaves: `? question answer` (the prompt is erased)."""
        line = Text(f"? {question}", style="bold")
        if answer:
            line.append(" ")
            line.append(answer, style=style)
        self.console.print(line)

    async def _ask(self, payload: Mapping[str, Any]) -> Any:
        kind = payload.get("type")
        message = str(payload.get("message") or "")
        options = _options(payload)
        if kind == "select" and options:
            return await self._select(message, options)
        if kind == "multi_select" and options:
            return await self._multi_select(message, options, int(payload.get("min", 1)))
        if kind == "confirm":
            return await self._confirm(payload)
        return await self._input(message, str(payload.get("placeholder") or ""))

    async def _input(self, message: str, placeholder: str) -> str:
        try:
            return await PromptSession[str](style=STYLE, erase_when_done=True).prompt_async(
                FormattedText([("class:question", f"? {message} ")]),
                placeholder=FormattedText([("class:placeholder", placeholder)]),
            )
        except EOFError:
            raise Leave from None

    async def _select(self, message: str, options: Sequence[tuple[str, str]]) -> str:
        choices = RadioList[str](
            values=list(options),
            select_on_focus=True,  # the marker follows the cursor
            open_character="",
            select_character=">",
            close_character="",
            show_cursor=False,
            show_numbers=True,  # the digits move the cursor
            default_style="class:option",
            selected_style="",
            checked_style="class:selected-option",
            number_style="class:number",
            show_scrollbar=False,
        )
        keys = _list_keys()

        @keys.add("enter", eager=True)
        def _submit(event: KeyPressEvent) -> None:
            event.app.exit(result=choices.current_value)

        layout = Layout(
            HSplit(
                [
                    Label(
                        FormattedText(
                            [("class:question", f"? {message}"), ("class:hint", f" {SELECT_HINT}")]
                        )
                    ),
                    Box(choices, padding_top=0, padding_bottom=0, padding_left=3),
                ]
            ),
            focused_element=choices,
        )
        app = Application[str](
            layout=layout, key_bindings=keys, style=STYLE, full_screen=False, erase_when_done=True
        )
        return await app.run_async()

    async def _multi_select(
        self, message: str, options: Sequence[tuple[str, str]], minimum: int
    ) -> list[str]:
        checkboxes = CheckboxList[str](values=list(options))
        checkboxes.show_numbers = True  # the digits move the cursor
        checkboxes.show_scrollbar = False
        problem: list[str] = []
        keys = _list_keys()

        @keys.add("enter", eager=True)
        def _submit(event: KeyPressEvent) -> None:
            chosen = [value for value, _ in options if value in checkboxes.current_values]
            if len(chosen) < minimum:
                problem[:] = [f"至少选择 {minimum} 项"]
                return
            event.app.exit(result=chosen)

        def _problem() -> FormattedText:
            return FormattedText([("class:error", problem[0])] if problem else [])

        layout = Layout(
            HSplit(
                [
                    Label(
                        FormattedText(
                            [
                                ("class:question", f"? {message}"),
                                ("class:hint", MULTI_HINT.format(min=minimum)),
                            ]
                        )
                    ),
                    Box(checkboxes, padding_top=0, padding_bottom=0, padding_left=3),
                    ConditionalContainer(
                        Window(FormattedTextControl(_problem), height=1),
                        filter=Condition(lambda: bool(problem)),
                    ),
                ]
            ),
            focused_element=checkboxes,
        )
        app = Application[list[str]](
            layout=layout, key_bindings=keys, style=STYLE, full_screen=False, erase_when_done=True
        )
        return await app.run_async()

    async def _confirm(self, payload: Mapping[str, Any]) -> bool:
        self._show_confirm(payload)
        while True:
            try:
                reply = await PromptSession[str](style=STYLE, erase_when_done=True).prompt_async(
                    FormattedText([("class:question", f"? {CONFIRM_PROMPT} ")])
                )
            except EOFError:
                raise Leave from None
            reply = reply.strip().lower()
            if reply in YES:
                return True
            if reply in NO:
                return False
            self._echo(CONFIRM_QUESTION, reply)
            self.console.print(Text(CONFIRM_AGAIN, style="yellow"))

    def _show_confirm(self, payload: Mapping[str, Any]) -> None:
        risk = str(payload.get("risk") or "")
        style = RISK_STYLES.get(risk, "bold")
        self.console.print(Text(f"? {payload.get('message') or ''}", style=f"bold {style}"))
        tool = payload.get("tool")
        if tool:
            line = Text("  工具：")
            line.append(str(tool), style="bold")
            if risk:
                line.append("  风险：")
                line.append(f"{RISK_LABELS.get(risk, risk)} ({risk})", style=style)
            self.console.print(line)
            rows = json.dumps(payload.get("args") or {}, ensure_ascii=False, indent=2).splitlines()
            self.console.print(Text("  参数：", style="dim"))
            for row in rows[:MAX_ARG_LINES]:
                self.console.print(Text(f"    {row}", style="dim"), overflow="fold")
            if len(rows) > MAX_ARG_LINES:
                self.console.print(Text(f"    {MORE_LINES.format(count=len(rows))}", style="dim"))
