"""Schemathesis hooks of `test_openapi.py`: half the runs it starts are ones that can run.

Generated from the schema alone, a run names an agent that does not exist and ids that
break the id rule, so every one is refused and the stateful phase has no thread to
follow. Here half of the `POST /api/chat` and `POST /api/agents/{graph_id}` requests
name a real agent, with valid ids and a user message (the rest stay as generated); the
LLM double answers them, so thread views, run records and event streams are checked too.
A LangGraph run body with neither `input` nor `command` (a rule the schema says in words
only: `app.http.langgraph.runs`) gets a user message before it is sent, so that a run
of an assistant the stateful phase created is not refused for it; the other such rules
(`rules_the_schema_says_in_words`: message ids, node names, assistant versions, empty
state updates) are bent the same way.
Loaded by schemathesis through `SCHEMATHESIS_HOOKS`, drawn from its seed.
"""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import strategies as st

GRAPH = "weather"
IDS = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,24}", fullmatch=True)
TEXT = st.text(min_size=1, max_size=40)
STRATEGIES = st.sampled_from(["reject", "enqueue", "interrupt", "rollback"])

CHATS = st.fixed_dictionaries(
    {"graph": st.just(GRAPH), "message": TEXT},
    optional={"threadId": IDS, "runId": IDS, "multitaskStrategy": STRATEGIES},
)
USER_MESSAGES = st.fixed_dictionaries({"id": IDS, "role": st.just("user"), "content": TEXT})
RUNS = st.fixed_dictionaries(
    {
        "threadId": IDS,
        "runId": IDS,
        "messages": st.lists(USER_MESSAGES, min_size=1, max_size=2),
        "state": st.just({}),
        "tools": st.just([]),
        "context": st.just([]),
        "forwardedProps": st.fixed_dictionaries(
            {},
            optional={
                "multitaskStrategy": STRATEGIES,
                "onDisconnect": st.sampled_from(["continue", "cancel"]),
            },
        ),
    }
)


# Decided by each operation's label: `.apply_to(...)` filters are lost on hooks named by
# a string in schemathesis 4.15.
BODIES = {"POST /api/chat": CHATS, "POST /api/agents/{graph_id}": RUNS}
PATHS = {"POST /api/agents/{graph_id}": st.just({"graph_id": GRAPH})}


@schemathesis.hook("before_generate_body")
def bodies_that_can_run(context: Any, strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    extra = BODIES.get(_label(context))
    return strategy if extra is None else st.one_of(strategy, extra)


@schemathesis.hook("before_generate_path_parameters")
def a_real_agent(context: Any, strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    extra = PATHS.get(_label(context))
    return strategy if extra is None else st.one_of(strategy, extra)


# LangGraph's run routes: their body needs `input.messages` or `command.resume`.
LANGGRAPH_RUNS = {
    "POST /runs/stream",
    "POST /runs/wait",
    "POST /threads/{thread_id}/runs",
    "POST /threads/{thread_id}/runs/stream",
    "POST /threads/{thread_id}/runs/wait",
}
A_QUESTION = {"messages": [{"role": "user", "content": "天气？"}]}


@schemathesis.hook("before_call")
def rules_the_schema_says_in_words(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    """Bend a generated request to the server's rules the schema cannot state (each
    named below), so schemathesis does not call their refusals wrong: a schema-valid
    request refused, or a resource just created reported gone."""
    label = f"{case.operation.method.upper()} {case.operation.path}"
    body = case.body
    if label in LANGGRAPH_RUNS and isinstance(body, dict) and not _has_input(body):
        case.body = {**body, "input": A_QUESTION}
    if label == "POST /assistants/{assistant_id}/latest" and isinstance(body, dict):
        # Only versions the assistant has exist (every one has 1): a rule the schema says
        # in words only (`unknown_version`), which the stateful phase reads as the
        # assistant it just created being gone. A version that breaks the schema stays.
        version = body.get("version")
        number = isinstance(version, (int, float)) and not isinstance(version, bool)
        if number and version >= 1 and version == int(version):
            body["version"] = 1
    # An empty list of values is no update at all (`invalid_update`): a rule the schema
    # says in words only; `null` (nothing written) is what it can mean.
    if (
        label == "POST /threads/{thread_id}/state"
        and isinstance(body, dict)
        and body.get("values") == []
    ):
        body["values"] = None
    if label == "POST /api/agents/{graph_id}" and isinstance(body, dict):
        _own_ids(body.get("messages"))
    langgraph = not case.operation.path.startswith("/api/")  # its API sits at the root
    if isinstance(body, dict) and langgraph and case.operation.method.upper() == "POST":
        _known_nodes(body)


def _has_input(body: dict[str, Any]) -> bool:
    """Whether a run body gives its run something to do: input, or a command that says
    something (`null` input or an empty command, `{}`, leave a new thread
    `no_user_message`, a rule the schema says in words only)."""
    command = body.get("command")
    directs = isinstance(command, dict) and bool({"resume", "update", "goto"} & set(command))
    return body.get("input") is not None or directs


# The agents' nodes: what `as_node`, `interrupt_before` and `interrupt_after` may name (a
# rule the schema says in words only: `unknown_node`); a body naming others drops them.
NODES = {"__start__", "agent", "tools"}


def _known_nodes(body: dict[str, Any]) -> None:
    def known(name: Any) -> bool:
        return isinstance(name, str) and name in NODES

    as_node = body.get("as_node")
    if as_node is not None and not (known(as_node) or as_node == "__copy__"):
        del body["as_node"]
    for key in ("interrupt_before", "interrupt_after"):
        named = body.get(key)
        if named is None or named == "*":
            continue
        if not isinstance(named, list) or not all(known(name) for name in named):
            del body[key]


def _own_ids(messages: Any) -> None:
    """Give user messages that share an id one each: a rule the schema says in words only
    (`duplicate_message`), as a client that numbers its messages does."""
    if not isinstance(messages, list):
        return
    seen: set[Any] = set()
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        given = message.get("id")
        unique, n = given, 1
        while unique in seen:
            unique, n = f"{given}{n}", n + 1
        message["id"] = unique
        seen.add(unique)


def _label(context: Any) -> str:
    operation = context.operation
    return "" if operation is None else f"{operation.method.upper()} {operation.path}"
