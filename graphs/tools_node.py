"""Tool execution policy: the guards of a production loop, the risk gate, error texts.

Each tool call runs as its own task (one `Send` per call), so when one of several
parallel calls interrupts, the siblings that finished are not run again on resume.
Every outcome, including failures, becomes exactly one ToolMessage for the model,
with its outcome as data: `status` "success" or "error", and `response_metadata`
`{"outcome": <one of OUTCOMES>}` so clients never read failure from the text.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any, Final, Literal, NotRequired, TypedDict, cast, get_args

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.messages.tool import ToolCall
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp
from pydantic import ValidationError

from graphs.settings import GraphSettings
from tools.interrupts import CANCELLED_TEXT, Cancelled, ask, confirm_payload
from tools.risk import risk_of
from tools.secrets import redactor_for

logger = logging.getLogger(__name__)

# What the model reads when a call did not produce a normal result.
REPEATED_CALL = "重复调用已拦截：本轮已用相同参数调用过 {name}，结果见上文，请直接使用已有结果。"
TOOL_CAP_REACHED = (
    "调用已拦截：本轮 {name} 已调用 {count} 次，达到上限 {cap} 次。"
    "请不要再调用它，根据已有信息回答或说明无法完成。"
)
UNKNOWN_TOOL = "错误：没有名为 {name} 的工具。可用工具：{available}。"
INVALID_ARGS = "错误：调用 {name} 的参数无效：{error}。请按工具的参数说明重新调用。"
NOT_AN_OBJECT = "参数不是合法的 JSON 对象"
TOOL_TIMEOUT = "错误：{name} 执行超时（超过 {seconds:g} 秒），已放弃本次调用。"
TOOL_FAILED = "错误：{name} 执行失败：{error}。"
USER_DECLINED = "用户拒绝执行 {name}：该工具没有运行。"
CONFIRM_MESSAGE = "确认执行 {name} ?"

# How a call ended; every value but "ok" has status "error".
Outcome = Literal[
    "ok",
    "error",
    "timeout",
    "invalid_args",
    "unknown_tool",
    "repeated",
    "capped",
    "declined",
    "cancelled",
    "abandoned",
]
OUTCOMES: Final[tuple[Outcome, ...]] = get_args(Outcome)
OUTCOME_KEY: Final = "outcome"


def tool_reply(call: ToolCall, content: str, outcome: Outcome) -> ToolMessage:
    """The ToolMessage for `call`, its outcome kept as data beside the text."""
    return ToolMessage(
        content=content,
        name=call["name"],
        tool_call_id=call["id"] or "",
        id=str(uuid.uuid4()),
        status="success" if outcome == "ok" else "error",
        response_metadata={OUTCOME_KEY: outcome},
    )


def outcome_of(message: ToolMessage) -> Outcome:
    """The outcome a ToolMessage records (older ones: from its status)."""
    outcome = (message.response_metadata or {}).get(OUTCOME_KEY)
    if outcome in OUTCOMES:
        return cast(Outcome, outcome)
    return "error" if message.status == "error" else "ok"


class Refusal(TypedDict):
    """A guard's refusal of a call: which guard, and what the model reads."""

    outcome: Outcome
    message: str


class ToolTask(TypedDict):
    """What one tools-node task receives: a call, and the guard's refusal if any."""

    call: ToolCall
    refusal: NotRequired[Refusal]


def current_run(messages: Sequence[AnyMessage]) -> Sequence[AnyMessage]:
    """The messages of the run in progress: those after the last user message."""
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage):
            return messages[index + 1 :]
    return messages


def _signature(call: ToolCall) -> str:
    return call["name"] + json.dumps(call["args"], sort_keys=True, ensure_ascii=False)


def plan_tool_tasks(messages: Sequence[AnyMessage], *, max_calls_per_tool: int) -> list[ToolTask]:
    """Turn the last AI message's calls into tasks, refusing repeats, over-cap calls and
    calls whose arguments did not parse (`invalid_tool_calls`)."""
    run = current_run(messages)
    last = run[-1]
    assert isinstance(last, AIMessage)
    counts: Counter[str] = Counter()
    seen: set[str] = set()
    for message in run[:-1]:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                counts[call["name"]] += 1
                seen.add(_signature(call))
    tasks: list[ToolTask] = []
    for call in last.tool_calls:
        name, signature = call["name"], _signature(call)
        task = ToolTask(call=call)
        if signature in seen:
            task["refusal"] = Refusal(outcome="repeated", message=REPEATED_CALL.format(name=name))
        elif counts[name] >= max_calls_per_tool:
            capped = TOOL_CAP_REACHED.format(name=name, count=counts[name], cap=max_calls_per_tool)
            task["refusal"] = Refusal(outcome="capped", message=capped)
        counts[name] += 1
        seen.add(signature)
        tasks.append(task)
    for bad in last.invalid_tool_calls:
        # Arguments that are not a JSON object: the model reads why and may call again.
        name = bad.get("name") or "?"
        call = ToolCall(name=name, args={}, id=bad.get("id") or "", type="tool_call")
        why = INVALID_ARGS.format(name=name, error=NOT_AN_OBJECT)
        tasks.append(ToolTask(call=call, refusal=Refusal(outcome="invalid_args", message=why)))
    return tasks


def _reply(call: ToolCall, content: str, outcome: Outcome) -> dict[str, list[ToolMessage]]:
    return {"messages": [tool_reply(call, content, outcome)]}


def _confirmed(tool: BaseTool, call: ToolCall) -> bool:
    """Ask the user before a non-safe tool runs; a cancel counts as a decline."""
    payload = confirm_payload(
        CONFIRM_MESSAGE.format(name=call["name"]),
        tool=call["name"],
        args=call["args"],
        risk=risk_of(tool),
    )
    try:
        return bool(ask(payload))
    except Cancelled:
        return False


async def run_tool_task(
    task: ToolTask, tools: Sequence[BaseTool], settings: GraphSettings, config: RunnableConfig
) -> dict[str, Any]:
    """Run one call under the policy and return its single ToolMessage.

    Its text (and its artifact: data for clients, never read by the model) has every
    configured secret masked before it enters the history: a tool's upstream may echo a
    credential, and the history goes to the model, the thread view and every client.
    """
    update = await _run_tool_task(task, tools, settings, config)
    redact = redactor_for(settings)
    if redact:
        update["messages"] = [
            message.model_copy(
                update={
                    "content": redact.value(message.content),
                    "artifact": redact.value(message.artifact),
                }
            )
            for message in update["messages"]
        ]
    return update


async def _run_tool_task(
    task: ToolTask, tools: Sequence[BaseTool], settings: GraphSettings, config: RunnableConfig
) -> dict[str, Any]:
    call = task["call"]
    name = call["name"]
    if "refusal" in task:
        return _reply(call, task["refusal"]["message"], task["refusal"]["outcome"])
    by_name = {tool.name: tool for tool in tools}
    tool = by_name.get(name)
    if tool is None:
        available = ", ".join(by_name)
        return _reply(call, UNKNOWN_TOOL.format(name=name, available=available), "unknown_tool")
    if risk_of(tool) != "safe" and not _confirmed(tool, call):
        return _reply(call, USER_DECLINED.format(name=name), "declined")
    timeout = settings.agent_tool_timeout_s
    try:
        async with asyncio.timeout(timeout):
            result = await tool.ainvoke({**call, "type": "tool_call"}, config)
    except GraphBubbleUp:
        raise  # interrupts pause the graph; they are not failures
    except Cancelled:
        return _reply(call, CANCELLED_TEXT, "cancelled")
    except TimeoutError:
        return _reply(call, TOOL_TIMEOUT.format(name=name, seconds=timeout), "timeout")
    except ValidationError as exc:
        errors = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        return _reply(call, INVALID_ARGS.format(name=name, error=errors), "invalid_args")
    except Exception as exc:
        logger.exception("tool %s failed", name)
        error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return _reply(call, TOOL_FAILED.format(name=name, error=error), "error")
    if isinstance(result, ToolMessage):
        # The tool's own ToolMessage (e.g. a ToolException it handled): keep it and its
        # artifact, add the outcome. A failed call carries no data.
        outcome: Outcome = "error" if result.status == "error" else "ok"
        metadata = {**(result.response_metadata or {}), OUTCOME_KEY: outcome}
        update: dict[str, Any] = {
            "id": result.id or str(uuid.uuid4()),
            "response_metadata": metadata,
        }
        if outcome != "ok":
            update["artifact"] = None
        return {"messages": [result.model_copy(update=update)]}
    return _reply(call, result if isinstance(result, str) else json.dumps(result), "ok")
