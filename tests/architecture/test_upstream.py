"""The upstream internals our code leans on, each checked where an upgrade breaks it first.

Every private symbol, private attribute or undocumented behaviour of another package
that app/, graphs/ or tools/ use is imported here and its assumption checked (a
signature, an attribute, a return shape, the behaviour on a tiny input). A failure names
the place in our code to mend. Each such package is pinned to a minor series (`~=`) in
pyproject.toml, so the upgrade that would break one is a deliberate one, made here first.

What uses only public APIs is not listed. Sections: the OpenAI SDK and langchain-openai
(graphs/model.py, app/core/observability/telemetry.py), langchain-core (graphs/
text_mode.py), the MCP SDK (tools/mcp/tushare_client.py), LangGraph (app/core/runs/
threads.py, app/http/langgraph/encoding.py), uvicorn (app/main.py, app/http/deadlines.py).

The last section checks what the tests themselves assume of llama.cpp's llama-server
(tests/support/llama.py), which no upstream documents either.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import operator
import time
import tomllib
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import anyio
import httpx
import openai
import pytest
import uvicorn
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.tracers._streaming import _StreamingCallbackHandler
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.constants import TASKS
from langgraph.graph import START, StateGraph
from langgraph.types import Send, interrupt
from mcp import ClientSession
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.supervisors import Multiprocess, multiprocess

from app.core.observability.telemetry import RETRY_HEADER
from app.core.runs.threads import _interrupted_calls
from app.http.langgraph.encoding import PULL, PUSH
from graphs.model import OpenAICompatibleChat, _PlainChunks, make_model
from graphs.settings import GraphSettings
from graphs.text_mode import text_mode_model
from tests.doubles.llm import ScriptedLLM, text
from tests.doubles.tushare_mcp import TushareMCP
from tests.support.llama import CHAT, MODEL_ALIAS, LlamaServers
from tools.mcp.tushare_client import MCPError, TushareMcp

ROOT = Path(__file__).resolve().parents[2]

# The packages whose internals the checks below fence, each pinned to a minor series.
FENCED = {
    "openai",
    "langchain-openai",
    "langchain-core",
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-sqlite",
    "langgraph-checkpoint-postgres",
    "mcp",
    "uvicorn",
}


def mend(place: str, assumption: str) -> str:
    """The failure message: what no longer holds, and where our code relies on it."""
    return f"upstream changed: {assumption}. Mend {place}."


def parameters(function: Callable[..., Any]) -> list[str]:
    return list(inspect.signature(function).parameters)


def defined_parameters(cls: type, name: str) -> list[str]:
    """The parameters of `cls.name` where it is defined with them, past the overrides
    that only pass `*args, **kwargs` on."""
    for owner in cls.__mro__:
        method = vars(owner).get(name)
        if method is None:
            continue
        signature = inspect.signature(method)
        kinds = {p.kind for p in signature.parameters.values()}
        if inspect.Parameter.VAR_POSITIONAL not in kinds:
            return list(signature.parameters)
    raise AssertionError(f"{cls.__name__}.{name} is not defined")


# --- the pins: pyproject.toml, constraints.txt ----------------------------------------


def runtime_requirements() -> dict[str, Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found = (Requirement(line) for line in project["dependencies"])
    return {canonicalize_name(requirement.name): requirement for requirement in found}


def pinned_versions() -> dict[str, str]:
    """constraints.txt: the exact version of every package the tests ran with."""
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        name, _, version = line.partition("==")
        pins[canonicalize_name(name)] = version
    return pins


def test_every_package_whose_internals_we_use_is_pinned_to_the_minor_series_tested() -> None:
    requirements, tested = runtime_requirements(), pinned_versions()
    for name in sorted(FENCED):
        assert name in requirements, f"{name} is not a direct dependency in pyproject.toml"
        specs = list(requirements[name].specifier)
        minor_series = len(specs) == 1 and specs[0].operator == "~="
        assert minor_series and specs[0].version.count(".") == 2, (
            f"pyproject.toml: {requirements[name]} should be `{name}~=X.Y.Z` (its internals "
            "are fenced here, so an upgrade past its minor series is made on purpose)"
        )
        assert specs[0].contains(tested[name]), (
            f"pyproject.toml: {requirements[name]} excludes the tested {name}=={tested[name]}"
        )


def test_every_runtime_dependency_has_an_upper_bound_that_admits_the_tested_version() -> None:
    tested = pinned_versions()
    for name, requirement in runtime_requirements().items():
        bounded = any(spec.operator in ("<", "<=", "==", "~=") for spec in requirement.specifier)
        assert bounded, f"pyproject.toml: {requirement} has no upper bound"
        assert requirement.specifier.contains(tested[name], prereleases=True), (
            f"pyproject.toml: {requirement} excludes the tested {name}=={tested[name]}"
        )


# --- the OpenAI SDK and langchain-openai: graphs/model.py ----------------------------

PLAIN_CHUNKS = "graphs/model.py (_PlainChunks, _request_options)"
HOOKS = "graphs/model.py (OpenAICompatibleChat's overrides)"


def test_the_sdk_request_options_take_the_keys_plain_chunks_sends() -> None:
    keys = set(openai.RequestOptions.__annotations__)
    assert {"headers", "params", "extra_json", "timeout", "security"} <= keys, mend(
        PLAIN_CHUNKS, f"openai.RequestOptions has the keys {sorted(keys)}"
    )


_converted: list[type] = []  # the type of each chunk _SeenChunks was handed


class _SeenChunks(OpenAICompatibleChat):
    """The model, noting the type of each chunk langchain-openai converts."""

    def _convert_chunk_to_generation_chunk(
        self,
        chunk: dict[str, Any],
        default_chunk_class: type,
        base_generation_info: dict[str, Any] | None,
    ) -> ChatGenerationChunk | None:
        _converted.append(type(chunk))
        return super()._convert_chunk_to_generation_chunk(
            chunk, default_chunk_class, base_generation_info
        )


async def test_a_streamed_request_goes_through_plain_chunks_with_the_key_and_the_extras(
    llm: ScriptedLLM,
) -> None:
    settings = GraphSettings()
    _converted.clear()
    model = _SeenChunks(
        model=settings.openai_model,
        api_key=settings.openai_api_key,
        base_url=settings.openai_base_url,
        max_retries=0,
    )
    assert isinstance(model.async_client, _PlainChunks), mend(
        PLAIN_CHUNKS, "ChatOpenAI's validator no longer makes async_client before ours runs"
    )
    llm.script(text("你好。"))

    chunks = [
        chunk
        async for chunk in model.astream(
            [HumanMessage("你好")], extra_headers={"x-probe": "1"}, extra_body={"probe": 2}
        )
    ]

    assert "".join(str(chunk.content) for chunk in chunks) == "你好。"
    assert _converted and set(_converted) == {dict}, mend(
        PLAIN_CHUNKS,
        "ChatOpenAI._astream no longer streams through async_client.create (chunks "
        f"arrived as {set(_converted)}, not the plain dicts _PlainChunks yields)",
    )
    [headers] = llm.request_headers
    assert headers["authorization"] == f"Bearer {settings.openai_api_key.get_secret_value()}", mend(
        PLAIN_CHUNKS, "RequestOptions' security no longer adds the API key"
    )
    assert headers["x-probe"] == "1", mend(PLAIN_CHUNKS, "RequestOptions' headers are not sent")
    assert llm.last_request["probe"] == 2, mend(
        PLAIN_CHUNKS, "RequestOptions' extra_json is not merged into the body"
    )


_results: list[type] = []  # the type of each whole reply _SeenReplies was handed


class _SeenReplies(OpenAICompatibleChat):
    """The model, noting the type of each whole reply langchain-openai turns into a result."""

    def _create_chat_result(
        self, response: dict[str, Any] | Any, generation_info: dict[str, Any] | None = None
    ) -> Any:
        _results.append(type(response))
        return super()._create_chat_result(response, generation_info)


async def test_a_whole_reply_goes_through_plain_chunks_with_the_key_and_the_extras(
    llm: ScriptedLLM,
) -> None:
    settings = GraphSettings()
    _results.clear()
    model = _SeenReplies(
        model=settings.openai_model,
        api_key=settings.openai_api_key,
        base_url=settings.openai_base_url,
        max_retries=0,
    )
    llm.script(text("你好。"))

    reply = await model.ainvoke(
        [HumanMessage("你好")], extra_headers={"x-probe": "1"}, extra_body={"probe": 2}
    )

    assert reply.content == "你好。"
    assert _results == [dict], mend(
        PLAIN_CHUNKS,
        "ChatOpenAI._agenerate no longer asks async_client.with_raw_response.create for a "
        f"whole reply (it arrived as {_results}, not the plain dict _WholeReplies posts)",
    )
    [headers] = llm.request_headers
    assert headers["authorization"] == f"Bearer {settings.openai_api_key.get_secret_value()}"
    assert headers["x-probe"] == "1" and llm.last_request["probe"] == 2
    assert llm.last_request.get("stream") in (None, False)


# How OpenAICompatibleChat calls each hook on super(): its leading positional parameters
# (after self), and whether it passes keyword arguments on.
@pytest.mark.parametrize(
    ("hook", "leading", "keywords"),
    [
        (
            "_convert_chunk_to_generation_chunk",
            ["chunk", "default_chunk_class", "base_generation_info"],
            False,
        ),
        ("_create_chat_result", ["response", "generation_info"], False),
        ("_get_request_payload", ["input_", "stop"], True),
        ("_astream", ["messages", "stop", "run_manager"], True),
        ("_stream", ["messages", "stop", "run_manager"], True),
    ],
)
def test_the_chat_openai_hooks_we_override_keep_their_parameters(
    hook: str, leading: list[str], keywords: bool
) -> None:
    found = defined_parameters(ChatOpenAI, hook)
    assert found[1 : len(leading) + 1] == leading, mend(HOOKS, f"ChatOpenAI.{hook} takes {found}")
    assert not keywords or found[-1] == "kwargs", mend(
        HOOKS, f"ChatOpenAI.{hook} takes no **kwargs: {found}"
    )


def test_the_request_payload_hook_reads_its_input_through_convert_input() -> None:
    # _get_request_payload pairs the payload's messages with the input's, read the same way.
    settings = GraphSettings()
    model = make_model(settings)
    converted = model._convert_input([HumanMessage("你好")]).to_messages()
    payload = model._get_request_payload([HumanMessage("你好")])
    assert [m.type for m in converted] == ["human"], mend(HOOKS, "_convert_input's shape")
    assert payload["messages"] == [{"role": "user", "content": "你好"}], mend(
        HOOKS, f"_get_request_payload's messages are {payload.get('messages')!r}"
    )


class _Tokens(_StreamingCallbackHandler, BaseCallbackHandler):
    """A streaming handler, as LangGraph's "messages" stream mode attaches one."""

    def __init__(self) -> None:
        self.tokens: list[str] = []

    def on_llm_new_token(self, token: Any, **kwargs: Any) -> None:
        self.tokens.append(token)

    def tap_output_aiter(self, run_id: Any, output: Any) -> Any:
        return output

    def tap_output_iter(self, run_id: Any, output: Any) -> Any:
        return output


async def test_an_ainvoke_with_a_streaming_handler_asks_should_stream_with_its_run_manager(
    llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    # OpenAICompatibleChat streams an ainvoke in its _agenerate (merging chunks as they
    # come) because _agenerate_with_cache asks _should_stream with the run manager first.
    asked: list[bool] = []
    original = OpenAICompatibleChat._agenerate

    async def spy(
        self: OpenAICompatibleChat,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> Any:
        asked.append(run_manager is not None)
        return await original(self, messages, stop, run_manager, **kwargs)

    monkeypatch.setattr(OpenAICompatibleChat, "_agenerate", spy)
    model = make_model(GraphSettings())
    handler = _Tokens()
    llm.script(text("一二三四五六七八九十", chunk_size=1))

    reply = await model.ainvoke([HumanMessage("数到十")], {"callbacks": [handler]})

    assert asked == [True], mend(HOOKS, "_agenerate_with_cache streams without _agenerate")
    assert reply.content == "一二三四五六七八九十"
    assert "".join(handler.tokens) == "一二三四五六七八九十", mend(
        HOOKS, f"the handler saw {handler.tokens} (on_llm_new_token per chunk)"
    )
    assert len([t for t in handler.tokens if t]) == 10


# --- the OpenAI SDK's HTTP client: app/core/observability/telemetry.py ---------------

RETRIES = "app/core/observability/telemetry.py (Telemetry.watch_model)"


async def test_the_retry_hook_sits_on_the_sdk_http_client_and_reads_its_attempt_header(
    llm: ScriptedLLM,
) -> None:
    model = make_model(GraphSettings())
    client = model.root_async_client._client
    assert isinstance(client.event_hooks, dict) and "request" in client.event_hooks, mend(
        RETRIES, "the OpenAI client's private _client has no httpx-style event_hooks"
    )
    llm.script(text("你好。"))

    await model.ainvoke([HumanMessage("你好")])

    [headers] = llm.request_headers
    assert headers.get(RETRY_HEADER) == "0", mend(
        RETRIES, f"the SDK no longer numbers its attempts in {RETRY_HEADER}"
    )


# --- langchain-core: graphs/text_mode.py ----------------------------------------------

TEXT_MODE = "graphs/text_mode.py (TextModeModel)"


class _Invocations(BaseCallbackHandler):
    def __init__(self) -> None:
        self.params: list[dict[str, Any]] = []
        self.metadata: list[dict[str, Any]] = []

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], **kwargs: Any
    ) -> None:
        self.params.append(kwargs.get("invocation_params") or {})
        self.metadata.append(kwargs.get("metadata") or {})


async def test_a_text_mode_call_reports_the_wrapped_model_to_callbacks(llm: ScriptedLLM) -> None:
    # Through BaseChatModel's hooks _identifying_params and _get_ls_params, which
    # TextModeModel answers with the wrapped model's.
    settings = GraphSettings()
    model = text_mode_model(make_model(settings), [])
    seen = _Invocations()
    llm.script(text("Final Answer: 你好。"))

    await model.ainvoke([HumanMessage("你好")], {"callbacks": [seen]})

    outer_params, outer_metadata = seen.params[0], seen.metadata[0]
    assert outer_params.get("model_name") == settings.openai_model, mend(
        TEXT_MODE, f"invocation params are {outer_params} (_identifying_params)"
    )
    assert outer_metadata.get("ls_model_name") == settings.openai_model, mend(
        TEXT_MODE, f"LangSmith metadata is {outer_metadata} (_get_ls_params)"
    )


@pytest.mark.parametrize("hook", ["_astream", "_stream", "_agenerate", "_generate"])
def test_the_chat_model_hooks_text_mode_implements_keep_their_parameters(hook: str) -> None:
    found = parameters(getattr(BaseChatModel, hook))
    assert found[:4] == ["self", "messages", "stop", "run_manager"], mend(
        TEXT_MODE, f"BaseChatModel.{hook} takes {found}"
    )
    assert parameters(BaseChatModel._get_ls_params)[:2] == ["self", "stop"], mend(
        TEXT_MODE, "BaseChatModel._get_ls_params' parameters"
    )


# --- the MCP SDK: tools/mcp/tushare_client.py -----------------------------------------

MCP_CLIENT = "tools/mcp/tushare_client.py (TushareMcp._in_session, _reason)"
TOKEN = "tushare-token-upstream"


@pytest.fixture
def tushare() -> Iterator[TushareMCP]:
    with TushareMCP(token=TOKEN) as double:
        yield double


async def test_the_session_keeps_tool_output_schemas_in_a_dict() -> None:
    send, receive = anyio.create_memory_object_stream[Any](1)
    async with send, receive:
        session = ClientSession(receive, send)
        assert isinstance(session._tool_output_schemas, dict), mend(
            MCP_CLIENT, "ClientSession._tool_output_schemas is gone"
        )


async def test_a_call_with_the_schemas_already_known_sends_no_tools_list(
    tushare: TushareMCP,
) -> None:
    client = TushareMcp(tushare.url, TOKEN)
    await client.connect()
    listed = len(tushare.methods)

    await client.call_tool("daily", {"ts_code": "000001.SZ", "trade_date": "20251231"})

    called = tushare.methods[listed:]
    assert "tools/call" in called, called
    assert "tools/list" not in called, mend(
        MCP_CLIENT, f"call_tool lists the tools again (it sent {called})"
    )


def test_the_mcp_error_carries_its_json_rpc_error() -> None:
    hints = inspect.get_annotations(MCPError, eval_str=False)
    assert "error" in hints, mend(MCP_CLIENT, "MCPError/McpError has no `error` attribute")


# --- LangGraph: app/core/runs/threads.py ----------------------------------------------

THREADS = "app/core/runs/threads.py (_interrupted_calls)"


class _Fan(TypedDict):
    done: Annotated[list[str], operator.add]


def _ask(task: dict[str, Any]) -> dict[str, list[str]]:
    interrupt({"type": "input", "message": task["call"]["id"]})
    return {"done": [task["call"]["id"]]}


async def test_an_interrupted_send_task_points_into_the_checkpoint_pending_sends() -> None:
    builder = StateGraph(_Fan)
    builder.add_node("ask", _ask)
    calls = ["c1", "c2"]
    builder.add_conditional_edges(
        START, lambda _: [Send("ask", {"call": {"id": call}}) for call in calls], ["ask"]
    )
    saver = InMemorySaver()
    graph = builder.compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    await graph.ainvoke({"done": []}, config)
    snapshot = await graph.aget_state(config)
    saved = await saver.aget_tuple(snapshot.config)

    assert saved is not None
    sends = saved.checkpoint["channel_values"].get(TASKS)
    assert isinstance(sends, list) and all(isinstance(s, Send) for s in sends), mend(
        THREADS, f"the checkpoint's {TASKS!r} channel holds {sends!r}, not the pending Sends"
    )
    paths = [task.path for task in snapshot.tasks]
    assert all(isinstance(path[1], int) for path in paths), mend(
        THREADS, f"a Send task's path is {paths}, not (PUSH, index, ...)"
    )
    expected = {task.id: sends[task.path[1]].arg["call"]["id"] for task in snapshot.tasks}
    assert sorted(expected.values()) == calls
    assert await _interrupted_calls(graph, snapshot) == expected, mend(THREADS, "the mapping")


ENCODING = "app/http/langgraph/encoding.py (task_input, StreamEncoder._task_starts)"


async def test_a_tasks_stream_names_triggers_as_the_encoder_derives_them_from_task_paths() -> None:
    builder = StateGraph(_Fan)
    builder.add_node("ask", _ask)
    builder.add_node("note", lambda _: {"done": ["noted"]})
    builder.add_edge(START, "note")
    builder.add_conditional_edges("note", lambda _: [Send("ask", {"call": {"id": "c1"}})], ["ask"])
    graph = builder.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    streamed = [
        data
        async for data in graph.astream({"done": []}, config, stream_mode="tasks")
        if "triggers" in data
    ]
    history = [state async for state in graph.aget_state_history(config)]
    paths = {task.id: task.path for state in history for task in state.tasks}

    triggers = {data["name"]: (list(data["triggers"]), paths[data["id"]][:1]) for data in streamed}
    assert triggers == {
        "note": (["branch:to:note"], (PULL,)),
        "ask": ([PUSH], (PUSH,)),
    }, mend(ENCODING, f"a pull task's triggers and a Send's path are {triggers}")


# --- uvicorn: app/main.py ---------------------------------------------------------

WORKERS = "app/main.py (_supervise)"


def test_the_supervisor_takes_the_config_and_the_sockets_its_workers_serve() -> None:
    assert parameters(Multiprocess.__init__) == ["self", "config", "sockets"], mend(
        WORKERS, "Multiprocess(config, sockets)"
    )
    assert callable(getattr(Multiprocess, "run", None)), mend(WORKERS, "Multiprocess.run()")
    # What the exit status is read from once every worker has stopped.
    assert isinstance(Multiprocess(uvicorn.Config(app=_app), sockets=[]).processes, list), mend(
        WORKERS, "Multiprocess.processes"
    )
    assert isinstance(inspect.getattr_static(multiprocess.Process, "exitcode"), property), mend(
        WORKERS, "multiprocess.Process.exitcode"
    )


async def _app(scope: Any, receive: Any, send: Any) -> None:
    """An ASGI app that is never called: uvicorn's objects only need one to be made."""


# --- uvicorn: app/http/deadlines.py ---------------------------------------------------

DEADLINES = "app/http/deadlines.py (_Guard)"


class _Transport(asyncio.Transport):
    """Just enough of a socket's transport for a protocol to be fed bytes."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 8000)}.get(
            name, default
        )

    def write(self, data: Any) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


@pytest.mark.parametrize("protocol_class", [H11Protocol, HttpToolsProtocol])
async def test_a_protocol_makes_its_cycle_once_the_head_is_in_with_the_app_it_holds_then(
    protocol_class: type[Any],
) -> None:
    config = uvicorn.Config(app=_app)
    config.load()
    protocol = protocol_class(
        config=config, server_state=uvicorn.Server(config).server_state, app_state={}
    )
    transport = _Transport()
    protocol.connection_made(transport)
    assert protocol in protocol.connections, mend(DEADLINES, "protocol.connections")
    answered = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        answered.set()

    protocol.app = app  # what the guard swaps for a request beyond the cap
    protocol.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n")
    assert protocol.cycle is None, mend(DEADLINES, "protocol.cycle before the head is in")
    protocol.data_received(b"\r\n")
    assert protocol.cycle is not None, mend(DEADLINES, "protocol.cycle made at the head's end")
    await asyncio.wait_for(answered.wait(), 5)  # the app held at the head's end served it
    assert protocol.cycle.response_complete, mend(DEADLINES, "cycle.response_complete")
    assert "on_response_complete" in vars(protocol_class), mend(
        DEADLINES, "on_response_complete, the cycle's end"
    )
    assert isinstance(getattr(protocol, "pipeline", deque()), deque), mend(
        DEADLINES, "the protocol's pipeline of requests already in"
    )
    protocol.connection_lost(None)


# --- llama.cpp's llama-server (tests/support/llama.py) -----------------------------

POLL_S = 0.05


@pytest.mark.processes  # llama.cpp's llama-server, a child process
def test_llama_server_adds_its_own_record_to_a_streamed_chat_completion(
    llama_server: LlamaServers,
) -> None:
    llama = llama_server()
    body = {
        "model": MODEL_ALIAS,
        "stream": True,
        "stop": ["Observation:"],
        "messages": [{"role": "user", "content": "Action: get_weather\nObservation: 晴\n"}],
    }
    with httpx.stream("POST", f"{llama.tap.url}{CHAT}", json=body, timeout=120) as answer:
        answer.read()
    [exchange] = llama.completions()

    record = exchange.verbose
    assert record.get("stop_type") in ("eos", "word", "limit") and "stopping_word" in record, (
        "llama-server (at --log-verbosity 10) no longer sends `__verbose` with `stop_type` "
        "and `stopping_word` in a streamed chat completion: mend Exchange.verbose in "
        "tests/support/llama.py and its use in tests/service/test_real_model_server.py"
    )
    assert record["generation_settings"]["stop"] == ["Observation:"], (
        "llama-server's `__verbose.generation_settings.stop` moved: mend the text-mode "
        "test in tests/service/test_real_model_server.py"
    )


@pytest.mark.processes  # llama.cpp's llama-server, a child process
def test_llama_server_logs_the_task_it_cancels_when_its_client_leaves(
    llama_server: LlamaServers,
) -> None:
    llama = llama_server(max_reply=2000)
    before = len(llama.cancelled_tasks)
    body = {"model": MODEL_ALIAS, "stream": True, "messages": [{"role": "user", "content": "写"}]}
    with httpx.stream("POST", f"{llama.direct_url}{CHAT}", json=body, timeout=120) as answer:
        first = next(line for line in answer.iter_lines() if line.startswith("data:"))
    assert "choices" in json.loads(first[5:])  # it was writing when the client left

    deadline = time.monotonic() + 10
    while len(llama.cancelled_tasks) == before and time.monotonic() < deadline:
        time.sleep(POLL_S)  # polling the server's log, not a wait for a result
    assert len(llama.cancelled_tasks) > before, (
        "llama-server no longer logs `cancel task, id_task = N` when a client leaves: "
        "mend CANCELLED and LlamaServer.cancelled_tasks in tests/support/llama.py"
    )
    llama.wait_idle(within_s=10)


@pytest.mark.processes  # llama.cpp's llama-server, a child process
def test_llama_server_timings_count_the_tokens_its_usage_counts(
    llama_server: LlamaServers,
) -> None:
    llama = llama_server()
    body = {
        "model": MODEL_ALIAS,
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "北京天气"}],
    }
    with httpx.stream("POST", f"{llama.tap.url}{CHAT}", json=body, timeout=120) as answer:
        answer.read()
    [exchange] = llama.completions()

    [usage] = [e["usage"] for e in exchange.events if e.get("usage")]
    [timings] = [e["timings"] for e in exchange.events if "timings" in e]
    assert (timings["prompt_n"] + timings["cache_n"], timings["predicted_n"]) == (
        usage["prompt_tokens"],
        usage["completion_tokens"],
    ), (
        "llama-server's `timings` no longer count what its `usage` counts: mend "
        "Exchange.usage in tests/support/llama.py, which reads them when the client "
        "asked for no usage"
    )
