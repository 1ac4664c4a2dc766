"""A thread's title from its first exchange, written by the model in the background.

Once a thread's first run ends with the model's answer (`success`, not a pending
question), `ThreadTitles.after_exchange` asks the model, in a task of its own, for a
short title (`prompts/thread_title.md`) from the first user message and that answer.
Nothing waits for it: the run has recorded its end and its last event before, and the
call goes through a model of its own (no retries, a small reply cap, no callbacks), so
none of it reaches a run's events. The thread keeps its first message as its title
until then, and for good when the call fails (one warning line) or `AGENT_THREAD_TITLES`
is false.

The database decides (`RunStore.title_due`, `RunStore.set_model_title`): only the
thread's first run to succeed asks, once, whichever process ran it; a title the user set
(`title_by` `user`) is never replaced, by a call already under way neither.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Final

import openai
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph.state import CompiledStateGraph

from app.core.errors import StorageUnavailable
from app.core.runs.threads import run_config
from app.core.storage.failures import failures
from app.core.storage.runs import RunStore, short_title
from app.settings import Settings
from graphs.model import ModelError, make_model
from prompts import load_prompts, render_template
from tools.secrets import Redactor

logger = logging.getLogger(__name__)

PROMPT: Final = "thread_title"
# A title is a few words; this also bounds what a chatty model costs.
TITLE_MAX_TOKENS: Final = 64
# What of the exchange the prompt quotes: a title needs the gist, not a report.
QUOTED_CHARS: Final = 600
TITLE_FAILED = "thread %s keeps its first message as its title: the model's title failed (%s)"
TITLE_MADE = "thread %s titled by the model"
TITLE_REFUSED = "thread %s keeps the title its user gave it (the model's came later)"
# Wrappings a model puts around a title despite the prompt: a label, quotes, markup.
_LABEL = re.compile(r"^\s*(?:标题|題目|title)\s*[:：]\s*", re.IGNORECASE)
_WRAPPING = "\"'“”‘’「」『』《》【】*#`_ \t"


class TitleFailed(Exception):
    """The model gave no usable title; the message says why (safe to log)."""


class ThreadTitles:
    """The background title calls of one service: started after a first exchange,
    awaited (or cancelled) when the service closes."""

    def __init__(
        self,
        settings: Settings,
        graphs: dict[str, CompiledStateGraph],
        store: RunStore,
        redact: Redactor,
    ) -> None:
        self._on = settings.agent_thread_titles
        self._settings = settings
        self._graphs = graphs
        self._store = store
        self._redact = redact
        self._model: BaseChatModel | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # What a title call may meet besides a bug: the model's failures (an unreadable
        # reply is a ValueError), no usable title, a database that does not answer.
        self._expected: tuple[type[Exception], ...] = (
            openai.APIError,
            ModelError,
            ValueError,
            TitleFailed,
            StorageUnavailable,
            *failures(settings.agent_db),
        )
        if self._on:
            load_prompts((PROMPT,))

    def after_exchange(self, thread_id: str, run_id: str, graph_id: str) -> None:
        """The run ended `success`: title its thread in the background if it is the
        thread's first exchange. Returns at once."""
        graph = self._graphs.get(graph_id)
        if not self._on or graph is None:
            return
        task = asyncio.create_task(
            self._title(graph, thread_id, run_id, graph_id), name=f"title {thread_id}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:  # a bug
            logger.error("the title task of %s failed", task.get_name(), exc_info=exc)

    async def close(self, *, wait_s: float) -> None:
        """Let the calls under way finish within `wait_s` seconds, then cancel the rest
        (their threads keep the first message as title)."""
        tasks = list(self._tasks)
        if not tasks:
            return
        if wait_s > 0:
            await asyncio.wait(tasks, timeout=wait_s)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _title(
        self, graph: CompiledStateGraph, thread_id: str, run_id: str, graph_id: str
    ) -> None:
        try:
            if not await self._store.title_due(thread_id, run_id):
                return
            snapshot = await graph.aget_state(run_config(thread_id, graph_id))
            messages: list[AnyMessage] = (snapshot.values or {}).get("messages", [])
            title = await self._ask(*first_exchange(messages))
            given = await self._store.set_model_title(thread_id, title)
        except self._expected as exc:  # the run is done all the same; the fallback stays
            reason = " ".join(self._redact(f"{type(exc).__name__}: {exc}").split())
            logger.warning(TITLE_FAILED, thread_id, reason[:300])
            return
        logger.info(TITLE_MADE if given else TITLE_REFUSED, thread_id)

    async def _ask(self, question: str, answer: str) -> str:
        if self._model is None:
            # A model of its own: one try (no retries), whatever OPENAI_MAX_RETRIES says.
            self._model = make_model(self._settings.model_copy(update={"openai_max_retries": 0}))
        prompt = render_template(PROMPT, question=question, answer=answer)
        reply = await self._model.ainvoke([HumanMessage(prompt)], max_tokens=TITLE_MAX_TOKENS)
        title = clean_title(reply.text if isinstance(reply, AIMessage) else "")
        if not title:
            raise TitleFailed("the reply held no title")
        return title


def first_exchange(messages: list[AnyMessage]) -> tuple[str, str]:
    """The thread's first user message with text and the model's last text before the next
    user message (a fast user may have sent one already), cut to QUOTED_CHARS each;
    TitleFailed when the thread has no such pair."""
    question, answer = "", ""
    for message in messages:
        if isinstance(message, HumanMessage) and message.text.strip():
            if question:
                break
            question = message.text.strip()
        elif question and isinstance(message, AIMessage) and message.text.strip():
            answer = message.text.strip()
    if not question or not answer:
        raise TitleFailed("no first exchange in the thread's state")
    return question[:QUOTED_CHARS], answer[:QUOTED_CHARS]


def clean_title(reply: str) -> str:
    """A model's reply as a title: its first non-empty line without a `标题:` label,
    quotes or markup, then `short_title`; "" when nothing is left."""
    line = next((line for line in reply.splitlines() if line.strip()), "")
    line = _LABEL.sub("", line.strip(_WRAPPING)).strip(_WRAPPING)
    return short_title(line.removesuffix("。").removesuffix("."))
