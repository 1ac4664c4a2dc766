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

from typing import Annotated, Any, Literal

from fastapi import Query, Request
from fastapi.responses import Response
from langgraph.store.base import BaseStore, Item
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from app.core.errors import NotFound, storage_unavailable
from app.core.users.identity import Caller
from app.http.auth import CallerOf
from app.http.langgraph.common import Agents, Count, answer, body_doc, body_of, router
from app.http.openapi import errors

api = router()

# The first label of every user's namespaces; the second is their id (`user_namespace`).
USERS_LABEL = "users"
UNKNOWN_ITEM = "no item {key!r} in namespace {namespace!r}"
NO_STORE = "the store is not open in this process"
LABEL_RULE = "a non-empty label without `.`"
WRITES = errors(400, 408, 413, 415, 422)

Label = Annotated[
    str,
    StringConstraints(min_length=1, max_length=256, pattern=r"^[^.]+$"),
    Field(description=LABEL_RULE),
]
Namespace = Annotated[list[Label], Field(max_length=32)]


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
    key: str = Field(min_length=1, max_length=1024)
    value: dict[str, Any]
    index: Literal[False] | list[str] | None = Field(
        None, description="taken, not used: the store has no semantic index"
    )
    ttl: float | None = Field(None, gt=0, description="minutes until the item expires")


class ItemDelete(BaseModel):
    """`DELETE /store/items`."""

    model_config = ConfigDict(extra="ignore")

    namespace: Namespace = Field(min_length=1)
    key: str = Field(min_length=1, max_length=1024)


class ItemSearch(BaseModel):
    """`POST /store/items/search`: the items under a namespace prefix, newest change first."""

    model_config = ConfigDict(extra="ignore")

    namespace_prefix: Namespace | None = None
    filter: dict[str, Any] | None = Field(None, description="value fields to match")
    limit: Count = Field(10, ge=1, le=1000)
    offset: Count = Field(0, ge=0)
    query: str | None = Field(
        None, description="taken, not used: the store has no semantic index, it lists"
    )
    refresh_ttl: bool | None = None


class NamespaceSearch(BaseModel):
    """`POST /store/namespaces`: the namespaces holding items."""

    model_config = ConfigDict(extra="ignore")

    prefix: Namespace | None = None
    suffix: Namespace | None = None
    max_depth: Count | None = Field(None, ge=1, le=32)
    limit: Count = Field(100, ge=1, le=1000)
    offset: Count = Field(0, ge=0)


@api.put("/store/items", status_code=204, responses=WRITES, openapi_extra=body_doc(ItemPut))
async def put_item(request: Request, agents: Agents, caller: CallerOf) -> Response:
    """Store `value` at `key` in `namespace` (the caller's own), replacing what was there."""
    body = await body_of(request, agents, ItemPut)
    namespace = user_namespace(caller.user_id, *body.namespace)
    await _memory(agents).aput(namespace, body.key, body.value, index=body.index, ttl=body.ttl)
    return Response(status_code=204)


@api.get(
    "/store/items",
    responses=errors((404, "no such item"), (422, "a bad namespace, key or query")),
)
async def get_item(
    agents: Agents,
    caller: CallerOf,
    key: Annotated[str, Query(min_length=1, max_length=1024, description="the item's key")],
    namespace: Annotated[
        str,
        Query(
            description="the namespace's labels joined by `.`",
            pattern=r"^[^.]+(\.[^.]+)*$",
            max_length=8192,
        ),
    ],
    refresh_ttl: Annotated[bool | None, Query(description="restart the item's ttl")] = None,
) -> Response:
    """The item (404 `unknown_item` when there is none in the caller's store)."""
    labels = namespace.split(".")
    item = await _memory(agents).aget(
        user_namespace(caller.user_id, *labels), key, refresh_ttl=refresh_ttl
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
