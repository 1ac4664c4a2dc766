"""What the service leaves on disk (issue 28, point 10): its data files readable by its
user alone, whatever the umask, and a deleted thread's text gone from every one of them.

A real `react-agent serve` started under `umask 000` (the most a umask can let through)
on a data directory it creates itself. SQLite only: what is tested is the bytes of the
database's own files (the database, its `-wal` and `-shm`) and their modes; PostgreSQL
keeps its files in the server's data directory (README, "What stays on disk").
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.doubles.tushare_mcp import TushareMCP
from tests.service.conftest import SQLITE, SQLITE_FILE, Api, answer, run_body, serving
from tests.support.processes import SERVE, ServerProcess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

TOKEN = "tushare-token-disk-5b2e"
# The server's own shell sets the umask: what the service creates must not depend on it.
DB_FILES = (SQLITE_FILE, f"{SQLITE_FILE}-shm", f"{SQLITE_FILE}-wal")
UNDER_UMASK_000 = ("sh", "-c", 'umask 000 && exec "$0" "$@"', *SERVE)


@pytest.fixture(scope="module")
def mcp() -> Iterator[TushareMCP]:
    with TushareMCP(token=TOKEN) as double:
        yield double


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The server's data directory: not there yet, the service creates it."""
    return tmp_path_factory.mktemp("disk") / "data"


@pytest.fixture(scope="module")
def server(
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    mcp: TushareMCP,
    data_dir: Path,
) -> Iterator[ServerProcess]:
    # SQLite: the test reads the database's files themselves.
    with serving(
        _llm_server,
        _meteo_server,
        data_dir,
        SQLITE,
        command=UNDER_UMASK_000,
        TUSHARE_MCP_URL=mcp.url,
        TUSHARE_TOKEN=TOKEN,
    ) as process:
        yield process


@pytest.fixture
def api(server: ServerProcess) -> Iterator[Api]:
    client = Api(server)
    yield client
    client.close()


def new_thread() -> str:
    return f"t-disk-{time.monotonic_ns()}"


def holding(data_dir: Path, needle: str) -> dict[str, int]:
    """Every file under `data_dir` whose raw bytes hold `needle` (UTF-8): name -> count."""
    found: dict[str, int] = {}
    for path in sorted(data_dir.rglob("*")):
        if path.is_file():
            count = path.read_bytes().count(needle.encode())
            if count:
                found[str(path.relative_to(data_dir))] = count
    return found


def mode(path: Path) -> str:
    return oct(stat.S_IMODE(path.stat().st_mode))


def test_a_deleted_thread_leaves_none_of_its_text_in_any_file_of_the_data_directory(
    api: Api, llm: ScriptedLLM, data_dir: Path
) -> None:
    thread_id = new_thread()
    said, answered = "quokka-7f3a9c-what-the-user-said", "quokka-7f3a9c-what-the-model-said"
    llm.script(text(f"回答 {answered}"))
    chat = api.chat(graph="weather", threadId=thread_id, message=f"问题 {said}")
    assert chat.status_code == 200, chat.text
    llm.script(text(f"再答 {answered}"))
    again = api.run("weather", run_body(thread_id, ("u1", f"再问 {said}")))  # an event log too
    assert again.last["type"] == "RUN_FINISHED"
    assert holding(data_dir, said) and holding(data_dir, answered)  # it was on disk

    deleted = api.http.delete(f"/api/threads/{thread_id}")

    assert deleted.status_code == 204, deleted.text
    assert api.http.get(f"/api/threads/{thread_id}").status_code == 404
    assert holding(data_dir, said) == {}
    assert holding(data_dir, answered) == {}


def test_the_data_directory_and_the_database_files_are_their_owners_alone_under_umask_000(
    api: Api, llm: ScriptedLLM, data_dir: Path
) -> None:
    llm.script(text("你好。"))
    assert api.chat(graph="weather", threadId=new_thread(), message="你好").status_code == 200
    db = data_dir / SQLITE_FILE

    assert mode(data_dir) == "0o700"
    assert {name: mode(data_dir / name) for name in sorted(os.listdir(data_dir))} == (
        dict.fromkeys(DB_FILES, "0o600")
    )
    assert db.with_name(f"{SQLITE_FILE}-wal").stat().st_size > 0  # written since the start


def test_a_saved_report_and_the_reports_directory_are_their_owners_alone_under_umask_000(
    api: Api, llm: ScriptedLLM, data_dir: Path
) -> None:
    thread_id = new_thread()
    llm.script(
        tool_call("save_report", {"title": "平安银行-disk", "markdown": "# 平安银行\n\n平稳。"}),
        text("报告已保存。"),
    )
    asked = api.chat(graph="tushare", threadId=thread_id, message="保存报告").json()
    [pending] = asked["interrupts"]
    done = api.chat(graph="tushare", threadId=thread_id, resume=[answer(pending["id"], True)])
    assert done.status_code == 200, done.text
    reports = data_dir / "reports"

    assert sorted(os.listdir(reports)) == ["平安银行-disk.md"]
    assert mode(reports) == "0o700"
    assert mode(reports / "平安银行-disk.md") == "0o600"


def test_database_files_an_older_version_left_readable_are_made_private_at_start_up(
    llm: ScriptedLLM, meteo: FakeOpenMeteo, tmp_path: Path
) -> None:
    db = tmp_path / SQLITE_FILE
    with closing(sqlite3.connect(db)) as old:  # as an older version left it: 0644, WAL
        old.execute("PRAGMA journal_mode=WAL")
        old.execute("CREATE TABLE earlier (x)")
        old.commit()
        # Kept open: the -wal and -shm files stay while the server starts.
        for name in os.listdir(tmp_path):
            os.chmod(tmp_path / name, 0o644)
        assert tuple(sorted(os.listdir(tmp_path))) == DB_FILES

        with serving(llm, meteo, tmp_path, SQLITE) as process:  # SQLite: its files are read
            modes = {name: mode(tmp_path / name) for name in sorted(os.listdir(tmp_path))}
            logged = process.logged("readable by others")

    assert modes == dict.fromkeys(DB_FILES, "0o600")
    assert str(db) in logged
