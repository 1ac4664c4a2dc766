"""A module's server with two users besides the admin, and langgraph-sdk clients of all
three (import `served` and `clients` into a test module to use them)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from tests.doubles.llm import ScriptedLLM
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.service.conftest import API_KEY, Backend, serving
from tests.support.processes import ServerProcess
from tests.support.user_keys import add_user

# A test agent whose tools use the graph's store (`memory_graph`), served as `memo`: the
# server imports it from the project's root, which the installed package does not put on
# its path.
MEMO = "memo=tests.langgraph_api.memory_graph"
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Served:
    server: ServerProcess
    alice: str  # keys of two users who are not admins
    bob: str


@pytest.fixture(scope="module")
def served(
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    tmp_path_factory: pytest.TempPathFactory,
    backend: Backend,
) -> Iterator[Served]:
    """The module's server (both backends) with `memo` besides the agents, and two users."""
    data_dir = tmp_path_factory.mktemp("people")
    with serving(
        _llm_server,
        _meteo_server,
        data_dir,
        backend,
        AGENT_EXTRA_GRAPHS=MEMO,
        PYTHONPATH=str(ROOT),
    ) as server:
        agent_db = backend.agent_db(data_dir)
        yield Served(server, add_user(agent_db, "alice"), add_user(agent_db, "bob"))


@pytest.fixture
async def clients(served: Served) -> AsyncIterator[dict[str, LangGraphClient]]:
    """langgraph-sdk clients of the admin (AGENT_API_KEY), Alice and Bob, by name."""
    clients = {
        name: get_client(url=served.server.url, api_key=key)
        for name, key in (("admin", API_KEY), ("alice", served.alice), ("bob", served.bob))
    }
    yield clients
    for client in clients.values():
        await client.aclose()
