"""A run reads its thread's checkpoint once: the check's read also starts the graph.

Counted on the SQLite saver's read connection (its statement trace), in-process: no
public interface shows how often the database is read.
"""

from __future__ import annotations

from ag_ui.core import UserMessage
from langchain_core.messages import AIMessage, HumanMessage

from app.core.runs.service import open_service
from app.core.runs.threads import run_config
from app.settings import Settings
from graphs.react import AGENT_NODE
from tests.doubles.llm import ScriptedLLM, text

CHECKPOINT_READ = "SELECT thread_id, checkpoint_id, parent_checkpoint_id"


async def test_a_run_reads_its_thread_s_checkpoint_once_and_the_model_sees_that_history(
    llm: ScriptedLLM,
) -> None:
    llm.script(text("今天也好。"))
    async with open_service(Settings(), only="weather") as service:
        # A thread with history and no recent run: nothing makes the run read it again.
        earlier = [HumanMessage(id="h0", content="早"), AIMessage(id="a0", content="早上好。")]
        graph = service.graph("weather")
        await graph.aupdate_state(
            run_config("t1", "weather"), {"messages": earlier}, as_node=AGENT_NODE
        )
        statements: list[str] = []
        await service.saver.conn.set_trace_callback(statements.append)  # type: ignore[attr-defined]

        run = await service.start_run(
            "weather", thread_id="t1", run_id="r1", messages=[UserMessage(id="u1", content="好吗")]
        )
        result = await run.result()
        await service.saver.conn.set_trace_callback(None)  # type: ignore[attr-defined]

    reads = [s for s in statements if s.startswith(CHECKPOINT_READ)]
    # One for the check and the graph's start, one for the result's `aget_state`.
    assert len(reads) == 2
    assert result.error is None
    sent = [m["content"] for m in llm.last_request["messages"] if m["role"] != "system"]
    assert sent == ["早", "早上好。", "好吗"]
