"""A process that runs the weather graph on AGENT_DB: `ask THREAD TEXT` or `answer THREAD VALUE`.

`ask` prints the pending interrupt as JSON and then blocks on stdin, so a test can kill it
with SIGKILL while the interrupt is pending; `answer` resumes it and prints the final text.
"""

from __future__ import annotations

import asyncio
import json
import sys

from langchain_core.messages import HumanMessage
from langgraph.types import Command

from app.core.storage.backends import open_checkpointer
from app.settings import get_settings
from graphs.weather import make_graph


async def main(mode: str, thread: str, text: str) -> None:
    config = {"configurable": {"thread_id": thread}}
    async with open_checkpointer(get_settings().agent_db) as saver:
        graph = make_graph(saver)
        if mode == "ask":
            await graph.ainvoke({"messages": [HumanMessage(text)]}, config)
            state = await graph.aget_state(config)
            [pending] = [i for task in state.tasks for i in task.interrupts]
            print(json.dumps({"id": pending.id, "value": pending.value}, ensure_ascii=False))
            sys.stdout.flush()
            await asyncio.to_thread(sys.stdin.read)  # hold the process until it is killed
        else:
            state = await graph.aget_state(config)
            [pending] = [i for task in state.tasks for i in task.interrupts]
            result = await graph.ainvoke(Command(resume={pending.id: {"value": text}}), config)
            print(json.dumps({"answer": result["messages"][-1].text}, ensure_ascii=False))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
