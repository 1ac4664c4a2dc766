"""The human-in-the-loop contract: interrupt payloads, answer validation, asking.

Every pause in the project goes through `ask()`: the payload shapes are those of
docs/api.md, and an answer is checked by `validate_answer()` both here (so a graph
driven directly, e.g. from Studio, never sees a bad answer) and by the service
before it resumes (so a bad answer is refused while the interrupt stays pending).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypedDict

from langgraph.types import interrupt

Risk = Literal["safe", "sensitive", "destructive"]

CANCELLED_TEXT = "用户取消了操作"


class Option(TypedDict):
    label: str
    value: str


class InputPayload(TypedDict):
    type: Literal["input"]
    message: str
    placeholder: str
    error: NotRequired[str]


class SelectPayload(TypedDict):
    type: Literal["select"]
    message: str
    options: list[Option]
    error: NotRequired[str]


class MultiSelectPayload(TypedDict):
    type: Literal["multi_select"]
    message: str
    options: list[Option]
    min: int
    error: NotRequired[str]


class ConfirmPayload(TypedDict):
    type: Literal["confirm"]
    message: str
    tool: NotRequired[str]
    args: NotRequired[dict[str, Any]]
    risk: NotRequired[Risk]
    error: NotRequired[str]


Payload = InputPayload | SelectPayload | MultiSelectPayload | ConfirmPayload


class InvalidAnswer(ValueError):
    """An answer that does not fit its interrupt; the message says why, in Chinese."""


class Cancelled(Exception):
    """The user cancelled the interrupt instead of answering it."""


def input_payload(message: str, placeholder: str = "") -> InputPayload:
    return {"type": "input", "message": message, "placeholder": placeholder}


def select_payload(message: str, options: list[Option]) -> SelectPayload:
    return {"type": "select", "message": message, "options": options}


def multi_select_payload(message: str, options: list[Option], min: int = 1) -> MultiSelectPayload:
    return {"type": "multi_select", "message": message, "options": options, "min": min}


def confirm_payload(
    message: str,
    *,
    tool: str | None = None,
    args: dict[str, Any] | None = None,
    risk: Risk | None = None,
) -> ConfirmPayload:
    payload: ConfirmPayload = {"type": "confirm", "message": message}
    if tool is not None:
        payload["tool"] = tool
        payload["args"] = args or {}
    if risk is not None:
        payload["risk"] = risk
    return payload


def options_of(values: list[str]) -> list[Option]:
    """Options whose label is their value, as the ask tools offer them."""
    return [{"label": value, "value": value} for value in values]


def response_schema(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON schema of a valid answer (cancellation aside) to `payload`."""
    kind = payload.get("type")
    values = [option["value"] for option in payload.get("options", [])]
    value: dict[str, Any]
    if kind == "select":
        value = {"type": "string", "enum": values}
    elif kind == "multi_select":
        value = {
            "type": "array",
            "items": {"type": "string", "enum": values},
            "minItems": int(payload.get("min", 1)),
            "uniqueItems": True,
        }
    elif kind == "confirm":
        value = {"type": "boolean"}
    else:
        value = {"type": "string"}
    return {
        "type": "object",
        "properties": {"value": value},
        "required": ["value"],
        "additionalProperties": False,
    }


def is_cancel(answer: object) -> bool:
    return isinstance(answer, dict) and answer.get("cancelled") is True


def validate_answer(payload: Mapping[str, Any], answer: object) -> object:
    """Return the answer's `value` if it fits `payload`; raise Cancelled or InvalidAnswer.

    `answer` is `{"value": ...}`, `{"cancelled": true}`, or a bare value as shorthand for
    `{"value": <it>}` (what Studio's resume box and `Command(resume="北京")` send).
    """
    if is_cancel(answer):
        raise Cancelled
    if isinstance(answer, dict):
        if "value" not in answer:
            raise InvalidAnswer('回答格式错误：应为 {"value": ...} 或 {"cancelled": true}')
        extra = sorted(str(key) for key in answer if key != "value")
        if extra:  # the advertised schema has additionalProperties: false
            raise InvalidAnswer(f"回答格式错误：只能包含 value，多了 {extra}")
        value = answer["value"]
    else:
        value = answer
    kind = payload.get("type")
    values = [option["value"] for option in payload.get("options", [])]
    if kind == "input":
        if not isinstance(value, str) or not value.strip():
            raise InvalidAnswer("请输入非空文本")
        return value.strip()
    if kind == "select":
        if not isinstance(value, str) or value not in values:
            raise InvalidAnswer(f"选项无效：{value!r} 不在可选项 {values} 中")
        return value
    if kind == "multi_select":
        minimum = int(payload.get("min", 1))
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InvalidAnswer("多选的回答应为字符串列表")
        unknown = [v for v in value if v not in values]
        if unknown:
            raise InvalidAnswer(f"选项无效：{unknown} 不在可选项 {values} 中")
        if len(set(value)) < minimum:
            raise InvalidAnswer(f"至少选择 {minimum} 项")
        return list(dict.fromkeys(value))
    if kind == "confirm":
        if not isinstance(value, bool):
            raise InvalidAnswer("确认的回答应为 true 或 false")
        return value
    raise InvalidAnswer(f"未知的中断类型：{kind!r}")


def ask(payload: Payload) -> Any:
    """Pause the graph with `payload` until a valid answer arrives; return its value.

    A wrong answer re-asks with the same payload plus an `error` text, so the
    question stays pending. Raises Cancelled when the user cancels.
    """
    current: dict[str, Any] = dict(payload)
    while True:
        answer = interrupt(current)
        try:
            return validate_answer(payload, answer)
        except InvalidAnswer as exc:
            current = {**payload, "error": str(exc)}
