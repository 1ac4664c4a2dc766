"""A run on a thread with history starts from the thread's checkpoint: the model reads
that history, then the new message."""

from __future__ import annotations

from ag_ui.core import UserMessage
from langchain_core.messages import AIMessage, HumanMessage

from app.core.runs.service import open_service
from app.core.runs.threads import run_config
from app.settings import Settings
from graphs.react import AGENT_NODE
from tests.doubles.llm import ScriptedLLM, text


async def test_a_run_on_a_thread_with_history_sends_the_model_that_history_then_its_message(
    llm: ScriptedLLM,
) -> None:
    llm.script(text("今天也好。"))
    async with open_service(Settings(), only="weather") as service:
        earlier = [HumanMessage(id="h0", content="早"), AIMessage(id="a0", content="早上好。")]
        graph = service.graph("weather")
        await graph.aupdate_state(
            run_config("t1", "weather"), {"messages": earlier}, as_node=AGENT_NODE
        )
        run = await service.start_run(
            "weather", thread_id="t1", run_id="r1", messages=[UserMessage(id="u1", content="好吗")]
        )
        result = await run.result()

    assert result.error is None
    sent = [m["content"] for m in llm.last_request["messages"] if m["role"] != "system"]
    assert sent == ["早", "早上好。", "好吗"]
