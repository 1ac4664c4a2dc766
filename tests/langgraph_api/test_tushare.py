"""The tushare agent's `resolve_stock` choice, asked and answered through langgraph-sdk,
on the Tushare MCP double (both backends)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import Command

from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.doubles.tushare_mcp import TushareMCP
from tests.langgraph_api.conftest import collect
from tests.service.conftest import API_KEY, Backend, serving_tushare
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.processes  # real servers


@pytest.fixture(scope="module")
def tushare_server(
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    mcp: TushareMCP,
    tmp_path_factory: pytest.TempPathFactory,
    backend: Backend,
) -> Iterator[ServerProcess]:
    with serving_tushare(
        _llm_server,
        _meteo_server,
        mcp,
        tmp_path_factory.mktemp("tushare"),
        backend,
    ) as process:
        yield process


@pytest.fixture
async def stock_client(tushare_server: ServerProcess) -> AsyncIterator[LangGraphClient]:
    sdk = get_client(url=tushare_server.url, headers={"Authorization": f"Bearer {API_KEY}"})
    yield sdk
    await sdk.aclose()


async def test_the_resolve_stock_choice_is_asked_and_answered_through_the_sdk(
    stock_client: LangGraphClient, llm: ScriptedLLM
) -> None:
    client = stock_client
    thread_id = (await client.threads.create())["thread_id"]
    llm.script(tool_call("resolve_stock", {"name": "平安"}))

    asked = await collect(
        client.runs.stream(
            thread_id,
            "tushare",
            input={"messages": [{"role": "user", "content": "平安的股票"}]},
            stream_mode=["updates"],
        )
    )
    [pending] = next(
        d["__interrupt__"] for e, d, _ in asked if e == "updates" and "__interrupt__" in d
    )
    llm.script(text("已选定平安银行。"))
    answered = await client.runs.wait(thread_id, "tushare", command=Command(resume="000001.SZ"))

    assert pending["value"]["type"] == "select"
    assert "000001.SZ" in [option["value"] for option in pending["value"]["options"]]
    tool = [m for m in answered["messages"] if m["type"] == "tool"][-1]
    assert "000001.SZ" in tool["content"]
    assert answered["messages"][-1]["content"] == "已选定平安银行。"
    assert "__interrupt__" not in answered
