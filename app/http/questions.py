"""An agent's question as the MCP and A2A endpoints ask it: an MCP `elicitation/create`
form, or text to answer (MCP without elicitation, A2A's `input-required`).

A question is an interrupt payload (`tools.interrupts`: input, select, multi_select,
confirm). Elicitation asks for it as a one-field form (`value`), whose accepted content
is the answer as the run core takes it (`{"value": ...}`). A client that cannot elicit
gets the question as text, and its next call's message is read as the answer
(`answer_from_text`): an option by value, label or number, yes/no for a confirmation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ag_ui.core import Interrupt

from app.core.runs.run import RunResult

ANSWER_HOW = "回答方法：再次调用工具 {tool}，thread_id 填 {thread_id}，message 填你的回答{how}。"
HOW_SELECT = "（选项的值、名称或序号）"
HOW_MULTI = "（一个或多个选项，用逗号分隔）"
HOW_CONFIRM = "（是 / 否）"
PLACEHOLDER = "例如：{placeholder}"
YES = frozenset({"是", "确认", "好", "好的", "可以", "同意", "y", "yes", "true", "ok"})
NO = frozenset({"否", "不", "不要", "取消", "拒绝", "n", "no", "false"})
_SEPARATORS = re.compile(r"[,，、;；\n]+")


def elicitation(payload: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The message and the requested schema of the elicitation asking `payload`."""
    message = str(payload.get("message", ""))
    if payload.get("error"):
        message = f"{message}\n{payload['error']}"
    kind = payload.get("type")
    options = list(payload.get("options", []))
    field: dict[str, Any]
    if kind == "select":
        field = {
            "type": "string",
            "title": message,
            "enum": [o["value"] for o in options],
            "enumNames": [o["label"] for o in options],
        }
    elif kind == "multi_select":
        field = {
            "type": "array",
            "title": message,
            "items": {"type": "string", "enum": [o["value"] for o in options]},
            "minItems": int(payload.get("min", 1)),
        }
    elif kind == "confirm":
        field = {"type": "boolean", "title": message}
    else:
        field = {"type": "string", "title": message, "minLength": 1}
        if payload.get("placeholder"):
            field["description"] = PLACEHOLDER.format(placeholder=payload["placeholder"])
    schema = {"type": "object", "properties": {"value": field}, "required": ["value"]}
    return message, schema


def question_text(payload: Mapping[str, Any], *, answer_how: str) -> str:
    """The question as text: what is asked, the choices, and `answer_how` (a line saying
    how to answer in the protocol at hand, its `{how}` the kind of answer expected)."""
    kind = payload.get("type")
    lines = [str(payload.get("message", ""))]
    if payload.get("error"):
        lines.append(str(payload["error"]))
    how = ""
    if kind in ("select", "multi_select"):
        lines += [
            f"{n}. {o['label']}（{o['value']}）"
            if o["label"] != o["value"]
            else f"{n}. {o['label']}"
            for n, o in enumerate(payload.get("options", []), start=1)
        ]
        how = HOW_SELECT if kind == "select" else HOW_MULTI
    elif kind == "confirm":
        how = HOW_CONFIRM
    elif payload.get("placeholder"):
        lines.append(PLACEHOLDER.format(placeholder=payload["placeholder"]))
    lines.append(answer_how.format(how=how))
    return "\n".join(lines)


def _option(payload: Mapping[str, Any], text: str) -> str:
    options = list(payload.get("options", []))
    wanted = text.strip()
    for option in options:
        if wanted in (option["value"], option["label"]):
            return str(option["value"])
    lowered = wanted.casefold()
    for option in options:
        if lowered in (str(option["value"]).casefold(), str(option["label"]).casefold()):
            return str(option["value"])
    if wanted.isdigit() and 1 <= int(wanted) <= len(options):
        return str(options[int(wanted) - 1]["value"])
    return wanted  # not an option: the run core refuses it and says why


def answer_from_text(payload: Mapping[str, Any], text: str) -> object:
    """The answer (`{"value": ...}`) that the text `text` gives to `payload`."""
    kind = payload.get("type")
    value: object
    if kind == "select":
        value = _option(payload, text)
    elif kind == "multi_select":
        value = [_option(payload, part) for part in _SEPARATORS.split(text) if part.strip()]
    elif kind == "confirm":
        word = text.strip().strip("。.!！").casefold()
        value = True if word in YES else False if word in NO else text
    else:
        value = text
    return {"value": value}


def payload_of(interrupt: Interrupt) -> dict[str, Any]:
    """The interrupt payload (`tools.interrupts`) an AG-UI interrupt carries."""
    payload = (interrupt.metadata or {}).get("payload")
    return payload if isinstance(payload, dict) else {"type": "input", "message": interrupt.message}


def answer_of(result: RunResult) -> str:
    """The text of a run's last assistant message."""
    for message in reversed(result.messages):
        if message.role == "assistant" and isinstance(message.content, str) and message.content:
            return message.content
    return ""
