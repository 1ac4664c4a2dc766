"""LangGraph's store (`/store/...`: Studio's memory tab, `client.store.*`), on the
service's own `AsyncSqliteStore` / `AsyncPostgresStore` (`app.core.storage.memory`),
the one the graphs get as their `store`.

Each user has a store of their own: what a caller reads and writes under namespace
`(a, b)` is kept under `("users", <their user id>, a, b)`, and every answer names it
`(a, b)` again. No caller reaches another's items, whatever the namespace asked;
admins included (an admin's items are the admin's own: the store keeps no owner beside
an item to tell them apart by). A graph node that keeps memories for the user of its
run finds them under the same prefix (`user_namespace`).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from fastapi import Query, Request
from fastapi.responses import Response
from langgraph.store.base import BaseStore, Item
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StringConstraints,
    WithJsonSchema,
)

from app.core.errors import NotFound, storage_unavailable
from app.core.storage.runs import storable
from app.core.users.identity import Caller
from app.http.auth import CallerOf
from app.http.langgraph.common import (
    Agents,
    Count,
    _whole,
    answer,
    body_doc,
    body_of,
    router,
)
from app.http.openapi import errors

api = router()

# The first label of every user's namespaces; the second is their id (`user_namespace`).
USERS_LABEL = "users"
UNKNOWN_ITEM = "no item {key!r} in namespace {namespace!r}"
NO_STORE = "the store is not open in this process"
LABEL_RULE = "a non-empty label without `.` (or NUL)"
WRITES = errors(400, 408, 413, 415, 422)
# What both stores keep as JSON: integers of 64 bits (LangGraph's JSON encoder), text
# without NUL (PostgreSQL's jsonb refuses it).
INT64 = 2**63
TOO_BIG = "value: an integer too large for a number"
# LangGraph's rule for a filter's keys (its stores refuse others), and its operators.
FILTER_KEY = r"^[A-Za-z0-9_.-]+$"
OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
BAD_FILTER_KEY = "filter: a field's name is letters, digits, `_`, `.` or `-`"
BAD_OPERATOR = "filter: a field's object holds operators ({operators}) on plain values only"
SCALAR = {"type": ["string", "number", "boolean", "null"]}
FILTER_SCHEMA = {
    "type": "object",
    "propertyNames": {"pattern": FILTER_KEY},
    "additionalProperties": {
        "anyOf": [
            {"type": ["string", "number", "boolean", "null", "array"]},
            {
                "type": "object",
                "properties": dict.fromkeys(sorted(OPERATORS), SCALAR),
                "additionalProperties": False,
            },
        ]
    },
}

Label = Annotated[
    str,
    StringConstraints(min_length=1, max_length=256, pattern=r"^[^.\u0000]+$"),
    Field(description=LABEL_RULE),
]
Namespace = Annotated[list[Label], Field(max_length=32)]
Key = Annotated[str, StringConstraints(min_length=1, max_length=1024, pattern=r"^[^\u0000]+$")]
# Where a page starts: bounded so that every backend takes it as an integer.
OFFSET = Field(0, ge=0, le=1_000_000_000)
# The bounds before the validator: after it they would not reach the schema's `integer`.
Depth = Annotated[int, Field(ge=1, le=32), BeforeValidator(_whole)]


def _storable(value: Any) -> bool:
    """Whether `value` is stored as it is (`_stored` leaves it unchanged)."""
    if isinstance(value, str):
        return "\x00" not in value
    if isinstance(value, int) and not isinstance(value, bool):
        return -INT64 <= value < INT64
    if isinstance(value, dict):
        return all(_storable(k) and _storable(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_storable(item) for item in value)
    return True


def _stored(value: Any) -> Any:
    """`value` as both stores can keep it: NUL in text as U+FFFD (as the service stores
    all text), an integer beyond 64 bits as the number a JSON reader without big integers
    reads (JavaScript's)."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, int) and not isinstance(value, bool):
        if -INT64 <= value < INT64:
            return value
        try:
            return float(value)
        except OverflowError:
            raise ValueError(TOO_BIG) from None
    if isinstance(value, dict):
        return {storable(k): _stored(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stored(item) for item in value]
    return value


def _filter(found: dict[str, Any]) -> dict[str, Any]:
    for name, condition in found.items():
        if not re.fullmatch(FILTER_KEY, name):
            raise ValueError(BAD_FILTER_KEY)
        if isinstance(condition, dict) and not (
            set(condition) <= OPERATORS
            and not any(isinstance(v, dict | list) for v in condition.values())
        ):
            raise ValueError(BAD_OPERATOR.format(operators=", ".join(sorted(OPERATORS))))
    return found


Value = Annotated[dict[str, Any], AfterValidator(_stored)]
Filter = Annotated[dict[str, Any], AfterValidator(_filter), WithJsonSchema(FILTER_SCHEMA)]


def user_namespace(user_id: str, *labels: str) -> tuple[str, ...]:
    """Where the store keeps `user_id`'s namespace `labels`: `("users", <id>, *labels)`,
    the id's `%` and `.` escaped (a namespace's labels are joined with `.` in the
    database, so a label must not hold one)."""
    return (USERS_LABEL, user_id.replace("%", "%25").replace(".", "%2E"), *labels)


def _theirs(item: Item, caller: Caller) -> dict[str, Any]:
    """`item` as the SDK reads it, its namespace as the caller named it."""
    found = item.dict()
    found["namespace"] = list(item.namespace[len(user_namespace(caller.user_id)) :])
    return found


def _memory(agents: Agents) -> BaseStore:
    if agents.memory is None:
        raise storage_unavailable(NO_STORE)
    return agents.memory


class ItemPut(BaseModel):
    """`PUT /store/items`: the item to store (a new one, or over the one at its key)."""

    model_config = ConfigDict(extra="ignore")

    namespace: Namespace = Field(min_length=1)
    key: Key
    value: Value
    index: StrictBool | list[str] | None = Field(
        None, description="taken, not used: the store has no semantic index"
    )
    ttl: float | None = Field(
        None, gt=0, le=1_000_000_000, description="minutes until the item expires"
    )


class ItemDelete(BaseModel):
    """`DELETE /store/items`."""

    model_config = ConfigDict(extra="ignore")

    namespace: Namespace = Field(min_length=1)
    key: Key


class ItemSearch(BaseModel):
    """`POST /store/items/search`: the items under a namespace prefix, newest change first."""

    model_config = ConfigDict(extra="ignore")

    namespace_prefix: Namespace | None = None
    filter: Filter | None = Field(
        None, description="value fields to match: a value, or `{operator: value}`"
    )
    limit: Count = Field(10, ge=1, le=1000)
    offset: Count = OFFSET
    query: str | None = Field(
        None, description="taken, not used: the store has no semantic index, it lists"
    )
    refresh_ttl: StrictBool | None = None


class NamespaceSearch(BaseModel):
    """`POST /store/namespaces`: the namespaces holding items."""

    model_config = ConfigDict(extra="ignore")

    prefix: Namespace | None = None
    suffix: Namespace | None = None
    max_depth: Depth | None = None
    limit: Count = Field(100, ge=1, le=1000)
    offset: Count = OFFSET


@api.put("/store/items", status_code=204, responses=WRITES, openapi_extra=body_doc(ItemPut))
async def put_item(request: Request, agents: Agents, caller: CallerOf) -> Response:
    """Store `value` at `key` in `namespace` (the caller's own), replacing what was there."""
    body = await body_of(request, agents, ItemPut)
    namespace = user_namespace(caller.user_id, *body.namespace)
    await _memory(agents).aput(namespace, body.key, body.value, ttl=body.ttl)
    return Response(status_code=204)


@api.get(
    "/store/items",
    responses=errors((404, "no such item"), (422, "a bad namespace, key or query")),
)
async def get_item(
    agents: Agents,
    caller: CallerOf,
    key: Annotated[
        str,
        Query(min_length=1, max_length=1024, pattern=r"^[^\u0000]+$", description="its key"),
    ],
    namespace: Annotated[
        str,
        Query(
            description="the namespace's labels joined by `.`",
            pattern=r"^[^.\u0000]+(\.[^.\u0000]+)*$",
            max_length=8192,
        ),
    ],
    refresh_ttl: Annotated[
        Literal["true", "false"] | None, Query(description="restart the item's ttl")
    ] = None,
) -> Response:
    """The item (404 `unknown_item` when there is none in the caller's store)."""
    labels = namespace.split(".")
    refresh = None if refresh_ttl is None else refresh_ttl == "true"
    item = await _memory(agents).aget(
        user_namespace(caller.user_id, *labels), key, refresh_ttl=refresh
    )
    if item is None:
        raise NotFound("unknown_item", UNKNOWN_ITEM.format(key=key[:100], namespace=labels[:8]))
    return answer(agents, _theirs(item, caller))


@api.delete("/store/items", status_code=204, responses=WRITES, openapi_extra=body_doc(ItemDelete))
async def delete_item(request: Request, agents: Agents, caller: CallerOf) -> Response:
    """Forget the item (204 whether or not there was one)."""
    body = await body_of(request, agents, ItemDelete)
    await _memory(agents).adelete(user_namespace(caller.user_id, *body.namespace), body.key)
    return Response(status_code=204)


@api.post("/store/items/search", responses=WRITES, openapi_extra=body_doc(ItemSearch))
async def search_items(request: Request, agents: Agents, caller: CallerOf) -> Response:
    """`{"items": [...]}`: a page of the caller's items under `namespace_prefix` whose
    values match `filter`, the last changed first."""
    body = await body_of(request, agents, ItemSearch)
    if body.filter is not None and not _storable(body.filter):
        # Nothing stored holds such a value (a write changes it): nothing matches.
        return answer(agents, {"items": []})
    found = await _memory(agents).asearch(
        user_namespace(caller.user_id, *(body.namespace_prefix or ())),
        filter=body.filter,
        limit=body.limit,
        offset=body.offset,
        query=body.query,
        refresh_ttl=body.refresh_ttl,
    )
    return answer(agents, {"items": [_theirs(item, caller) for item in found]})


@api.post("/store/namespaces", responses=WRITES, openapi_extra=body_doc(NamespaceSearch))
async def list_namespaces(request: Request, agents: Agents, caller: CallerOf) -> Response:
    """`{"namespaces": [[...], ...]}`: the caller's namespaces under `prefix`, ending
    with `suffix`, cut to `max_depth` labels."""
    body = await body_of(request, agents, NamespaceSearch)
    own = user_namespace(caller.user_id)
    found = await _memory(agents).alist_namespaces(
        prefix=(*own, *(body.prefix or ())),
        suffix=tuple(body.suffix) if body.suffix else None,
        max_depth=None if body.max_depth is None else len(own) + body.max_depth,
        limit=body.limit,
        offset=body.offset,
    )
    namespaces = [list(namespace[len(own) :]) for namespace in found]
    if body.suffix and body.max_depth is None:
        # A suffix longer than the caller's labels could match into the hidden prefix.
        namespaces = [n for n in namespaces if n[-len(body.suffix) :] == body.suffix]
    return answer(agents, {"namespaces": namespaces})
