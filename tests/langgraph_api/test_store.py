"""LangGraph's store (`/store/...`, Studio's memory tab) through langgraph-sdk's
`client.store`, on LangGraph's own SQLite and PostgreSQL stores: items put, got,
searched, listed and deleted; bad namespaces and values refused; each user's items their
own; and the graphs' own `store` the same one (both backends)."""

from __future__ import annotations

import json
import uuid

import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import NotFoundError

from tests.doubles.llm import ScriptedLLM, text, tool_call

pytestmark = pytest.mark.processes  # real servers


async def test_an_item_is_put_got_searched_listed_and_deleted(
    clients: dict[str, LangGraphClient],
) -> None:
    store = clients["alice"].store
    root = f"prefs-{uuid.uuid4().hex[:6]}"
    await store.put_item([root, "ui"], "theme", {"mode": "dark", "size": 14})
    await store.put_item([root, "lang"], "main", {"code": "zh"})
    await store.put_item([root, "ui"], "theme", {"mode": "light", "size": 14})  # replaced

    item = await store.get_item([root, "ui"], key="theme")
    searched = await store.search_items([root])
    filtered = await store.search_items([root], filter={"code": "zh"})
    paged = await store.search_items([root], limit=1, offset=1)
    namespaces = await store.list_namespaces(prefix=[root])
    shallow = await store.list_namespaces(prefix=[root], max_depth=1)
    ending = await store.list_namespaces(prefix=[root], suffix=["lang"])

    assert item["namespace"] == [root, "ui"] and item["key"] == "theme"
    assert item["value"] == {"mode": "light", "size": 14}
    assert item["created_at"] and item["updated_at"] >= item["created_at"]
    # (Listed by their last change: to the second on SQLite, so not ordered here.)
    assert sorted((i["namespace"], i["key"]) for i in searched["items"]) == [
        ([root, "lang"], "main"),
        ([root, "ui"], "theme"),
    ]
    assert [i["value"] for i in filtered["items"]] == [{"code": "zh"}]
    assert len(paged["items"]) == 1 and paged["items"][0] in searched["items"]
    assert sorted(namespaces["namespaces"]) == [[root, "lang"], [root, "ui"]]
    assert shallow["namespaces"] == [[root]]
    assert ending["namespaces"] == [[root, "lang"]]

    await store.delete_item([root, "ui"], key="theme")
    with pytest.raises(NotFoundError) as missing:
        await store.get_item([root, "ui"], key="theme")
    assert missing.value.response.json()["code"] == "unknown_item"
    assert [i["key"] for i in (await store.search_items([root]))["items"]] == ["main"]
    await store.delete_item([root, "ui"], key="theme")  # nothing there: still 204


async def test_bad_namespaces_and_values_are_refused_and_nothing_is_stored(
    clients: dict[str, LangGraphClient],
) -> None:
    http = clients["alice"].http.client
    root = f"bad-{uuid.uuid4().hex[:6]}"
    refused = []
    for body in (
        {"namespace": [root, "a.b"], "key": "k", "value": {}},  # a label with a dot
        {"namespace": [root, ""], "key": "k", "value": {}},  # an empty label
        {"namespace": [], "key": "k", "value": {}},  # no namespace
        {"namespace": [root, 3], "key": "k", "value": {}},  # not a string
        {"namespace": [root], "key": "k", "value": [1, 2]},  # a value that is no object
        {"namespace": [root], "key": "k", "value": "text"},
        {"namespace": [root], "key": "", "value": {}},
        {"namespace": [root], "key": "k", "value": {}, "ttl": -1},
    ):
        answer = await http.put("/store/items", json=body)
        refused.append((answer.status_code, answer.json()["code"]))
    for params in ({"namespace": f"{root}..x", "key": "k"}, {"namespace": root}):
        answer = await http.get("/store/items", params=params)
        refused.append((answer.status_code, answer.json()["code"]))
    search = await http.post("/store/items/search", json={"namespace_prefix": ["a.b"]})
    listing = await http.post("/store/namespaces", json={"prefix": [root], "max_depth": 0})
    refused += [(search.status_code, search.json()["code"])]
    refused += [(listing.status_code, listing.json()["code"])]

    assert (
        refused
        == [(422, "invalid_body")] * 8
        + [(422, "invalid_request")] * 2
        + [(422, "invalid_body")] * 2
    )
    assert (await clients["alice"].store.list_namespaces(prefix=[root]))["namespaces"] == []


async def test_each_user_reads_and_writes_only_their_own_items(
    clients: dict[str, LangGraphClient],
) -> None:
    alice, bob, admin = clients["alice"].store, clients["bob"].store, clients["admin"].store
    root = f"shared-{uuid.uuid4().hex[:6]}"
    await alice.put_item([root], "secret", {"owner": "alice"})
    await bob.put_item([root], "secret", {"owner": "bob"})

    assert (await alice.get_item([root], key="secret"))["value"] == {"owner": "alice"}
    assert (await bob.get_item([root], key="secret"))["value"] == {"owner": "bob"}
    await bob.delete_item([root], key="secret")
    assert (await alice.get_item([root], key="secret"))["value"] == {"owner": "alice"}
    with pytest.raises(NotFoundError):
        await bob.get_item([root], key="secret")
    # Namespaces that would name another user's store are only the caller's own labels.
    for caller in (bob, admin):
        assert (await caller.search_items([root]))["items"] == []
        assert (await caller.search_items(["users", "alice", root]))["items"] == []
        assert (await caller.list_namespaces(prefix=[root]))["namespaces"] == []
        assert [root] not in (await caller.list_namespaces(limit=1000))["namespaces"]
    with pytest.raises(NotFoundError):
        await admin.get_item([root], key="secret")
    assert [root] in (await alice.list_namespaces(limit=1000))["namespaces"]


async def test_the_graphs_store_is_the_one_the_api_shows(
    clients: dict[str, LangGraphClient], llm: ScriptedLLM
) -> None:
    admin = clients["admin"]
    await admin.store.put_item(["notes"], "today", {"note": "带伞", "by": "api"})
    llm.script(tool_call("recall", {}), text("记得：带伞。"))
    recalled = await admin.runs.wait(
        None, "memo", input={"messages": [{"role": "user", "content": "我说过什么？"}]}
    )
    llm.script(tool_call("remember", {"note": "买菜"}), text("记下了。"))
    await admin.runs.wait(
        None, "memo", input={"messages": [{"role": "user", "content": "记下：买菜"}]}
    )

    tool_results = [m["content"] for m in recalled["messages"] if m["type"] == "tool"]
    assert [json.loads(result) for result in tool_results] == [{"note": "带伞", "by": "api"}]
    item = await admin.store.get_item(["notes"], key="today")
    assert item["value"] == {"note": "买菜", "by": "graph"}
