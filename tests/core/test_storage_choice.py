"""AGENT_DB picks the backend: a path or sqlite:///path is SQLite, postgresql:// is
PostgreSQL; the URL's password is a secret; a database that refuses us says which."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple, empty_checkpoint
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from pydantic import ValidationError

from app.core.errors import StorageUnavailable
from app.core.observability.logs import formatter_for
from app.core.storage.backends import open_storage
from app.core.storage.postgres.runs import PostgresRunStore
from app.core.storage.postgres.saver import PooledPostgresSaver
from app.core.storage.sqlite.runs import SqliteRunStore
from app.core.storage.sqlite.saver import WriterSqliteSaver
from app.settings import PostgresDb, Settings, SqliteDb
from tests.support.processes import refused_port
from tools.secrets import redactor_for

PASSWORD = "pg-S3cret-pass/word"  # a "/", which a URL must escape
URL = "postgresql://agent:pg-S3cret-pass%2Fword@db.example:6432/agents?sslmode=require"


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ("data/agent.sqlite", Path("data/agent.sqlite")),
        ("/var/lib/agent/agent.sqlite", Path("/var/lib/agent/agent.sqlite")),
        ("sqlite:///data/agent.sqlite", Path("data/agent.sqlite")),
        ("sqlite:////var/lib/agent.sqlite", Path("/var/lib/agent.sqlite")),
    ],
)
def test_a_path_or_an_sqlite_url_is_an_sqlite_file(value: str, path: Path) -> None:
    db = Settings(agent_db=value).agent_db

    assert db == SqliteDb(path=path)
    assert db.data_dir == path.parent


def test_a_postgres_url_keeps_its_password_apart_as_a_secret() -> None:
    db = Settings(agent_db=URL).agent_db

    assert isinstance(db, PostgresDb)
    assert db.url == "postgresql://agent@db.example:6432/agents?sslmode=require"
    assert db.password is not None and db.password.get_secret_value() == PASSWORD
    assert str(db) == db.where == "postgresql://agent@db.example:6432/agents"
    assert PASSWORD not in repr(Settings(agent_db=URL))
    assert db.data_dir == Path("data")


@pytest.mark.parametrize(
    "value",
    [
        "postgres://agent@db.example/agents?password=pg-S3cret-pass%2Fword",
        "postgresql://agent:pg-S3cret-pass%2Fword@db.example/agents",
    ],
)
def test_the_postgres_scheme_and_a_password_parameter_are_read_too(value: str) -> None:
    db = Settings(agent_db=value).agent_db

    assert isinstance(db, PostgresDb)
    assert db.url == "postgresql://agent@db.example/agents"
    assert db.password is not None and db.password.get_secret_value() == PASSWORD


def test_url_parameters_are_kept_as_written_and_a_plus_in_the_password_stays_a_plus() -> None:
    value = "postgresql://agent@db/agents?options=-c%20a%3Db&password=p%2Bq+r&application_name=x+y"

    db = Settings(agent_db=value).agent_db

    assert isinstance(db, PostgresDb)
    assert db.url == "postgresql://agent@db/agents?options=-c%20a%3Db&application_name=x+y"
    assert db.password is not None and db.password.get_secret_value() == "p+q+r"


def test_another_scheme_is_refused_without_echoing_the_value() -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(agent_db="mysql://agent:pg-S3cret-pass@db.example/agents")

    [error] = refused.value.errors(include_input=False)
    assert error["loc"] == ("agent_db",)
    assert "postgresql://" in error["msg"]
    assert "S3cret" not in error["msg"]


def test_the_pool_size_and_prepared_statements_are_settings_of_their_own() -> None:
    default, tuned = Settings(), Settings(agent_db_pool_size=3, agent_db_prepare=False)

    assert (default.agent_db_pool_size, default.agent_db_prepare) == (10, True)
    assert (tuned.agent_db_pool_size, tuned.agent_db_prepare) == (3, False)
    with pytest.raises(ValidationError):
        Settings(agent_db_pool_size=0)


def test_the_password_is_masked_in_log_lines_and_wherever_a_secret_is_masked() -> None:
    settings = Settings(agent_db=URL)
    record = logging.LogRecord(
        "app", logging.ERROR, __file__, 1, "connect with %s", (f"password={PASSWORD}",), None
    )

    line = formatter_for(settings).format(record)
    masked = redactor_for(settings)(f"echoed {PASSWORD} and {URL}")

    assert PASSWORD not in line and "***" in line
    assert PASSWORD not in masked and "pg-S3cret-pass%2Fword" not in masked


async def test_libpq_options_in_the_url_reach_the_server_as_pool_connections_open(
    postgres_url: str,
) -> None:
    joiner = "&" if "?" in postgres_url else "?"
    url = f"{postgres_url}{joiner}options=-c%20statement_timeout%3D4321"

    async with open_storage(Settings(agent_db=url)) as (saver, *_):
        assert isinstance(saver, PooledPostgresSaver)
        async with saver.conn.connection() as conn:
            row = await (await conn.execute("SHOW statement_timeout")).fetchone()

    assert row == {"statement_timeout": "4321ms"}


async def test_sqlite_and_postgres_each_open_their_own_saver_and_run_store(
    tmp_path: Path, postgres_url: str
) -> None:
    async with open_storage(Settings(agent_db=str(tmp_path / "a.sqlite"))) as (saver, runs, _):
        on_sqlite = (type(saver), type(runs))
    async with open_storage(Settings(agent_db=postgres_url)) as (saver, runs, _):
        on_postgres = (type(saver), type(runs))

    assert on_sqlite == (WriterSqliteSaver, SqliteRunStore)
    assert on_postgres == (PooledPostgresSaver, PostgresRunStore)


MESSAGES = [HumanMessage("北京天气怎么样", id="h1"), AIMessage("晴", id="a1")]
PENDING = [
    ("task-1", "messages", [AIMessage("要伞吗", id="a2")]),
    ("task-1", "step", 4),
    ("task-2", "__interrupt__", {"q": "哪个城市?"}),  # an interrupt is replaced
]


_THREAD: RunnableConfig = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}


async def _write_a_step(saver: BaseCheckpointSaver) -> tuple[RunnableConfig, RunnableConfig]:
    """A first checkpoint, a second with values, and writes against it: (first, second)."""
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"messages": MESSAGES, "step": 3, "branch:to:agent": None}
    checkpoint["channel_versions"] = {"messages": "00000000000000000000000000000002.5"}
    first = await saver.aput(_THREAD, empty_checkpoint(), {"step": -1}, {})
    saved = await saver.aput(
        first, checkpoint, {"source": "loop", "step": 0}, {**checkpoint["channel_versions"]}
    )
    await saver.aput_writes(
        saved, [("messages", [AIMessage("要伞吗", id="a2")]), ("step", 4)], "task-1"
    )
    await saver.aput_writes(saved, [("__interrupt__", {"q": "城市?"})], "task-2")
    await saver.aput_writes(saved, [("__interrupt__", {"q": "哪个城市?"})], "task-2")
    return first, saved


def _assert_read_back(read: CheckpointTuple | None, first: RunnableConfig) -> None:
    assert read is not None and read.parent_config == first
    assert read.checkpoint["channel_values"]["messages"] == MESSAGES
    assert read.checkpoint["channel_values"]["step"] == 3
    assert read.metadata["step"] == 0
    assert read.pending_writes == PENDING


async def test_checkpoints_and_writes_of_the_pooled_saver_read_back_through_langgraphs_own(
    postgres_url: str,
) -> None:
    async with open_storage(Settings(agent_db=postgres_url)) as (saver, *_):
        first, saved = await _write_a_step(saver)

    async with AsyncPostgresSaver.from_conn_string(postgres_url) as plain:
        read = await plain.aget_tuple(saved)

    _assert_read_back(read, first)


async def test_checkpoints_and_writes_of_the_one_hop_saver_read_back_through_langgraphs_own(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.sqlite"
    async with open_storage(Settings(agent_db=str(path))) as (saver, *_):
        first, saved = await _write_a_step(saver)

    async with AsyncSqliteSaver.from_conn_string(str(path)) as plain:
        read = await plain.aget_tuple(saved)

    _assert_read_back(read, first)


async def test_checkpoints_and_writes_langgraphs_own_postgres_saver_made_read_back_through_ours(
    postgres_url: str,
) -> None:
    async with open_storage(Settings(agent_db=postgres_url)):
        pass  # our tables and LangGraph's, as the service makes them
    async with AsyncPostgresSaver.from_conn_string(postgres_url) as plain:
        first, saved = await _write_a_step(plain)

    async with open_storage(Settings(agent_db=postgres_url)) as (saver, *_):
        read = await saver.aget_tuple(saved)
        listed = [found.config async for found in saver.alist(_THREAD)]

    _assert_read_back(read, first)
    assert {c["configurable"]["checkpoint_id"] for c in listed} == {
        saved["configurable"]["checkpoint_id"],
        first["configurable"]["checkpoint_id"],
    }


async def test_checkpoints_and_writes_langgraphs_own_sqlite_saver_made_read_back_through_ours(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.sqlite"
    async with open_storage(Settings(agent_db=str(path))):
        pass
    async with AsyncSqliteSaver.from_conn_string(str(path)) as plain:
        first, saved = await _write_a_step(plain)

    async with open_storage(Settings(agent_db=str(path))) as (saver, *_):
        read = await saver.aget_tuple(saved)
        listed = [found.config async for found in saver.alist(_THREAD)]

    _assert_read_back(read, first)
    assert {c["configurable"]["checkpoint_id"] for c in listed} == {
        saved["configurable"]["checkpoint_id"],
        first["configurable"]["checkpoint_id"],
    }


async def test_a_postgres_server_that_is_not_there_is_named_without_the_password() -> None:
    with refused_port() as port, pytest.raises(StorageUnavailable) as refused:
        url = f"postgresql://agent:{PASSWORD.replace('/', '%2F')}@127.0.0.1:{port}/agents"
        async with open_storage(Settings(agent_db=url)):
            pass

    message = refused.value.message
    assert message.startswith(
        "cannot connect to the PostgreSQL database postgresql://agent@127.0.0.1:"
    )
    assert "/agents: " in message and "Connection refused" in message
    assert "S3cret" not in message
    assert refused.value.code == "database_unreachable"
