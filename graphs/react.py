"""The ReAct loop every agent is built from: agent <-> tools, until no tool is called."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, Final, Literal, NotRequired

import openai
from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.managed import RemainingSteps
from langgraph.types import Send

# typing_extensions: pydantic reads the state schema (LangGraph API schemas) only from it on 3.11.
from typing_extensions import TypedDict

from graphs.budget import BoundModel, ContextBudget
from graphs.context import Summary, Wire
from graphs.model import (
    REPLY_UNREADABLE,
    ModelReplyUnreadable,
    is_unreadable_reply,
    model_call_failed,
    repair_misplaced_tool_calls,
    shared_model,
)
from graphs.settings import GraphSettings
from graphs.text_mode import needs_retry, text_mode_model
from graphs.tools_node import ToolTask, current_run, plan_tool_tasks, run_tool_task
from graphs.transcript import hand_over
from prompts import load_prompts, render_prompt
from tools.errors import ToolsetUnavailable
from tools.mcp.servers import configured_tools, merge_tools
from tools.secrets import redactor_for

ToolsProvider = Callable[[], Awaitable[Sequence[BaseTool]]]

# The loop's two nodes; clients of the stream (the service's events) use these names.
AGENT_NODE: Final = "agent"
TOOLS_NODE: Final = "tools"

STEP_LIMIT = (
    "已达到本轮最多 {steps} 步的限制，为避免无限循环已停止。"
    "以上是目前得到的结果；请缩小问题范围或补充信息后再试。"
)


class AgentState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    remaining_steps: RemainingSteps
    # The turns no longer sent to the model, summarised (graphs/context.py).
    summary: NotRequired[Summary]


def build_react_graph(
    *,
    prompts: Sequence[str],
    tools: Sequence[BaseTool] | ToolsProvider,
    settings: GraphSettings,
) -> StateGraph[AgentState]:
    """The uncompiled loop for one agent; compile it with its name and a checkpointer (or none).

    `settings` configure the model and the guards for every run of the graph.
    """
    load_tools = tools if callable(tools) else static_tools(tools)
    load_prompts(tuple(prompts))  # file reads belong to start-up, not to a run
    models = _ModelCache()
    budget = ContextBudget(settings)

    async def agent(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        turns = sum(isinstance(m, AIMessage) for m in current_run(state["messages"]))
        if turns >= settings.agent_max_steps or state["remaining_steps"] <= 2:
            return {"messages": [AIMessage(STEP_LIMIT.format(steps=turns))]}
        try:
            toolset = await load_tools()
        except ToolsetUnavailable as exc:  # its reason may quote what a server echoed
            return {"messages": [AIMessage(redactor_for(settings)(str(exc)))]}
        model = models.bound(settings, toolset)
        try:
            system = render_prompt(tuple(prompts))
            answer = await budget.call(
                model, system, state["messages"], state.get("summary"), config
            )
        except openai.APIError as exc:
            raise model_call_failed(
                exc, retries=settings.openai_max_retries, redact=redactor_for(settings)
            ) from exc
        except ValueError as exc:
            if is_unreadable_reply(exc):
                raise ModelReplyUnreadable(REPLY_UNREADABLE) from exc
            raise
        # What the model will never be sent again leaves the state (graphs/transcript.py).
        removed = await hand_over(config, answer.out_of_view)
        reply = repair_misplaced_tool_calls(answer.message)
        return {"messages": [*removed, reply], **answer.state}

    def should_continue(state: AgentState) -> list[Send] | Literal["agent", "__end__"]:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and needs_retry(last):
            return AGENT_NODE  # a text-mode reply that did not parse: the model reads why
        if not isinstance(last, AIMessage) or not (last.tool_calls or last.invalid_tool_calls):
            return "__end__"
        max_calls = settings.agent_max_calls_per_tool
        return [
            Send(TOOLS_NODE, task)
            for task in plan_tool_tasks(state["messages"], max_calls_per_tool=max_calls)
        ]

    async def tools_node(task: ToolTask, config: RunnableConfig) -> dict[str, Any]:
        return await run_tool_task(task, await load_tools(), settings, config)

    builder = StateGraph(AgentState)
    builder.add_node(AGENT_NODE, agent)
    builder.add_node(TOOLS_NODE, tools_node, input_schema=ToolTask)  # type: ignore[arg-type]
    builder.add_edge(START, AGENT_NODE)
    builder.add_conditional_edges(
        AGENT_NODE, should_continue, path_map=[TOOLS_NODE, AGENT_NODE, END]
    )
    builder.add_edge(TOOLS_NODE, AGENT_NODE)
    return builder


def with_mcp_servers(graph_id: str, settings: GraphSettings, own: ToolsProvider) -> ToolsProvider:
    """`own` plus the tools of the MCP servers AGENT_MCP_CONFIG gives `graph_id`
    (`tools.mcp.servers`): a server that is down leaves its tools out, not the agent."""
    if not settings.agent_mcp_config.for_agent(graph_id):
        return own

    async def provide() -> Sequence[BaseTool]:
        return merge_tools(await own(), await configured_tools(graph_id, settings))

    return provide


def static_tools(tools: Sequence[BaseTool]) -> ToolsProvider:
    fixed = tuple(tools)

    async def provide() -> Sequence[BaseTool]:
        return fixed

    return provide


class _ModelCache:
    """One bound model per (settings, toolset), so binding happens once, not per turn.

    Native tool calling binds the tools to the request; text mode describes them in the
    prompt instead (`graphs/text_mode.py`).
    """

    def __init__(self) -> None:
        self._key: tuple[GraphSettings, Sequence[BaseTool]] | None = None
        self._model: BoundModel | None = None

    def bound(self, settings: GraphSettings, toolset: Sequence[BaseTool]) -> BoundModel:
        key = self._key
        if self._model is None or key is None or key[0] is not settings or key[1] is not toolset:
            model = shared_model(settings)
            if settings.agent_tool_calling == "text":
                text = text_mode_model(model, toolset)
                self._model = BoundModel(text, model, Wire.text_mode(text.instructions))
            else:
                tools = list(toolset)
                self._model = BoundModel(model.bind_tools(tools), model, Wire.native(tools))
            self._key = (settings, toolset)
        return self._model
